"""Shared fixtures: a real PostgreSQL, moto-backed AWS, and both artifact-store backends.

The database is ``DATABASE_URL`` when set (used as an admin connection: each test session
creates and drops its own database), otherwise the project's embedded server with its data
under ``.zerg/test-pgNN/pg`` in the checkout, NN its major version (reused across runs, never the
user's own data dir; a cluster of another version left there by older code is simply not used).
"""

from __future__ import annotations

import io
import json
import os
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import zerg.local  # noqa: F401  the local host: gives the composition root its run starter
from zerg import config, db, observability, runtime, wiring
from zerg.migrate import migrate

ROOT = Path(__file__).resolve().parents[1]
# Read once at import: the autouse fixture below rewrites DATABASE_URL for each test.
_OUTER_DATABASE_URL = os.environ.get("DATABASE_URL")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
for _var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
    os.environ.setdefault(_var, "testing")


# A suite started as a background job of a non-interactive shell (``./dev.sh test &``, some CI
# runners) inherits SIGINT ignored, and so would every process it starts: Ctrl-C could then neither
# reach a test's ``zerg run`` nor ``_thread.interrupt_main``. The tests of Ctrl-C need it handled,
# as in any terminal; the process's children then start with it at its default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def embedded_test_dir() -> Path:
    return ROOT / ".zerg" / f"test-pg{db.embedded_major()}"


def _admin_url() -> str:
    return _OUTER_DATABASE_URL or db.embedded_database_url(embedded_test_dir())


def _with_dbname(url: str, name: str) -> str:
    return psycopg.conninfo.make_conninfo(url, dbname=name)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test gets its markers (db, e2e, browser, infra, slow) from the one rule in
    tests/support/slices.py: ``./dev.sh test --fast`` and ``-m db`` select by them (docs/testing.md)."""
    from tests.support.slices import marks_for, runs_first

    for item in items:
        for mark in sorted(marks_for(item.path, item.name, getattr(item, "fixturenames", ()))):
            item.add_marker(mark)
    items.sort(key=lambda item: not runs_first(item.path, item.name))  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def _e2e_is_marked(request: pytest.FixtureRequest):
    """A test that starts the local engine in this process carries ``e2e`` (so ``--fast`` never
    runs the engine): one that does not fails here, saying where to list it."""
    from tests.support import slices

    slices.watch_engine()
    before = slices.engine_starts()
    yield
    if slices.engine_starts() > before and request.node.get_closest_marker("e2e") is None:
        pytest.fail(slices.unmarked_engine_start(request.node.nodeid), pytrace=False)


@pytest.fixture(scope="session")
def admin_url() -> str:
    return _admin_url()


@pytest.fixture(scope="session")
def make_database(admin_url: str) -> Iterator:
    """Factory for empty, throw-away databases (dropped at session end)."""
    created: list[str] = []

    def make() -> str:
        name = f"zerg_test_{secrets.token_hex(6)}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return _with_dbname(admin_url, name)

    yield make
    db.close_pools()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for name in created:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def database_url(make_database) -> str:
    """A migrated database shared by the session; tests isolate by creating their own owners."""
    url = make_database()
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    return url


@pytest.fixture(scope="session")
def pool(database_url: str):
    pool = db.open_pool(database_url, max_size=20)
    yield pool
    pool.close()


@pytest.fixture(autouse=True)
def zerg_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, request: pytest.FixtureRequest):
    """Every test sees a clean ZERG_* environment pointing at its own data dir."""
    for name in list(os.environ):
        if name.startswith("ZERG_") or name.startswith("OPENAI_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ZERG_DATA_DIR", str(tmp_path / "zerg-data"))
    monkeypatch.setenv("ZERG_CONFIG_DIR", str(tmp_path / "zerg-config"))  # never the user's stored sessions
    if "database_url" in request.fixturenames:
        monkeypatch.setenv("DATABASE_URL", request.getfixturevalue("database_url"))
    else:
        monkeypatch.delenv("DATABASE_URL", raising=False)
    config.get_settings.cache_clear()
    wiring.reset_runtime()
    observability.reset()
    yield
    wiring.reset_runtime()  # stops a local engine the test's runtime started
    observability.reset()
    config.get_settings.cache_clear()


@pytest.fixture(scope="session")
def pg16():
    """A PostgreSQL 16.2 of the session's own (pgserver: pgvector 0.6.2, no pg_trgm), as an
    admin URL: Aurora's major version, and the server earlier Zerg versions embedded."""
    from tests.support.disposable_pg import DisposablePostgres

    server = DisposablePostgres("pgserver")
    yield server.url
    server.close()


@pytest.fixture
def owner(pool) -> int:
    from tests.support.factories import unique_name
    from zerg.owners import create_owner

    with pool.connection() as conn:
        return create_owner(conn, unique_name("test owner")).owner_id


@pytest.fixture
def other_owner(pool) -> int:
    from tests.support.factories import unique_name
    from zerg.owners import create_owner

    with pool.connection() as conn:
        return create_owner(conn, unique_name("someone else")).owner_id


@pytest.fixture
def s3_bucket() -> Iterator:
    """A moto S3 bucket: yields (client, bucket name)."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="zerg-artifacts-test")
        yield client, "zerg-artifacts-test"


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    """The artifact-store contract runs against both backends."""
    if request.param == "local":
        from zerg.artifacts.local import LocalArtifactStore

        yield LocalArtifactStore(tmp_path / "artifacts")
    else:
        from zerg.artifacts.s3 import S3ArtifactStore

        client, bucket = request.getfixturevalue("s3_bucket")
        yield S3ArtifactStore(bucket, client=client)


@pytest.fixture
def llm():
    """The scripted OpenAI-compatible server on loopback (see tests/support/llm_server.py)."""
    from tests.support.llm_server import ScriptedLLM

    server = ScriptedLLM()
    yield server
    server.close()


@pytest.fixture
def runtime_env(monkeypatch, tmp_path, database_url, llm):
    """Point the process runtime at the test database, a temp artifact dir and the scripted model.

    Returns a function that applies extra settings (env vars) and gives a fresh Runtime.
    """

    def configure(**env: str) -> runtime.Runtime:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("ZERG_ARTIFACT_DIR", str(tmp_path / "artifacts"))
        monkeypatch.setenv("ZERG_LLM_MAX_RETRIES", "0")
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        config.get_settings.cache_clear()
        wiring.reset_runtime()
        return wiring.get_runtime()

    return configure


@pytest.fixture
def engine():
    """The local engine: the real ASL under moto's interpreter, the real handlers."""
    from zerg.local.engine import LocalEngine

    eng = LocalEngine().start()
    yield eng
    eng.stop()


@pytest.fixture
def api_server(runtime_env):
    """``zerg serve`` in-process on an ephemeral loopback port; yields (base_url, configure).

    ``configure(**env)`` re-applies settings (as runtime_env does) while the server runs.
    """
    from zerg.local.server import make_server

    runtime_env()
    server = make_server("127.0.0.1", 0).start()
    yield server.url, runtime_env
    server.stop()


@pytest.fixture
def zerg_server(runtime_env):
    """``zerg serve`` in-process on an ephemeral loopback port: the server object itself (its
    ``url``, its ASGI app), with 30 s heartbeats."""
    from zerg.local.server import make_server

    runtime_env(ZERG_HEARTBEAT_S="30")
    server = make_server("127.0.0.1", 0).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ssh_server(tmp_path_factory):
    """OpenSSH's sshd on loopback, one per test module: a failure under CI=true where it cannot
    run, a skip saying what to install elsewhere (``tests.support.ssh_server``)."""
    from tests.support.ssh_server import start_ssh_server

    server = start_ssh_server(tmp_path_factory.mktemp("sshd"), "openssh")
    yield server
    server.stop()


@pytest.fixture
def alice(pool):
    """An owner with its device secret (``NewOwner``): for tests that authenticate as it."""
    from tests.support.factories import unique_name
    from zerg.owners import create_owner

    with pool.connection() as conn:
        return create_owner(conn, unique_name("alice"))


@pytest.fixture
def bob(pool):
    """A second owner with its device secret, for isolation tests."""
    from tests.support.factories import unique_name
    from zerg.owners import create_owner

    with pool.connection() as conn:
        return create_owner(conn, unique_name("bob"))


@pytest.fixture
def log_lines():
    """The structured log lines written while the test runs (the Powertools logger's stream, swapped)."""
    handler = observability.logger().registered_handler
    buffer = io.StringIO()
    old = handler.setStream(buffer)
    yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]
    handler.setStream(old)
