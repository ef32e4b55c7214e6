-- Issue 27: a tool call waiting for the owner's answer (zerg.approvals.requests). The worker that
-- wanted it ended its step; the run's execution waits on a callback task (.waitForTaskToken) whose
-- token is kept here until the owner answers, the wait times out or the run is cancelled. A row is
-- decided once ('pending' -> approved, denied, expired or cancelled, never back) and its decision is
-- used once (used_at: the worker ran the call, or told the model why not).
-- (The approval policy of issue 27 item 1 is another migration; whichever merges second renumbers.)
CREATE TABLE approvals (
    id            bigserial PRIMARY KEY,
    owner_id      bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    run_id        bigint NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    job_id        bigint NOT NULL REFERENCES worker_jobs(id) ON DELETE CASCADE,
    tool          text NOT NULL CHECK (length(tool) BETWEEN 1 AND 200),
    arguments     jsonb NOT NULL CHECK (jsonb_typeof(arguments) = 'object' AND octet_length(arguments::text) <= 200000),
    tool_call_id  text NOT NULL CHECK (length(tool_call_id) <= 500),
    reason        text NOT NULL DEFAULT '' CHECK (length(reason) <= 2000),
    status        text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
    task_token    text CHECK (length(task_token) <= 4096),
    created_at    timestamptz NOT NULL DEFAULT now(),
    waiting_since timestamptz,
    expires_at    timestamptz,
    answered_at   timestamptz,
    used_at       timestamptz
);
CREATE INDEX approvals_owner ON approvals (owner_id, id);
CREATE INDEX approvals_run_pending ON approvals (run_id) WHERE status = 'pending';
-- A worker waits on one call at a time.
CREATE UNIQUE INDEX approvals_one_pending_per_job ON approvals (job_id) WHERE status = 'pending';

-- A run whose worker waits for the owner's answer to a tool call: unfinished, not running.
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('queued', 'running', 'awaiting_approval', 'success', 'failed', 'timeout', 'cancelled',
                      'interrupted'));
-- The run's clock stops while it waits (zerg.runs.deadline.clock_start): the seconds it waited, and
-- since when it waits now.
ALTER TABLE runs ADD COLUMN approval_wait_s double precision NOT NULL DEFAULT 0 CHECK (approval_wait_s >= 0);
ALTER TABLE runs ADD COLUMN awaiting_since timestamptz;
DROP INDEX runs_unfinished;
CREATE INDEX runs_unfinished ON runs (id) WHERE status IN ('queued', 'running', 'awaiting_approval');
