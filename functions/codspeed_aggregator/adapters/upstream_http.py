"""Forward one upload with CodSpeed's two-step protocol: POST metadata, PUT archive."""

from dataclasses import dataclass
from typing import BinaryIO

import requests

from codspeed_wire.upstream import UploadAccepted


class UpstreamError(Exception):
    """The upstream refused or failed; the message says which step and what it answered."""


@dataclass(frozen=True)
class UpstreamAnswer:
    run_id: str
    upload_url: str


class UpstreamClient:
    def __init__(self, url: str, token: str | None, timeout: float = 60) -> None:
        self.url = url
        self.token = token
        self.timeout = timeout
        self.http = requests.Session()

    def forward(self, metadata: dict, archive: BinaryIO, size: int, md5: str) -> UpstreamAnswer:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = self.token  # CodSpeed wants the bare token, no "Bearer"
        try:
            answer = self.http.post(self.url, json=metadata, headers=headers, timeout=self.timeout)
        except requests.RequestException as exc:
            raise UpstreamError(f"POST {self.url} failed: {exc}") from exc
        if answer.status_code >= 300:
            raise UpstreamError(f"POST {self.url} answered {answer.status_code}: {answer.text[:300]}")
        try:
            accepted = UploadAccepted.model_validate_json(answer.content)
        except ValueError as exc:
            raise UpstreamError(f"POST {self.url} answered a body that is not an upload grant: {answer.text[:300]}") from exc
        put_headers = {"Content-Type": "application/gzip", "Content-Length": str(size), "Content-MD5": md5}
        try:
            put = self.http.put(accepted.uploadUrl, data=archive, headers=put_headers, timeout=self.timeout)
        except requests.RequestException as exc:
            raise UpstreamError(f"PUT of the archive failed: {exc}") from exc
        if put.status_code >= 300:
            raise UpstreamError(f"PUT of the archive answered {put.status_code}: {put.text[:300]}")
        return UpstreamAnswer(run_id=accepted.runId, upload_url=accepted.uploadUrl)
