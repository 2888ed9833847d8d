"""Configuration, read from the environment (set by template.yaml, or by the local stack)."""

import os
from dataclasses import dataclass
from functools import cache

from .domain.upstream_parts import MAX_UPLOAD_BYTES


def _flag(name: str, default: bool = False) -> bool:
    return os.environ.get(name, str(default)).lower() in ("1", "true", "yes")


def _text(name: str) -> str | None:
    """A variable's value; None when it is unset or empty."""
    return os.environ.get(name) or None


def _listed(name: str) -> tuple[str, ...]:
    """A comma-separated variable's items, each stripped, the empty ones left out."""
    return tuple(item.strip() for item in (os.environ.get(name) or "").split(",") if item.strip())


def _forward_modes() -> tuple[tuple[str, str], ...]:
    """FORWARD_MODES: ``owner/repo=mode`` items, each mode checked."""
    pairs = (item.partition("=") for item in _listed("FORWARD_MODES"))
    return tuple((p.strip(), _mode(m.strip(), f"FORWARD_MODES ({p.strip()})")) for p, _, m in pairs if p.strip())


class MissingSetting(RuntimeError):
    """A variable a function cannot run without is not set: said when the function's adapters are
    first built (a cold start), not later as an empty name in an AWS call."""


# The forward modes: each shard upstream as its own run part the moment it is counted (CodSpeed
# combines a run's parts itself), or one upload a run, at its end (an upstream that takes only that)
PARTS, ONE_UPLOAD = "parts", "one-upload"
MODES = (PARTS, ONE_UPLOAD)


def _mode(value: str, name: str) -> str:
    if value not in MODES:
        raise MissingSetting(f"{name} must be {PARTS} or {ONE_UPLOAD}, not {value!r}")
    return value


# What each setting is called in the environment, for the ones a function may require.
VARIABLES = {
    "table_name": "TABLE_NAME",
    "bucket_name": "BUCKET_NAME",
    "finalize_queue_url": "FINALIZE_QUEUE_URL",
    "arrivals_queue_url": "ARRIVALS_QUEUE_URL",
    "arrivals_dead_letter_url": "ARRIVALS_DEAD_LETTER_QUEUE_URL",
    "upstream_url": "UPSTREAM_URL",
}


@dataclass(frozen=True)
class Settings:
    table_name: str
    bucket_name: str
    finalize_queue_url: str
    arrivals_queue_url: str
    upstream_url: str
    api_token: str | None
    api_token_parameter: str | None
    upstream_token: str | None
    upstream_token_parameter: str | None
    upstream_tokens_path: str | None  # SSM: one upstream token per project, <path>/<owner>/<repo>
    run_deadline_seconds: int
    finalize_lease_seconds: int
    max_part_bytes: int
    arrival_reserve_seconds: int
    arrival_mib_per_second: float
    retention_days: int
    default_branch: str
    webhook_secret: str | None
    webhook_secret_parameter: str | None
    commit_status: bool
    pr_comments: (
        bool  # the sticky pull-request comment (GitHub; GitLab's merge-request note where gitlab_api_url is set)
    )
    comment_seconds: int  # a partial report edits the comment at most this often
    github_api_url: str
    github_token: str | None
    github_token_parameter: str | None
    gitlab_api_url: str | None  # GitLab's API (https://gitlab.com/api/v4): merge-request notes, with pr_comments
    gitlab_token: str | None
    gitlab_token_parameter: str | None
    oidc_audience: str | None
    oidc_jwks_url: str | None
    circleci_org_ids: tuple[str, ...]  # CircleCI organizations whose jobs' OIDC tokens are taken
    circleci_jwks_url: str | None  # their keys ({issuer}, {org}): CircleCI's own by default
    tokenless_projects: frozenset[str]
    tokenless_max_bundle_bytes: int  # a shard sent without a token (a fork's pull request) is at most this
    public_url: str | None  # where the API answers (run pages' links); the API also knows it from a request
    page_link_days: int
    regression_threshold: float
    forward_mode: str = PARTS  # parts: each shard upstream as it is counted; one-upload: a run at its end
    forward_modes: tuple[tuple[str, str], ...] = ()  # (project, mode): a project's own mode
    arrivals_dead_letter_url: str = ""  # where an event deferred past MAX_DEFERRALS goes
    # Constants, no operator's to set (the tests vary them with dataclasses.replace):
    presign_expiry_seconds: int = (
        600  # an upload URL's life: a job's PUT comes within seconds; a close waits this at most
    )
    max_bundle_bytes: int = 5 << 30  # S3's largest PUT
    merge_level: int = 1  # deflate level of a merged upload's recompressed members: bench/merge.py, speed over size
    upstream_timeout_seconds: float = 60  # one request to CodSpeed; a 5 GiB PUT streams, each read within it
    upstream_attempts: int = 3  # tries of one request to CodSpeed, then the message's own retries (SQS)
    max_benchmarks_per_upload: int = 1000  # CodSpeed's limit of benchmarks in one upload
    report_inline_bytes: int = 5 << 20  # a report answered inline up to this (Lambda answers 6 MB); larger, a link

    def sends_parts(self, project: str) -> bool:
        """Whether a run of ``project`` opened now sends each shard upstream as it is counted."""
        return _mode(dict(self.forward_modes).get(project, self.forward_mode), "the forward mode") == PARTS

    def require(self, function: str, *names: str) -> None:
        """Refuse to build ``function`` without the settings it needs, naming the variables."""
        missing = [VARIABLES[name] for name in names if not getattr(self, name)]
        if missing:
            raise MissingSetting(
                f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: "
                f"the {function} function needs {'it' if len(missing) == 1 else 'them'} "
                "(template.yaml sets them on every function; the local stack sets them too)"
            )

    def arrival_reserve(self, size: int | None) -> float:
        """The seconds an invocation must have left to take an arrival of ``size`` bytes (the S3
        event says it): its floor, plus its bytes at the validation rate. A 1 KiB bundle needs the
        floor, a 5 GiB one its whole pass; an event that says no size gets the largest's."""
        size = self.max_bundle_bytes if size is None else size
        return self.arrival_reserve_seconds + size / (1 << 20) / self.arrival_mib_per_second

    @classmethod
    def from_env(cls) -> "Settings":
        env = os.environ
        return cls(
            table_name=env.get("TABLE_NAME", ""),
            bucket_name=env.get("BUCKET_NAME", ""),
            finalize_queue_url=env.get("FINALIZE_QUEUE_URL", ""),
            arrivals_queue_url=env.get("ARRIVALS_QUEUE_URL", ""),
            arrivals_dead_letter_url=env.get("ARRIVALS_DEAD_LETTER_QUEUE_URL", ""),
            upstream_url=env.get("UPSTREAM_URL", ""),
            api_token=_text("API_TOKEN"),
            api_token_parameter=_text("API_TOKEN_PARAMETER"),
            upstream_token=_text("UPSTREAM_TOKEN"),
            upstream_token_parameter=_text("UPSTREAM_TOKEN_PARAMETER"),
            upstream_tokens_path=_text("UPSTREAM_TOKENS_PATH"),
            run_deadline_seconds=int(env.get("RUN_DEADLINE_SECONDS", 3 * 3600)),
            finalize_lease_seconds=int(env.get("FINALIZE_LEASE_SECONDS", 960)),
            # bundle bytes merged into one upload: under S3's 5 GB PUT, and what one merge does in minutes
            max_part_bytes=int(env.get("MAX_PART_BYTES", MAX_UPLOAD_BYTES)),
            # what an arrival takes, beyond its bundle's bytes at ARRIVAL_MIB_PER_SECOND (``arrival_reserve``)
            arrival_reserve_seconds=int(env.get("ARRIVAL_RESERVE_SECONDS", 20)),
            # an arrival's pass over a bundle (read, validate, normalize, write), in a Lambda vCPU: bench/scale.py
            arrival_mib_per_second=float(env.get("ARRIVAL_MIB_PER_SECOND", 7)),
            retention_days=int(env.get("RETENTION_DAYS", 30)),
            default_branch=env.get("DEFAULT_BRANCH", "main"),
            webhook_secret=_text("WEBHOOK_SECRET"),
            webhook_secret_parameter=_text("WEBHOOK_SECRET_PARAMETER"),
            commit_status=_flag("COMMIT_STATUS"),
            pr_comments=_flag("PR_COMMENTS"),
            comment_seconds=int(env.get("COMMENT_SECONDS", 30)),
            github_api_url=env.get("GITHUB_API_URL", "https://api.github.com"),
            github_token=_text("GITHUB_TOKEN"),
            github_token_parameter=_text("GITHUB_TOKEN_PARAMETER"),
            gitlab_api_url=_text("GITLAB_API_URL"),
            gitlab_token=_text("GITLAB_TOKEN"),
            gitlab_token_parameter=_text("GITLAB_TOKEN_PARAMETER"),
            oidc_audience=env.get("OIDC_AUDIENCE", "codspeed.io") or None,  # what CodSpeed's runner asks GitHub for
            oidc_jwks_url=_text("OIDC_JWKS_URL"),
            circleci_org_ids=_listed("CIRCLECI_ORG_IDS"),
            circleci_jwks_url=_text("CIRCLECI_JWKS_URL"),
            public_url=(_text("PUBLIC_URL") or "").rstrip("/") or None,
            page_link_days=int(env.get("PAGE_LINK_DAYS", 30)),
            regression_threshold=float(env.get("REGRESSION_THRESHOLD", 0.05)),
            forward_mode=_mode(env.get("FORWARD_MODE") or PARTS, "FORWARD_MODE"),
            forward_modes=_forward_modes(),
            tokenless_max_bundle_bytes=int(env.get("TOKENLESS_MAX_BUNDLE_BYTES", 256 << 20)),
            tokenless_projects=frozenset(_listed("TOKENLESS_PROJECTS")),
        )


@cache
def settings() -> Settings:
    return Settings.from_env()
