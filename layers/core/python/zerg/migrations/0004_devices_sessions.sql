-- 0004: several devices per owner, revocable sessions, one-time pairing codes; owner names that
-- are printable, trimmed and unique.

-- 1. Owner names. Existing rows are cleaned before the rules become constraints, deterministically:
--    control characters (U+0001-U+001F, U+007F-U+009F) become spaces and surrounding spaces are
--    trimmed; a name left empty becomes 'owner <id>'. Among names equal ignoring case, the oldest
--    owner (lowest id) keeps the name and each later one, in id order, gets the first free suffix
--    ' (2)', ' (3)', ... The application's own check (zerg.identity.names) is stricter: it also
--    refuses other unprintable characters such as non-breaking spaces.
UPDATE owners
    SET name = coalesce(nullif(btrim(regexp_replace(name, '[\x01-\x1f\x7f-\x9f]', ' ', 'g')), ''), 'owner ' || id)
    WHERE name ~ '[\x01-\x1f\x7f-\x9f]' OR name <> btrim(name);

DO $$
DECLARE
    dup record;
    candidate text;
    n integer;
BEGIN
    FOR dup IN SELECT o.id, o.name FROM owners o
               WHERE EXISTS (SELECT 1 FROM owners p WHERE lower(p.name) = lower(o.name) AND p.id < o.id)
               ORDER BY o.id
    LOOP
        n := 2;
        LOOP
            candidate := left(dup.name, 190) || ' (' || n || ')';
            EXIT WHEN NOT EXISTS (SELECT 1 FROM owners WHERE lower(name) = lower(candidate));
            n := n + 1;
        END LOOP;
        UPDATE owners SET name = candidate WHERE id = dup.id;
    END LOOP;
END $$;

CREATE UNIQUE INDEX owners_name_unique ON owners (lower(name));
ALTER TABLE owners ADD CONSTRAINT owners_name_clean
    CHECK (name = btrim(name) AND name !~ '[\x01-\x1f\x7f-\x9f]');

-- 2. Devices: each holds one device secret (SHA-256 of a 256-bit random token). A revoked device's
--    secret no longer authenticates and its sessions stop working.
CREATE TABLE devices (
    id            bigserial PRIMARY KEY,
    owner_id      bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    name          text NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    secret_hash   text NOT NULL UNIQUE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz,
    revoked_at    timestamptz
);
CREATE INDEX devices_owner ON devices (owner_id, id);
-- Two live devices of one owner never share a name (ignoring case); a revoked one frees its name.
CREATE UNIQUE INDEX devices_live_name ON devices (owner_id, lower(name)) WHERE revoked_at IS NULL;

-- Today's one secret per owner becomes the owner's first device, 'primary': the same hash, so the
-- secret an owner holds keeps working.
INSERT INTO devices (owner_id, name, secret_hash, created_at)
    SELECT id, 'primary', device_secret_hash, created_at FROM owners
    WHERE device_secret_hash IS NOT NULL ORDER BY id;
ALTER TABLE owners DROP COLUMN device_secret_hash;

-- 3. Sessions: the id is the token's sid/jti claim, so checking a token is one primary-key lookup.
CREATE TABLE sessions (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id      bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    device_id     bigint NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    issued_at     timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    CHECK (expires_at > issued_at)
);
CREATE INDEX sessions_owner ON sessions (owner_id, issued_at DESC);
CREATE INDEX sessions_live_device ON sessions (device_id) WHERE revoked_at IS NULL;

-- 4. One-time pairing codes: only the SHA-256 of the normalised code is stored; a code lives
--    minutes and is used at most once (used_at, set by one conditional UPDATE).
CREATE TABLE pairing_codes (
    id          bigserial PRIMARY KEY,
    owner_id    bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    code_hash   text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    device_id   bigint REFERENCES devices(id) ON DELETE SET NULL,  -- the device it paired
    CHECK (expires_at > created_at)
);
CREATE INDEX pairing_codes_owner ON pairing_codes (owner_id, expires_at);
