"""An owner's SSH hosts: register, list, remove, and resolve an alias for ``ssh_exec``.

Invariants:
- An alias resolves only among the calling owner's hosts. Another owner's alias is "not found"
  (API 404, CLI error, ``ssh_exec``: "not in the SSH allowlist"), exactly like one that never existed.
- ``ZERG_SSH_HOSTS`` is the bootstrap of a single-user install: consulted at call time, and only
  for the local owner (the owner named ``local`` that ``zerg run`` acts for). It is never copied
  into the table, so its keys stay where the configuration points (file, env var, Secrets
  Manager). An owner's own row with the same alias wins over it.
- Private keys are sealed before they reach the table and opened only in :meth:`Target.load_key`,
  in the worker, for the row's own owner. No view, message or log line carries key material.
- Hosts in the table always have a pinned host key; only bootstrap hosts without ``host_key`` fall
  back to the known_hosts file, as they did before.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from psycopg import Connection

from zerg.config import Settings, SSHHost
from zerg.hosts import store
from zerg.hosts.spec import HostSpec, check_alias, host_key_fingerprint, parse_host_key, parse_private_key
from zerg.owners import LOCAL_OWNER, owner_by_name
from zerg.sealing import Sealer, SealError

BOOTSTRAP = "ZERG_SSH_HOSTS"
Source = Literal["owner", "ZERG_SSH_HOSTS"]


class HostNotFound(LookupError):
    pass


class HostExists(Exception):
    pass


class BootstrapHost(Exception):
    """The alias comes from ``ZERG_SSH_HOSTS``: it is changed there, not through the registry."""


class KeyUnavailable(RuntimeError):
    """The host's private key cannot be loaded or opened (the message never holds key material)."""


@dataclass(frozen=True)
class HostView:
    """What any read path shows of a host: never key material."""

    alias: str
    hostname: str
    port: int
    user: str
    key_type: str | None
    key_fingerprint: str | None
    host_key_fingerprint: str | None
    source: Source
    created_at: datetime | None = None
    updated_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _view(row: dict[str, Any]) -> HostView:
    return HostView(row["alias"], row["hostname"], row["port"], row["username"], row["key_type"],
                    row["key_fingerprint"], row["host_key_fingerprint"], "owner", row["created_at"], row["updated_at"])


def _bootstrap_view(alias: str, host: SSHHost) -> HostView:
    return HostView(alias, host.hostname, host.port, host.user, None, None, host_key_fingerprint(host.host_key), BOOTSTRAP)


def is_local_owner(conn: Connection, owner_id: int) -> bool:
    return owner_by_name(conn, LOCAL_OWNER) == owner_id


def _bootstrap(conn: Connection, settings: Settings, owner_id: int) -> dict[str, SSHHost]:
    """The ``ZERG_SSH_HOSTS`` entries this owner may use: all of them for the local owner, else none."""
    if not settings.ssh_hosts or not is_local_owner(conn, owner_id):
        return {}
    return dict(settings.ssh_hosts)


def put_host(conn: Connection, sealer: Sealer, owner_id: int, alias: str, spec: HostSpec, *,
             replace: bool = True) -> tuple[HostView, bool]:
    """Register (or, with ``replace``, replace) the owner's host: (view, created)."""
    check_alias(alias)
    key = parse_private_key(spec.private_key.get_secret_value())
    pin = parse_host_key(spec.host_key)
    sealed = sealer.seal(owner_id, spec.private_key.get_secret_value().encode())
    row, created = store.save(
        conn, owner_id, alias, hostname=spec.hostname, port=spec.port, username=spec.user,
        private_key_sealed=sealed, key_type=key.key_type, key_fingerprint=key.fingerprint,
        host_key=pin.line, host_key_fingerprint=pin.fingerprint, replace=replace,
    )
    if row is None:
        raise HostExists(f"ssh host {alias!r} already exists (replace it explicitly)")
    return _view(row), created


def list_hosts(conn: Connection, settings: Settings, owner_id: int) -> list[HostView]:
    """The owner's hosts by alias, with the bootstrap entries their own rows do not shadow."""
    own = {row["alias"]: _view(row) for row in store.list_public(conn, owner_id)}
    boot = {a: _bootstrap_view(a, h) for a, h in _bootstrap(conn, settings, owner_id).items() if a not in own}
    return [v for _, v in sorted({**own, **boot}.items())]


def get_host(conn: Connection, settings: Settings, owner_id: int, alias: str) -> HostView:
    row = store.get_public(conn, owner_id, alias)
    if row is not None:
        return _view(row)
    host = _bootstrap(conn, settings, owner_id).get(alias)
    if host is None:
        raise HostNotFound(f"ssh host {alias!r} not found")
    return _bootstrap_view(alias, host)


def remove_host(conn: Connection, settings: Settings, owner_id: int, alias: str) -> None:
    if store.delete(conn, owner_id, alias):
        return
    if alias in _bootstrap(conn, settings, owner_id):
        raise BootstrapHost(f"ssh host {alias!r} comes from {BOOTSTRAP}: remove it there")
    raise HostNotFound(f"ssh host {alias!r} not found")


@dataclass(frozen=True)
class Target:
    """One resolved alias: where ``ssh_exec`` connects and how it gets the key (lazily, in the worker)."""

    alias: str
    hostname: str
    port: int
    user: str
    host_key: str | None  # the pin; None only for a bootstrap host relying on known_hosts
    source: Source
    _sealed: bytes | None = None
    _owner_id: int | None = None
    _bootstrap: SSHHost | None = None

    def __repr__(self) -> str:  # no sealed bytes in tracebacks or logs
        return f"Target({self.alias!r}, {self.user}@{self.hostname}:{self.port}, source={self.source})"

    def load_key(self, sealer: Sealer | None):
        """The paramiko key, opened for this owner (or read from the bootstrap's key source)."""
        if self._bootstrap is not None:
            text = _bootstrap_key_text(self.alias, self._bootstrap)
        else:
            if sealer is None or self._sealed is None or self._owner_id is None:
                raise KeyUnavailable(f"ssh key for {self.alias}: no sealer to open it")
            try:
                text = sealer.open(self._owner_id, self._sealed).decode()
            except SealError as exc:
                raise KeyUnavailable(f"ssh key for {self.alias} cannot be opened: {exc}") from None
        try:
            return parse_private_key(text).pkey
        except ValueError:
            raise KeyUnavailable(f"ssh key for {self.alias} is not a readable Ed25519, ECDSA or RSA private key") from None


def _bootstrap_key_text(alias: str, host: SSHHost) -> str:
    if host.key_file:
        try:
            return Path(host.key_file).expanduser().read_text()
        except OSError as exc:
            raise KeyUnavailable(f"ssh key for {alias}: cannot read key_file ({exc.strerror})") from None
    if host.key_env:
        text = os.environ.get(host.key_env, "")
        if not text:
            raise KeyUnavailable(f"ssh key for {alias}: environment variable {host.key_env} is empty")
        return text
    if host.key_secret_arn:
        import boto3

        return boto3.client("secretsmanager").get_secret_value(SecretId=host.key_secret_arn)["SecretString"]
    raise KeyUnavailable(f"ssh host {alias} has no key_file, key_env or key_secret_arn")


def resolve(conn: Connection, settings: Settings, owner_id: int, alias: str) -> Target | list[str]:
    """The owner's host called ``alias``, or (when there is none) the aliases the owner may use."""
    row = store.connect_row(conn, owner_id, alias)
    if row is not None:
        return Target(row["alias"], row["hostname"], row["port"], row["username"], row["host_key"], "owner",
                      bytes(row["private_key_sealed"]), owner_id)
    boot = _bootstrap(conn, settings, owner_id)
    if alias in boot:
        host = boot[alias]
        return Target(alias, host.hostname, host.port, host.user, host.host_key, BOOTSTRAP, _bootstrap=host)
    return sorted({*store.aliases(conn, owner_id), *boot})

