"""Runs: the run store, the owner's thread, the run event log and the execution starter."""
