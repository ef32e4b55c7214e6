"""One Router per domain of the Jarvis API."""
