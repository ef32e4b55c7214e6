"""Jarvis, the face: intent routing (quick or supervisor), quick answers, voice sessions."""
