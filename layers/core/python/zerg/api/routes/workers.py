"""The worker browser, for power users. Every read goes through the owner."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from zerg.api.deps import int_param, json_response, owner_of, runtime
from zerg.api.errors import ApiError, not_found
from zerg.artifacts import ArtifactNotFound, ArtifactPathError
from zerg.statuses import JOB_STATUSES
from zerg.workers import jobs
from zerg.workers.ownership import NotFound, NotStarted, open_worker

router = Router()
FILE_MAX_BYTES = 5_000_000


@router.get("/api/jarvis/workers", summary="Workers, newest first (summaries, never results)")
def list_workers():
    rt = runtime()
    owner_id = owner_of(router.current_event)
    q = router.current_event.query_string_parameters or {}
    limit = int_param(q.get("limit"), "limit", default=50, hi=200)
    status = q.get("status") or None
    if status is not None and status not in JOB_STATUSES:
        raise ApiError(422, "validation_error", f"status: must be one of {', '.join(JOB_STATUSES)}")
    run_id = int_param(q["run_id"], "run_id") if q.get("run_id") else None
    since = None
    if q.get("since_hours"):
        since = datetime.now(timezone.utc) - timedelta(hours=int_param(q["since_hours"], "since_hours", hi=24 * 366))
    before_id = int_param(q["before_id"], "before_id") if q.get("before_id") else None
    with rt.pool.connection() as conn:
        rows = jobs.list_jobs(conn, owner_id, limit=limit, status=status, since=since, run_id=run_id, before_id=before_id)
    return json_response({"workers": rows, "next_before_id": rows[-1]["job_id"] if len(rows) == limit else None})


def _handle(owner_id: int, job_id: str):
    rt = runtime()
    jid = int_param(job_id, "job_id")
    with rt.pool.connection() as conn:
        try:
            return open_worker(conn, rt.store, owner_id, job_id=jid)
        except NotFound:
            raise not_found(f"worker {jid}") from None


@router.get("/api/jarvis/workers/<job_id>", summary="A worker's metadata and file list")
def get_worker(job_id: str):
    handle = _handle(owner_of(router.current_event), job_id)
    body = {"job_id": handle.ref.job_id, "run_id": handle.ref.run_id, "worker_id": handle.ref.worker_id,
            "status": handle.ref.status, "task": handle.ref.task, "metadata": None, "files": []}
    try:
        body["metadata"] = handle.metadata()
        body["files"] = [{"path": f.path, "size": f.size} for f in handle.list_files()]
    except (NotStarted, ArtifactNotFound):
        pass
    return json_response(body)


def _file(job_id: str, path: str) -> Response:
    handle = _handle(owner_of(router.current_event), job_id)
    try:
        size = handle.size(unquote(path))
        if size > FILE_MAX_BYTES:
            raise ApiError(413, "payload_too_large", f"{path} is {size} bytes; files over {FILE_MAX_BYTES} are not served whole")
        text = handle.read_file(unquote(path))
    except ArtifactPathError as exc:
        raise ApiError(400, "bad_path", str(exc)) from None
    except NotStarted as exc:
        raise ApiError(404, "not_found", str(exc)) from None
    except ArtifactNotFound:
        raise not_found(f"file {unquote(path)!r} of worker {job_id}") from None
    kind = "application/json" if path.endswith(".json") else "application/x-ndjson" if path.endswith(".jsonl") else "text/plain; charset=utf-8"
    return Response(status_code=200, content_type=kind, body=text)


@router.get("/api/jarvis/workers/<job_id>/files/<path>", summary="One artifact file")
def get_worker_file(job_id: str, path: str):
    return _file(job_id, path)


@router.get("/api/jarvis/workers/<job_id>/files/<folder>/<name>", summary="One artifact file in a folder")
def get_worker_file_in_folder(job_id: str, folder: str, name: str):
    return _file(job_id, f"{folder}/{name}")
