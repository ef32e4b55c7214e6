-- 0002: keep the supervisor's own usage apart from the run's totals.
-- runs.tokens_in/out/cost_usd become the run's totals (supervisor + workers + summaries), set when
-- the run ends; these columns accumulate the supervisor's inferences while it runs.
ALTER TABLE runs
    ADD COLUMN supervisor_tokens_in   bigint NOT NULL DEFAULT 0,
    ADD COLUMN supervisor_tokens_out  bigint NOT NULL DEFAULT 0,
    ADD COLUMN supervisor_cost_usd    numeric(14, 6) DEFAULT 0;
