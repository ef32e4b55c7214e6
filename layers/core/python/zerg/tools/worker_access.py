"""The supervisor's tools for past work: list, read, drill into, search and describe workers.

Invariants:
- Every read is scoped to the calling owner through :mod:`zerg.runs.worker_artifacts`; another owner's job
  is "not found", exactly like a job that does not exist.
- ``list_workers`` returns summaries only (the task, cut to 150 characters, until a summary
  exists), never result text: it is the compression layer that lets the supervisor scan
  hundreds of workers. Full text is one ``read_worker_result`` away.
- ``grep_workers`` is bounded (≤ 50 matches, lines cut to 200 characters, a bounded number of
  workers scanned) and says when it hit a bound.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pydantic import BaseModel, ConfigDict, Field

from zerg.artifacts import ArtifactNotFound, ArtifactPathError
from zerg.loop.tool import Tool, ToolContext, ToolOutcome, error
from zerg.runs import jobs
from zerg.runs.worker_artifacts import NotFound, NotStarted, WorkerArtifacts, open_worker, resolve_worker
from zerg.statuses import JobStatus

GREP_MAX_MATCHES = 50
GREP_LINE_CHARS = 200
GREP_MAX_WORKERS = 200
FILE_MAX_BYTES = 64_000
GREP_FILE_BYTES = 1_000_000  # per file: bounded memory and time per search


class ListWorkersArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limit: int = Field(default=20, ge=1, le=100, description="How many workers, newest first")
    status: JobStatus | None = None
    since_hours: float | None = Field(default=None, gt=0, le=24 * 366, description="Only workers created in the last N hours")


class JobArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job_id: int = Field(gt=0, description="The worker's job id")


class FileArgs(JobArgs):
    path: str = Field(min_length=1, max_length=500, description="Path inside the worker directory, e.g. tool_calls/001_ssh_exec.txt")


class GrepArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pattern: str = Field(min_length=1, max_length=200, description="Literal text, matched case-insensitively")
    since_hours: float = Field(default=24, gt=0, le=24 * 366)


def _duration(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f}s"


def list_workers(args: ListWorkersArgs, ctx: ToolContext) -> ToolOutcome:
    since = datetime.now(timezone.utc) - timedelta(hours=args.since_hours) if args.since_hours else None
    with ctx.runtime.pool.connection() as conn:
        total = jobs.count_jobs(conn, ctx.owner_id, status=args.status, since=since)
        rows = jobs.list_jobs(conn, ctx.owner_id, limit=args.limit, status=args.status, since=since, by_created=True)
    if not rows:
        return ToolOutcome(text="No workers match.")
    lines = [f"Workers (newest first, {len(rows)} of {total}):"]
    for r in rows:
        lines.append(f"- #{r['job_id']} [{r['status']}] {_duration(r['duration_ms'])} | {r['summary'] or r['task'][:150]}")
    lines.append("Full output: read_worker_result(job_id).")
    return ToolOutcome(text="\n".join(lines))


def _open(args: JobArgs, ctx: ToolContext) -> WorkerArtifacts | ToolOutcome:
    """The owner's worker, or the "not found" text for the model."""
    with ctx.runtime.pool.connection() as conn:
        try:
            return open_worker(conn, ctx.runtime.store, ctx.owner_id, job_id=args.job_id)
        except NotFound as exc:
            return error(str(exc))


def read_worker_result(args: JobArgs, ctx: ToolContext) -> ToolOutcome:
    handle = _open(args, ctx)
    if isinstance(handle, ToolOutcome):
        return handle
    if handle.ref.status in ("queued", "running"):
        return error(
            f"worker {args.job_id} is still {handle.ref.status}: its result is not ready yet"
            + ("; read_worker_file shows its partial output" if handle.ref.worker_id else "")
        )
    try:
        return ToolOutcome(text=handle.read_file("result.txt"))
    except (ArtifactNotFound, NotStarted):
        return error(f"worker {args.job_id} ({handle.ref.status}) left no result.txt")
    except ArtifactPathError as exc:
        return error(f"refused: {exc}")


def read_worker_file(args: FileArgs, ctx: ToolContext) -> ToolOutcome:
    handle = _open(args, ctx)
    if isinstance(handle, ToolOutcome):
        return handle
    try:
        size = handle.size(args.path)
        if size <= FILE_MAX_BYTES:
            return ToolOutcome(text=handle.read_file(args.path))
        half = FILE_MAX_BYTES // 2  # a huge log: head and tail, never the whole file into context
        head = handle.head(args.path, half).decode("utf-8", "ignore")
        tail = handle.tail(args.path, half).decode("utf-8", "ignore")
        return ToolOutcome(text=f"{head}\n[...truncated {size - 2 * half} bytes of {size}; "
                                f"grep_workers finds lines in the middle...]\n{tail}")
    except ArtifactPathError as exc:
        return error(f"refused: {exc}")
    except NotStarted as exc:
        return error(str(exc))
    except ArtifactNotFound:
        files = ", ".join(f.path for f in handle.list_files() if f.is_file)
        return error(f"worker {args.job_id} has no file {args.path!r}; its files: {files}")


def grep_workers(args: GrepArgs, ctx: ToolContext) -> ToolOutcome:
    since = datetime.now(timezone.utc) - timedelta(hours=args.since_hours)
    with ctx.runtime.pool.connection() as conn:
        rows = jobs.finished_workers(conn, ctx.owner_id, since=since, limit=GREP_MAX_WORKERS + 1)
    store, needle = ctx.runtime.store, args.pattern.lower()
    matches: list[str] = []
    full = False
    clipped = 0  # files larger than GREP_FILE_BYTES: only their first part is searched
    for row in rows[:GREP_MAX_WORKERS]:
        try:
            files = [f for f in store.list_files(row["worker_id"])
                     if f.is_file and (f.path == "result.txt" or f.path.startswith("tool_calls/"))]
        except ArtifactNotFound:
            continue
        for info in files:
            path = info.path
            clipped += info.size > GREP_FILE_BYTES
            try:
                text = store.head(row["worker_id"], path, GREP_FILE_BYTES).decode("utf-8", "replace")
            except (ArtifactNotFound, ArtifactPathError):  # gone or swapped for a link since the listing
                continue
            if needle not in text.lower():
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if needle in line.lower():
                    cut = line if len(line) <= GREP_LINE_CHARS else line[: GREP_LINE_CHARS - 3] + "..."
                    matches.append(f"#{row['id']} {path}:{number}: {cut}")
                    if len(matches) >= GREP_MAX_MATCHES:
                        full = True
                        break
            if full:
                break
        if full:
            break
    notes = []
    if full:
        notes.append(f"[stopped at {GREP_MAX_MATCHES} matches: narrow the pattern or since_hours]")
    if len(rows) > GREP_MAX_WORKERS:
        notes.append(f"[searched only the newest {GREP_MAX_WORKERS} finished workers]")
    if clipped:
        notes.append(f"[{clipped} file(s) over {GREP_FILE_BYTES:,} bytes: only their first {GREP_FILE_BYTES:,} bytes searched]")
    if not matches:
        return ToolOutcome(text=f"No match for {args.pattern!r} in the last {args.since_hours:g}h." + (" " + " ".join(notes) if notes else ""))
    return ToolOutcome(text="\n".join([f"{len(matches)} matches for {args.pattern!r}:", *matches, *notes]))


def get_worker_metadata(args: JobArgs, ctx: ToolContext) -> ToolOutcome:
    with ctx.runtime.pool.connection() as conn:
        try:
            ref = resolve_worker(conn, ctx.owner_id, job_id=args.job_id)
        except NotFound as exc:
            return error(str(exc))
    row = ref.row
    lines = [
        f"job_id: {row['id']}", f"worker_id: {row['worker_id'] or '(not started)'}",
        f"status: {row['status']}", f"task: {row['task']}", f"model: {row['model'] or '-'}",
        f"created_at: {row['created_at']:%Y-%m-%dT%H:%M:%SZ}",
        f"started_at: {row['started_at']:%Y-%m-%dT%H:%M:%SZ}" if row["started_at"] else "started_at: -",
        f"finished_at: {row['finished_at']:%Y-%m-%dT%H:%M:%SZ}" if row["finished_at"] else "finished_at: -",
        f"duration: {_duration(row['duration_ms'])}", f"error: {row['error'] or '-'}",
        f"summary: {row['summary'] or '-'}",
        f"tokens: {row['tokens_in']} in / {row['tokens_out']} out",
    ]
    if ref.worker_id:
        try:
            files = ctx.runtime.store.list_files(ref.worker_id)
            lines.append("files:")
            lines += [f"  {f.path} ({f.size} bytes)" if f.is_file else f"  {f.path} ({f.kind}: never read)"
                      for f in files]
        except ArtifactNotFound:
            lines.append("files: (artifacts missing)")
    return ToolOutcome(text="\n".join(lines))


TOOLS = [
    Tool("list_workers", "List recent workers with their SUMMARIES ONLY (never full results). "
         "Use read_worker_result(job_id) for details.", ListWorkersArgs, list_workers),
    Tool("read_worker_result", "The full final result (result.txt) of a finished worker.", JobArgs, read_worker_result),
    Tool("read_worker_file", "Read any file in a worker's artifact directory, e.g. a raw tool output "
         "'tool_calls/001_ssh_exec.txt', 'thread.jsonl' or 'metadata.json' (files over 64 KB: "
         "head and tail).", FileArgs, read_worker_file),
    Tool("grep_workers", "Case-insensitive literal search across your finished workers' results and raw "
         "tool outputs (at most 50 matches).", GrepArgs, grep_workers),
    Tool("get_worker_metadata", "A worker's status, timings, model, summary, error and file list.", JobArgs, get_worker_metadata),
]
