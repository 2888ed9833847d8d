"""Where things live in the bucket."""

from .errors import BadBundle

BUNDLE_PREFIX = "bundles/"


def bundle_key(project: str, run_id: str, shard: str, upload_id: str) -> str:
    return f"{BUNDLE_PREFIX}{project}/{run_id}/{shard}/{upload_id}.tar.gz"


def run_bundles_prefix(project: str, run_id: str) -> str:
    return f"{BUNDLE_PREFIX}{project}/{run_id}/"


def normalized_key(bundle: str) -> str:
    """The normalized copy of a bundle (``codspeed_rules.normalize``): what the finalizer splices."""
    return f"normalized/{bundle.removeprefix(BUNDLE_PREFIX)}"


def index_key(bundle: str) -> str:
    return normalized_key(bundle).removesuffix(".tar.gz") + ".index.json"


def spool_key(project: str, run_id: str, part: int) -> str:
    """Where the finalizer writes a merged part before sending it (expired by the bucket's lifecycle)."""
    return f"spool/{project}/{run_id}/part-{part:04d}.tar.gz"


def parse_bundle_key(key: str) -> tuple[str, str, str, str]:
    """(project, run_id, shard, upload_id) of a bundle key; the project is ``owner/repo`` or, on
    GitLab, ``group/subgroup/.../repo``: run ids and shard names hold no ``/``, so it is the rest."""
    parts = key.split("/")
    if len(parts) < 6 or parts[0] + "/" != BUNDLE_PREFIX or not parts[-1].endswith(".tar.gz") or "" in parts:
        raise BadBundle(f"object key {key!r} is not a bundle key")
    *project, run_id, shard, name = parts[1:]
    return "/".join(project), run_id, shard, name.removesuffix(".tar.gz")


def report_prefix(project: str, run_id: str) -> str:
    return f"reports/{project}/{run_id}/v"


def report_key(project: str, run_id: str, version: int, ext: str = "json") -> str:
    """Each report version is its own object: the highest one is the run's report."""
    return f"{report_prefix(project, run_id)}{version:010d}.{ext}"
