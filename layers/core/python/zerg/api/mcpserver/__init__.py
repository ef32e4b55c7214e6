"""Zerg as an MCP server (issue 30, docs/mcp.md): the tools and resources (:mod:`.tools`), the SDK
server that offers them to one owner (:mod:`.server`), and ``POST /mcp``'s stateless streamable HTTP
(:mod:`.http`). ``zerg mcp serve`` (:mod:`zerg.cli.mcp_serve`) serves the same over stdio."""
