-- Issue 27 item 3, "one mechanism": a directive only the owner may decide (issue 25's pending question,
-- confirmed by their "yes") is an approval of the same table as a waiting tool call, listed, answered
-- and expired the same ways (zerg.approvals.requests holds all of its SQL).
--   kind 'call':      a worker's tool call waiting on a Step Functions task token (job and call id set);
--   kind 'directive': a change Zerg makes when it is approved (no job, no token, never a wait);
--                     summary is Zerg's own words for it, shown_at when Zerg appended the question to the
--                     asking run's answer, outcome what approving it did.
-- A newer question supersedes an older one ('superseded': a yes confirms the latest question only).
ALTER TABLE approvals ADD COLUMN kind text NOT NULL DEFAULT 'call' CHECK (kind IN ('call', 'directive'));
ALTER TABLE approvals ALTER COLUMN job_id DROP NOT NULL;
ALTER TABLE approvals ALTER COLUMN tool_call_id DROP NOT NULL;
ALTER TABLE approvals ADD COLUMN summary text CHECK (length(summary) <= 10000);
ALTER TABLE approvals ADD COLUMN shown_at timestamptz;
ALTER TABLE approvals ADD COLUMN outcome text CHECK (length(outcome) <= 20000);
ALTER TABLE approvals ADD CONSTRAINT approvals_kind_shape CHECK (
    (kind = 'call' AND job_id IS NOT NULL AND tool_call_id IS NOT NULL AND summary IS NULL AND shown_at IS NULL)
    OR (kind = 'directive' AND job_id IS NULL AND tool_call_id IS NULL AND task_token IS NULL
        AND summary IS NOT NULL AND expires_at IS NOT NULL
        AND tool IN ('create_schedule', 'delete_schedule', 'set_preference', 'update_schedule')));
ALTER TABLE approvals DROP CONSTRAINT approvals_status_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_status_check
    CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'cancelled', 'superseded'));
CREATE INDEX approvals_pending_directives ON approvals (owner_id, id) WHERE kind = 'directive' AND status = 'pending';

-- The questions asked so far move over with their history (the owner's data; the export keeps them):
-- done -> approved (its outcome was never recorded), expired and superseded as they were, pending stays
-- pending (answerable by yes, API, CLI; no SMS code: those are drawn for new questions only). A row
-- without its run (never possible through the code) could never be confirmed and is not kept.
INSERT INTO approvals (owner_id, run_id, kind, tool, arguments, reason, summary, status, created_at, expires_at,
                       answered_at, used_at, shown_at)
SELECT owner_id, run_id, 'directive', action, args, '', summary,
       CASE status WHEN 'done' THEN 'approved' ELSE status END, created_at, expires_at,
       decided_at, CASE WHEN status = 'done' THEN decided_at END, shown_at
FROM pending_directives WHERE run_id IS NOT NULL ORDER BY id;
DROP TABLE pending_directives;
