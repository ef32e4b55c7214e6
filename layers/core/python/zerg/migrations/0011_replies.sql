-- Replies (issue 15): inbound email and SMS as rows first, the destructive directives waiting for
-- the owner's "yes", and SMS opt-out (STOP) per contact.

-- One row per inbound message, written before anything acts on it; idempotent by the provider's
-- message id (SES messageId, the SMS inboundMessageId, or the local file's sha256).
CREATE TABLE inbound_messages (
    id               bigserial PRIMARY KEY,
    channel          text NOT NULL CHECK (channel IN ('email', 'sms')),
    provider_id      text NOT NULL CHECK (length(provider_id) BETWEEN 1 AND 300),
    source           text NOT NULL CHECK (source IN ('ses', 'sns', 'local')),
    -- NULL while no owner is known (an unknown sender: rejected, kept for the operators).
    owner_id         bigint REFERENCES owners(id) ON DELETE CASCADE,
    sender           text CHECK (length(sender) <= 400),
    recipient        text CHECK (length(recipient) <= 400),
    subject          text CHECK (length(subject) <= 1000),
    body             text NOT NULL DEFAULT '' CHECK (length(body) <= 20000),  -- the reply as read (quotes stripped)
    message_id       text CHECK (length(message_id) <= 1000),   -- email: its Message-ID (the answer's In-Reply-To)
    references_ids   text CHECK (length(references_ids) <= 8000),  -- email: its References
    object_key       text,  -- where the raw message is kept (S3 key, or a path under ZERG_DATA_DIR)
    notification_id  bigint REFERENCES notifications(id) ON DELETE SET NULL,  -- what it answers
    answers_run_id   bigint REFERENCES runs(id) ON DELETE SET NULL,           -- that notification's run
    run_id           bigint REFERENCES runs(id) ON DELETE SET NULL,           -- the run it started
    status           text NOT NULL DEFAULT 'received'
                     CHECK (status IN ('received', 'rejected', 'acknowledged', 'run', 'keyword', 'failed')),
    reason           text CHECK (length(reason) <= 1000),
    received_at      timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (channel, provider_id)
);
CREATE INDEX inbound_messages_owner ON inbound_messages (owner_id, id DESC);
CREATE INDEX inbound_messages_run ON inbound_messages (run_id) WHERE run_id IS NOT NULL;

-- A destructive directive (delete a schedule, stop all alerts) asked for in one run and done only
-- when the owner confirms in a later run of the same thread.
CREATE TABLE pending_directives (
    id          bigserial PRIMARY KEY,
    owner_id    bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    run_id      bigint REFERENCES runs(id) ON DELETE CASCADE,  -- the run that asked
    action      text NOT NULL CHECK (action IN ('delete_schedule', 'set_preference')),
    args        jsonb NOT NULL,
    summary     text NOT NULL CHECK (length(summary) <= 1000),
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'expired', 'superseded')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    decided_at  timestamptz
);
CREATE INDEX pending_directives_owner ON pending_directives (owner_id, status, id DESC);

-- STOP from a number: no SMS to it until START (recorded when and by which inbound message).
ALTER TABLE owner_contacts ADD COLUMN opted_out_at timestamptz;
ALTER TABLE owner_contacts ADD COLUMN opted_out_by bigint REFERENCES inbound_messages(id) ON DELETE SET NULL;
