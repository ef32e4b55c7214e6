"""Long-term memory: memory files (with versions and embeddings), organisational memory and
thread compaction summaries. One module per table holds all of its SQL."""
