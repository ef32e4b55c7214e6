-- Issue 27 item 3: a short numeric code per pending approval, so the owner can answer by SMS
-- ("Y 4821" / "N 4821"). Unique per owner among the pending approvals only: a code is freed when its
-- approval is decided, and the code alone never identifies another owner's approval (every answer
-- is scoped by the owner the channel proved).
ALTER TABLE approvals ADD COLUMN code text CHECK (code ~ '^[0-9]{4}$');
CREATE UNIQUE INDEX approvals_pending_code ON approvals (owner_id, code) WHERE status = 'pending';
