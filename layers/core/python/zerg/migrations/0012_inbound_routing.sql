-- Replies (issue 15): what an inbound message names as the message it answers, kept on its row so
-- a row left 'received' by a crash can be processed again from the row alone, and the lookups of a
-- reply's notification by Message-ID (owner-scoped).

ALTER TABLE inbound_messages ADD COLUMN in_reply_to text CHECK (length(in_reply_to) <= 1000);  -- email: In-Reply-To
-- email: the reply tokens of the plus-addresses it was sent to (bearer credentials: never exported).
ALTER TABLE inbound_messages ADD COLUMN reply_tokens text[] NOT NULL DEFAULT '{}' CHECK (cardinality(reply_tokens) <= 20);
ALTER TABLE inbound_messages ADD COLUMN previous_provider_id text CHECK (length(previous_provider_id) <= 300);  -- SMS

-- The recovery sweep's read: rows whose processing never finished.
CREATE INDEX inbound_messages_received ON inbound_messages (received_at) WHERE status = 'received';

-- A reply without a reply token is matched by the Message-ID it answers, within its owner.
CREATE INDEX notifications_message_id ON notifications (owner_id, message_id) WHERE message_id IS NOT NULL;
