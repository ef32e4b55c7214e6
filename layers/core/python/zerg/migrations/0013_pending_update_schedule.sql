-- Directives (issue 15, review P2 #7): a schedule change that silences a check (its warnings and
-- critical alerts, or its critical alerts, would reach the owner by no channel) waits for the
-- owner's yes like a deletion, so it is a question too.
ALTER TABLE pending_directives DROP CONSTRAINT pending_directives_action_check;
ALTER TABLE pending_directives ADD CONSTRAINT pending_directives_action_check
    CHECK (action IN ('delete_schedule', 'set_preference', 'update_schedule'));
