-- 0008: forgetting an organisational memory is reversible (kept 30 days, then pruned), and a file
-- the embedder refuses (too long, rejected input) is recorded so it stops blocking the others.
ALTER TABLE org_memory ADD COLUMN forgotten_at timestamptz;
CREATE INDEX org_memory_forgotten ON org_memory (forgotten_at) WHERE forgotten_at IS NOT NULL;

CREATE TABLE memory_embedding_failures (
    id            bigserial PRIMARY KEY,
    file_id       bigint NOT NULL REFERENCES memory_files(id) ON DELETE CASCADE,
    owner_id      bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    model         text NOT NULL CHECK (length(model) BETWEEN 1 AND 100),
    content_hash  text NOT NULL,  -- the content that failed: a change makes the file worth another try
    attempts      integer NOT NULL DEFAULT 1 CHECK (attempts > 0),
    last_error    text NOT NULL CHECK (length(last_error) <= 1000),
    failed_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (file_id, model)
);
CREATE INDEX memory_embedding_failures_owner ON memory_embedding_failures (owner_id);
