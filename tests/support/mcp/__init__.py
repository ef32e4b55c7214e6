"""Scripted MCP servers for the client's tests: a streamable-HTTP one built with the official SDK
(:mod:`.http_server`) and a hostile stdio one in plain JSON-RPC (``attack_server.py``)."""
