-- 0028 (issue 29): a worker's tool calls in its index row, copied from metadata.json's tool_calls
-- when the worker finishes (and by ``zerg workers reindex``): [{path, tool, ok, exit_code, exit_signal,
-- command, started_at, duration_ms}]. The evidence under an answer and the run's waterfall show what
-- each worker ran (its command, cut to 300 characters) without reading its artifacts. NULL for a
-- worker that has not finished, and for workers finished before this column existed that were not
-- reindexed.
ALTER TABLE worker_jobs ADD COLUMN tool_calls jsonb;
-- Kept spans are a debugging aid that `zerg serve` now keeps by default (docs/tracing.md): they are
-- deleted after ZERG_TRACE_RETENTION_DAYS (the run, its events and its events' waterfall stay).
-- This index finds the old ones without reading the table.
CREATE INDEX run_spans_started ON run_spans (started_at);
