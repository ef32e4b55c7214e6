-- Issue 27 item 3: a short numeric code per pending approval, so the owner can answer by SMS
-- ("Y 4821" / "N 4821"). Unique per owner among the pending approvals only: a code is freed when its
-- approval is decided, and the code alone never identifies another owner's approval (every answer
-- is scoped by the owner the channel proved).
ALTER TABLE approvals ADD COLUMN code text CHECK (code ~ '^[0-9]{4}$');
CREATE UNIQUE INDEX approvals_pending_code ON approvals (owner_id, code) WHERE status = 'pending';

-- An SMS that answered an approval by its code: its own outcome, never a run.
ALTER TABLE inbound_messages DROP CONSTRAINT inbound_messages_status_check;
ALTER TABLE inbound_messages ADD CONSTRAINT inbound_messages_status_check
    CHECK (status IN ('received', 'rejected', 'acknowledged', 'run', 'keyword', 'approval', 'failed'));

-- The owner is told when an approval is requested (email and SMS): those notifications are kept on the
-- approval, so an email reply "approve" through a notification's reply token answers exactly that
-- approval and no other (NULL: not told yet; claimed once, so a retried callback tells nobody twice).
ALTER TABLE approvals ADD COLUMN notification_ids bigint[];
CREATE INDEX approvals_notifications ON approvals USING gin (notification_ids);
ALTER TABLE notifications DROP CONSTRAINT notifications_purpose_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_purpose_check
    CHECK (purpose IN ('alert', 'escalation', 'digest', 'reminder', 'verification', 'connector', 'budget', 'answer',
                       'test', 'idle_pause', 'approval'));
