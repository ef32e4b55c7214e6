"""Your data, yours: ``zerg owners export`` writes everything an owner has to one archive, and
``zerg owners delete`` removes all of it, artifacts included (local directory and moto S3)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.support.factories import make_finished_worker, make_run, unique_name
from tests.support.schedules import moto_scheduler as support_moto_scheduler
from zerg.hosts import store as hosts
from zerg.identity.devices import hash_secret
from zerg.llm import CallTag, ChatResult, Usage
from zerg.llm.ledger import record_call
from zerg.owners import create_owner, local_owner
from zerg.privacy import scope
from zerg.privacy.delete import DeleteRefused, delete_owner, plan_delete
from zerg.privacy.export import ExportError, export_owner, secret_column
from zerg.runs import jobs
from zerg.runs import store as runs
from zerg.tracing.store import insert_spans

GLOBAL_TABLES = {"owners", "schema_migrations", "push_vapid_keys"}  # the only tables that hang off no owner


SEALED_KEY = b"sealed private key bytes"


def fill(pool, store, owner_id: int, tag: str) -> dict:
    """One of everything for an owner: a contact, a finished run on its thread (messages, events),
    a worker with artifacts and its index row, a ledger row."""
    run_id, _ = make_run(pool, owner_id, f"{tag} task")
    job_id, worker_id = make_finished_worker(pool, store, owner_id, run_id, f"{tag} worker task",
                                             result=f"{tag} result", tool_outputs=[("ssh_exec", f"{tag} output", True)])
    with pool.connection() as conn:
        conn.execute("INSERT INTO owner_contacts (owner_id, kind, address) VALUES (%s, 'email', %s)",
                     (owner_id, f"{tag}-{owner_id}@example.com"))
        record_call(conn, CallTag("supervisor", owner_id, run_id), ChatResult("m", "", usage=Usage(10, 5, 0.001)), 12.0)
        hosts.save(conn, owner_id, f"{tag}-box", hostname="127.0.0.1", port=22, username="ops",
                   private_key_sealed=SEALED_KEY, key_type="ssh-ed25519", key_fingerprint="SHA256:k",
                   host_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPinned", host_key_fingerprint="SHA256:h",
                   replace=False)
        runs.complete_run(conn, runs.get_run(conn, owner_id, run_id), f"{tag} answer")
        fill_memory(conn, owner_id, run_id, tag)
        fill_background(conn, owner_id, run_id, tag)
        fill_replies(conn, owner_id, run_id, tag)
        conn.execute("""INSERT INTO agent_configs (owner_id, agent, model, instructions)
                        VALUES (%s, 'worker', 'gpt-4o-mini', %s) ON CONFLICT DO NOTHING""", (owner_id, f"{tag} instructions"))
        conn.execute("""INSERT INTO push_subscriptions (owner_id, endpoint, p256dh_secret, auth_secret)
                        VALUES (%s, %s, %s, %s)""", (owner_id, f"https://push.example.com/{tag}", "B" * 87, "A" * 22))
        conn.execute("INSERT INTO approval_policies (owner_id, policy) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                     (owner_id, json.dumps({"ssh_allow": {tag: ["uptime"]}})))
        conn.execute("""INSERT INTO mcp_servers (owner_id, name, transport, command) VALUES (%s, %s, 'stdio', %s)
                        ON CONFLICT DO NOTHING""", (owner_id, "srv-" + tag.lower().replace(" ", "-")[:18], f"{tag} cmd"))
        insert_spans(conn, [{"owner_id": owner_id, "run_id": run_id, "trace_id": "a" * 32, "span_id": "b" * 16,
                             "parent_span_id": None, "name": f"{tag} span", "kind": "internal",
                             "started_at": datetime.now(timezone.utc), "duration_ms": 1.0, "status": "ok",
                             "status_message": None, "attributes": {"zerg.run.id": run_id}}])
    return {"run_id": run_id, "job_id": job_id, "worker_id": worker_id}


def fill_memory(conn, owner_id: int, run_id: int, tag: str) -> None:
    """A memory file with a previous version and an embedding, a fact and a compaction summary
    (raw SQL: these tables' own modules are tested on their own)."""
    file_id = conn.execute(
        """INSERT INTO memory_files (owner_id, path, title, content, writer, content_hash)
           VALUES (%s, %s, 'A', %s, 'user', 'h') RETURNING id""", (owner_id, f"notes/{tag}.md", f"{tag} note")).fetchone()["id"]
    conn.execute("""INSERT INTO memory_file_versions (owner_id, path, title, content, tags, metadata, writer,
                                                      content_hash, written_at, reason)
                    VALUES (%s, 'notes/a.md', 'A', 'old', '{}', '{}', 'user', 'h0', now(), 'overwrite')""", (owner_id,))
    conn.execute("""INSERT INTO memory_embeddings (file_id, owner_id, model, dimension, embedding, content_hash)
                    VALUES (%s, %s, 'test-model', 3, '[1,0,0]', 'h')""", (file_id, owner_id))
    conn.execute("""INSERT INTO memory_embedding_failures (file_id, owner_id, model, content_hash, last_error)
                    VALUES (%s, %s, 'other-model', 'h', 'input too long')""", (file_id, owner_id))
    conn.execute("""INSERT INTO org_memory (owner_id, category, content, writer, source_run_id)
                    VALUES (%s, 'fact', %s, 'supervisor', %s)""", (owner_id, f"{tag} fact", run_id))
    message_id = conn.execute("SELECT max(id) AS id FROM thread_messages WHERE owner_id = %s", (owner_id,)).fetchone()["id"]
    conn.execute("""INSERT INTO conversation_summaries (owner_id, thread_id, first_message_id, last_message_id,
                                                        message_count, summary)
                    SELECT %s, id, %s, %s, 1, 'summary' FROM threads WHERE owner_id = %s""",
                 (owner_id, message_id, message_id, owner_id))


def fill_background(conn, owner_id: int, run_id: int, tag: str) -> None:
    """A schedule that fired this run, a policy, a send count, a notification, an inbox item and an
    escalation (raw SQL: these tables' own modules are tested on their own)."""
    schedule_id = conn.execute(
        """INSERT INTO schedules (owner_id, name, task, cron, expression, last_run_id)
           VALUES (%s, %s, 'check the disks', '0 6 * * *', 'cron(0 6 * * ? *)', %s) RETURNING id""",
        (owner_id, f"{tag} daily {run_id}", run_id)).fetchone()["id"]
    conn.execute("""INSERT INTO schedule_fires (schedule_id, owner_id, scheduled_time, source, outcome, run_id)
                    VALUES (%s, %s, now(), 'ticker', 'started', %s)""", (schedule_id, owner_id, run_id))
    conn.execute("INSERT INTO notification_policies (owner_id, timezone) VALUES (%s, 'Europe/Berlin') ON CONFLICT (owner_id) DO NOTHING",
                 (owner_id,))
    conn.execute("INSERT INTO notification_usage (owner_id, day, channel, sent) VALUES (%s, current_date, 'email', 1) "
                 "ON CONFLICT (owner_id, day, channel) DO UPDATE SET sent = notification_usage.sent + 1",
                 (owner_id,))
    conn.execute("""INSERT INTO notifications (owner_id, run_id, schedule_id, channel, purpose, severity, status, address,
                                               subject, body, reply_token)
                    VALUES (%s, %s, %s, 'email', 'alert', 'warning', 'sent', %s, 'Disk', 'disk full', %s)""",
                 (owner_id, run_id, schedule_id, f"{tag}-{owner_id}@example.com", f"tok-{tag}-{run_id}"))
    conn.execute("""INSERT INTO inbox_items (owner_id, run_id, schedule_id, severity, headline, assessed_by)
                    VALUES (%s, %s, %s, 'warning', 'Disk nearly full', 'model')""", (owner_id, run_id, schedule_id))
    conn.execute("""INSERT INTO escalations (owner_id, run_id, max_repeats, interval_s)
                    VALUES (%s, %s, 3, 900)""", (owner_id, run_id))


def fill_replies(conn, owner_id: int, run_id: int, tag: str) -> None:
    """An inbound reply that started this run, and a directive waiting for its "yes"."""
    conn.execute("""INSERT INTO inbound_messages (channel, provider_id, source, owner_id, sender, body, run_id, status)
                    VALUES ('sms', %s, 'sns', %s, '+15550000000', 'make it weekly', %s, 'run')""",
                 (f"in-{tag}-{run_id}", owner_id, run_id))
    conn.execute("""INSERT INTO approvals (owner_id, run_id, kind, tool, arguments, summary, expires_at)
                    VALUES (%s, %s, 'directive', 'delete_schedule', '{"schedule_id": 1}', 'delete schedule #1',
                            now() + interval '1 hour')""",
                 (owner_id, run_id))
    job_id = conn.execute("SELECT id FROM worker_jobs WHERE run_id = %s", (run_id,)).fetchone()["id"]
    conn.execute("""INSERT INTO approvals (owner_id, run_id, job_id, tool, arguments, tool_call_id, reason)
                    VALUES (%s, %s, %s, 'ssh_exec', %s, 'call-1', 'asks before ssh_exec')""",
                 (owner_id, run_id, job_id, json.dumps({"host": f"{tag}-box", "command": "systemctl restart nginx"})))


# Tables whose rows are keyed by more than an id (derived data the database keeps).
ROW_KEYS = {"memory_terms": ("file_id", "lexeme")}


def row_key(table: str, row: dict):
    columns = ROW_KEYS.get(table, ("id",))
    return tuple(row[c] for c in columns) if len(columns) > 1 else row[columns[0]]


def owner_row_ids(pool, owner_id: int) -> dict[str, set]:
    with pool.connection() as conn:
        return {t.name: {row_key(t.name, r) for r in conn.execute(
            f"SELECT * FROM {t.name} WHERE {'id' if t.name == 'owners' else 'owner_id'} = %s", (owner_id,))}
            for t in scope.OWNER_TABLES}


def read_archive(path: Path) -> tuple[dict, dict[str, list[dict]], dict[str, bytes]]:
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        tables = {name: [json.loads(line) for line in zf.read(f"tables/{name}.jsonl").splitlines()]
                  for name in manifest["tables"]}
        artifacts = {n.removeprefix("artifacts/"): zf.read(n) for n in zf.namelist() if n.startswith("artifacts/")}
    return manifest, tables, artifacts


def test_every_table_with_an_owner_cascades_from_owners_and_is_exported(pool):
    with pool.connection() as conn:
        tables = {r["tablename"] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        fks = conn.execute(
            """SELECT conrelid::regclass::text AS child, confrelid::regclass::text AS parent, confdeltype AS rule
               FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace""").fetchall()
    assert [f for f in fks if f["parent"] == "owners" and f["rule"] != "c"] == []
    cascades, grew = {"owners"}, True
    while grew:  # tables deleted with their owner, directly or through a cascading parent
        grew = False
        for f in fks:
            if f["rule"] == "c" and f["parent"] in cascades and f["child"] not in cascades:
                cascades.add(f["child"])
                grew = True
    assert tables - GLOBAL_TABLES - cascades == set(), "tables an owner's deletion would leave behind"
    listed = {t.name for t in scope.OWNER_TABLES} | set(scope.NOT_EXPORTED)
    assert cascades - listed == set(), "owner tables missing from zerg.privacy.scope"
    assert listed <= tables


def test_export_holds_every_tables_rows_of_the_owner_and_none_of_another(pool, store, owner, other_owner, tmp_path):
    fill(pool, store, owner, "mine")
    theirs = fill(pool, store, other_owner, "theirs")
    expected = owner_row_ids(pool, owner)
    assert all(expected.values()), "every table has a row to export"
    report = export_owner(pool, store, owner, tmp_path / "me.zip")
    manifest, tables, artifacts = read_archive(tmp_path / "me.zip")
    for name, ids in expected.items():
        assert {row_key(name, row) for row in tables[name]} == ids, name
        assert manifest["tables"][name]["rows"] == len(ids) == report.rows[name]
        assert all(row.get("owner_id", owner) == owner for row in tables[name])
    assert manifest["owner"]["id"] == owner and manifest["owner"]["name"].startswith("test owner")
    assert manifest["format"] == "zerg-owner-export" and manifest["format_version"] == 1
    assert all(not p.startswith(f"workers/{theirs['worker_id']}") for p in artifacts)
    with zipfile.ZipFile(tmp_path / "me.zip") as zf:
        everything = b"".join(zf.read(n) for n in zf.namelist())
    assert b"theirs" not in everything


def test_artifacts_round_trip_byte_identical_with_matching_sha256(pool, store, owner, tmp_path):
    _, worker_id = make_finished_worker(pool, store, owner, None, "big", result="r" * 3_000_000 + "END",
                                        tool_outputs=[("ssh_exec", "ünïcode ✓\n", True), ("container_exec", "", True)])
    binary = bytes(range(256)) * 100
    assert store._create(store._key(worker_id, "tool_calls/099_raw.bin"), binary)
    export_owner(pool, store, owner, tmp_path / "me.zip")
    manifest, _, artifacts = read_archive(tmp_path / "me.zip")
    stored = {f"workers/{worker_id}/{f.path}": b"".join(store.read_chunks(worker_id, f.path))
              for f in store.list_files(worker_id)}
    assert artifacts == stored and stored[f"workers/{worker_id}/tool_calls/099_raw.bin"] == binary
    listed = {f["path"]: f for f in manifest["artifacts"]["files"]}
    assert set(listed) == set(stored)
    for path, data in stored.items():
        assert listed[path]["sha256"] == hashlib.sha256(data).hexdigest() and listed[path]["size"] == len(data)
    assert manifest["artifacts"]["count"] == len(stored)
    assert manifest["artifacts"]["bytes"] == sum(map(len, stored.values()))


def test_a_large_artifact_is_streamed_into_the_archive_not_held_in_memory(pool, owner, tmp_path):
    import tracemalloc

    from zerg.artifacts.local import LocalArtifactStore

    store = LocalArtifactStore(tmp_path / "artifacts")
    worker_id = store.create_worker("big", owner)
    block = os.urandom(1 << 20)  # incompressible: the archive member is as big as the file
    with open(store.root / "workers" / worker_id / "result.txt", "wb") as fh:
        for _ in range(32):
            fh.write(block)
    tracemalloc.start()
    try:
        export_owner(pool, store, owner, tmp_path / "me.zip")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB for a 32 MiB artifact"
    with zipfile.ZipFile(tmp_path / "me.zip") as zf:
        assert zf.getinfo(f"artifacts/workers/{worker_id}/result.txt").file_size == 32 << 20


def test_the_archive_holds_no_secret_material(pool, store, tmp_path):
    from zerg.auth import jwt_secret, login
    from zerg.config import get_settings

    with pool.connection() as conn:
        new = create_owner(conn, unique_name("secretive"))
        token = login(conn, get_settings(), new.device_secret).token
    fill(pool, store, new.owner_id, "s")
    export_owner(pool, store, new.owner_id, tmp_path / "me.zip")
    with zipfile.ZipFile(tmp_path / "me.zip") as zf:
        everything = b"".join(zf.read(n) for n in zf.namelist())
        owners_rows = [json.loads(line) for line in zf.read("tables/owners.jsonl").splitlines()]
    for secret in (new.device_secret, hash_secret(new.device_secret), token, jwt_secret(get_settings())):
        assert secret.encode() not in everything
    assert SEALED_KEY not in everything and b"private_key" not in everything
    assert set(owners_rows[0]) == {"id", "name", "created_at"}


@pytest.mark.parametrize(("column", "secret"), [
    ("device_secret_hash", True), ("session_token", True), ("token_hash", True), ("private_key_encrypted", True),
    ("encrypted_key", True), ("password", True), ("tokens_in", False), ("tokens_cached", False),
    ("token_id", False), ("idempotency_key", False), ("host_key", False), ("name", False),
])
def test_secret_columns_are_recognised_by_name(column, secret):
    assert secret_column(column) is secret


def test_a_secret_or_binary_column_stops_the_export_and_leaves_no_file(pool, owner, tmp_path, monkeypatch):
    from zerg.artifacts.local import LocalArtifactStore

    store = LocalArtifactStore(tmp_path / "artifacts")
    out = tmp_path / "out"
    out.mkdir()
    tables = scope.OWNER_TABLES
    for row, why in (({"id": 1, "private_key_encrypted": "AAAA"}, "hostile_table.private_key_encrypted looks like secret"),
                     ({"id": 1, "blob": b"\x00key"}, "binary column")):
        table = scope.OwnerTable("hostile_table", lambda conn, owner_id, row=row: iter([row]))
        monkeypatch.setattr(scope, "OWNER_TABLES", (*tables, table))
        with pytest.raises(ExportError, match=why):
            export_owner(pool, store, owner, out / "me.zip")
        assert list(out.iterdir()) == []  # neither the archive nor a partial file


def test_export_of_an_owner_with_no_data_works(pool, owner, tmp_path):
    from zerg.artifacts.local import LocalArtifactStore

    report = export_owner(pool, LocalArtifactStore(tmp_path / "artifacts"), owner, tmp_path / "empty.zip")
    manifest, tables, artifacts = read_archive(tmp_path / "empty.zip")
    assert manifest["tables"]["owners"]["rows"] == 1
    assert manifest["tables"]["devices"]["rows"] == 1  # the device every owner is created with
    assert all(v["rows"] == 0 for k, v in manifest["tables"].items() if k not in ("owners", "devices"))
    assert manifest["artifacts"] | {"files": [], "skipped": []} == {
        "workers": 0, "count": 0, "bytes": 0, "files": [], "skipped": []}
    assert artifacts == {} and tables["runs"] == [] and report.artifact_files == 0
    assert stat.S_IMODE(os.stat(tmp_path / "empty.zip").st_mode) == 0o600


def test_export_never_replaces_an_existing_file(pool, owner, tmp_path):
    from zerg.artifacts.local import LocalArtifactStore

    (tmp_path / "me.zip").write_text("keep me")
    with pytest.raises(ExportError, match="already exists"):
        export_owner(pool, LocalArtifactStore(tmp_path / "artifacts"), owner, tmp_path / "me.zip")
    assert (tmp_path / "me.zip").read_text() == "keep me"


def test_export_takes_an_unindexed_worker_by_its_metadata_but_never_one_the_index_gives_another(
        pool, store, owner, other_owner, tmp_path):
    unindexed = store.create_worker("crashed before indexing", owner)
    with pool.connection() as conn:  # metadata claims `owner`, the index (the authority) says `other_owner`
        job = jobs.create_job(conn, other_owner, "claimed")
    disputed = store.create_worker("disputed", owner, job_id=job)
    with pool.connection() as conn:
        jobs.mark_started(conn, job, disputed, store.read_metadata(disputed)["started_at"])
    export_owner(pool, store, owner, tmp_path / "me.zip")
    _, _, artifacts = read_archive(tmp_path / "me.zip")
    workers = {p.split("/")[1] for p in artifacts}
    assert workers == {unindexed}


def test_delete_removes_rows_and_artifacts_and_leaves_the_other_owner_untouched(pool, store, owner, other_owner):
    mine = fill(pool, store, owner, "mine")
    theirs = fill(pool, store, other_owner, "theirs")
    before = owner_row_ids(pool, owner)
    theirs_before = owner_row_ids(pool, other_owner)
    files = store.list_files(mine["worker_id"])
    plan = plan_delete(pool, store, owner)
    assert plan.rows == {k: len(v) for k, v in before.items()} and plan.artifact_files == len(files)
    report = delete_owner(pool, store, owner)
    assert report.rows == plan.rows
    assert (report.workers, report.artifact_files, report.artifact_bytes) == (1, len(files), sum(f.size for f in files))
    assert all(not ids for ids in owner_row_ids(pool, owner).values())
    assert not store.exists(mine["worker_id"]) and store.owner_workers(owner).worker_ids == []
    assert owner_row_ids(pool, other_owner) == theirs_before
    assert store.read_file(theirs["worker_id"], "result.txt") == "theirs result"


def test_delete_is_refused_while_a_run_is_unfinished_and_force_cancels_it_first(pool, store, owner):
    done = fill(pool, store, owner, "done")
    run_id, _ = make_run(pool, owner, "still running")
    with pytest.raises(DeleteRefused, match=rf"1 unfinished run\(s\) \({run_id}\).*--force"):
        delete_owner(pool, store, owner)
    assert store.exists(done["worker_id"]) and owner_row_ids(pool, owner)["owners"] == {owner}
    stopped = []
    with pool.connection() as conn:
        runs.set_execution_arn(conn, run_id, "arn:aws:states:us-east-1:1:execution:zerg-run:run-x")
    report = delete_owner(pool, store, owner, force=True, stop_execution=stopped.append)
    assert report.cancelled_runs == [run_id] and stopped == ["arn:aws:states:us-east-1:1:execution:zerg-run:run-x"]
    assert owner_row_ids(pool, owner)["owners"] == set() and not store.exists(done["worker_id"])


def test_an_interrupted_delete_finishes_when_run_again(pool, store, owner, monkeypatch):
    first, second = fill(pool, store, owner, "one"), fill(pool, store, owner, "two")
    real = type(store).delete_worker
    calls = []

    def crash_on_second(self, worker_id):
        calls.append(worker_id)
        if len(calls) == 2:
            raise OSError("power cut")
        return real(self, worker_id)

    monkeypatch.setattr(type(store), "delete_worker", crash_on_second)
    with pytest.raises(OSError):
        delete_owner(pool, store, owner)
    monkeypatch.setattr(type(store), "delete_worker", real)
    assert owner_row_ids(pool, owner)["owners"] == {owner}  # the row goes last
    assert sum(store.exists(w["worker_id"]) for w in (first, second)) == 1
    report = delete_owner(pool, store, owner)
    assert report.workers == 1 and report.rows["runs"] == 2
    assert not any(store.exists(w["worker_id"]) for w in (first, second))


def test_artifacts_of_an_owner_whose_rows_are_gone_are_still_found_and_removed(pool, store, owner):
    mine = fill(pool, store, owner, "orphaned")
    with pool.connection() as conn:  # e.g. rows deleted by hand: the index no longer names the worker
        conn.execute("DELETE FROM owners WHERE id = %s", (owner,))
    report = delete_owner(pool, store, owner)
    assert report.rows == {} and report.workers == 1 and not store.exists(mine["worker_id"])


def test_the_local_owner_can_be_deleted_and_is_created_again_on_next_use(pool, store):
    with pool.connection() as conn:
        first = local_owner(conn)
    delete_owner(pool, store, first, force=True)
    with pool.connection() as conn:
        again = local_owner(conn)
    assert again != first


def _cli(env: dict, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zerg.cli", *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture
def cli_env(database_url, tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZERG_", "OPENAI_"))}
    return env | {"DATABASE_URL": database_url, "ZERG_ARTIFACT_DIR": str(tmp_path / "artifacts"),
                  "ZERG_DATA_DIR": str(tmp_path / "data")}


def test_cli_export_writes_the_archive_and_names_an_unknown_owner(pool, cli_env, tmp_path):
    from zerg.artifacts.local import LocalArtifactStore

    name = f"alice-{tmp_path.name}"
    with pool.connection() as conn:
        alice = create_owner(conn, name).owner_id
    fill(pool, LocalArtifactStore(tmp_path / "artifacts"), alice, "alice")
    out = _cli(cli_env, "owners", "export", name, "-o", str(tmp_path / "alice.zip"))
    assert out.returncode == 0, out.stderr
    assert f"exported owner {alice}" in out.stdout and "artifacts: 3 files of 1 workers" in out.stdout
    assert read_archive(tmp_path / "alice.zip")[0]["owner"]["name"] == name
    again = _cli(cli_env, "owners", "export", name, "-o", str(tmp_path / "alice.zip"))
    assert again.returncode == 2 and "already exists" in again.stderr and "Traceback" not in again.stderr
    unknown = _cli(cli_env, "owners", "export", "nobody-here")
    assert unknown.returncode == 2 and "no owner named 'nobody-here'" in unknown.stderr


def test_cli_delete_asks_for_the_owners_name_and_deletes_only_when_it_matches(pool, cli_env, tmp_path):
    from zerg.artifacts.local import LocalArtifactStore

    store = LocalArtifactStore(tmp_path / "artifacts")
    name = f"bob-{tmp_path.name}"
    with pool.connection() as conn:
        bob = create_owner(conn, name).owner_id
    worker_id = fill(pool, store, bob, "bob")["worker_id"]
    for typed in ("bob\n", ""):  # a wrong name, then no answer at all (end of input)
        out = _cli(cli_env, "owners", "delete", name, stdin=typed)
        assert out.returncode == 1 and "not deleted" in out.stdout and f"Type the owner's name ({name})" in out.stdout
        assert store.exists(worker_id) and owner_row_ids(pool, bob)["owners"] == {bob}
    out = _cli(cli_env, "owners", "delete", name, stdin=f"{name}\n")
    assert out.returncode == 0, out.stderr
    assert f"deleted owner {bob}: rows owners 1" in out.stdout and "artifacts: 3 files of 1 workers" in out.stdout
    assert not store.exists(worker_id) and owner_row_ids(pool, bob)["owners"] == set()


def test_cli_delete_refuses_an_owner_with_a_running_run_before_asking(pool, cli_env, tmp_path):
    name = f"carol-{tmp_path.name}"
    with pool.connection() as conn:
        carol = create_owner(conn, name).owner_id
    run_id, _ = make_run(pool, carol, "busy")
    out = _cli(cli_env, "owners", "delete", name, "--yes")
    assert out.returncode == 2 and f"unfinished run(s) ({run_id})" in out.stderr and "--force" in out.stderr
    assert "Type the owner's name" not in out.stdout and "Traceback" not in out.stderr
    out = _cli(cli_env, "owners", "delete", name, "--yes", "--force")
    assert out.returncode == 0, out.stderr
    assert f"cancelled 1 run(s) [{run_id}]" in out.stdout
    assert owner_row_ids(pool, carol)["owners"] == set()


# --- the owner's EventBridge Scheduler schedules go with the owner ---------------------------------

@pytest.fixture
def moto_scheduler(runtime_env):
    """Moto's EventBridge Scheduler with a group, and the runtime configured for it."""
    with support_moto_scheduler(runtime_env, "zerg-owner-test") as (_, rt):
        yield rt


def make_schedules(rt, owner_id: int, n: int = 2) -> list[int]:
    from zerg.schedules import service
    from zerg.schedules.spec import ScheduleSpec

    return [service.create(rt, owner_id, ScheduleSpec(name=unique_name("s"), task="check", rate="1 hour"))["id"]
            for _ in range(n)]


def test_deleting_an_owner_deletes_their_scheduler_schedules_and_no_one_elses(moto_scheduler, pool, owner,
                                                                              other_owner, tmp_path):
    from zerg.artifacts.local import LocalArtifactStore

    rt = moto_scheduler
    mine, theirs = make_schedules(rt, owner), make_schedules(rt, other_owner)

    report = delete_owner(pool, LocalArtifactStore(tmp_path / "a"), owner, delete_schedule=rt.scheduler.delete)

    assert report.scheduler_schedules == set(mine) and report.rows["schedules"] == 2
    assert "deleted 2 EventBridge Scheduler schedule(s)" in report.lines()
    assert [rt.scheduler.describe(s) for s in mine] == [None, None]
    assert all(rt.scheduler.describe(s) is not None for s in theirs)


def test_an_owner_whose_scheduler_schedule_cannot_be_deleted_is_not_deleted(moto_scheduler, pool, owner, tmp_path):
    from zerg.artifacts.local import LocalArtifactStore
    from zerg.ports import SchedulerUnavailable

    rt = moto_scheduler
    artifacts = LocalArtifactStore(tmp_path / "a")
    worker_id = fill(pool, artifacts, owner, "kept")["worker_id"]
    [schedule_id] = make_schedules(rt, owner, 1)

    def unavailable(schedule_id):
        raise SchedulerUnavailable("EventBridge Scheduler refused or did not answer (ThrottlingException)")

    with pytest.raises(DeleteRefused, match=r"of schedule \d+ .*ThrottlingException.*untouched: try again"):
        delete_owner(pool, artifacts, owner, delete_schedule=unavailable)
    assert owner_row_ids(pool, owner)["owners"] == {owner} and artifacts.exists(worker_id)  # nothing went
    assert rt.scheduler.describe(schedule_id) is not None


def test_zerg_owners_delete_on_aws_deletes_the_owners_scheduler_schedules(moto_scheduler, pool, tmp_path, capsys):
    from zerg.cli.main import main

    rt = moto_scheduler
    name = f"dave-{tmp_path.name}"
    with pool.connection() as conn:
        dave = create_owner(conn, name).owner_id
    schedules = make_schedules(rt, dave)

    assert main(["owners", "delete", name, "--yes"]) == 0

    assert "deleted 2 EventBridge Scheduler schedule(s)" in capsys.readouterr().out
    assert [rt.scheduler.describe(s) for s in schedules] == [None, None]
    assert owner_row_ids(pool, dave)["owners"] == set()
