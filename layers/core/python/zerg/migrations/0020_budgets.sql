-- 0020 (issue 27): budgets that stop spending, and idle schedules that pause themselves.
-- The owner's defaults for a run's budget (a request's preferences.budget_usd / budget_tokens win),
-- and the prices the owner sets for models Zerg has no price for (USD per million tokens, [in, out]):
-- a budgeted run refuses a model of unknown price, since it would count $0 and no budget could stop it.
ALTER TABLE notification_policies ADD COLUMN run_usd_budget numeric(12, 4) CHECK (run_usd_budget >= 0);
ALTER TABLE notification_policies ADD COLUMN run_token_budget bigint CHECK (run_token_budget >= 0);
ALTER TABLE notification_policies ADD COLUMN model_prices jsonb NOT NULL DEFAULT '{}'::jsonb;
-- A schedule's budgets: per fire (its run's budget) and per day (in the schedule's time zone: a fire
-- is skipped once the day's runs spent it). NULL: none. idle_pause_days: results nobody opened or
-- acknowledged for that many days pause the schedule (NULL: never); idle_paused_at: when it did.
ALTER TABLE schedules ADD COLUMN fire_usd_budget numeric(12, 4) CHECK (fire_usd_budget >= 0);
ALTER TABLE schedules ADD COLUMN fire_token_budget bigint CHECK (fire_token_budget >= 0);
ALTER TABLE schedules ADD COLUMN day_usd_budget numeric(12, 4) CHECK (day_usd_budget >= 0);
ALTER TABLE schedules ADD COLUMN day_token_budget bigint CHECK (day_token_budget >= 0);
ALTER TABLE schedules ADD COLUMN idle_pause_days integer DEFAULT 14 CHECK (idle_pause_days BETWEEN 1 AND 365);
ALTER TABLE schedules ADD COLUMN idle_paused_at timestamptz;
-- A run that stopped at its budget: when (its result is the partial answer of the workers that finished).
ALTER TABLE runs ADD COLUMN budget_stopped_at timestamptz;
-- When the owner first opened a background run's details (GET /api/jarvis/runs/{id}): with
-- acknowledged_at, what tells a schedule whose results nobody looks at (it pauses after N days).
ALTER TABLE inbox_items ADD COLUMN opened_at timestamptz;
-- The one notice a schedule sends when it pauses itself for lack of attention.
ALTER TABLE notifications DROP CONSTRAINT notifications_purpose_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_purpose_check
    CHECK (purpose IN ('alert', 'escalation', 'digest', 'reminder', 'verification', 'connector', 'budget', 'answer',
                       'test', 'idle_pause'));
