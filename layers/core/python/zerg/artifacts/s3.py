"""S3 backend: keys ``{prefix}workers/{worker_id}/...`` in one bucket.

Exclusive creation uses conditional writes (``If-None-Match: *``), so two writers can never
overwrite each other's tool output or result. ``thread.jsonl`` is appended by read-and-rewrite:
a worker is its thread's only writer.

A streamed tool output claims its key with an empty conditional write, then uploads its bytes as a
multipart upload of :data:`PART_BYTES` parts (one part in memory at a time) and completes it at
close; an output smaller than one part is one plain PUT over its own empty claim. An upload that
fails is aborted (its parts do not linger) and the error raised.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, BinaryIO

from zerg.artifacts.paths import WORKER_ID
from zerg.artifacts.store import ArtifactError, ArtifactNotFound, FileInfo, WorkerArtifactStore
from zerg.artifacts.stream import ArtifactStream

PART_BYTES = 5 * 1024 * 1024  # S3's smallest part (but the last): the memory a stream holds at most


class S3ArtifactStore(WorkerArtifactStore):
    def __init__(self, bucket: str, *, prefix: str = "", client: Any = None) -> None:
        super().__init__()
        if client is None:
            import boto3  # imported where used: keeps cold start small for non-S3 paths

            client = boto3.client("s3")
        self.bucket = bucket
        self.prefix = prefix
        self.client = client
        self._versioning: bool | None = None

    def __repr__(self) -> str:
        return f"S3ArtifactStore(s3://{self.bucket}/{self.prefix})"

    def location(self, worker_id: str = "") -> str:
        suffix = f"workers/{worker_id}/" if worker_id else ""
        return f"s3://{self.bucket}/{self.prefix}{suffix}"

    def _k(self, key: str) -> str:
        return self.prefix + key

    @staticmethod
    def _code(exc: Exception) -> str:
        return getattr(exc, "response", {}).get("Error", {}).get("Code", "")

    def _create(self, key: str, data: bytes) -> bool:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._k(key), Body=data, IfNoneMatch="*")
        except self.client.exceptions.ClientError as exc:
            if self._code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                return False
            raise
        return True

    def _create_stream(self, key: str) -> "_S3Stream | None":
        if not self._create(key, b""):  # the claim: nobody else may write this key from now on
            return None
        return _S3Stream(self, key)

    def _put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._k(key), Body=data)

    def _append(self, key: str, data: bytes) -> None:
        try:
            current = self._get(key)
        except ArtifactNotFound:
            current = b""
        self._put(key, current + data)

    def _get(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._k(key))["Body"].read()
        except self.client.exceptions.NoSuchKey:
            raise ArtifactNotFound(f"no such artifact file: {key.split('/', 2)[-1]}") from None

    def _range(self, key: str, start: int | None, length: int) -> bytes:
        spec = f"bytes=-{length}" if start is None else f"bytes={start}-{start + length - 1}"
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=self._k(key), Range=spec)
        except self.client.exceptions.NoSuchKey:
            raise ArtifactNotFound(f"no such artifact file: {key.split('/', 2)[-1]}") from None
        except self.client.exceptions.ClientError as exc:
            if self._code(exc) == "InvalidRange":  # empty object
                return b""
            raise
        return resp["Body"].read()

    def _size(self, key: str) -> int:
        try:
            return self.client.head_object(Bucket=self.bucket, Key=self._k(key))["ContentLength"]
        except self.client.exceptions.ClientError as exc:
            if self._code(exc) in ("404", "NoSuchKey", "NotFound"):
                raise ArtifactNotFound(f"no such artifact file: {key.split('/', 2)[-1]}") from None
            raise

    def _list(self, prefix: str) -> list[FileInfo]:
        full = self._k(prefix)
        found = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=full):
            for obj in page.get("Contents", []):
                found.append(FileInfo(obj["Key"][len(full):], obj["Size"]))
        return sorted(found, key=lambda f: f.path)

    def _worker_ids(self) -> Iterator[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        base = self._k("workers/")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=base, Delimiter="/"):
            for common in page.get("CommonPrefixes", []):
                name = common["Prefix"][len(base):].rstrip("/")
                if WORKER_ID.match(name):
                    yield name

    def _is_worker(self, worker_id: str) -> bool:
        try:
            self.client.head_object(
                Bucket=self.bucket, Key=self._k(f"workers/{worker_id}/metadata.json")
            )
        except self.client.exceptions.ClientError as exc:
            if self._code(exc) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def _stream(self, key: str) -> BinaryIO:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._k(key))["Body"]
        except self.client.exceptions.NoSuchKey:
            raise ArtifactNotFound(f"no such artifact file: {key.split('/', 2)[-1]}") from None

    def _delete(self, keys: list[str]) -> None:
        """Every version and delete marker of each key: on a versioned bucket a plain delete
        would only hide the bytes, and "deleted" must mean gone."""
        wanted = {self._k(k) for k in keys}
        if not wanted:
            return
        if not self._versioned():
            targets = [{"Key": k} for k in sorted(wanted)]
        else:
            targets = []
            paginator = self.client.get_paginator("list_object_versions")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=os.path.commonprefix(sorted(wanted))):
                for version in (*page.get("Versions", []), *page.get("DeleteMarkers", [])):
                    if version["Key"] in wanted:
                        targets.append({"Key": version["Key"], "VersionId": version["VersionId"]})
        for start in range(0, len(targets), 1000):  # DeleteObjects takes at most 1000 keys
            resp = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": targets[start:start + 1000], "Quiet": True})
            if resp.get("Errors"):
                first = resp["Errors"][0]
                raise ArtifactError(f"could not delete {len(resp['Errors'])} object(s), e.g. {first.get('Key')}: "
                                    f"{first.get('Code')} {first.get('Message')}")

    def _versioned(self) -> bool:
        """Whether the bucket keeps versions (asked once; unknown counts as yes, the thorough way)."""
        if self._versioning is None:
            try:
                status = self.client.get_bucket_versioning(Bucket=self.bucket).get("Status")
            except self.client.exceptions.ClientError:
                status = "unknown"
            self._versioning = status is not None  # "Enabled" or "Suspended": versions may exist
        return self._versioning


class _S3Stream(ArtifactStream):
    def __init__(self, store: S3ArtifactStore, key: str) -> None:
        super().__init__(key)
        self._store, self._buffer = store, bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []

    def _call(self, name: str, **kwargs: Any) -> dict[str, Any]:
        store = self._store
        try:
            return getattr(store.client, name)(Bucket=store.bucket, Key=store._k(self.key), **kwargs)
        except Exception as exc:
            self._abort()
            raise ArtifactError(f"could not write {self.path} to S3 ({name}): {exc}") from exc

    def _abort(self) -> None:
        if self._upload_id is not None:
            upload, self._upload_id = self._upload_id, None
            try:
                self._store.client.abort_multipart_upload(
                    Bucket=self._store.bucket, Key=self._store._k(self.key), UploadId=upload)
            except Exception:  # the bucket's lifecycle rule removes what an abort could not
                pass
        self._buffer = bytearray()

    def _write(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) >= PART_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._upload_id is None:
            self._upload_id = self._call("create_multipart_upload")["UploadId"]
        number = len(self._parts) + 1
        etag = self._call("upload_part", UploadId=self._upload_id, PartNumber=number, Body=bytes(self._buffer))["ETag"]
        self._parts.append({"ETag": etag, "PartNumber": number})
        self._buffer = bytearray()

    def _close(self) -> None:
        if self._upload_id is None:  # smaller than one part: one PUT over our own empty claim
            self._call("put_object", Body=bytes(self._buffer))
            self._buffer = bytearray()
            return
        if self._buffer:
            self._flush()  # the last part may be smaller than PART_BYTES
        self._call("complete_multipart_upload", UploadId=self._upload_id, MultipartUpload={"Parts": self._parts})
        self._upload_id = None
