"""The bucket: presigned uploads, bundle streams, published reports."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from ..domain.keys import is_report_key, plan_key, report_key, report_prefix
from ..domain.run_plan import RunPlan

if TYPE_CHECKING:  # boto3's type stubs: a dev dependency, not deployed
    from botocore.response import StreamingBody
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import (
        CompletedPartTypeDef,
        CopySourceTypeDef,
        GetObjectOutputTypeDef,
        ObjectTypeDef,
    )

FINAL_TAG = "run-final"  # template.yaml's lifecycle rule expires bundles carrying it


class MissingObject(Exception):
    """An object (or the version asked for) is not in the bucket: expired, or never written."""


class VersionedStream:
    """One object read once, front to back, saying which version it is (the bucket is versioned)."""

    def __init__(self, raw: StreamingBody, version_id: str | None) -> None:
        self._raw = raw
        self.version_id = version_id if version_id not in (None, "null") else None

    def read(self, n: int = -1) -> bytes:
        return self._raw.read() if n is None or n < 0 else self._raw.read(n)


SPOOL_PART_BYTES = 64 << 20  # S3 takes 10,000 parts of 5 MiB to 5 GiB: 64 MiB parts hold a 625 GiB object


class SpoolWriter:
    """A file-like sink that writes an object with a multipart upload, one part per 64 MiB:
    memory stays at one part whatever the object's size, and nothing touches the disk. An
    object smaller than one part is written with one PUT."""

    def __init__(self, s3: S3Client, bucket: str, key: str, part_bytes: int = SPOOL_PART_BYTES) -> None:
        self.s3, self.bucket, self.key, self.part_bytes = s3, bucket, key, part_bytes
        self.upload_id: str | None = None  # started with the first full part
        self.version_id: str | None = None
        self._buffer = bytearray()
        self._parts: list[CompletedPartTypeDef] = []
        self._abandoned = False

    def write(self, data: bytes) -> int:
        self._buffer += data
        while len(self._buffer) >= self.part_bytes:
            self._send(bytes(self._buffer[: self.part_bytes]))
            del self._buffer[: self.part_bytes]
        return len(data)

    def flush(self) -> None:
        pass

    def _send(self, body: bytes) -> None:
        if self.upload_id is None:
            self.upload_id = self.s3.create_multipart_upload(Bucket=self.bucket, Key=self.key)["UploadId"]
        number = len(self._parts) + 1
        answer = self.s3.upload_part(
            Bucket=self.bucket, Key=self.key, UploadId=self.upload_id, PartNumber=number, Body=body
        )
        self._parts.append({"ETag": answer["ETag"], "PartNumber": number})

    def abandon(self) -> None:
        """Nothing of it is wanted after all: the upload is aborted, and the block makes no object."""
        self.abort()
        self._abandoned = True

    def complete(self) -> None:
        if self._abandoned:
            return
        if self.upload_id is None:
            self.version_id = self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=bytes(self._buffer)).get(
                "VersionId"
            )
        else:
            if self._buffer:
                self._send(bytes(self._buffer))
            self.version_id = self.s3.complete_multipart_upload(
                Bucket=self.bucket, Key=self.key, UploadId=self.upload_id, MultipartUpload={"Parts": self._parts}
            ).get("VersionId")
        self._buffer.clear()

    def abort(self) -> None:
        if self.upload_id is not None:
            self.s3.abort_multipart_upload(Bucket=self.bucket, Key=self.key, UploadId=self.upload_id)


class ObjectReader:
    """One version of an object read like a file, from its start again after ``seek(0)`` (a
    retried PUT streams it again): the finalizer sends what it spooled, or a bundle, without a copy."""

    def __init__(self, store: Bucket, key: str, version_id: str | None) -> None:
        self._store, self.key, self.version_id = store, key, version_id
        self._body: StreamingBody | None = None

    def seek(self, offset: int, whence: int = 0) -> int:
        if (offset, whence) != (0, 0):
            raise ValueError("an object stream seeks back to its start only")
        self.close()
        return 0

    def read(self, n: int = -1) -> bytes:
        if self._body is None:
            self._body = self._store.get(self.key, self.version_id)["Body"]
        body = self._body
        return body.read() if n is None or n < 0 else body.read(n)

    def digest(self, chunk: int = 1 << 20) -> tuple[int, str]:
        """The object's size and the base64 of its MD5, read through once."""
        md5, size = hashlib.md5(), 0
        self.seek(0)
        while data := self.read(chunk):
            md5.update(data)
            size += len(data)
        self.seek(0)
        return size, base64.b64encode(md5.digest()).decode()

    def close(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None


class Bucket:
    def __init__(self, bucket: str, client: S3Client) -> None:
        self.bucket = bucket
        self.s3 = client

    def presign_put(
        self, key: str, expires: int, *, size: int | None, content_type: str | None, md5: str | None, crc32: str | None
    ) -> tuple[str, dict[str, Any]]:
        """A presigned PUT whose headers, each when given, are signed: S3 refuses a body that
        disagrees with its checksums (Content-MD5, x-amz-checksum-crc32) or its length."""
        params: dict[str, str | int] = {"Bucket": self.bucket, "Key": key}
        headers: dict[str, str] = {}
        if md5 is not None:
            params["ContentMD5"] = md5
            headers["Content-MD5"] = md5
        if crc32 is not None:
            params["ChecksumCRC32"] = crc32
            headers["x-amz-checksum-crc32"] = crc32
        if size is not None:
            params["ContentLength"] = size
            headers["Content-Length"] = str(size)
        if content_type:
            params["ContentType"] = content_type
            headers["Content-Type"] = content_type
        url = self.s3.generate_presigned_url("put_object", Params=params, ExpiresIn=expires)
        return url, headers

    @contextmanager
    def open(self, key: str, version_id: str | None = None) -> Iterator[VersionedStream]:
        """A bundle's bytes: the version given (the bucket is versioned: a second PUT to a
        bundle's URL makes a new version and leaves the validated one as it was), else the
        current one; the stream's ``version_id`` says which was read."""
        answer = self.get(key, version_id)
        body = VersionedStream(answer["Body"], answer.get("VersionId") or version_id)
        try:
            yield body
        finally:
            answer["Body"].close()

    def get(self, key: str, version_id: str | None = None) -> GetObjectOutputTypeDef:
        """S3's GetObject answer for the version given, else the current one; MissingObject when absent."""
        try:
            if version_id:
                return self.s3.get_object(Bucket=self.bucket, Key=key, VersionId=version_id)
            return self.s3.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            # a GET of an absent key is a 403 to a role whose ListBucket is held to prefixes: a LIST tells
            if code in ("NoSuchKey", "NoSuchVersion", "404") or (code == "AccessDenied" and not self.holds(key)):
                raise MissingObject(f"{key} (version {version_id or 'current'}) is not in the bucket") from exc
            raise

    def holds(self, key: str) -> bool:
        """Whether the bucket still holds a current version of ``key`` (a lifecycle rule may have
        expired it): a LIST of the key itself, as a HEAD of an absent key is answered 403, not 404, to
        a role whose s3:ListBucket is held to prefixes. A version made noncurrent expires after it."""
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=1).get("Contents", [])
        return any(o["Key"] == key for o in listed)

    @contextmanager
    def spool(self, key: str) -> Iterator[SpoolWriter]:
        """A ``SpoolWriter`` for ``key``; the object exists once the block ends without an error."""
        writer = SpoolWriter(self.s3, self.bucket, key)
        try:
            yield writer
        except BaseException:
            writer.abort()
            raise
        writer.complete()

    def put_json(self, key: str, document: dict[str, Any] | str) -> str | None:
        """Write a JSON object (or its text, already made); answers its version."""
        text = document if isinstance(document, str) else json.dumps(document, separators=(",", ":"))
        answer = self.s3.put_object(Bucket=self.bucket, Key=key, Body=text.encode(), ContentType="application/json")
        return answer.get("VersionId")

    def put_json_many(self, documents: dict[str, dict[str, Any]], writers: int = 16) -> None:
        """Write many JSON objects, in parallel (a plan's parts: a thousand for a big run)."""
        with ThreadPoolExecutor(max(1, min(writers, len(documents)))) as pool:
            list(pool.map(self.put_json, documents, documents.values()))

    def read_json(self, key: str, version_id: str | None = None) -> dict[str, Any]:
        with self.open(key, version_id) as body:
            document: dict[str, Any] = json.loads(body.read())
            return document

    def put_plan(self, project: str, run_id: str, plan: RunPlan) -> str | None:
        """Write a run's whole plan; answers the version its run item records."""
        return self.put_json(plan_key(project, run_id), plan.to_item())

    def read_plan(self, project: str, run_id: str, version_id: str | None) -> RunPlan:
        return RunPlan.from_item(self.read_json(plan_key(project, run_id), version_id))

    def copy(self, key: str, version_id: str | None, target: str) -> str | None:
        """Copy an object (at its version) to ``target`` within the bucket, untagged (its run tags
        it final); answers the copy's version. S3 copies 5 GB at most in one request."""
        source: CopySourceTypeDef = {"Bucket": self.bucket, "Key": key}
        if version_id:
            source["VersionId"] = version_id
        return self.s3.copy_object(Bucket=self.bucket, Key=target, CopySource=source, TaggingDirective="REPLACE").get(
            "VersionId"
        )

    def reader(self, key: str, version_id: str | None = None) -> ObjectReader:
        return ObjectReader(self, key, version_id)

    def mark_final(self, prefix: str, sent_as_they_came: frozenset[str] = frozenset()) -> int:
        """Tag every bundle under ``prefix`` ``run-final=true``, or ``run-final=parts`` for a bundle
        that went upstream as it came (``sent_as_they_came``: their keys): the bucket's lifecycle rules
        expire only tagged bundles (nothing of a run not yet forwarded is ever deleted), the second kind
        sooner: a later run needs their results, kept apart, not them. A bundle never counted (its
        arrival in the dead-letter queue) keeps the long retention: its redrive still reads it."""
        tagged = 0
        for key in self._keys(prefix):
            value = "parts" if key in sent_as_they_came else "true"
            self.s3.put_object_tagging(
                Bucket=self.bucket, Key=key, Tagging={"TagSet": [{"Key": FINAL_TAG, "Value": value}]}
            )
            tagged += 1
        return tagged

    def listed_under(self, prefix: str) -> dict[str, tuple[int, float]]:
        """Every object under ``prefix``, with its size and when its PUT was answered (one list call a
        thousand keys: S3 lists an object once its PUT was answered)."""
        return {o["Key"]: (o["Size"], o["LastModified"].timestamp()) for o in self._listed(prefix)}

    def _keys(self, prefix: str) -> Iterator[str]:
        """Every key under ``prefix``, page after page."""
        return (o["Key"] for o in self._listed(prefix))

    def _listed(self, prefix: str) -> Iterator[ObjectTypeDef]:
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            yield from page.get("Contents", [])

    def publish_report(self, project: str, run_id: str, version: int, json_body: str) -> bool:
        """Publish a report version; False when that version was already there. Versions are
        separate objects and readers take the highest, so two publishers racing can never put an
        older report over a newer one, and no read is needed before writing. Its Markdown is
        rendered from it when asked for (one object a publish, not two)."""
        return self.put_once(report_key(project, run_id, version), json_body)

    def put_once(self, key: str, body: str, content_type: str = "application/json") -> bool:
        """Write an object unless the key has one (``If-None-Match: *``); False when it had."""
        try:
            self.s3.put_object(
                Bucket=self.bucket, Key=key, Body=body.encode(), ContentType=content_type, IfNoneMatch="*"
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                return False
            raise
        return True

    def latest_report_key(self, project: str, run_id: str) -> str | None:
        """The key of the highest published version of a run's report (its JSON), or None."""
        prefix = report_prefix(project, run_id)
        return max((k for k in self._keys(prefix) if is_report_key(prefix, k)), default=None)

    def read_report(self, project: str, run_id: str) -> str | None:
        """The highest published version of a run's report, or None."""
        latest = self.latest_report_key(project, run_id)
        return None if latest is None else self.s3.get_object(Bucket=self.bucket, Key=latest)["Body"].read().decode()

    def presign_get(self, key: str, expires: int) -> str:
        """A presigned GET of one object (a report too large for Lambda's answer)."""
        return self.s3.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=expires
        )
