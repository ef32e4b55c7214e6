-- 0007: long-term memory. Every table is owner-scoped and cascades from owners.
--
-- Valid on PostgreSQL 16 with pgvector >= 0.5 (Aurora PostgreSQL 16 ships pgvector 0.8): nothing
-- here is PostgreSQL 17/18-only, and tests/test_migrations.py applies it to a real 16.
-- pg_trgm is optional: where the server has it (Aurora, the embedded 18), grep gets a trigram
-- index; where it does not, grep scans the owner's rows (bounded by the owner filter).

-- Memory files: a small virtual file system per owner ("episodes/2026-11-22/42-disk-check.md").
CREATE TABLE memory_files (
    id                bigserial PRIMARY KEY,
    owner_id          bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    path              text NOT NULL CHECK (length(path) BETWEEN 1 AND 512),
    title             text NOT NULL DEFAULT '' CHECK (length(title) <= 255),
    content           text NOT NULL CHECK (octet_length(content) <= 262144),
    tags              text[] NOT NULL DEFAULT '{}',
    metadata          jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- Who wrote the current content: recalled text a model wrote from tool or fetched text is
    -- untrusted like any tool output, so the writer is always known.
    writer            text NOT NULL CHECK (writer IN ('user', 'supervisor', 'worker', 'system')),
    writer_run_id     bigint REFERENCES runs(id) ON DELETE SET NULL,
    content_hash      text NOT NULL,  -- sha256 hex of title + content: embeddings follow it
    search            tsvector GENERATED ALWAYS AS (
                          setweight(to_tsvector('english', title), 'A')
                          || setweight(to_tsvector('english', content), 'B')) STORED,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    last_accessed_at  timestamptz,
    UNIQUE (owner_id, path)
);
CREATE INDEX memory_files_search ON memory_files USING gin (search);
CREATE INDEX memory_files_tags ON memory_files USING gin (tags);
CREATE INDEX memory_files_owner_updated ON memory_files (owner_id, updated_at DESC);

-- Previous versions: every overwrite, edit or delete keeps what was there (30 days, restorable).
-- Keyed by path, not by file id: a deleted file's versions outlive it.
CREATE TABLE memory_file_versions (
    id             bigserial PRIMARY KEY,
    owner_id       bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    path           text NOT NULL,
    title          text NOT NULL,
    content        text NOT NULL,
    tags           text[] NOT NULL,
    metadata       jsonb NOT NULL,
    writer         text NOT NULL,
    writer_run_id  bigint REFERENCES runs(id) ON DELETE SET NULL,
    content_hash   text NOT NULL,
    written_at     timestamptz NOT NULL,  -- when this content was written (its updated_at)
    reason         text NOT NULL CHECK (reason IN ('overwrite', 'edit', 'delete', 'restore')),
    replaced_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_file_versions_path ON memory_file_versions (owner_id, path, replaced_at DESC);
CREATE INDEX memory_file_versions_age ON memory_file_versions (replaced_at);

-- Embeddings live apart from the files: one row per (file, model), never compared across models.
-- owner_id is repeated here so the owner filter applies inside the vector query itself.
CREATE TABLE memory_embeddings (
    id            bigserial PRIMARY KEY,
    file_id       bigint NOT NULL REFERENCES memory_files(id) ON DELETE CASCADE,
    owner_id      bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    model         text NOT NULL CHECK (length(model) BETWEEN 1 AND 100),
    dimension     integer NOT NULL CHECK (dimension BETWEEN 1 AND 2000),
    embedding     vector NOT NULL CHECK (vector_dims(embedding) = dimension),
    content_hash  text NOT NULL,  -- the file's content_hash this vector was computed from
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (file_id, model)
);
CREATE INDEX memory_embeddings_owner ON memory_embeddings (owner_id, model);
-- One HNSW index per model (a partial expression index: the query must use the same cast and
-- the same model predicate). A new model gets its index in a new migration.
CREATE INDEX memory_embeddings_hnsw_minilm ON memory_embeddings
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE model = 'all-MiniLM-L6-v2';
CREATE INDEX memory_embeddings_hnsw_te3s ON memory_embeddings
    USING hnsw ((embedding::vector(1536)) vector_cosine_ops) WHERE model = 'text-embedding-3-small';

-- Organisational memory (seed 002): short add-only facts about the owner and their world.
CREATE TABLE org_memory (
    id             bigserial PRIMARY KEY,
    owner_id       bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    category       text NOT NULL
                   CHECK (category IN ('fact', 'decision', 'preference', 'insight', 'reminder', 'profile')),
    content        text NOT NULL CHECK (length(content) BETWEEN 1 AND 2000),
    tags           text[] NOT NULL DEFAULT '{}',
    importance     smallint NOT NULL DEFAULT 5 CHECK (importance BETWEEN 1 AND 10),
    writer         text NOT NULL CHECK (writer IN ('user', 'supervisor', 'worker', 'system')),
    source_run_id  bigint REFERENCES runs(id) ON DELETE SET NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX org_memory_rank ON org_memory (owner_id, importance DESC, updated_at DESC);

-- Thread compaction: a range of the owner's thread messages replaced in the prompt by a summary.
-- The messages themselves stay in thread_messages.
CREATE TABLE conversation_summaries (
    id                bigserial PRIMARY KEY,
    owner_id          bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    thread_id         bigint NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    first_message_id  bigint NOT NULL,
    last_message_id   bigint NOT NULL,
    message_count     integer NOT NULL CHECK (message_count > 0),
    summary           text NOT NULL CHECK (length(summary) BETWEEN 1 AND 20000),
    run_id            bigint REFERENCES runs(id) ON DELETE SET NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CHECK (first_message_id <= last_message_id),
    UNIQUE (thread_id, first_message_id)
);
CREATE INDEX conversation_summaries_thread ON conversation_summaries (owner_id, thread_id, last_message_id DESC);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
        CREATE INDEX memory_files_content_trgm ON memory_files USING gin (content gin_trgm_ops);
    END IF;
END
$$;
