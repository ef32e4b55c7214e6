"""One contract, two backends: every test here runs on the local directory and on (moto) S3."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta, timezone

import pytest

from zerg.artifacts import ArtifactError, ArtifactNotFound, ArtifactPathError, WorkerExists

T0 = datetime(2026, 11, 22, 14, 32, 0, tzinfo=timezone.utc)


def test_create_worker_id_has_timestamp_slug_and_random_suffix(store):
    wid = store.create_worker("Check disk usage on cube!!", owner_id=1, now=T0)
    assert re.fullmatch(r"2026-11-22T14-32-00_check-disk-usage-on-cube_[0-9a-f]{6}", wid)
    meta = store.read_metadata(wid)
    assert meta["status"] == "running" and meta["owner_id"] == 1
    assert meta["task"] == "Check disk usage on cube!!"


def test_slug_is_cut_to_30_characters(store):
    wid = store.create_worker("x" * 80, owner_id=1, now=T0)
    assert wid.split("_")[1] == "x" * 30


def test_create_worker_refuses_an_existing_id(store):
    wid = store.create_worker("task", owner_id=1)
    with pytest.raises(WorkerExists):
        store.create_worker("task", owner_id=1, worker_id=wid)
    assert store.read_metadata(wid)["task"] == "task"


def test_create_worker_requires_an_owner(store):
    with pytest.raises(ArtifactError, match="owner_id"):
        store.create_worker("task", owner_id=0)


def test_tool_outputs_are_numbered_in_order_and_readable_at_once(store):
    wid = store.create_worker("task", owner_id=1)
    first = store.save_tool_output(wid, "ssh_exec", "Filesystem 78%")
    assert store.read_file(wid, first) == "Filesystem 78%"  # written immediately
    second = store.save_tool_output(wid, "container_exec", "ok")
    assert (first, second) == ("tool_calls/001_ssh_exec.txt", "tool_calls/002_container_exec.txt")


def test_thread_is_append_only_jsonl_in_order(store):
    wid = store.create_worker("task", owner_id=1)
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "line1\nline2"}]
    for m in messages:
        store.append_thread(wid, m)
    lines = store.read_file(wid, "thread.jsonl").splitlines()
    assert [json.loads(line) for line in lines] == messages


def test_result_is_canonical_never_truncated_never_overwritten(store):
    wid = store.create_worker("task", owner_id=1)
    big = "r" * 1_500_000 + "END"
    store.save_result(wid, big)
    with pytest.raises(ArtifactError, match="canonical"):
        store.save_result(wid, "something else")
    assert store.read_file(wid, "result.txt") == big


def test_complete_worker_records_status_and_timings(store):
    wid = store.create_worker("task", owner_id=1, now=T0)
    meta = store.complete_worker(wid, "failed", error="ssh: auth failed", finished_at=T0 + timedelta(seconds=12))
    assert meta["status"] == "failed" and meta["error"] == "ssh: auth failed"
    assert meta["duration_ms"] == 12_000
    assert meta["started_at"] == "2026-11-22T14:32:00.000Z"
    assert meta["finished_at"] == "2026-11-22T14:32:12.000Z"
    assert store.read_metadata(wid) == meta


def test_status_is_set_once_and_only_to_a_system_status(store):
    wid = store.create_worker("task", owner_id=1)
    with pytest.raises(ArtifactError, match="status must be"):
        store.complete_worker(wid, "probably fine")
    store.complete_worker(wid, "timeout")
    with pytest.raises(ArtifactError, match="already complete"):
        store.complete_worker(wid, "success")
    assert store.read_metadata(wid)["status"] == "timeout"


def test_update_summary_is_best_effort(store):
    wid = store.create_worker("task", owner_id=1)
    store.complete_worker(wid, "success")
    meta = {"version": 1, "model": "m", "generated_at": "now", "error": None}
    assert store.update_summary(wid, "Cube 78% full", meta) is True
    got = store.read_metadata(wid)
    assert got["summary"] == "Cube 78% full" and got["summary_meta"] == meta
    assert got["status"] == "success"
    # A missing worker is a failure reported as False, never an exception.
    assert store.update_summary("2026-01-01T00-00-00_gone_abcdef", "x", meta) is False


@pytest.mark.parametrize(
    "path",
    [
        "../x",
        "/etc/passwd",
        "tool_calls/../../y",
        "..",
        "%2e%2e/x",
        "..%2fmetadata.json",
        "%2Fetc%2Fpasswd",
        "tool_calls/%252e%252e/%252e%252e/y",
        "tool_calls\\..\\..\\y",
        "result.txt\x00.png",
        "",
        "C:/Windows/win.ini",
    ],
)
def test_read_file_refuses_paths_outside_the_worker(store, path):
    wid = store.create_worker("task", owner_id=1)
    with pytest.raises(ArtifactPathError) as err:
        store.read_file(wid, path)
    assert str(err.value)  # says why


def test_a_name_no_backend_can_hold_is_refused_with_its_limit(store):
    wid = store.create_worker("task", owner_id=1)
    for path, limit in (("a" * 256, "at most 255"), ("é" * 128, "at most 255"),
                        ("/".join(["d" * 200] * 5), "at most 800"), ("tool_calls/" + "x" * 5000, "at most 255")):
        for read in (store.read_file, store.size):
            with pytest.raises(ArtifactPathError, match=limit):
                read(wid, path)
    with pytest.raises(ArtifactNotFound):  # at the limit: a name like any other
        store.read_file(wid, "a" * 255)


def test_read_file_of_a_missing_file_says_so(store):
    wid = store.create_worker("task", owner_id=1)
    with pytest.raises(ArtifactNotFound, match="result.txt"):
        store.read_file(wid, "result.txt")


def test_a_bad_worker_id_is_refused_before_any_io(store):
    for bad in ("../../etc", "2026-01-01T00-00-00_x_abcdef/../y", "whatever"):
        with pytest.raises(ArtifactPathError, match="invalid worker id"):
            store.read_file(bad, "result.txt")


def test_list_files_shows_every_artifact_with_sizes(store):
    wid = store.create_worker("task", owner_id=1)
    store.save_tool_output(wid, "ssh_exec", "abc")
    store.append_thread(wid, {"role": "user", "content": "x"})
    store.save_result(wid, "done")
    files = {f.path: f.size for f in store.list_files(wid)}
    assert set(files) == {"metadata.json", "thread.jsonl", "result.txt", "tool_calls/001_ssh_exec.txt"}
    assert files["tool_calls/001_ssh_exec.txt"] == 3 and files["result.txt"] == 4


def test_tail_reads_only_the_last_bytes(store):
    wid = store.create_worker("task", owner_id=1)
    rel = store.save_tool_output(wid, "ssh_exec", "a" * 5_000_000 + "TAIL-END")
    before = store.bytes_read
    assert store.tail(wid, rel, 8) == b"TAIL-END"
    assert store.head(wid, rel, 3) == b"aaa"
    assert store.bytes_read - before == 11
    assert store.size(wid, rel) == 5_000_008
    assert store.tail(wid, rel, 10**9) == b"a" * 5_000_000 + b"TAIL-END"


def test_tail_of_an_empty_file_is_empty(store):
    wid = store.create_worker("task", owner_id=1)
    rel = store.save_tool_output(wid, "container_exec", "")
    assert store.tail(wid, rel, 100) == b""


def test_iter_metadata_reports_corrupt_metadata_instead_of_hiding_it(store):
    good = store.create_worker("good", owner_id=1)
    bad = store.create_worker("bad", owner_id=1)
    store._put(store._key(bad, "metadata.json"), b"{not json")
    seen = dict(store.iter_metadata())
    assert seen[good]["task"] == "good"
    assert isinstance(seen[bad], ArtifactError)


# --- owner data: stream, find by owner, delete (``zerg owners export|delete``) -------------------

def test_read_chunks_streams_a_file_byte_identical_and_counts_it(store):
    wid = store.create_worker("task", owner_id=1)
    data = bytes(range(256)) * 12_000 + b"END"  # ~3 MB, not valid UTF-8: bytes, not text
    assert store._create(store._key(wid, "tool_calls/001_blob.txt"), data)
    before = store.bytes_read
    chunks = list(store.read_chunks(wid, "tool_calls/001_blob.txt", chunk_size=1 << 20))
    assert b"".join(chunks) == data and len(chunks) == 3
    assert store.bytes_read - before == len(data)


def test_read_chunks_of_a_missing_file_says_so(store):
    wid = store.create_worker("task", owner_id=1)
    with pytest.raises(ArtifactNotFound, match="result.txt"):
        list(store.read_chunks(wid, "result.txt"))


def test_owner_workers_finds_only_that_owners_workers_and_lists_unreadable_apart(store):
    mine = [store.create_worker("mine", owner_id=7), store.create_worker("mine too", owner_id=7)]
    theirs = store.create_worker("theirs", owner_id=8)
    broken = store.create_worker("broken", owner_id=7)
    store._put(store._key(broken, "metadata.json"), b"{not json")
    found = store.owner_workers(7)
    assert sorted(found.worker_ids) == sorted(mine)
    assert theirs not in found.worker_ids
    assert [wid for wid, _ in found.unreadable] == [broken]
    assert store.owner_workers(9).worker_ids == []


def test_delete_worker_removes_every_file_and_leaves_other_workers_alone(store):
    wid = store.create_worker("task", owner_id=1)
    store.save_tool_output(wid, "ssh_exec", "abc")
    store.append_thread(wid, {"role": "user", "content": "x"})
    store.save_result(wid, "done")
    other = store.create_worker("other", owner_id=2)
    store.save_result(other, "kept")
    size = sum(f.size for f in store.list_files(wid))
    gone = store.delete_worker(wid)
    assert (gone.files, gone.bytes) == (4, size)
    assert not store.exists(wid) and store._list(store._key(wid)) == []
    assert wid not in [w for w, _ in store.iter_metadata()]  # nothing left behind, not even a directory
    assert store.read_file(other, "result.txt") == "kept"
    assert store.delete_worker(wid).files == 0  # idempotent


def test_an_interrupted_delete_keeps_metadata_so_running_it_again_finishes(store):
    wid = store.create_worker("task", owner_id=5)
    store.save_tool_output(wid, "ssh_exec", "abc")
    store.save_result(wid, "done")
    real_delete = store._delete

    def crash_at_metadata(keys):
        if any(k.endswith("/metadata.json") for k in keys):
            raise OSError("power cut")
        real_delete(keys)

    store._delete = crash_at_metadata
    with pytest.raises(OSError):
        store.delete_worker(wid)
    store._delete = real_delete
    assert store.owner_workers(5).worker_ids == [wid]  # still found: metadata.json goes last
    assert {f.path for f in store.list_files(wid)} == {"metadata.json"}
    assert store.delete_worker(wid).files == 1
    assert store.owner_workers(5).worker_ids == []


def test_s3_delete_removes_every_version_of_a_versioned_bucket(s3_bucket):
    from zerg.artifacts.s3 import S3ArtifactStore

    client, bucket = s3_bucket
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    store = S3ArtifactStore(bucket, prefix="p/", client=client)
    wid = store.create_worker("task", owner_id=1)
    store.append_thread(wid, {"n": 1})
    store.append_thread(wid, {"n": 2})  # a second version of thread.jsonl
    store.complete_worker(wid, "success")  # a second version of metadata.json
    keep = store.create_worker("keep", owner_id=2)
    store.delete_worker(wid)
    left = client.list_object_versions(Bucket=bucket, Prefix=f"p/workers/{wid}/")
    assert left.get("Versions", []) == [] and left.get("DeleteMarkers", []) == []
    assert store.exists(keep)


def test_local_delete_removes_a_symlink_never_its_target(tmp_path):
    from zerg.artifacts.local import LocalArtifactStore

    store = LocalArtifactStore(tmp_path / "artifacts")
    outside = tmp_path / "precious.txt"
    outside.write_text("not an artifact")
    wid = store.create_worker("task", owner_id=1)
    (store.root / "workers" / wid / "link.txt").symlink_to(outside)
    store._delete([store._key(wid, "link.txt")])
    assert outside.read_text() == "not an artifact"
    assert not (store.root / "workers" / wid / "link.txt").is_symlink()


def test_local_delete_worker_removes_hidden_entries_temp_files_and_links_without_following(tmp_path):
    """Whatever sits in a worker directory goes with it: entries the listing hides (dot
    directories, an interrupted write's .tmp-* file), links (never their targets), a FIFO; once
    metadata.json is gone nothing could find them again, so nothing may stay."""
    from zerg.artifacts.local import LocalArtifactStore

    store = LocalArtifactStore(tmp_path / "artifacts")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("not an artifact")
    wid = store.create_worker("task", owner_id=1)
    store.save_tool_output(wid, "ssh_exec", "abc")
    d = store.root / "workers" / wid
    (d / ".hidden" / "deeper").mkdir(parents=True)
    (d / ".hidden" / "deeper" / "secret").write_text("left by a crash")
    (d / ".tmp-0123456789ab").write_text("a half-written metadata.json")
    (d / "tool_calls" / ".tmp-ba9876543210").write_text("half an output")
    (d / "linked-dir").symlink_to(outside)
    (d / "tool_calls" / "002_link.txt").symlink_to(outside / "precious.txt")
    os.mkfifo(d / "pipe")
    store.delete_worker(wid)
    assert not d.exists() and not d.is_symlink()
    assert (outside / "precious.txt").read_text() == "not an artifact"
    assert sorted(os.listdir(outside)) == ["precious.txt"]


def test_local_delete_of_a_worker_directory_that_is_a_link_removes_the_link_only(tmp_path):
    from zerg.artifacts.local import LocalArtifactStore

    store = LocalArtifactStore(tmp_path / "artifacts")
    other = store.create_worker("someone else's", owner_id=2)
    fake = "2026-01-01T00-00-00_linked_deadbe"
    (store.root / "workers" / fake).symlink_to(store.root / "workers" / other)
    store.delete_worker(fake)
    assert not (store.root / "workers" / fake).is_symlink()
    assert store.read_file(other, "metadata.json")  # the target worker is untouched


# --- streamed tool outputs and ranged reads (big outputs, issue 12) ------------------------------

def test_a_streamed_tool_output_claims_its_number_at_open_and_reads_back_whole(store):
    wid = store.create_worker("task", owner_id=1)
    stream = store.open_tool_output(wid, "container_exec")
    assert stream.path == "tool_calls/001_container_exec.txt"
    # The number is taken at open: a call saved while the stream runs gets the next one.
    assert store.save_tool_output(wid, "http_request", "x") == "tool_calls/002_http_request.txt"
    piece = bytes(range(256)) * 256  # 64 KiB, not valid UTF-8: bytes go through untouched
    with stream:
        for _ in range(200):  # 12.5 MiB: several S3 parts
            stream.write(piece)
    assert stream.size == store.size(wid, stream.path) == 200 * len(piece)
    assert b"".join(store.read_chunks(wid, stream.path)) == piece * 200
    assert store.save_tool_output(wid, "ssh_exec", "y") == "tool_calls/003_ssh_exec.txt"


def test_an_empty_streamed_output_is_an_empty_file(store):
    wid = store.create_worker("task", owner_id=1)
    with store.open_tool_output(wid, "container_exec") as stream:
        pass
    assert store.size(wid, stream.path) == 0 and store.read_file(wid, stream.path) == ""


def test_a_stream_ended_by_an_error_keeps_what_was_written(store):
    wid = store.create_worker("task", owner_id=1)
    with pytest.raises(RuntimeError, match="tool crashed"):
        with store.open_tool_output(wid, "ssh_exec") as stream:
            stream.write(b"partial output\n")
            raise RuntimeError("tool crashed")
    assert store.read_file(wid, stream.path) == "partial output\n"


def test_a_closed_stream_refuses_more_bytes(store):
    wid = store.create_worker("task", owner_id=1)
    with store.open_tool_output(wid, "ssh_exec") as stream:
        stream.write(b"done")
    with pytest.raises(ArtifactError, match="closed"):
        stream.write(b"more")
    stream.close()  # idempotent
    assert store.read_file(wid, stream.path) == "done"


def test_open_tool_output_of_a_missing_worker_says_so(store):
    with pytest.raises(ArtifactNotFound, match="no artifacts"):
        store.open_tool_output("2026-01-01T00-00-00_gone_abcdef", "ssh_exec")


def test_read_range_reads_only_the_bytes_asked_for(store):
    wid = store.create_worker("task", owner_id=1)
    rel = store.save_tool_output(wid, "ssh_exec", "0123456789" * 100_000)  # 1 MB
    before = store.bytes_read
    assert store.read_range(wid, rel, 500_003, 7) == b"3456789"
    assert store.read_range(wid, rel, 999_995, 100) == b"56789"  # cut at the end of the file
    assert store.read_range(wid, rel, 1_000_000, 10) == b""  # past the end: nothing
    assert store.bytes_read - before == 12
    with pytest.raises(ArtifactPathError):
        store.read_range(wid, "../x", 0, 1)


def test_s3_stream_uploads_parts_and_holds_at_most_one_in_memory(s3_bucket):
    from zerg.artifacts import s3

    client, bucket = s3_bucket
    store = s3.S3ArtifactStore(bucket, client=client)
    wid = store.create_worker("task", owner_id=1)
    piece = b"x" * (1 << 20)
    held = 0
    with store.open_tool_output(wid, "container_exec") as stream:
        for _ in range(12):  # 12 MiB: two full parts and a last, smaller one
            stream.write(piece)
            held = max(held, len(stream._buffer))
    assert held < s3.PART_BYTES
    etag = client.head_object(Bucket=bucket, Key=f"workers/{wid}/{stream.path}")["ETag"]
    assert etag.strip('"').endswith("-3")  # a multipart object's ETag counts its parts
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_s3_stream_that_cannot_upload_aborts_and_says_so(s3_bucket):
    from zerg.artifacts import s3

    client, bucket = s3_bucket
    store = s3.S3ArtifactStore(bucket, client=client)
    wid = store.create_worker("task", owner_id=1)
    stream = store.open_tool_output(wid, "container_exec")
    stream.write(b"x" * s3.PART_BYTES)  # the first part is uploaded
    real = client.complete_multipart_upload

    def refuse(**kwargs):
        raise client.exceptions.ClientError({"Error": {"Code": "InternalError", "Message": "down"}}, "CompleteMultipartUpload")

    client.complete_multipart_upload = refuse
    try:
        with pytest.raises(ArtifactError, match="could not write tool_calls/001_container_exec.txt"):
            stream.close()
    finally:
        client.complete_multipart_upload = real
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []  # no orphaned parts


def test_local_stream_is_readable_while_it_is_written(tmp_path):
    from zerg.artifacts.local import LocalArtifactStore

    store = LocalArtifactStore(tmp_path / "artifacts")
    wid = store.create_worker("task", owner_id=1)
    with store.open_tool_output(wid, "container_exec") as stream:
        stream.write(b"first line\n")
        assert store.read_file(wid, stream.path) == "first line\n"  # a crash now keeps it
        stream.write(b"second line\n")
        assert store.size(wid, stream.path) == 23


def test_local_stream_never_writes_through_a_link_planted_under_its_name(tmp_path):
    from zerg.artifacts.local import LocalArtifactStore

    store = LocalArtifactStore(tmp_path / "artifacts")
    outside = tmp_path / "precious.txt"
    outside.write_text("not an artifact")
    wid = store.create_worker("task", owner_id=1)
    calls = store.root / "workers" / wid / "tool_calls"
    calls.mkdir()
    (calls / "001_container_exec.txt").symlink_to(outside)
    with store.open_tool_output(wid, "container_exec") as stream:
        stream.write(b"output")
    assert stream.path == "tool_calls/002_container_exec.txt"  # the link's name counts as taken
    assert outside.read_text() == "not an artifact"
    assert store.read_file(wid, stream.path) == "output"
