"""Runs: the run store, the owner's thread, the run event log, the worker jobs of a run and their
artifacts' ownership (the records); the run lifecycle: launch, close and what follows it
(:mod:`zerg.runs.closing`, the run-close registry), orphans, deadline, execution status."""
