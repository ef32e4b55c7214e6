-- 0003: the usage ledger: one row per model call, written by the model port itself, so every
-- feature's calls (supervisor, workers, summaries, later memory and intent) are counted.
CREATE TABLE llm_calls (
    id             bigserial PRIMARY KEY,
    owner_id       bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    run_id         bigint REFERENCES runs(id) ON DELETE SET NULL,
    job_id         bigint,  -- worker_jobs is a derived index (rebuildable): no foreign key
    component      text NOT NULL
                   CHECK (component IN ('supervisor', 'worker', 'summary', 'memory', 'intent')),
    model          text NOT NULL,
    tokens_in      integer NOT NULL DEFAULT 0,
    tokens_out     integer NOT NULL DEFAULT 0,
    tokens_cached  integer NOT NULL DEFAULT 0,
    cost_usd       numeric(14, 8),  -- NULL: the model's price is unknown
    latency_ms     integer NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX llm_calls_owner_created ON llm_calls (owner_id, created_at);
CREATE INDEX llm_calls_run ON llm_calls (run_id);
