"""The aggregator's API over HTTP, with every failure turned into one clear sentence."""

from pathlib import Path

import requests

from .errors import AUTH, NETWORK, REFUSED, ClientError


class AggregatorApi:
    def __init__(self, url: str, token: str, timeout: float = 30) -> None:
        self.url = url.rstrip("/")
        self.http = requests.Session()
        self.http.headers["Authorization"] = token
        self.timeout = timeout

    def _call(self, method: str, path: str, **kwargs) -> dict | str:
        try:
            answer = self.http.request(method, f"{self.url}{path}", timeout=self.timeout, **kwargs)
        except requests.RequestException as exc:
            raise ClientError(f"cannot reach the aggregator at {self.url} ({type(exc).__name__}): check --api-url and the network", NETWORK) from exc
        if answer.status_code < 300:
            return answer.json() if "json" in answer.headers.get("content-type", "") else answer.text
        try:
            message = answer.json().get("error") or answer.text
        except ValueError:
            message = answer.text[:300]
        if answer.status_code in (401, 403):
            raise ClientError(f"the aggregator refused the token ({answer.status_code}): {message}", AUTH)
        if answer.status_code < 500:
            raise ClientError(f"the aggregator refused the request ({answer.status_code}): {message}", REFUSED)
        raise ClientError(f"the aggregator failed ({answer.status_code}): {message}; try again later", NETWORK)

    def request_upload(self, request: dict) -> dict:
        return self._call("POST", "/v1/uploads", json=request)

    def close(self, project: str, run_id: str, skip: list[str]) -> dict:
        return self._call("POST", "/v1/runs/close", json={"project": project, "run_id": run_id, "skip": skip})

    def report(self, project: str, run_id: str, fmt: str = "json") -> dict | str:
        return self._call("GET", f"/v1/runs/{project}/{run_id}", params={"format": fmt})

    def put_bundle(self, url: str, headers: dict[str, str], path: Path) -> None:
        try:
            with open(path, "rb") as body:
                answer = requests.put(url, data=body, headers=headers, timeout=max(self.timeout, 300))
        except requests.RequestException as exc:
            raise ClientError(f"uploading the bundle failed ({type(exc).__name__}): check the network and push again", NETWORK) from exc
        if answer.status_code >= 300:
            raise ClientError(f"the bundle store refused the upload ({answer.status_code}): {answer.text[:300]}", REFUSED)
