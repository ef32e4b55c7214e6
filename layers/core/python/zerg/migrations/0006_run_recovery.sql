-- 0006: orphan recovery and the run deadline.

-- A run whose executing process stopped before it ended is closed as 'interrupted' (final).
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('queued', 'running', 'success', 'failed', 'timeout', 'cancelled', 'interrupted'));

-- Which process executes the run (local runtime: host, boot, pid and start time; NULL when Step
-- Functions does), and when that process last said it was alive. The orphan reaper reads both.
ALTER TABLE runs ADD COLUMN executor text;
ALTER TABLE runs ADD COLUMN heartbeat_at timestamptz;
-- Set once, when the run's deadline came near and its unfinished workers were stopped: the
-- supervisor then answers with what exists and the run ends 'timeout'.
ALTER TABLE runs ADD COLUMN deadline_reached_at timestamptz;

-- The sweeps read only unfinished runs and running jobs: keep those reads off the full tables.
CREATE INDEX runs_unfinished ON runs (id) WHERE status IN ('queued', 'running');
CREATE INDEX worker_jobs_running ON worker_jobs (started_at) WHERE status = 'running';
