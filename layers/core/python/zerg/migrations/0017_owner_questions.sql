-- Issue 25: what only the owner decides is confirmed outside the model.
-- A new check (it runs commands unattended) waits for the owner's yes too.
ALTER TABLE pending_directives DROP CONSTRAINT pending_directives_action_check;
ALTER TABLE pending_directives ADD CONSTRAINT pending_directives_action_check
    CHECK (action IN ('create_schedule', 'delete_schedule', 'set_preference', 'update_schedule'));
-- A new check's question quotes its whole task (up to 8 KiB), word for word.
ALTER TABLE pending_directives DROP CONSTRAINT pending_directives_summary_check;
ALTER TABLE pending_directives ADD CONSTRAINT pending_directives_summary_check CHECK (length(summary) <= 10000);
-- When Zerg showed the question, word for word, at the end of the asking run's answer. Only a shown
-- question can be confirmed; rows asked before this migration were never shown, so they expire.
ALTER TABLE pending_directives ADD COLUMN shown_at timestamptz;
-- A run whose model read untrusted text (tool output, worker evidence, mail, memory, summaries):
-- its answer is replayed to later runs as data, never as the assistant's own words.
ALTER TABLE runs ADD COLUMN read_untrusted boolean NOT NULL DEFAULT false;
