"""The owner's MCP servers: register, list, remove, list their tools (cached per owner), call one.

A server is remote (``url``: streamable HTTP, with a bearer token or OAuth client credentials) or
local (``command``: run over stdio inside the ``container_exec`` sandbox, :mod:`.client`). Its table
is :mod:`.store`; workers get its tools as ``mcp__<server>__<tool>`` (:mod:`zerg.tools.mcp_tools`).

Invariants:
- Every read and write is the calling owner's: another owner's server of the same name is another row,
  never seen, listed or called.
- A secret (the bearer token, the OAuth client secret) is sealed for the owner before it is stored
  (:mod:`zerg.sealing`) and opened only to connect; no view, listing, log line or error returns it.
- Replacing a server never drops its secret unasked: a PUT that gives no secret keeps the stored one
  (sealed as it is, with its OAuth client) when the URL is the same; ``"auth": "none"`` drops it; a new
  URL without a secret or ``"auth": "none"`` is refused (:class:`SecretWouldBeLost`), since the stored
  one was given for another URL.
- A listing is what the server said at the time, kept as data: names, descriptions (cut to
  :data:`DESCRIPTION_MAX`), input schemas (at most :data:`SCHEMA_MAX` bytes each), annotations.
  At most :data:`TOOLS_MAX` tools are kept per server (the note says so); a tool whose name cannot
  be an ``mcp__<server>__<tool>`` name (characters, 64 in all) or whose schema is not an object is
  left out, said in the note. A failed listing keeps the last good one and says why.
- A call is made only for a tool of the cached listing, under its original name, and only while
  the server still lists it the same way (same schema, same read-only hint): a tool renamed,
  removed or changed since the listing is refused, until the owner lists the server again.
- A listing needs the server's secret opened; where it cannot be (on AWS the API may only seal owners'
  secrets, the worker opens them), the listing is left to the next worker (:data:`PENDING_NOTE`):
  a worker lists each server that was never listed, the pending ones and the never tried
  (:func:`list_pending`), within :data:`WORKER_LISTING_S` each and :data:`WORKER_LISTINGS_S` in all,
  and never fails for it. A listing inside an API request takes at most :data:`API_LISTING_S`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from psycopg import Connection
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from zerg.mcp_servers import store
from zerg.mcp_servers.client import Endpoint, McpError

if TYPE_CHECKING:
    from zerg.config import Settings
    from zerg.loop.tool import CancelSignal
    from zerg.sealing import Sealer

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,23}$"
URL_PATTERN = r"^https?://[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]{1,5})?([/?#][!-~]*)?$"
_NAME = re.compile(NAME_PATTERN)
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
PREFIX = "mcp__"
TOOLS_MAX = 500  # tools kept from one server's listing
DESCRIPTION_MAX = 2_000
SCHEMA_MAX = 16_384
SECRET_MAX = 4_096
API_LISTING_S = 20.0  # a listing inside an API request (below API Gateway's 30 s)
WORKER_LISTING_S = 15.0  # a listing a worker does before its first step, per server
WORKER_LISTINGS_S = 30.0  # ... and in all
PENDING_NOTE = "not listed yet: its secret cannot be opened here"


class ServerNotFound(LookupError):
    pass


class SecretWouldBeLost(ValueError):
    """A replacement would drop the server's stored secret without being asked to."""


class OAuthSpec(BaseModel):
    """OAuth 2.0 client credentials (the SDK finds the token endpoint from the server's metadata)."""

    model_config = ConfigDict(extra="forbid")
    client_id: str = Field(min_length=1, max_length=500)
    client_secret: SecretStr = Field(min_length=1, max_length=SECRET_MAX, description="Sealed; never returned")
    scope: str | None = Field(default=None, max_length=1_000)
    issuer: str | None = Field(default=None, max_length=2_000,
                               description="The authorization server that issued the credentials (its issuer URL)")


class ServerSpec(BaseModel):
    """What an owner registers: a remote server (``url``) or a local command (``command``), exactly one;
    ``bearer_token``, ``oauth`` (not both) and ``allow_private`` with a ``url`` only."""

    model_config = ConfigDict(extra="forbid")
    url: str | None = Field(default=None, min_length=1, max_length=2_000, pattern=URL_PATTERN,
                            description="A remote server's streamable HTTP endpoint (http or https, a host name or "
                                        "an IPv4 address, no credentials)")
    command: str | None = Field(default=None, min_length=1, max_length=4_000, pattern=r"\S",
                                description="A local server: a shell command run over stdio in the sandbox")
    bearer_token: SecretStr | None = Field(default=None, min_length=1, max_length=SECRET_MAX,
                                           description="Sent as Authorization: Bearer; sealed, never returned")
    oauth: OAuthSpec | None = None
    auth: Literal["none"] | None = Field(
        default=None, description="\"none\": no secret (a stored one is dropped). Without it, a replacement that "
                                  "gives no bearer_token or oauth keeps the stored secret when the url is unchanged")
    allow_private: bool = Field(default=False, description="The URL's host may be a private or loopback address "
                                                           "(that host only; redirects elsewhere are checked as usual)")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises for a port out of range
        except ValueError as exc:
            raise ValueError(f"not a URL ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("an http or https URL with a host")
        if "@" in parts.netloc:
            raise ValueError("no credentials in the URL: give bearer_token or oauth instead")
        if any(c.isspace() or ord(c) < 32 for c in value):
            raise ValueError("no spaces or control characters")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "\x00" in value):
            raise ValueError("a non-blank shell command without NUL characters")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> ServerSpec:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of url (a remote server) or command (a local one)")
        if self.command is not None and (self.bearer_token or self.oauth or self.allow_private):
            raise ValueError("bearer_token, oauth and allow_private are for a remote server (url) only")
        if self.bearer_token is not None and self.oauth is not None:
            raise ValueError("give bearer_token or oauth, not both")
        if self.auth == "none" and (self.bearer_token is not None or self.oauth is not None):
            raise ValueError('"auth": "none" means no secret: give it without bearer_token and oauth')
        return self


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError("a server name is 1-24 characters of lower-case letters, digits and '-', starting with a "
                         "letter or digit")
    return name


@dataclass(frozen=True)
class ServerView:
    """A server as every read shows it: never a secret."""

    name: str
    transport: str
    url: str | None
    command: str | None
    auth: str
    allow_private: bool
    tools: list[dict[str, Any]] | None
    listing_note: str | None
    listed_at: Any
    created_at: Any
    updated_at: Any
    oauth_client_id: str | None = None

    @staticmethod
    def of(row: dict[str, Any]) -> ServerView:
        oauth = row.get("oauth") or {}
        return ServerView(row["name"], row["transport"], row["url"], row["command"], row["auth"], row["allow_private"],
                          row["tools"], row["listing_note"], row["listed_at"], row["created_at"], row["updated_at"],
                          oauth.get("client_id"))

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "transport": self.transport, "url": self.url, "command": self.command,
                "auth": self.auth, "oauth_client_id": self.oauth_client_id, "allow_private": self.allow_private,
                "tools": [public_tool(t) for t in self.tools or []], "tool_count": len(self.tools or []),
                "listing_note": self.listing_note, "listed_at": self.listed_at, "created_at": self.created_at,
                "updated_at": self.updated_at}


def public_tool(tool: dict[str, Any]) -> dict[str, Any]:
    return {k: tool[k] for k in ("name", "exposed", "title", "description", "read_only", "input_schema")}


def put_server(conn: Connection, sealer: Sealer, owner_id: int, name: str, spec: ServerSpec) -> ServerView:
    """Register or replace the owner's server ``name`` (its secret sealed for the owner; a stored secret
    kept or refused to be dropped as the module says)."""
    check_name(name)
    auth, secret, oauth = "none", None, None
    sealed: bytes | None = None
    if spec.bearer_token is not None:
        auth, secret = "bearer", spec.bearer_token.get_secret_value()
    elif spec.oauth is not None:
        auth, secret = "oauth", spec.oauth.client_secret.get_secret_value()
        oauth = {"client_id": spec.oauth.client_id, "scope": spec.oauth.scope, "issuer": spec.oauth.issuer}
    elif spec.auth is None and spec.url is not None:
        stored = store.connect_row(conn, owner_id, name)
        if stored is not None and stored["secret_sealed"] is not None:
            if stored["url"] != spec.url:
                raise SecretWouldBeLost(
                    f"{name} has a stored {'bearer token' if stored['auth'] == 'bearer' else 'OAuth client secret'} "
                    f"given for {stored['url']}: give it again for the new url (bearer_token or oauth), or "
                    '"auth": "none" to register the new url without one')
            auth, oauth, sealed = stored["auth"], stored["oauth"], bytes(stored["secret_sealed"])
    if secret is not None:
        sealed = sealer.seal(owner_id, secret.encode())
    row = store.save(conn, owner_id, name, transport="http" if spec.url else "stdio", url=spec.url,
                     command=spec.command, auth=auth, oauth=oauth, secret_sealed=sealed,
                     allow_private=spec.allow_private)
    return ServerView.of(row)


def list_servers(conn: Connection, owner_id: int) -> list[ServerView]:
    return [ServerView.of(r) for r in store.list_public(conn, owner_id)]


def get_server(conn: Connection, owner_id: int, name: str) -> ServerView:
    row = store.get_public(conn, owner_id, name)
    if row is None:
        raise ServerNotFound(name)
    return ServerView.of(row)


def remove_server(conn: Connection, owner_id: int, name: str) -> None:
    if not store.delete(conn, owner_id, name):
        raise ServerNotFound(name)


def endpoint(conn: Connection, sealer: Sealer, owner_id: int, name: str) -> Endpoint:
    """How to reach the owner's server ``name``, its secret opened (for a connection, never shown)."""
    row = store.connect_row(conn, owner_id, name)
    if row is None:
        raise ServerNotFound(name)
    secret = sealer.open(owner_id, bytes(row["secret_sealed"])).decode() if row["secret_sealed"] else None
    oauth = {**row["oauth"], "client_secret": secret} if row["auth"] == "oauth" else None
    return Endpoint(name=row["name"], transport=row["transport"], url=row["url"], command=row["command"],
                    bearer=secret if row["auth"] == "bearer" else None, oauth=oauth,
                    allow_private=row["allow_private"])


def _fingerprint(schema: Any, read_only: bool) -> str:
    data = json.dumps([schema, read_only], sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def cached_tools(server: str, tools: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The listing as cached: (tools kept, why others were left out)."""
    kept: list[dict[str, Any]] = []
    left: list[str] = []
    seen: set[str] = set()
    for tool in tools:
        name = str(tool.name)
        exposed = f"{PREFIX}{server}__{name}"
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else None
        if not TOOL_NAME.fullmatch(exposed):
            left.append(f"{name[:80]!r}: not a usable tool name (letters, digits, '_' and '-', 64 "
                        "characters with the mcp__<server>__ prefix)")
            continue
        if exposed in seen:
            left.append(f"{name!r}: listed twice")
            continue
        if schema is None or schema.get("type", "object") != "object":
            left.append(f"{name!r}: its input schema is not a JSON object schema")
            continue
        if len(json.dumps(schema)) > SCHEMA_MAX:
            left.append(f"{name!r}: its input schema is over {SCHEMA_MAX} bytes")
            continue
        seen.add(exposed)
        annotations = tool.annotations
        read_only = bool(annotations is not None and annotations.read_only_hint)
        description = (tool.description or "")[:DESCRIPTION_MAX]
        kept.append({"name": name, "exposed": exposed, "title": (tool.title or None) and str(tool.title)[:200],
                     "description": description, "input_schema": schema, "read_only": read_only,
                     "fingerprint": _fingerprint(schema, read_only)})
    return kept, left


def refresh(conn_factory: Any, settings: Settings, sealer: Sealer, owner_id: int, name: str,
            timeout_s: float | None = None) -> ServerView:
    """List the server's tools now (within ``timeout_s``, else ``ZERG_MCP_TIMEOUT_S``) and cache them (a
    failure keeps the last listing, noted why; a secret that cannot be opened here: :data:`PENDING_NOTE`)."""
    from zerg.mcp_servers import client
    from zerg.sealing import SealError

    try:
        with conn_factory() as conn:
            target = endpoint(conn, sealer, owner_id, name)
    except SealError as exc:  # on AWS the API may only seal: a worker, which may open it, lists the tools
        note = f"{PENDING_NOTE} ({exc}); the next worker that can open it lists the tools"
        with conn_factory() as conn:
            row = store.save_listing(conn, owner_id, name, None, note[:1_000])
        if row is None:
            raise ServerNotFound(name) from None
        return ServerView.of(row)
    trouble = client._Trouble()
    timeout = min(timeout_s, settings.mcp_timeout_s) if timeout_s else settings.mcp_timeout_s

    async def work(guard: client.Guard) -> client.Listing:
        async with client.session(settings, target, timeout, trouble) as session:
            return await client.list_tools(session, TOOLS_MAX)

    try:
        listing = client.run(work, timeout_s=timeout, what=f"listing the tools of {name}", trouble=trouble)
    except McpError as exc:
        with conn_factory() as conn:
            row = store.save_listing(conn, owner_id, name, None, str(exc)[:1_000])
        if row is None:
            raise ServerNotFound(name) from None
        return ServerView.of(row)
    kept, left = cached_tools(name, listing.tools)
    notes = []
    if listing.truncated:
        notes.append(f"the server lists more than {TOOLS_MAX} tools: the first {TOOLS_MAX} are kept")
    if left:
        notes.append(f"{len(left)} left out: " + "; ".join(left[:5]) + (" ..." if len(left) > 5 else ""))
    with conn_factory() as conn:
        row = store.save_listing(conn, owner_id, name, kept, " | ".join(notes)[:1_000] or None)
    if row is None:
        raise ServerNotFound(name)
    return ServerView.of(row)


def list_pending(conn_factory: Any, settings: Settings, sealer: Sealer, owner_id: int) -> list[str]:
    """List (and cache) the tools of the owner's servers never listed and not failed since: those left
    to a worker (:data:`PENDING_NOTE`) and those never tried. For a worker, before it takes the tools from
    the cache: within :data:`WORKER_LISTING_S` each and :data:`WORKER_LISTINGS_S` in all; never raises.
    Returns what went wrong, one line per server (also kept in its ``listing_note``)."""
    import logging
    import time

    log = logging.getLogger(__name__)
    with conn_factory() as conn:
        pending = [s.name for s in list_servers(conn, owner_id) if s.listed_at is None
                   and (s.listing_note is None or s.listing_note.startswith(PENDING_NOTE))]
    said: list[str] = []
    ends = time.monotonic() + WORKER_LISTINGS_S
    for name in pending:
        left = ends - time.monotonic()
        if left < 1:
            said.append(f"{name}: not listed (no time left for listings in this worker)")
            continue
        try:
            view = refresh(conn_factory, settings, sealer, owner_id, name, timeout_s=min(WORKER_LISTING_S, left))
        except ServerNotFound:
            continue
        except Exception as exc:  # noqa: BLE001 - never the worker's failure
            log.warning("listing the tools of MCP server %s failed: %s: %s", name, type(exc).__name__, exc)
            said.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
            continue
        if view.tools is None:
            said.append(f"{name}: {view.listing_note}"[:300])
    return said


@dataclass(frozen=True)
class CallResult:
    is_error: bool
    content: list[dict[str, Any]]  # the result's content items as JSON
    structured: Any
    duration_ms: int


def call_tool(conn_factory: Any, settings: Settings, sealer: Sealer, owner_id: int, server: str,
              tool: dict[str, Any], arguments: dict[str, Any], *, timeout_s: float,
              cancel: CancelSignal | None = None) -> CallResult:
    """Call the cached ``tool`` of the owner's ``server`` with ``arguments``; :class:`McpError` when it
    could not be (unreachable, refused, changed since the listing, too slow, cancelled...)."""
    import time

    from zerg.mcp_servers import client

    with conn_factory() as conn:
        target = endpoint(conn, sealer, owner_id, server)
    trouble = client._Trouble()
    started = time.monotonic()

    async def work(guard: client.Guard) -> Any:
        async with client.session(settings, target, timeout_s, trouble) as session:
            listing = await client.list_tools(session, TOOLS_MAX)
            now = next((t for t in listing.tools if t.name == tool["name"]), None)
            if now is None:
                raise McpError(f"the server no longer lists a tool {tool['name']!r} (renamed or removed since it was "
                               f"listed): not called; the owner can list {server}'s tools again")
            current, _ = cached_tools(server, [now])
            if not current or current[0]["fingerprint"] != tool["fingerprint"]:
                raise McpError(f"the server changed tool {tool['name']!r} since it was listed (its input schema or "
                               f"read-only hint): not called; the owner can list {server}'s tools again")
            with guard.request():
                return await session.call_tool(tool["name"], arguments, read_timeout_seconds=timeout_s)

    result = client.run(work, timeout_s=timeout_s, cancel=cancel, what=f"{server}/{tool['name']}", trouble=trouble)
    content = [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in result.content]
    return CallResult(bool(result.is_error), content, result.structured_content,
                      int((time.monotonic() - started) * 1000))

