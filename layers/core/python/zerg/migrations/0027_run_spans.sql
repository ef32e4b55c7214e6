-- Issue 28 item 2: the spans of each run's OpenTelemetry trace, kept locally so the dashboard can draw
-- a waterfall (GET /api/jarvis/runs/{id}/trace). Written by zerg.tracing.store's span exporter when
-- ZERG_TRACE_STORE is on; every read is scoped by owner. A span is stored once per run (its id is
-- unique within the run's trace), so a retried export changes nothing.
CREATE TABLE run_spans (
    id             bigserial PRIMARY KEY,
    owner_id       bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    run_id         bigint NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    trace_id       text NOT NULL CHECK (trace_id ~ '^[0-9a-f]{32}$'),
    span_id        text NOT NULL CHECK (span_id ~ '^[0-9a-f]{16}$'),
    parent_span_id text CHECK (parent_span_id ~ '^[0-9a-f]{16}$'),
    name           text NOT NULL CHECK (length(name) BETWEEN 1 AND 300),
    kind           text NOT NULL CHECK (kind IN ('internal', 'client', 'server', 'producer', 'consumer')),
    started_at     timestamptz NOT NULL,
    duration_ms    double precision NOT NULL CHECK (duration_ms >= 0),
    status         text NOT NULL CHECK (status IN ('unset', 'ok', 'error')),
    status_message text CHECK (length(status_message) <= 2000),
    attributes     jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(attributes) = 'object'),
    UNIQUE (run_id, span_id)
);
CREATE INDEX run_spans_run ON run_spans (run_id, started_at);
CREATE INDEX run_spans_owner ON run_spans (owner_id, id);
