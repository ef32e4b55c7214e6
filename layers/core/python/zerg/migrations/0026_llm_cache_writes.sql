-- 0021 (issue 28): prompt-cache writes in the usage ledger. Anthropic and Bedrock bill the tokens a
-- call writes to their prompt cache apart (1.25x the input price on Claude); like tokens_cached (the
-- reads), they are a part of tokens_in, and cost_usd already prices them. 0 for every earlier call
-- and for providers that do not report them (OpenAI caches without a write price).
ALTER TABLE llm_calls ADD COLUMN tokens_cache_write integer NOT NULL DEFAULT 0 CHECK (tokens_cache_write >= 0);
-- Amazon Titan Text Embeddings V2 (zerg.embeddings.bedrock, 1,024 dimensions): memory search's embedder on
-- AWS with Bedrock. Its own partial HNSW index, as each model has (0007).
CREATE INDEX memory_embeddings_hnsw_titan2 ON memory_embeddings
    USING hnsw ((embedding::vector(1024)) vector_cosine_ops) WHERE model = 'amazon.titan-embed-text-v2:0';
