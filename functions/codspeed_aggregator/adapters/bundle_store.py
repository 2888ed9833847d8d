"""The bucket: presigned uploads, bundle streams, published reports."""

from contextlib import contextmanager

from botocore.exceptions import ClientError

from ..domain.keys import report_key

VERSION_META = "report-version"


class BundleStore:
    def __init__(self, bucket: str, client) -> None:
        self.bucket = bucket
        self.s3 = client

    def presign_put(self, key: str, md5: str, size: int | None, expires: int, content_type: str | None) -> tuple[str, dict]:
        """A presigned PUT whose Content-MD5 (and Content-Length, Content-Type when given) are signed."""
        params = {"Bucket": self.bucket, "Key": key, "ContentMD5": md5}
        headers = {"Content-MD5": md5}
        if size is not None:
            params["ContentLength"] = size
            headers["Content-Length"] = str(size)
        if content_type:
            params["ContentType"] = content_type
            headers["Content-Type"] = content_type
        url = self.s3.generate_presigned_url("put_object", Params=params, ExpiresIn=expires)
        return url, headers

    @contextmanager
    def open(self, key: str):
        body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"]
        try:
            yield body
        finally:
            body.close()

    def publish_report(self, project: str, run_id: str, version: int, json_body: str, markdown: str) -> bool:
        """Publish a report unless one of the same or a newer version is there already.

        The JSON is written with S3's conditional PUT (If-Match on the ETag read, or
        If-None-Match for the first), so two publishers racing can never put an older
        version over a newer one. The Markdown follows the JSON it was rendered with.
        """
        key = report_key(project, run_id)
        for _ in range(10):
            current, etag = self._published_version(key)
            if current >= version:
                return False
            condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
            try:
                self.s3.put_object(
                    Bucket=self.bucket, Key=key, Body=json_body.encode(), ContentType="application/json",
                    Metadata={VERSION_META: str(version)}, **condition,
                )
            except ClientError as exc:
                if exc.response["Error"]["Code"] in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                    continue
                raise
            self.s3.put_object(
                Bucket=self.bucket, Key=report_key(project, run_id, "md"), Body=markdown.encode(),
                ContentType="text/markdown; charset=utf-8", Metadata={VERSION_META: str(version)},
            )
            return True
        return False

    def _published_version(self, key: str) -> tuple[int, str | None]:
        try:
            head = self.s3.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return 0, None
            raise
        return int(head.get("Metadata", {}).get(VERSION_META, 0)), head["ETag"]

    def read_report(self, project: str, run_id: str, ext: str = "json") -> str | None:
        try:
            return self.s3.get_object(Bucket=self.bucket, Key=report_key(project, run_id, ext))["Body"].read().decode()
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                return None
            raise
