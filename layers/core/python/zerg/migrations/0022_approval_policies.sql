-- Issue 27: the owner's approval policy (zerg.approvals.policy): per governed tool allow, ask or deny;
-- per SSH host the command patterns that run without asking; how long a request waits. No row: the
-- defaults. The document is validated by the application (zerg.approvals.policy.Policy); the CHECKs
-- here only bound it.
CREATE TABLE approval_policies (
    id          bigserial PRIMARY KEY,
    owner_id    bigint NOT NULL UNIQUE REFERENCES owners(id) ON DELETE CASCADE,
    policy      jsonb NOT NULL CHECK (jsonb_typeof(policy) = 'object' AND octet_length(policy::text) <= 1000000),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
