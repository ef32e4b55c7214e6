-- The web client and dashboard (issue 16): the request contract's context and preferences kept on
-- the run, quick turns in the usage ledger, the owner-wide feed and runs list, agent configuration.

-- What the run was asked with, for that run only: {"previous_messages": [{role, content}], ...}
-- (bounded by the API) and {"verbosity": "concise"|"detailed", "notify_on_complete": bool}.
ALTER TABLE runs ADD COLUMN context jsonb;
ALTER TABLE runs ADD COLUMN preferences jsonb;

-- Quick-mode answers (POST /api/jarvis/quick) are model calls outside any run.
ALTER TABLE llm_calls DROP CONSTRAINT llm_calls_component_check;
ALTER TABLE llm_calls ADD CONSTRAINT llm_calls_component_check
    CHECK (component IN ('supervisor', 'worker', 'summary', 'memory', 'intent', 'quick'));

-- GET /api/jarvis/events: the owner's run events in id order, resumable by id.
CREATE INDEX run_events_owner ON run_events (owner_id, id);
-- GET /api/jarvis/runs: newest first, paged by before_id.
CREATE INDEX runs_owner_id ON runs (owner_id, id DESC);

-- Agent configuration per owner (seed 6.3, 8.3): NULL means "the deployment's default".
CREATE TABLE agent_configs (
    id             bigserial PRIMARY KEY,
    owner_id       bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    agent          text NOT NULL CHECK (agent IN ('supervisor', 'worker')),
    model          text CHECK (length(model) BETWEEN 1 AND 100),
    temperature    real CHECK (temperature >= 0 AND temperature <= 2),
    max_tokens     integer CHECK (max_tokens BETWEEN 1 AND 100000),
    instructions   text NOT NULL DEFAULT '' CHECK (length(instructions) <= 4000),
    allowed_tools  text[],  -- NULL: every tool the agent has
    updated_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner_id, agent)
);
