-- 0001: owners, the supervisor thread, runs, the worker index and the run event log.

-- Memory (later) stores embeddings; the extension must exist wherever Zerg runs.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE owners (
    id                  bigserial PRIMARY KEY,
    name                text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    -- SHA-256 of a 256-bit random device secret: high entropy, so a fast unsalted hash is safe
    -- and lets authentication look the owner up by hash.
    device_secret_hash  text UNIQUE,
    created_at          timestamptz NOT NULL DEFAULT now()
);

-- Verified contacts: the only addresses Zerg may email/SMS, and the only senders it accepts.
CREATE TABLE owner_contacts (
    id           bigserial PRIMARY KEY,
    owner_id     bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    kind         text NOT NULL CHECK (kind IN ('email', 'sms')),
    address      text NOT NULL,
    verified_at  timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (kind, address)
);
CREATE INDEX owner_contacts_owner ON owner_contacts (owner_id);

-- One long-lived supervisor thread per owner ("one brain"): the unique constraint is the rule.
CREATE TABLE threads (
    id          bigserial PRIMARY KEY,
    owner_id    bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    kind        text NOT NULL DEFAULT 'supervisor' CHECK (kind IN ('supervisor')),
    title       text NOT NULL DEFAULT 'Supervisor',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner_id, kind)
);

CREATE TABLE runs (
    id                bigserial PRIMARY KEY,
    owner_id          bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    thread_id         bigint NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    status            text NOT NULL DEFAULT 'queued'
                      CHECK (status IN ('queued', 'running', 'success', 'failed', 'timeout', 'cancelled')),
    trigger           text NOT NULL DEFAULT 'api'
                      CHECK (trigger IN ('api', 'cli', 'schedule', 'email', 'sms')),
    task              text NOT NULL,
    result            text,
    error             text,
    idempotency_key   text,
    execution_arn     text,
    spawn_rounds      integer NOT NULL DEFAULT 0,
    tokens_in         bigint NOT NULL DEFAULT 0,
    tokens_out        bigint NOT NULL DEFAULT 0,
    cost_usd          numeric(14, 6),
    -- The run's working conversation (system prompt, tool calls and results): never the thread.
    working_messages  jsonb NOT NULL DEFAULT '[]'::jsonb,
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    duration_ms       bigint,
    UNIQUE (owner_id, idempotency_key)
);
CREATE INDEX runs_owner_created ON runs (owner_id, created_at DESC);

-- The thread holds only what the user said and what Zerg answered, with provenance in metadata.
CREATE TABLE thread_messages (
    id          bigserial PRIMARY KEY,
    thread_id   bigint NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    owner_id    bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    run_id      bigint REFERENCES runs(id) ON DELETE SET NULL,
    role        text NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    content     text NOT NULL,
    metadata    jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX thread_messages_thread ON thread_messages (thread_id, id);

-- The worker index that list_workers queries. Derived: rebuildable from the artifacts'
-- metadata.json (``zerg workers reindex``), so run_id deliberately has no foreign key.
CREATE TABLE worker_jobs (
    id            bigserial PRIMARY KEY,           -- job_id: the stable handle from worker_spawned on
    owner_id      bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    run_id        bigint,
    worker_id     text UNIQUE,                     -- artifact id, assigned when the worker starts
    task          text NOT NULL,
    model         text,
    status        text NOT NULL DEFAULT 'queued'
                  CHECK (status IN ('queued', 'running', 'success', 'failed', 'timeout', 'cancelled')),
    summary       text,
    summary_meta  jsonb,
    error         text,
    tokens_in     bigint NOT NULL DEFAULT 0,
    tokens_out    bigint NOT NULL DEFAULT 0,
    cost_usd      numeric(14, 6),
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz,
    duration_ms   bigint
);
CREATE INDEX worker_jobs_owner_created ON worker_jobs (owner_id, created_at DESC);
CREATE INDEX worker_jobs_run ON worker_jobs (run_id);

-- The SSE log: every event is a row first; its id is the SSE event id.
CREATE TABLE run_events (
    id          bigserial PRIMARY KEY,
    run_id      bigint NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    owner_id    bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    event_type  text NOT NULL,
    payload     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX run_events_run ON run_events (run_id, id);
