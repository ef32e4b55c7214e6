"""The worker browser, for power users. Every read goes through the owner.

A file is served whole up to ``FILE_MAX_BYTES``; any file, whatever its size, is readable in pieces
with a ``Range`` header (206, at most ``RANGE_MAX_BYTES`` each: :mod:`zerg.api.ranges`).

A file is what a worker (and so whatever text it read) wrote: it is served as a download
(``Content-Disposition: attachment``) unless the caller asks to see it (``?inline=true``), and
either way under a Content-Security-Policy that lets nothing in it run (``sandbox``), with
``nosniff``, so no browser ever renders it as a page of this origin.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Annotated
from urllib.parse import quote, unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query

from zerg.api.deps import MAX_ID, Owner, Rt, json_response
from zerg.api.errors import ApiError, not_found
from zerg.api.models import RunAccepted, WorkerDetail, WorkerPage, responses
from zerg.api.ranges import RANGE_MAX_BYTES, RangeNotSatisfiable, parse_range, partial_content
from zerg.api.routes.runs import IdempotencyKey, accept_run, check_idempotency_key
from zerg.artifacts import ArtifactNotFound, ArtifactPathError
from zerg.runs import jobs
from zerg.runs.owner_words import RETRIED_JOB
from zerg.runs.store import worker_facts
from zerg.runs.worker_artifacts import NotFound, NotStarted, WorkerArtifacts, open_worker
from zerg.runtime import Runtime
from zerg.statuses import JobStatus

router = Router()
FILE_MAX_BYTES = 5_000_000

JobId = Annotated[int, Path(ge=1, le=MAX_ID, description="The worker job's id")]
# The body is the file as it is (or a piece of it, 206): its type, and no schema it must meet.
FILE_TYPES = ("text/plain", "application/json", "application/x-ndjson")
FILE_RESPONSES = {
    **responses(200, "The whole file's text (JSON, JSON lines or plain text)", None, 400, 401, 404, 413, 416,
                media_type=FILE_TYPES),
    206: {"description": f"The bytes of the Range asked for (the first range only, at most {RANGE_MAX_BYTES} "
                         "bytes; Content-Range says which)", "content": {t: {} for t in FILE_TYPES}},
}
RangeHeader = Annotated[str | None, Header(alias="range", max_length=1000, description=(
    f"Read a piece: bytes=START-END, bytes=START- or bytes=-LAST_N (at most {RANGE_MAX_BYTES} bytes "
    "per response; of several ranges only the first is served)"))]
Inline = Annotated[bool, Query(description="Content-Disposition: inline (to view the text in the browser) instead "
                                           "of attachment (a download)")]
ArtifactName = Annotated[str, Path(json_schema_extra={"format": "artifact-name"})]
# Nothing in a file runs, even when a browser is asked to show it (inline): no script, no plugin,
# no form, no frame of it anywhere.
FILE_CSP = "default-src 'none'; sandbox; frame-ancestors 'none'"


@router.get("/api/jarvis/workers", summary="Workers, newest first (summaries, never results)",
            responses=responses(200, "One page of workers", WorkerPage, 401))
def list_workers(
    owner_id: Owner,
    rt: Rt,
    limit: Annotated[int, Query(ge=1, le=200, description="Workers per page")] = 50,
    status: Annotated[JobStatus | None, Query(description="Only workers in this status")] = None,
    run_id: Annotated[int | None, Query(ge=1, le=MAX_ID, description="Only this run's workers")] = None,
    since_hours: Annotated[int | None,
                           Query(ge=1, le=24 * 366, description="Only workers created in the last N hours")] = None,
    before_id: Annotated[int | None,
                         Query(ge=1, le=MAX_ID, description="Only workers older than this job id (paging)")] = None,
):
    since = None if since_hours is None else datetime.now(timezone.utc) - timedelta(hours=since_hours)
    with rt.pool.connection() as conn:
        rows = jobs.list_jobs(conn, owner_id, limit=limit, status=status, since=since, run_id=run_id, before_id=before_id)
    return json_response({"workers": rows, "next_before_id": rows[-1]["job_id"] if len(rows) == limit else None})


def _handle(rt: Runtime, owner_id: int, job_id: int) -> WorkerArtifacts:
    with rt.pool.connection() as conn:
        try:
            return open_worker(conn, rt.store, owner_id, job_id=job_id)
        except NotFound:
            raise not_found(f"worker {job_id}") from None


@router.get("/api/jarvis/workers/<job_id>", summary="A worker's metadata and file list",
            responses=responses(200, "The worker; metadata and files once it started", WorkerDetail, 401, 404))
def get_worker(job_id: JobId, owner_id: Owner, rt: Rt):
    handle = _handle(rt, owner_id, job_id)
    body = {"job_id": handle.ref.job_id, "run_id": handle.ref.run_id, "worker_id": handle.ref.worker_id,
            "status": handle.ref.status, "task": handle.ref.task,
            # The worker on its result (issue 29): its title, outcome, time and the calls it made, from its index row.
            **worker_facts(handle.ref.row), "metadata": None, "files": []}
    try:
        body["metadata"] = handle.metadata()
        body["files"] = [{"path": f.path, "size": f.size, "kind": f.kind} for f in handle.list_files()]
    except (NotStarted, ArtifactNotFound):
        pass
    return json_response(body)


def disposition(path: str, inline: bool) -> str:
    """``attachment`` (or ``inline``) naming the file's last segment: an ASCII fallback and its
    UTF-8 name (RFC 6266, RFC 8187), so the header is ASCII whatever the name."""
    name = path.rsplit("/", 1)[-1] or "file"
    fallback = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name)
    return f"{'inline' if inline else 'attachment'}; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def _file(rt: Runtime, owner_id: int, job_id: int, path: str, byte_range: str | None, inline: bool) -> Response:
    response = _read(rt, owner_id, job_id, path, byte_range)
    if response.status_code in (200, 206):
        response.headers.update({"Content-Disposition": disposition(unquote(path), inline),
                                 "Content-Security-Policy": FILE_CSP})
    return response


def _read(rt: Runtime, owner_id: int, job_id: int, path: str, byte_range: str | None) -> Response:
    handle = _handle(rt, owner_id, job_id)
    rel = unquote(path)
    kind = "application/json" if path.endswith(".json") else "application/x-ndjson" if path.endswith(".jsonl") else "text/plain; charset=utf-8"
    try:
        size = handle.size(rel)
        wanted = parse_range(byte_range, size)
        if wanted is not None:
            return partial_content(handle.read_range(rel, wanted.start, wanted.length), wanted.start, size, kind)
        if size > FILE_MAX_BYTES:
            raise ApiError(413, "payload_too_large", f"{path} is {size} bytes; files over {FILE_MAX_BYTES} bytes are not "
                           f"served whole: read them in pieces with a Range header, e.g. 'Range: bytes=0-"
                           f"{RANGE_MAX_BYTES - 1}' (at most {RANGE_MAX_BYTES} bytes per response)")
        text = handle.read_file(rel)
    except RangeNotSatisfiable as exc:
        return exc.response()
    except ArtifactPathError as exc:
        raise ApiError(400, "bad_path", str(exc)) from None
    except NotStarted as exc:
        raise ApiError(404, "not_found", str(exc)) from None
    except ArtifactNotFound:
        raise not_found(f"file {rel!r} of worker {job_id}") from None
    return Response(status_code=200, content_type=kind, body=text, headers={"Accept-Ranges": "bytes"})


# A path parameter cannot hold '/': a file in a folder has its own route (or a %2F-encoded path).
@router.get("/api/jarvis/workers/<job_id>/files/<path>", summary="One artifact file (whole, or a byte range)",
            responses=FILE_RESPONSES)
def get_worker_file(job_id: JobId, path: Annotated[str, Path(description="The file, '/' encoded as %2F",
                                                              json_schema_extra={"format": "artifact-path"})],
                    owner_id: Owner, rt: Rt, byte_range: RangeHeader = None, inline: Inline = False):
    return _file(rt, owner_id, job_id, path, byte_range, inline)


@router.get("/api/jarvis/workers/<job_id>/files/<folder>/<name>", summary="One artifact file in a folder (whole, or a byte range)",
            responses=FILE_RESPONSES)
def get_worker_file_in_folder(job_id: JobId, folder: ArtifactName, name: ArtifactName,
                              owner_id: Owner, rt: Rt, byte_range: RangeHeader = None, inline: Inline = False):
    return _file(rt, owner_id, job_id, f"{folder}/{name}", byte_range, inline)


RETRYABLE = ("timeout", "failed", "cancelled")  # a worker that did not finish its task


@router.post("/api/jarvis/workers/<job_id>/retry", summary="Retry a worker's task as a new run", status_code=202,
             responses=responses(202, "Run accepted; follow stream_url (the same answer as POST /api/jarvis/supervisor)",
                                 RunAccepted, 400, 401, 404, 409, 413, 503))
def retry_worker(job_id: JobId, owner_id: Owner, rt: Rt, key: IdempotencyKey = None):
    """Seed 8.4, "worker timeout offers retry": a new supervisor run (trigger ``api``) whose task is
    the worker's task, on the owner's thread, started as ``/supervisor`` starts one. Only a worker
    that ended ``timeout``, ``failed`` or ``cancelled`` (409 otherwise). The task is the one a model
    wrote for the worker, not the owner's words: the run is marked so (:data:`RETRIED_JOB`)."""
    check_idempotency_key(key)
    with rt.pool.connection() as conn:
        job = jobs.get_owned_job(conn, owner_id, job_id=job_id)
    if job is None:
        raise not_found(f"worker {job_id}")
    if job["status"] not in RETRYABLE:
        raise ApiError(409, "conflict", f"worker {job_id} is {job['status']}: only a worker that ended "
                       f"{', '.join(RETRYABLE)} can be retried")
    task = job["task"].strip()
    if len(task.encode()) > rt.settings.task_max_bytes:
        raise ApiError(413, "payload_too_large", f"worker {job_id}'s task is {len(task.encode())} bytes; a run's "
                       f"task is at most {rt.settings.task_max_bytes} (ZERG_TASK_MAX_BYTES)")
    return accept_run(rt, owner_id, task, key=key, context={RETRIED_JOB: job_id})
