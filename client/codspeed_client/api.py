"""The aggregator's API over HTTP: retries where a retry can help, and every failure
turned into one clear sentence with its exit code."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import requests

from codspeed_rules.backoff import Retry, retryable, with_retries

from .errors import AUTH, CONFIG, NETWORK, REFUSED, ClientError, Skipped

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any, BinaryIO

    from codspeed_rules.report_json import ReportJson, ShardBenchmarksJson

    from .progress import Progress


class UploadExpired(Exception):
    """The presigned URL expired before the upload: ask for a new one."""


class AggregatorApi:
    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float = 30,
        attempts: int = 5,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url.rstrip("/")
        self.http = requests.Session()
        if token:  # none: a fork's pull request, which the aggregator checks with GitHub
            self.http.headers["Authorization"] = token
        self.token = token
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.sleep = sleep

    def _send(self, send: Callable[[], requests.Response], what: str) -> requests.Response:
        """Send, retrying connection errors and the answers worth it (``retryable``) with backoff; never
        another 4xx (a closing run takes a push: its close waits for it; one being forwarded sends it to
        its next attempt). The last try's answer is returned whatever it is."""

        def attempt() -> requests.Response | Retry:
            try:
                answer = send()
            except requests.RequestException as exc:
                return Retry(type(exc).__name__, error=exc)
            if retryable(answer.status_code):
                return Retry(str(answer.status_code), answer.headers.get("retry-after"), answer=answer)
            return answer

        outcome = with_retries(attempt, self.attempts, self.backoff, 60.0, self.sleep)
        if not isinstance(outcome, Retry):
            return outcome
        if outcome.answer is not None:
            answer: requests.Response = outcome.answer
            return answer
        raise ClientError(
            f"cannot reach {what} ({outcome.why}) after {self.attempts} tries: "
            "check the URL and the network, then run the command again",
            NETWORK,
        ) from outcome.error

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        found: dict[str, Any] = self._read(method, path, **kwargs)
        return found

    def _read(self, method: str, path: str, **kwargs: Any) -> Any:  # noqa: ANN401 -- JSON, typed by its caller
        answer = self._call(method, path, **kwargs)
        return answer.json() if answer is not None else {}

    def _call(self, method: str, path: str, missing_ok: bool = False, **kwargs: Any) -> requests.Response | None:
        """The aggregator's answer of 2xx (None: 404 and ``missing_ok``); any other, one sentence raised."""
        answer = self._send(
            lambda: self.http.request(method, f"{self.url}{path}", timeout=self.timeout, **kwargs),
            f"the aggregator at {self.url}",
        )
        if answer.status_code < 300:
            return answer
        try:
            message = answer.json()["error"]
        except (ValueError, KeyError, TypeError):
            message = None
        if answer.status_code == 404 and message is None:
            raise ClientError(
                f"{method} {self.url}{path} answered 404 not found: is {self.url} the aggregator's URL "
                "(the stack's ApiUrl)?",
                CONFIG,
            )
        if answer.status_code == 404 and missing_ok:
            return None
        message = message or answer.text[:300]
        if answer.status_code == 401 and not self.token:  # the project takes none: a fork's job stays green
            raise Skipped(
                f"this pull request comes from a fork, whose jobs GitHub gives no secrets, and the aggregator "
                f"takes no request without a token for this project, so nothing was sent: {message}"
            )
        if answer.status_code == 403 and not self.token:
            raise ClientError(f"the aggregator refused a request without a token (403): {message}", AUTH)
        if answer.status_code in (401, 403):
            raise ClientError(
                f"the aggregator refused the token ({answer.status_code}): {message}; check CODSPEED_AGGREGATOR_TOKEN",
                AUTH,
            )
        if not retryable(answer.status_code):
            raise ClientError(f"the aggregator refused the request ({answer.status_code}): {message}", REFUSED)
        raise ClientError(
            f"the aggregator failed ({answer.status_code}) after {self.attempts} tries: {message}; try again later",
            NETWORK,
        )

    def request_upload(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", "/v1/uploads", json=request)

    def give_back(self, key: str, reason: str) -> dict[str, Any]:
        """A grant this job will not use (its bundle refused, or its push stopped before the PUT was
        answered), named by its key: its shard is rejected with ``reason``, and no close waits for it."""
        said = " ".join(reason.split())[:500] or "no reason said"  # one line, as the aggregator takes it
        return self._json("POST", "/v1/uploads/give-back", json={"key": key, "reason": said})

    def costs(self, project: str, branch: str | None, run_id: str | None = None) -> dict[str, Any]:
        """The costs to split with: for a run (``run_id``), those its first split used."""
        params = {
            "project": project,
            **({"branch": branch} if branch else {}),
            **({"run_id": run_id} if run_id else {}),
        }
        return self._json("GET", "/v1/costs", params=params)

    def open(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", "/v1/runs/open", json=request)

    def close(self, project: str, run_id: str, skip: list[str], origin: dict[str, Any] | None = None) -> dict[str, Any]:
        """``origin``: the CI run and attempt the close speaks for (their jobs have ended)."""
        body = {"project": project, "run_id": run_id, "skip": skip, **(origin or {})}
        return self._json("POST", "/v1/runs/close", json=body)

    def report(self, project: str, run_id: str, missing_ok: bool = False) -> ReportJson | None:
        """The run's report (None: no such run, with ``missing_ok``)."""
        answer = self._call("GET", f"/v1/runs/{project}/{run_id}", missing_ok, params={"format": "json"})
        found: ReportJson | None = answer.json() if answer is not None else None  # the report's JSON, as served
        return found

    def report_markdown(self, project: str, run_id: str) -> str:
        answer = self._call("GET", f"/v1/runs/{project}/{run_id}", params={"format": "markdown"})
        return answer.text if answer is not None else ""

    def shard_benchmarks(self, project: str, run_id: str, shard: str) -> ShardBenchmarksJson:
        """Every benchmark of one shard of a run (the report itself names only the worst changes)."""
        found: ShardBenchmarksJson = self._read("GET", f"/v1/runs/{project}/{run_id}", params={"shard": shard})
        return found

    def put_bundle(
        self,
        url: str,
        headers: dict[str, str],
        path: Path,
        progress: Progress | None = None,
        guard: Callable[[BinaryIO], Any] | None = None,  # a file-like the upload reads instead
    ) -> None:
        def send() -> requests.Response:
            with open(path, "rb") as body:
                guarded = guard(body) if guard else body
                data = progress.wrap(guarded) if progress else guarded
                return requests.put(url, data=data, headers=headers, timeout=max(self.timeout, 300))

        answer = self._send(send, "the bundle store")
        if answer.status_code == 403 and "expired" in answer.text.lower():
            raise UploadExpired()
        if answer.status_code == 400 and "BadDigest" in answer.text:
            raise ClientError(
                f"the bundle store received other bytes than {path} held when its checksum was taken: "
                "check that nothing writes to the archive while it uploads, then push again",
                NETWORK,
            )
        if answer.status_code >= 300:
            raise ClientError(
                f"the bundle store refused the upload ({answer.status_code}): {answer.text[:300]}", REFUSED
            )
