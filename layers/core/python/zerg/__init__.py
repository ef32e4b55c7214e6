"""Zerg core library: shared by every Lambda function and the local runtime."""
