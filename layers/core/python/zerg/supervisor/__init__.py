"""The supervisor: its turns, its prompt and the evidence mount."""
