"""``zerg doctor``: what this host gives Zerg, checked for real and printed for a person.

Invariants:
- It reports, it does not change: the one side effect is the embedded database starting, as any
  command that needs the database does.
- No secret is ever printed: not the model key, not a database password, not an SSH key; only
  whether each is present.
- The exit status is non-zero only when something is broken (the database unreachable, an SSH
  key that cannot be found). A weak level (a best-effort sandbox, no model key) is said loudly but
  is a working configuration.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from zerg.config import Settings, SSHHost


def _sandbox(settings: Settings, say: Callable[[str], None]) -> bool:
    from zerg.hosting import lambda_environment
    from zerg.sandbox import Limits, level
    from zerg.sandbox.detect import fix

    current = level(settings)
    say(f"sandbox: {current.describe()}")
    if current.binary:
        say(f"  launcher: {current.binary}")
    say(f"  limits: {Limits.of(settings).summary(current.isolated)}")
    for note in current.notes:
        say(f"  passed over: {note}")
    if not current.isolated and not lambda_environment(settings):
        say(f"  WARNING: commands are NOT isolated from this host; fix: {fix(current.notes)}")
    return True


def _ssh_key(host: SSHHost) -> tuple[str, bool]:
    """(where the key comes from, usable) — never the key itself."""
    if host.key_file is not None:
        readable = os.access(host.key_file, os.R_OK)
        return f"key file {host.key_file} ({'readable' if readable else 'MISSING or unreadable'})", readable
    if host.key_env is not None:
        present = bool(os.environ.get(host.key_env))
        return f"key in ${host.key_env} ({'set' if present else 'NOT set'})", present
    if host.key_secret_arn is not None:
        return f"key in Secrets Manager {host.key_secret_arn}", True
    return "no key configured (agent/default keys)", True


def _ssh(settings: Settings, say: Callable[[str], None]) -> bool:
    if not settings.ssh_hosts:
        say("ssh allowlist (ZERG_SSH_HOSTS): empty — the local owner has no bootstrap host "
            "(owners' own hosts: zerg hosts list --owner NAME)")
        return True
    say(f"ssh allowlist (ZERG_SSH_HOSTS): {len(settings.ssh_hosts)} bootstrap host(s) of the local owner "
        "(owners' own hosts: zerg hosts list --owner NAME)")
    ok = True
    for alias, host in sorted(settings.ssh_hosts.items()):
        where, usable = _ssh_key(host)
        pin = "host key pinned" if host.host_key else f"host key from {settings.ssh_known_hosts or 'known_hosts'}"
        say(f"  {alias}: {host.user}@{host.hostname}:{host.port}, {where}, {pin}")
        ok = ok and usable
    return ok


def _database_target(settings: Settings) -> str:
    if settings.database_url:
        from psycopg.conninfo import conninfo_to_dict

        try:
            parts = conninfo_to_dict(settings.database_url)
        except Exception:  # psycopg's ProgrammingError: the URL itself is malformed
            return "DATABASE_URL (malformed)"
        user = f"{parts['user']}@" if parts.get("user") else ""
        port = f":{parts['port']}" if parts.get("port") else ""
        return f"DATABASE_URL postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"
    if settings.db_secret_arn:
        proxy = f" via RDS Proxy {settings.db_proxy_endpoint}" if settings.db_proxy_endpoint else ""
        return f"Aurora from secret {settings.db_secret_arn}{proxy}"
    return f"embedded PostgreSQL in {settings.data_dir / 'pg'}"


def _database(settings: Settings, say: Callable[[str], None]) -> bool:
    say(f"database: {_database_target(settings)}")
    try:
        import psycopg
        from psycopg.rows import dict_row

        from zerg.db import database_url, server_info
        from zerg.migrate import status

        with psycopg.connect(database_url(settings), connect_timeout=5, row_factory=dict_row) as conn:
            info = server_info(conn)
            schema = status(conn)
    except Exception as exc:  # any failure to reach it is the finding, in one line
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        say(f"  reachable: NO ({detail})")
        return False
    say(f"  reachable: yes, PostgreSQL {info['server_version']}, schema version {schema.current} of "
        f"{schema.latest}, pgvector {_extension(info, 'pgvector')}, pg_trgm {_extension(info, 'pg_trgm')}")
    if schema.pending:
        say("  pending migrations: zerg db migrate applies them (zerg run and zerg serve do it too)")
    for warning in _extension_warnings(info):
        say(f"  WARNING: {warning}")
    return True


def _extension(info: dict, name: str) -> str:
    if info[name]:
        return info[name]
    return f"{info[name + '_available']} available, not installed" if info[name + "_available"] else "MISSING"


ITERATIVE_SCANS = (0, 8)  # pgvector's hnsw.iterative_scan: an owner filter that never shrinks the top-k


def _extension_warnings(info: dict) -> list[str]:
    """What memory loses on this server (pgvector < 0.8, no pg_trgm); it works either way."""
    warnings = []
    pgvector = info["pgvector"] or info["pgvector_available"]
    if pgvector and tuple(int(p) for p in pgvector.split(".")[:2] if p.isdigit()) < ITERATIVE_SCANS:
        warnings.append(f"pgvector {pgvector} has no iterative index scans (0.8+): memory search falls "
                        "back to exact scans of the owner's vectors")
    if not info["pg_trgm_available"]:
        warnings.append("pg_trgm is missing: memory grep scans the owner's files without a trigram index")
    return warnings


def _model(settings: Settings, say: Callable[[str], None]) -> bool:
    from zerg.llm.providers import ModelConfigError, check_settings

    provider = settings.default_provider
    if provider == "offline":
        say("model provider: offline (the deterministic playbook; set OPENAI_API_KEY or OPENAI_BASE_URL, or "
            "ZERG_MODEL_PROVIDER, for a model)")
    elif provider in ("openai", "openai-chat"):
        base = settings.openai_base_url or "https://api.openai.com/v1"
        if settings.openai_api_key is not None:
            key = "present (OPENAI_API_KEY)"
        elif settings.openai_secret_arn:
            key = f"from Secrets Manager {settings.openai_secret_arn}"
        else:
            key = "absent"
        api = "OpenAI Responses" if provider == "openai" else "OpenAI-compatible"
        say(f"model provider: {api} at {base}, key {key}")
    elif provider == "anthropic":
        key = ("present (ANTHROPIC_API_KEY)" if settings.anthropic_api_key is not None else
               f"from Secrets Manager {settings.anthropic_secret_arn}" if settings.anthropic_secret_arn else "absent")
        say(f"model provider: Anthropic Messages at {settings.anthropic_base_url or 'https://api.anthropic.com'}, "
            f"key {key}")
    else:
        say(f"model provider: Amazon Bedrock Converse in {settings.region_for_bedrock or '(no region)'}, IAM credentials"
            + (f", endpoint {settings.bedrock_endpoint_url}" if settings.bedrock_endpoint_url else ""))
    if provider != "offline":
        say(f"  models: supervisor {settings.supervisor_model}, worker {settings.worker_model}, "
            f"summary {settings.summary_model}")
    try:
        check_settings(settings)
    except ModelConfigError as exc:
        say(f"  PROBLEM: {exc}")
        return False
    return True


def _embeddings(settings: Settings, say: Callable[[str], None]) -> bool:
    from zerg.embeddings import choose

    choice = choose(settings)
    if choice.kind == "openai":
        from zerg.embeddings.openai import DIMENSION, MODEL
    elif choice.kind == "local":
        from zerg.embeddings.local import DIMENSION, MODEL
    elif choice.kind == "bedrock":
        from zerg.embeddings.bedrock import DIMENSION, MODEL
    else:
        say(f"embeddings: none, memory search is full-text only ({choice.reason})")
        return not choice.broken
    say(f"embeddings: {MODEL} ({choice.kind}, {DIMENSION} dimensions; {choice.reason}), "
        f"{settings.embedding_timeout_s:g} s timeout per call")
    return True


def run_doctor(settings: Settings, say: Callable[[str], None] = print) -> int:
    """Print every finding; 0 when nothing is broken, 1 otherwise."""
    checks = (_sandbox, _ssh, _database, _model, _embeddings)
    results = [check(settings, say) for check in checks]
    broken = results.count(False)
    say("doctor: " + ("everything works" if not broken else f"{broken} problem(s) above"))
    return 0 if not broken else 1
