-- Issue 30: the owner's MCP servers, whose tools workers get as mcp__<server>__<tool>
-- (zerg.mcp_servers). A remote server by URL (streamable HTTP; its bearer token or OAuth client
-- secret sealed for the owner, like an SSH key, never returned) or a local command run over stdio
-- inside the container_exec sandbox. The last tool listing is cached here (tools), per owner.
CREATE TABLE mcp_servers (
    id              bigserial PRIMARY KEY,
    owner_id        bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    name            text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,23}$'),
    transport       text NOT NULL CHECK (transport IN ('http', 'stdio')),
    url             text CHECK (url IS NULL OR length(url) <= 2000),
    command         text CHECK (command IS NULL OR length(command) <= 4000),
    auth            text NOT NULL DEFAULT 'none' CHECK (auth IN ('none', 'bearer', 'oauth')),
    oauth           jsonb CHECK (oauth IS NULL OR jsonb_typeof(oauth) = 'object'),
    secret_sealed   bytea,
    allow_private   boolean NOT NULL DEFAULT false,
    tools           jsonb CHECK (tools IS NULL OR jsonb_typeof(tools) = 'array'),
    listing_note    text,
    listed_at       timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner_id, name),
    CHECK ((transport = 'http') = (url IS NOT NULL) AND (transport = 'stdio') = (command IS NOT NULL)),
    CHECK ((auth = 'none') = (secret_sealed IS NULL))
);
