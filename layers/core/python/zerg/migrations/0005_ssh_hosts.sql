-- 0005: SSH hosts belong to owners. Each row is one allowlisted server of one owner: where it is,
-- who to log in as, the private key sealed for that owner (zerg.sealing: KMS with the owner id as
-- encryption context, or AES-GCM under a local 0600 key with the owner id as associated data), and
-- the server's pinned host key. Only the sealed key is secret; fingerprints are for display.
-- Independent of 0004: only owners (0001) is referenced.
CREATE TABLE ssh_hosts (
    id                    bigserial PRIMARY KEY,
    owner_id              bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    alias                 text NOT NULL CHECK (alias ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    hostname              text NOT NULL CHECK (length(hostname) BETWEEN 1 AND 253),
    port                  integer NOT NULL DEFAULT 22 CHECK (port BETWEEN 1 AND 65535),
    username              text NOT NULL CHECK (length(username) BETWEEN 1 AND 64),
    private_key_sealed    bytea NOT NULL,
    key_type              text NOT NULL,
    key_fingerprint       text NOT NULL,
    host_key              text NOT NULL,  -- "ssh-ed25519 AAAA...": the pin, public
    host_key_fingerprint  text NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner_id, alias)
);
