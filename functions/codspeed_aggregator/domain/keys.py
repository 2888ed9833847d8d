"""Where things live in the bucket.

A project is one key segment, its ``/`` percent-encoded (``grp%2Fsub``: ``%`` is in no project
name), so no project's keys are a prefix of another's: ``grp/sub`` and ``grp/sub/repo`` never
share a key, a prefix or a listing, whatever their run ids."""

from urllib.parse import quote, unquote

from codspeed_rules.names import is_project

from .errors import BadBundle

BUNDLE_PREFIX = "bundles/"


def project_segment(project: str) -> str:
    return quote(project, safe="")


def bundle_key(project: str, run_id: str, shard: str, upload_id: str) -> str:
    return f"{run_bundles_prefix(project, run_id)}{shard}/{upload_id}.tar.gz"


def run_bundles_prefix(project: str, run_id: str) -> str:
    return f"{BUNDLE_PREFIX}{project_segment(project)}/{run_id}/"


def normalized_key(bundle: str) -> str:
    """The normalized copy of a bundle (``codspeed_rules.normalize``): what the finalizer splices."""
    return f"normalized/{bundle.removeprefix(BUNDLE_PREFIX)}"


def index_key(bundle: str) -> str:
    return normalized_key(bundle).removesuffix(".tar.gz") + ".index.json"


def results_key(bundle: str) -> str:
    """A counted bundle's benchmark names and figures (``domain.results.ShardResults``), gzipped
    JSON written once by the arrival that validated it: the key follows the bundle's, so every
    attempt that counts the bundle finds them."""
    return f"results/{bundle.removeprefix(BUNDLE_PREFIX).removesuffix('.tar.gz')}.json.gz"


def spool_key(project: str, run_id: str, part: int) -> str:
    """Where the finalizer writes a merged part before sending it (expired by the bucket's lifecycle)."""
    return f"spool/{project_segment(project)}/{run_id}/part-{part:04d}.tar.gz"


def plan_key(project: str, run_id: str) -> str:
    """Where a run's forward plan is written once, by its claiming finalizer: its parts and their
    shards, read by each part's finalizer and by the run's next attempt (kept as long as bundles)."""
    return f"plans/{project_segment(project)}/{run_id}/plan.json"


def upstream_runs_key(project: str, run_id: str) -> str:
    """Where a run whose parts went under more upstream runs than its item lists keeps them all."""
    return f"plans/{project_segment(project)}/{run_id}/upstream-runs.json"


def part_plan_key(project: str, run_id: str, plan: str, index: int) -> str:
    """Where the claiming finalizer writes what one part of the plan ``plan`` (its nonce) needs:
    a part's finalizer reads that, not the whole plan, however many shards the run has."""
    return f"plans/{project_segment(project)}/{run_id}/{plan}/part-{index:06d}.json"


def parse_bundle_key(key: str) -> tuple[str, str, str, str]:
    """(project, run_id, shard, upload_id) of a bundle key (``bundle_key``'s)."""
    parts = key.split("/")
    if len(parts) != 5 or parts[0] + "/" != BUNDLE_PREFIX or not parts[-1].endswith(".tar.gz") or "" in parts:
        raise BadBundle(f"object key {key!r} is not a bundle key")
    segment, run_id, shard, name = parts[1:]
    project = unquote(segment)
    if not is_project(project):
        raise BadBundle(f"object key {key!r} is not a bundle key")
    return project, run_id, shard, name.removesuffix(".tar.gz")


def report_prefix(project: str, run_id: str) -> str:
    return f"reports/{project_segment(project)}/{run_id}/v"


def digest_key(project: str, run_id: str) -> str:
    """What the latest published report summed up of its shards' results (``results.SummaryDigest``),
    beside its versions (``is_report_key`` lists none of it) and expired with them."""
    return f"reports/{project_segment(project)}/{run_id}/summaries.json.gz"


def known_key(project: str, run_id: str) -> str:
    """What the latest report's publisher had read of the run's ledger (its shards, its tallies'
    revisions): a process new to the run reads from DynamoDB what changed since, not the run whole."""
    return f"reports/{project_segment(project)}/{run_id}/ledger.json.gz"


def answer_key(project: str, digest: str, ext: str = "json") -> str:
    """An API answer too large for Lambda's 6 MB (a shard's page, a branch's costs, a report in
    Markdown), kept for a presigned link under the project's reports (expired with them): named by
    its content's digest, under ``~answers``, which no run id can be (a run id starts with a letter
    or digit)."""
    return f"reports/{project_segment(project)}/~answers/{digest}.{ext}"


def report_key(project: str, run_id: str, version: int, ext: str = "json") -> str:
    """Each report version is its own object: the highest one is the run's report."""
    return f"{report_prefix(project, run_id)}{version:010d}.{ext}"


def is_report_key(prefix: str, key: str) -> bool:
    """A report version directly under ``prefix`` (``v0000000012.json``), nothing deeper."""
    rest = key.removeprefix(prefix)
    return key.startswith(prefix) and rest.endswith(".json") and rest[:-5].isdigit() and len(rest) == 15
