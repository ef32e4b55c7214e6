-- Issue 27 item 3: an approval shows the model's stated reason (its own words with the call, fenced as
-- data) and, apart from it, why the owner's policy asks (Zerg's words). Until now ``reason`` held the
-- policy's sentence; those rows keep it as ``asked_because`` and their model reason is unknown.
ALTER TABLE approvals ADD COLUMN asked_because text;
UPDATE approvals SET asked_because = reason, reason = '' WHERE kind = 'call';
