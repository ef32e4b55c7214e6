-- 0004 is the sessions branch's migration (devices, sessions, pairing codes), developed in
-- parallel. This placeholder exists only so this branch migrates standalone (numbers must run
-- 1..N without gaps). DELETE THIS FILE when merging with the branch that brings the real 0004.
SELECT 1;
