"""Workers: the job index, ownership of artifacts, the runner and summaries."""
