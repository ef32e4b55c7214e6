-- 0010: verification codes are limited per contact per 24 hours, not per resend. Before this, every
-- resend set code_attempts back to 0 and the only cap was the owner's own daily limit, so an owner
-- could guess without end or keep texting a stranger. code_sends counts the codes of the window
-- that began at code_window_start; code_attempts counts the wrong guesses of that same window.
ALTER TABLE owner_contacts ADD COLUMN code_sends integer NOT NULL DEFAULT 0 CHECK (code_sends >= 0);
ALTER TABLE owner_contacts ADD COLUMN code_window_start timestamptz;
