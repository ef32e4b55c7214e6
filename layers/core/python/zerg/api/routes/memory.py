"""The owner's memory files: list, read, write (PUT), delete, versions, restore, search.

Every route goes through :mod:`zerg.memory.filesystem`, like the memory tools and ``zerg memory``:
another owner's file is 404 exactly like a missing one; input the validator refuses is 422 with
its message. Files are named by a ``path`` query parameter (a path holds ``/``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel, ConfigDict, Field

from zerg.api.deps import MAX_ID, Owner, Rt, json_response
from zerg.api.errors import ApiError
from zerg.api.models import (MemoryFileDocument, MemoryFileList, MemoryFileVersionList, MemorySearchResult,
                             responses)
from zerg.memory import filesystem as fs
from zerg.memory.paths import MAX_PATH_CHARS, MAX_TAGS, MAX_TAG_CHARS, MAX_TITLE_CHARS
from zerg.validation import NOT_BLANK_NOR_NUL

router = Router()

# The rules of zerg.memory.paths are named formats in the document (a letter or a digit of any
# script is more than a JSON Schema pattern can say); the validator's 422 words each refusal.
FilePath = Annotated[str, Query(min_length=1, max_length=MAX_PATH_CHARS, json_schema_extra={"format": "memory-path"},
                                description=(
    "The file's relative path, e.g. notes/backup.md: letters, digits, space and - _ . @ + , ( ), "
    "'/' between folders; no '..', no leading '/'"))]


class MemoryFileBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str = Field(json_schema_extra={"format": "memory-content"},
                         description="The whole content (at most 256 KiB of UTF-8)")
    title: str | None = Field(default=None, max_length=MAX_TITLE_CHARS, json_schema_extra={"format": "memory-title"},
                              description="Omitted: an existing file keeps its title; a new one takes its first '# heading'")
    tags: list[Annotated[str, Field(json_schema_extra={"format": "memory-tag"})]] | None = Field(
        default=None, max_length=MAX_TAGS, description=(
            f"Up to {MAX_TAGS} tags of at most {MAX_TAG_CHARS} characters (lower-cased); omitted: an existing file "
            "keeps its tags"))


@contextmanager
def _answers() -> Iterator[None]:
    """The service's refusals as HTTP answers."""
    try:
        yield
    except fs.MemoryInputError as exc:
        raise ApiError(422, "validation_error", str(exc)) from None
    except fs.MemoryNotFound as exc:
        raise ApiError(404, "not_found", str(exc)) from None


@router.get("/api/jarvis/memory/files", summary="The owner's memory files under a path prefix, by path",
            responses=responses(200, "The files (no content)", MemoryFileList, 401))
def list_memory_files(
    owner_id: Owner,
    rt: Rt,
    prefix: Annotated[str, Query(max_length=MAX_PATH_CHARS + 1, json_schema_extra={"format": "memory-prefix"},
                                 description="Only paths starting with this, e.g. notes/")] = "",
    limit: Annotated[int, Query(ge=1, le=fs.LS_MAX, description="How many files")] = 100,
):
    with _answers():
        listing = fs.ls(rt, owner_id, prefix, limit)
    return json_response({"files": [f.entry() for f in listing.files], "total": listing.total})


@router.get("/api/jarvis/memory/file", summary="One memory file, with who wrote it",
            responses=responses(200, "The file", MemoryFileDocument, 401, 404))
def get_memory_file(path: FilePath, owner_id: Owner, rt: Rt):
    with _answers():
        return json_response(fs.read(rt, owner_id, path).document())


@router.put("/api/jarvis/memory/file",
            summary="Create or replace a memory file (written by the user; the replaced content is kept 30 days)",
            responses={**responses(200, "Replaced (or unchanged): the file as stored", MemoryFileDocument, 400, 401, 415),
                       201: {"description": "Created: the file as stored",
                             "content": {"application/json": {"model": MemoryFileDocument}}}})
def put_memory_file(path: FilePath, body: MemoryFileBody, owner_id: Owner, rt: Rt):
    with _answers():
        out = fs.write(rt, owner_id, path, body.content, title=body.title, tags=body.tags, writer="user")
    return json_response(out.file.document(), 201 if out.created else 200)


@router.delete("/api/jarvis/memory/file", summary="Delete a memory file (restorable for 30 days)",
               responses=responses(204, "Deleted", None, 401, 404))
def delete_memory_file(path: FilePath, owner_id: Owner, rt: Rt):
    with _answers():
        fs.delete(rt, owner_id, path)
    return Response(status_code=204)


@router.get("/api/jarvis/memory/file/versions",
            summary="The kept versions of a memory file, newest first (a deleted file's too)",
            responses=responses(200, "The versions (no content)", MemoryFileVersionList, 401, 404))
def list_memory_file_versions(path: FilePath, owner_id: Owner, rt: Rt):
    with _answers():
        kept = fs.versions_of(rt, owner_id, path)
    return json_response({"versions": [v.entry() for v in kept]})


@router.post("/api/jarvis/memory/file/restore",
             summary="Write a kept version back (what it replaces is kept as a version in turn)",
             responses=responses(200, "The file as restored", MemoryFileDocument, 401, 404))
def restore_memory_file(
    path: FilePath,
    owner_id: Owner,
    rt: Rt,
    version_id: Annotated[int, Query(ge=1, le=MAX_ID, description="A version id from .../versions")],
):
    with _answers():
        out = fs.restore(rt, owner_id, path, version_id, writer="user")
    return json_response(out.file.document())


@router.get("/api/jarvis/memory/search", summary="Search the owner's memory files (full text, and vectors when embeddings exist)",
            responses=responses(200, "The best files, with snippets and the method that found each", MemorySearchResult, 401))
def search_memory_files(
    owner_id: Owner,
    rt: Rt,
    q: Annotated[str, Query(min_length=1, max_length=1_000, json_schema_extra={"pattern": NOT_BLANK_NOR_NUL},
                            description=(
                            "What to look for, in words (not blank); operators only after `strict:` "
                            "(a \"phrase\", or, -word)"))],
    tags: Annotated[str | None, Query(max_length=MAX_TAGS * (MAX_TAG_CHARS + 1),
                                      json_schema_extra={"format": "memory-tag-list"}, description=(
        "Comma-separated: only files carrying ALL of these tags"))] = None,
    limit: Annotated[int, Query(ge=1, le=50, description="How many hits")] = 5,
):
    wanted = [t for t in (tags or "").split(",") if t.strip()]
    with _answers():
        out = fs.search(rt, owner_id, q, tags=wanted, limit=limit)
    return json_response({"hits": [h.as_dict() for h in out.hits], "methods": out.methods, "note": out.note})
