-- 0019 (issue 26): memory search ranks by BM25 and reads a file's vectors chunk by chunk.
--
-- memory_terms: each memory file's lexemes and how often each occurs (its term frequencies), kept
-- by the database itself from the file's `search` tsvector on every write of the title or content,
-- so that no writer can let it drift. A file's row with the empty lexeme ('', never a real lexeme)
-- holds the file's length in tokens. What BM25 needs per owner is then read from one index: how
-- many of the owner's files hold a word (its rarity), how long the owner's files are on average,
-- and the term frequencies of the files that hold a query's words. Plain PostgreSQL and plpgsql:
-- the same on the embedded server and on Aurora, which offers no BM25 extension.
CREATE TABLE memory_terms (
    owner_id  bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    lexeme    text NOT NULL,
    file_id   bigint NOT NULL REFERENCES memory_files(id) ON DELETE CASCADE,
    tf        integer NOT NULL CHECK (tf >= 0),
    length    integer NOT NULL CHECK (length >= 0),  -- the file's length, on each of its rows
    PRIMARY KEY (owner_id, lexeme, file_id) INCLUDE (tf, length)
);
CREATE INDEX memory_terms_file ON memory_terms (file_id);

-- A lexeme occurs at most 256 times in a tsvector's positions (PostgreSQL keeps no more): the
-- term frequency is capped there, the length is the sum over the file's lexemes.
CREATE FUNCTION memory_terms_of(file_id bigint, owner_id bigint, search tsvector)
RETURNS TABLE (owner_id bigint, lexeme text, file_id bigint, tf integer, length integer)
LANGUAGE sql IMMUTABLE AS $$
    WITH counted AS (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf FROM unnest(search) AS u),
    total AS (SELECT coalesce(sum(tf), 0)::integer AS length FROM counted)
    SELECT owner_id, c.lexeme, file_id, c.tf, t.length FROM counted c CROSS JOIN total t
    UNION ALL
    SELECT owner_id, '', file_id, t.length, t.length FROM total t
$$;

CREATE FUNCTION memory_terms_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM memory_terms WHERE file_id = NEW.id;
    END IF;
    INSERT INTO memory_terms (owner_id, lexeme, file_id, tf, length)
    SELECT * FROM memory_terms_of(NEW.id, NEW.owner_id, NEW.search);
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_terms_insert AFTER INSERT ON memory_files
    FOR EACH ROW EXECUTE FUNCTION memory_terms_sync();
CREATE TRIGGER memory_terms_update AFTER UPDATE OF title, content ON memory_files
    FOR EACH ROW EXECUTE FUNCTION memory_terms_sync();

INSERT INTO memory_terms (owner_id, lexeme, file_id, tf, length)
SELECT t.* FROM memory_files f CROSS JOIN LATERAL memory_terms_of(f.id, f.owner_id, f.search) AS t;
ANALYZE memory_terms;

-- Vectors of overlapping chunks: a file has one row per chunk and model (chunk 0, 1, ...), each
-- chunk within what the model reads, with the characters of the content it covers. A file is
-- scored by its best chunk. All of a file's chunks are replaced together, so chunk 0's content
-- hash says whether the file's vectors are current.
ALTER TABLE memory_embeddings
    ADD COLUMN chunk integer NOT NULL DEFAULT 0 CHECK (chunk >= 0),
    ADD COLUMN chunk_start integer NOT NULL DEFAULT 0 CHECK (chunk_start >= 0),
    ADD COLUMN chunk_end integer CHECK (chunk_end >= chunk_start);
ALTER TABLE memory_embeddings DROP CONSTRAINT memory_embeddings_file_id_model_key;
ALTER TABLE memory_embeddings ADD CONSTRAINT memory_embeddings_file_model_chunk UNIQUE (file_id, model, chunk);
-- Vectors made before chunking saw only a file's first ~1,000 characters: they still answer
-- until the background indexer re-makes them in chunks (a hash no file has marks them stale).
UPDATE memory_embeddings SET content_hash = 'before-chunks:' || content_hash;
