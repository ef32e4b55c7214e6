-- Replies (issue 15, after review): the reads that keep inbound mail honest over time.

-- The same email delivered again under a new provider id (a DKIM replay, an MTA resending after a
-- lost acknowledgement) is found by its owner's Message-ID and refused: not unique, since rows
-- that were refused (a forgery with a copied Message-ID among them) must not block the real one.
CREATE INDEX inbound_messages_message_id ON inbound_messages (owner_id, message_id)
    WHERE channel = 'email' AND message_id IS NOT NULL;
