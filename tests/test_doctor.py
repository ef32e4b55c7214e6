"""``zerg doctor`` against the real test database, a closed loopback port, and this host's sandbox."""

from __future__ import annotations

import json
import socket

from zerg.cli.main import main
from zerg.config import get_settings
from zerg.sandbox import detect


def doctor(capsys) -> tuple[int, str]:
    get_settings.cache_clear()  # the test's environment, not one read earlier
    code = main(["doctor"])
    return code, capsys.readouterr().out


def test_doctor_prints_the_sandbox_level_database_and_provider(database_url, monkeypatch, capsys):
    code, out = doctor(capsys)
    level = detect.level(get_settings())
    assert code == 0, out
    assert f"sandbox: {level.describe()}" in out
    if level.isolated:
        assert "network off (only lo)" in out
        assert ("  limits: each file <= 50 MiB, each process <= 1024 MiB of address space and 120 CPU s, "
                "home and /tmp a 256 MiB tmpfs each") in out
    assert "reachable: yes, PostgreSQL " in out and "schema version" in out
    assert "model provider: offline" in out
    assert "ssh allowlist (ZERG_SSH_HOSTS): empty" in out
    assert out.rstrip().endswith("doctor: everything works")


def test_doctor_says_network_on_and_never_prints_secrets(database_url, monkeypatch, capsys, tmp_path):
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-key-body\n")
    monkeypatch.setenv("ZERG_SANDBOX_NETWORK", "on")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-printed")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ZERG_SSH_HOSTS", json.dumps({"cube": {"hostname": "127.0.0.1", "port": 2222, "user": "ops",
                                                              "key_file": str(key)}}))
    code, out = doctor(capsys)
    assert code == 0, out
    assert "network on (the host's network)" in out or not detect.level(get_settings()).isolated
    assert "model provider: OpenAI-compatible at http://127.0.0.1:9/v1, key present" in out
    assert f"cube: ops@127.0.0.1:2222, key file {key} (readable)" in out
    assert "sk-test-never-printed" not in out and "secret-key-body" not in out


def test_doctor_shows_the_pgvector_and_pg_trgm_versions_of_the_database(database_url, capsys):
    import psycopg
    from psycopg.rows import dict_row

    from zerg.db import server_info

    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        info = server_info(conn)
    code, out = doctor(capsys)
    assert code == 0, out
    assert f"pgvector {info['pgvector']}, pg_trgm {info['pg_trgm'] or ''}" in out
    if info["pgvector"].startswith("0.8.") and info["pg_trgm"]:  # the embedded 18 (or a server like it)
        assert "WARNING: pgvector" not in out and "WARNING: pg_trgm" not in out


def test_doctor_warns_when_pgvector_has_no_iterative_scans_and_pg_trgm_is_missing(pg16, monkeypatch, capsys):
    """PostgreSQL 16.2 with pgvector 0.6.2 and no pg_trgm (pgserver): working, but weaker."""
    import secrets

    import psycopg
    from psycopg.conninfo import make_conninfo

    from zerg.migrate import migrate

    name = f"zerg_test_{secrets.token_hex(6)}"
    with psycopg.connect(pg16, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = make_conninfo(pg16, dbname=name)
        with psycopg.connect(url, autocommit=True) as conn:
            migrate(conn)
        monkeypatch.setenv("DATABASE_URL", url)
        code, out = doctor(capsys)
    finally:
        with psycopg.connect(pg16, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert code == 0, out  # a working configuration, said loudly
    assert "reachable: yes, PostgreSQL 16.2, " in out and "pgvector 0.6.2, pg_trgm MISSING" in out
    assert ("WARNING: pgvector 0.6.2 has no iterative index scans (0.8+): memory search falls back to "
            "exact scans") in out
    assert "WARNING: pg_trgm is missing: memory grep scans the owner's files without a trigram index" in out


def test_doctor_exits_nonzero_when_the_database_is_unreachable(monkeypatch, capsys):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("DATABASE_URL", f"postgresql://zerg:hunter2@127.0.0.1:{port}/zerg")
    code, out = doctor(capsys)
    assert code == 1
    assert f"database: DATABASE_URL postgresql://zerg@127.0.0.1:{port}/zerg" in out
    assert "reachable: NO (" in out and "hunter2" not in out
    assert "1 problem(s) above" in out


def test_doctor_exits_nonzero_when_an_ssh_key_is_missing(database_url, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("ZERG_SSH_HOSTS", json.dumps({"cube": {"hostname": "127.0.0.1", "user": "ops",
                                                              "key_env": "ZERG_SSH_KEY_CUBE"}}))
    code, out = doctor(capsys)
    assert code == 1 and "key in $ZERG_SSH_KEY_CUBE (NOT set)" in out


def test_the_unshare_level_works_with_python_under_a_directory_others_cannot_enter(monkeypatch, request):
    """As root the unshare level runs Python as root and becomes the call's uid only for the
    command: a Python under a 0700 directory (a fresh machine's /root/.pyenv) still gets the
    namespace sandbox, and no directory's mode is changed for it."""
    import os
    import shutil
    import sys
    import tempfile
    from pathlib import Path

    import pytest

    from tests.support.sandbox import require, require_root

    require_root("per-call uids need root")
    require("unshare")
    base = Path(tempfile.mkdtemp(prefix="zerg-doctor-"))  # under /tmp: others may enter it
    request.addfinalizer(lambda: shutil.rmtree(base))
    base.chmod(0o755)
    private = base / "pyenv"
    private.mkdir(mode=0o700)
    python = private / "python3"
    shutil.copy2(os.path.realpath(sys.executable), python)
    tools = base / "bin"  # unshare (and setpriv) only: the bwrap level is not tried
    tools.mkdir()
    for name in ("unshare", "setpriv"):
        (tools / name).symlink_to(shutil.which(name))
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("PATH", str(tools))
    from zerg.cli.doctor import _sandbox

    said: list[str] = []
    detect.forget()
    try:
        _sandbox(get_settings(), said.append)
    finally:
        detect.forget()
    assert said[0].startswith("sandbox: unshare, network off"), said
    assert not any("WARNING" in line for line in said), said
    assert private.stat().st_mode & 0o777 == 0o700 and sys.executable == str(python)


def test_doctor_names_the_provider_and_a_model_it_cannot_ask(database_url, monkeypatch, capsys):
    monkeypatch.setenv("ZERG_MODEL_PROVIDER", "bedrock")
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    monkeypatch.setenv("ZERG_WORKER_MODEL", "anthropic:claude-haiku-4-5")  # no ANTHROPIC_API_KEY
    code, out = doctor(capsys)
    assert code != 0
    assert "model provider: Amazon Bedrock Converse in eu-central-1, IAM credentials" in out
    assert "  models: supervisor amazon.nova-pro-v1:0, worker anthropic:claude-haiku-4-5, summary amazon.nova-lite-v1:0" in out
    assert ("  PROBLEM: ZERG_WORKER_MODEL: model 'anthropic:claude-haiku-4-5' needs ANTHROPIC_API_KEY "
            "(or ZERG_ANTHROPIC_SECRET_ARN on AWS)") in out
    assert "embeddings: amazon.titan-embed-text-v2:0 (bedrock, 1024 dimensions; " in out
