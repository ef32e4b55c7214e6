"""Registering an owner's SSH host the way the API and ``zerg hosts add`` do (sealed key, pinned host key)."""

from __future__ import annotations

from pathlib import Path

from zerg.hosts import registry
from zerg.hosts.spec import HostSpec


def host_spec(server, **overrides) -> HostSpec:
    """The loopback test server as a host: its client key and its host key pinned.
    ``key_file=`` reads another private key; other overrides replace fields."""
    key_file = Path(overrides.pop("key_file", server.client_key))
    fields = {"hostname": "127.0.0.1", "port": server.port, "user": server.user,
              "private_key": key_file.read_text(), "host_key": server.host_key}
    return HostSpec(**(fields | overrides))


def add_host(rt, owner_id: int, alias: str, server, **overrides) -> registry.HostView:
    with rt.pool.connection() as conn:
        view, _ = registry.put_host(conn, rt.sealer, owner_id, alias, host_spec(server, **overrides))
    return view


def key_lines(private_key: str) -> list[str]:
    """The base64 body lines of a private key: any one of them in an answer is a leak."""
    return [line for line in private_key.splitlines() if line and "-----" not in line]


def assert_no_key(text: str, private_key: str) -> None:
    assert not any(line in text for line in key_lines(private_key)), "private key material leaked"
