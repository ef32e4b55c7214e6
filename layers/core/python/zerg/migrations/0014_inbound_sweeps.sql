-- Replies (issue 15, after review): the reads that keep inbound mail honest over time.

-- The same email delivered again under a new provider id (a DKIM replay, an MTA resending after a
-- lost acknowledgement) is found by its owner's Message-ID and refused: not unique, since rows
-- that were refused (a forgery with a copied Message-ID among them) must not block the real one.
CREATE INDEX inbound_messages_message_id ON inbound_messages (owner_id, message_id)
    WHERE channel = 'email' AND message_id IS NOT NULL;

-- The inbound sweep finds reply runs (trigger email/sms) that closed in the last day and whose
-- answer was never sent (a crash or an outage between the close and the send).
CREATE INDEX runs_trigger_finished ON runs (trigger, finished_at) WHERE finished_at IS NOT NULL;

-- Rows without an owner (unknown senders, forgeries) are kept 30 days for the operators, then
-- deleted by the inbound sweep.
CREATE INDEX inbound_messages_ownerless ON inbound_messages (received_at) WHERE owner_id IS NULL;
