-- 0009: background runs. Schedules and their fires, the notification policy, verified contacts,
-- every notification sent (or suppressed), the task inbox and the escalations of critical alerts.

-- A schedule is a row first; on AWS an EventBridge Scheduler schedule follows it, locally the
-- ticker of `zerg serve` reads it. Exactly one of cron / rate / at is set (what the user wrote);
-- `expression` is Scheduler's form of it: cron(m h dom mon dow y), rate(n unit) or at(yyyy-mm-ddThh:mm:ss).
CREATE TABLE schedules (
    id            bigserial PRIMARY KEY,
    owner_id      bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    kind          text NOT NULL DEFAULT 'check' CHECK (kind IN ('check', 'digest', 'reminder')),
    name          text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    task          text NOT NULL CHECK (length(task) BETWEEN 1 AND 8192),
    cron          text,
    rate          text,
    at            timestamp,  -- local wall-clock time in `timezone` (one-off)
    expression    text NOT NULL,
    timezone      text NOT NULL DEFAULT 'UTC',
    enabled       boolean NOT NULL DEFAULT true,
    channels      jsonb,  -- per-severity channel overrides {"warning": ["email"], ...}; NULL = the policy's
    next_fire_at  timestamptz,  -- NULL: disabled, or a one-off that has fired
    last_fire_at  timestamptz,
    last_run_id   bigint REFERENCES runs(id) ON DELETE SET NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((cron IS NOT NULL)::int + (rate IS NOT NULL)::int + (at IS NOT NULL)::int = 1),
    UNIQUE (owner_id, name)
);
CREATE INDEX schedules_owner ON schedules (owner_id, id);
-- The ticker's one read: enabled schedules that are due.
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE enabled AND next_fire_at IS NOT NULL;

-- One row per (schedule, scheduled time): a duplicate delivery of the same fire starts nothing.
CREATE TABLE schedule_fires (
    id              bigserial PRIMARY KEY,
    schedule_id     bigint NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
    owner_id        bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    scheduled_time  timestamptz NOT NULL,
    fired_at        timestamptz NOT NULL DEFAULT now(),
    source          text NOT NULL CHECK (source IN ('scheduler', 'ticker', 'run-now')),
    outcome         text NOT NULL DEFAULT 'pending'
                    CHECK (outcome IN ('pending', 'started', 'sent', 'nothing', 'skipped', 'failed')),
    detail          text CHECK (length(detail) <= 1000),  -- why skipped / failed, what was sent
    run_id          bigint REFERENCES runs(id) ON DELETE SET NULL,
    UNIQUE (schedule_id, scheduled_time)
);
CREATE INDEX schedule_fires_owner ON schedule_fires (owner_id, id);
CREATE INDEX schedule_fires_run ON schedule_fires (run_id) WHERE run_id IS NOT NULL;

-- One notification policy per owner (absent row = the defaults in zerg.alerts.policy).
CREATE TABLE notification_policies (
    id                  bigserial PRIMARY KEY,
    owner_id            bigint NOT NULL UNIQUE REFERENCES owners(id) ON DELETE CASCADE,
    timezone            text NOT NULL DEFAULT 'UTC',
    channels            jsonb NOT NULL DEFAULT '{"info": [], "warning": ["email", "sms"], "critical": ["email", "sms"]}'::jsonb,
    quiet_start         time,  -- both NULL: no quiet hours
    quiet_end           time,
    daily_email_limit   integer NOT NULL DEFAULT 50 CHECK (daily_email_limit BETWEEN 0 AND 10000),
    daily_sms_limit     integer NOT NULL DEFAULT 10 CHECK (daily_sms_limit BETWEEN 0 AND 10000),
    daily_usd_cap       numeric(12, 4) CHECK (daily_usd_cap IS NULL OR daily_usd_cap >= 0),
    escalation_repeats  integer NOT NULL DEFAULT 3 CHECK (escalation_repeats BETWEEN 0 AND 20),
    escalation_every_s  integer NOT NULL DEFAULT 900 CHECK (escalation_every_s BETWEEN 1 AND 86400),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CHECK ((quiet_start IS NULL) = (quiet_end IS NULL))
);

-- Contact verification: a 6-digit code, stored as a hash, expiring, with limited attempts.
ALTER TABLE owner_contacts ADD COLUMN code_hash text;
ALTER TABLE owner_contacts ADD COLUMN code_expires_at timestamptz;
ALTER TABLE owner_contacts ADD COLUMN code_attempts integer NOT NULL DEFAULT 0;
ALTER TABLE owner_contacts ADD COLUMN code_sent_at timestamptz;

-- Sends reserved per owner, UTC day and channel: one conditional upsert is the atomic reservation.
CREATE TABLE notification_usage (
    id        bigserial PRIMARY KEY,
    owner_id  bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    day       date NOT NULL,
    channel   text NOT NULL CHECK (channel IN ('email', 'sms')),
    sent      integer NOT NULL DEFAULT 0 CHECK (sent >= 0),
    UNIQUE (owner_id, day, channel)
);

-- Every notification Zerg sent, held or suppressed (and why). reply_token is what a reply carries
-- back (reply+{token}@domain, or the SMS's previousPublishedMessageId via provider_message_id).
CREATE TABLE notifications (
    id                   bigserial PRIMARY KEY,
    owner_id             bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    run_id               bigint REFERENCES runs(id) ON DELETE SET NULL,
    schedule_id          bigint REFERENCES schedules(id) ON DELETE SET NULL,
    contact_id           bigint REFERENCES owner_contacts(id) ON DELETE SET NULL,
    channel              text NOT NULL CHECK (channel IN ('email', 'sms')),
    purpose              text NOT NULL
                         CHECK (purpose IN ('alert', 'escalation', 'digest', 'reminder', 'verification',
                                            'connector', 'budget', 'answer')),
    severity             text CHECK (severity IN ('info', 'warning', 'critical')),
    status               text NOT NULL CHECK (status IN ('sent', 'suppressed', 'held', 'failed')),
    reason               text CHECK (length(reason) <= 1000),
    address              text,  -- where it went (a verified contact's address at the time)
    subject              text,
    body                 text NOT NULL DEFAULT '',
    provider_message_id  text,
    message_id           text,  -- the email's RFC 5322 Message-ID, for threading replies
    reply_token          text UNIQUE,
    attempt              integer NOT NULL DEFAULT 0,  -- 0: the first alert; n: the n-th repeat
    release_at           timestamptz,  -- held (quiet hours): when it may be sent
    created_at           timestamptz NOT NULL DEFAULT now(),
    sent_at              timestamptz
);
CREATE INDEX notifications_owner ON notifications (owner_id, id DESC);
CREATE INDEX notifications_run ON notifications (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX notifications_held ON notifications (release_at) WHERE status = 'held';
CREATE INDEX notifications_provider ON notifications (provider_message_id) WHERE provider_message_id IS NOT NULL;

-- The task inbox: one item per background run, with its assessment. System rules only raise
-- severity; acknowledging stops an escalation.
CREATE TABLE inbox_items (
    id               bigserial PRIMARY KEY,
    owner_id         bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    run_id           bigint NOT NULL UNIQUE REFERENCES runs(id) ON DELETE CASCADE,
    schedule_id      bigint REFERENCES schedules(id) ON DELETE SET NULL,
    severity         text NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    headline         text NOT NULL CHECK (length(headline) BETWEEN 1 AND 300),
    details          text NOT NULL DEFAULT '' CHECK (length(details) <= 20000),
    assessed_by      text NOT NULL CHECK (assessed_by IN ('model', 'fallback', 'system')),
    created_at       timestamptz NOT NULL DEFAULT now(),
    acknowledged_at  timestamptz,
    digested_at      timestamptz  -- first included in a digest
);
CREATE INDEX inbox_items_owner ON inbox_items (owner_id, (acknowledged_at IS NULL) DESC, created_at DESC);

-- A critical alert's repeats: one escalation state machine execution each, until acknowledged.
CREATE TABLE escalations (
    id             bigserial PRIMARY KEY,
    owner_id       bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    run_id         bigint NOT NULL UNIQUE REFERENCES runs(id) ON DELETE CASCADE,
    execution_arn  text,
    status         text NOT NULL DEFAULT 'running'
                   CHECK (status IN ('running', 'acknowledged', 'exhausted', 'failed')),
    repeats_sent   integer NOT NULL DEFAULT 0,
    max_repeats    integer NOT NULL,
    interval_s     integer NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    ended_at       timestamptz
);
CREATE INDEX escalations_owner ON escalations (owner_id, id);

