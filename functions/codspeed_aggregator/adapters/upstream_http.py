"""Forward one upload with CodSpeed's two-step protocol: POST metadata, PUT archive.

The two steps are separate calls so the finalizer can record the POST's answer before the
PUT: a retry after a crash then PUTs the same bytes to the same URL instead of making a
second upload. Each step is retried (``codspeed_rules.backoff.with_retries``) on connection
errors, timeouts, the answers CodSpeed's runner retries (5xx, 408, 429) and malformed answers,
after what the answer's Retry-After says or else a backoff; any other 4xx is final."""

import io
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import urljoin, urlsplit

import requests

from codspeed_rules.backoff import Retry, retryable, with_retries
from codspeed_wire.upstream import UploadAccepted

T = TypeVar("T")


class Rewindable(Protocol):
    """An archive a PUT streams, and streams again from its start on a retry."""

    def read(self, n: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


MIN_PUT_RATE = 512 * 1024  # bytes per second: an upload slower than this has stalled
MAX_ANSWER = 1 << 20  # an upload grant is a few hundred bytes
MAX_REDIRECTS = 3


@dataclass(frozen=True)
class Answer:
    """An answer read whole within its request's budget: its status, headers and body."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class TooSlow(requests.Timeout):
    """The whole request took longer than its budget (a read timeout bounds each read only)."""


class _Deadline:
    """A request body read like a file, that stops the request once its time is up."""

    def __init__(self, raw: Rewindable, deadline: float, budget: float) -> None:
        self._raw, self._deadline, self._budget = raw, deadline, budget

    def read(self, n: int = -1) -> bytes:
        if time.monotonic() > self._deadline:
            raise TooSlow(f"sending took longer than {self._budget:.0f} s")
        return self._raw.read(n)


class UpstreamError(Exception):
    """The upstream refused or failed; the message says which step and what it answered."""


class UpstreamRefused(UpstreamError):
    """A 4xx other than 429: asking again the same way will not help."""


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _read_within(answer: requests.Response, deadline: float, budget: float) -> Answer:
    """An answer's body, read by chunks until ``deadline`` (monotonic) and ``MAX_ANSWER`` bytes at most."""
    content = bytearray()
    with answer:
        while chunk := answer.raw.read1(65536, decode_content=True):
            content += chunk
            if time.monotonic() > deadline:
                raise TooSlow(f"the answer took longer than {budget:.0f} s")
            if len(content) > MAX_ANSWER:
                raise TooSlow(f"the answer is over {MAX_ANSWER} bytes")
    return Answer(answer.status_code, answer.headers, bytes(content))


def _check_redirect(origin: str, target: str) -> None:
    """Follow only to https (or, from the local stand-in on loopback, to loopback)."""
    to = urlsplit(target)
    local = urlsplit(origin).hostname in LOOPBACK and to.hostname in LOOPBACK
    if to.scheme != "https" and not (local and to.scheme == "http"):
        raise UpstreamRefused(f"the upstream redirected to {target}: a redirect is followed to https only")


USER_AGENT = "codspeed-shard-aggregator/1.0.0"  # like the runner's codspeed-runner, with our own name


class UpstreamClient:
    def __init__(
        self,
        url: str,
        token: str | None,
        timeout: float = 60,
        attempts: int = 3,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        tokens: Callable[[str | None], str | None] | None = None,
    ) -> None:
        self.url = url
        self.token = token
        self.tokens = tokens  # a project's own token (adapters.upstream_tokens); else ``token``
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.sleep = sleep
        self.http = requests.Session()

    def _bounded(
        self,
        method: str,
        url: str,
        budget: float,
        *,
        data: Rewindable | None = None,
        headers: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Answer:
        """One request that ends within ``budget`` seconds however slowly the peer reads or
        answers (``timeout`` alone bounds each read: an upstream trickling a byte at a time
        would hold the finalizer until the function's own timeout). A 307 or 308 is followed,
        the body sent again from its start (S3 answers 307 for a new bucket outside us-east-1)."""
        deadline, headers = time.monotonic() + budget, dict(headers or {})
        for hop in range(MAX_REDIRECTS + 1):
            if data is not None and hop:
                data.seek(0)
            body = _Deadline(data, deadline, budget) if data is not None else None
            answer = self.http.request(
                method,
                url,
                stream=True,
                timeout=self.timeout,
                allow_redirects=False,
                data=body,
                headers=headers,
                **kwargs,
            )
            if answer.status_code not in (307, 308) or not answer.headers.get("location"):
                break
            answer.close()
            if hop == MAX_REDIRECTS:
                raise UpstreamError(f"{method} {url} redirected more than {MAX_REDIRECTS} times")
            target = urljoin(url, answer.headers["location"])
            _check_redirect(url, target)
            if urlsplit(target).netloc != urlsplit(url).netloc:
                headers.pop("Authorization", None)  # the token is the upstream's, never another host's
            url = target
        return _read_within(answer, deadline, budget)

    def _retrying(self, step: str, send: Callable[[], Answer], accept: Callable[[Answer], T]) -> T:
        def attempt() -> T | Retry:
            try:
                answer = send()
            except requests.RequestException as exc:
                return Retry(f"{step} failed: {type(exc).__name__}: {exc}")
            if retryable(answer.status_code):
                return Retry(
                    f"{step} answered {answer.status_code}: {answer.text[:300]}", answer.headers.get("retry-after")
                )
            if answer.status_code >= 300:
                error = UpstreamRefused if 400 <= answer.status_code < 500 else UpstreamError
                raise error(f"{step} answered {answer.status_code}: {answer.text[:300]}")
            try:
                return accept(answer)
            except ValueError:
                return Retry(f"{step} answered a body that is not an upload grant: {answer.text[:300]}")

        outcome = with_retries(attempt, self.attempts, self.backoff, 60.0, self.sleep)
        if isinstance(outcome, Retry):
            raise UpstreamError(f"{outcome.why} (after {self.attempts} tries)")
        return outcome

    def token_for(self, metadata: dict[str, Any]) -> str | None:
        """The token a run's upload goes with: none for a tokenless one (a fork's pull request: the
        runner sends no Authorization then), else its project's."""
        if metadata.get("tokenless"):
            return None
        owner, repository = metadata.get("owner"), metadata.get("repository")
        project = f"{owner}/{repository}" if owner and repository else None
        return self.tokens(project) if self.tokens else self.token

    def announce(
        self,
        metadata: dict[str, Any],
        body: bytes | None = None,
        user_agent: str | None = None,
        job_token: str | None = None,
    ) -> UploadAccepted:
        """Step 1: POST the metadata (in the runner's field order, as given), or ``body``, the bytes a
        runner sent (``metadata`` read from them), with its ``user_agent`` and its job's own
        ``job_token`` (still valid) over the stack's; the answer says where to PUT the archive."""
        headers = {"Content-Type": "application/json", "User-Agent": user_agent or USER_AGENT}
        if body is not None:  # a body read like a file goes chunked without its length
            headers["Content-Length"] = str(len(body))
        if token := (job_token if job_token and not metadata.get("tokenless") else self.token_for(metadata)):
            headers["Authorization"] = token  # CodSpeed wants the bare token, no "Bearer"

        def sent() -> dict[str, Any]:  # each try from the start
            return {"data": io.BytesIO(body)} if body is not None else {"json": metadata}

        return self._retrying(
            f"POST {self.url}",
            lambda: self._bounded("POST", self.url, self.timeout, headers=headers, **sent()),
            lambda answer: UploadAccepted.model_validate_json(answer.content),
        )

    def put(self, upload_url: str, archive: Rewindable, size: int, md5: str, gzipped: bool = True) -> None:
        """Step 2: PUT the archive with the runner's headers: a tar, its Content-MD5, and
        ``Content-Encoding: gzip`` when it is compressed."""
        headers = {
            "Content-Type": "application/x-tar",
            "Content-Length": str(size),
            "Content-MD5": md5,
            "User-Agent": USER_AGENT,
        }
        if gzipped:
            headers["Content-Encoding"] = "gzip"

        def send() -> Answer:
            archive.seek(0)
            return self._bounded("PUT", upload_url, self.timeout + size / MIN_PUT_RATE, data=archive, headers=headers)

        self._retrying("PUT of the archive", send, lambda answer: None)
