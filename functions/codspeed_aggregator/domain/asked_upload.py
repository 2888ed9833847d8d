"""What an upload asks for (a pushed shard's request, or a runner's POST read as a shard), and whether a
run can take it: every check made before the first write, so a refusal changes nothing."""

from dataclasses import dataclass

from codspeed_wire.upstream import UploadMetadata

from .closing import CiOrigin
from .errors import Conflict, Forbidden, Unprocessable
from .manifest import Manifest
from .records import MAX_GROUPS, MAX_VARIANTS, RunRecord, SentPost, variant_key

# a run opened without a token takes at most this many uploads (re-runs included): a fork's pull request can
# ask for nothing more of the stack (invariant 18's bound, for the one caller nobody authenticated)
MAX_FORK_UPLOADS = 200


@dataclass(frozen=True)
class AskedUpload:
    """What an upload asks for: a pushed shard's request, or a runner's POST read as a shard."""

    project: str
    run_id: str
    shard: str  # the name the manifest knows
    manifest: Manifest
    metadata: UploadMetadata
    size: int | None = None  # signed into a pushed shard's URL; a runner's signs its MD5 only
    content_type: str | None = None
    crc32: str | None = None
    label: str | None = None  # a runner job's name, as its run shows it
    variant: str | None = None  # the executor (and run index) a group's total is counted per
    group: str = ""  # a runner job's group; "" for pushed shards
    page: str | None = None  # the CI run's page, as the client says it
    base_commit: str | None = None
    base_ancestors: tuple[str, ...] = ()
    key: str | None = None  # the shard as stored (a pushed shard's name and executor); ``shard`` when None
    sent: SentPost | None = None  # the POST's body as it came (a runner's) or as the client made it, to go as it was
    fork: bool = False  # sent without a token by a fork's pull request, as GitHub bore it out
    head_commit: str | None = None  # a pull request's head, where the commit sent is GitHub's merge commit of it
    origin: CiOrigin = CiOrigin()  # the CI run and attempt that asks, as the CI vouched: a close of theirs ends its job
    merged: bool = False  # a Buildkite build's: CodSpeed's runner sends no run parts there (``RunForward.by_executor``)

    @property
    def stored_as(self) -> str:
        """The shard as stored: a pushed shard's name and executor, a runner job's key."""
        return self.key or self.shard

    def variants(self) -> tuple[str, ...]:
        return (variant_key(self.group, self.variant),) if self.variant else ()

    def marks_tokenless(self, run: RunRecord) -> bool:
        """Whether it is the first upload without a token of its kind the run takes: a fork's (GitHub
        bore it out), or an unchecked one."""
        return self.metadata.tokenless and not (run.fork if self.fork else run.tokenless)

    @property
    def most_grants(self) -> int | None:
        """The grants its run may have counted before this one, without a token; None with one."""
        return MAX_FORK_UPLOADS if self.fork else None


def refuse_skipped(run: RunRecord, asked: AskedUpload) -> None:
    """A push of a shard its run's first attempt was told to skip (at its opening or its close): it is
    carried from the baseline run."""
    if asked.group == "" and asked.shard in run.skipped and run.attempt.number == 1:
        when = "by its close" if run.close.requested else "when it was opened"
        raise Conflict(
            f"shard {asked.shard} was declared skipped {when} (run {run.run_id} of {asked.project}): "
            "it is carried from the baseline run, not pushed"
        )


def admit(run: RunRecord, asked: AskedUpload, manifest: Manifest) -> None:
    """Refuse an upload the run cannot take, before anything is written: a job the declared run
    does not expect (in every attempt), a manifest other than its group's, a shard outside it, a
    group or a kind of upload past what a run holds (``MAX_GROUPS``, ``MAX_VARIANTS``);
    without a token (``fork``), a run a token opened, and past ``MAX_FORK_UPLOADS``."""
    group, shard, fork = asked.group, asked.shard, asked.fork
    admit_size(run, asked)  # a next attempt holds what its run held
    if fork and not run.fork:
        raise Forbidden(
            f"run {run.run_id} of {run.project} was opened with a token: a request without one cannot join it "
            "(a fork's pull request runs in a workflow run of its own)"
        )
    if fork and run.grants >= MAX_FORK_UPLOADS:
        raise Unprocessable(
            f"run {run.run_id} of {run.project} took {run.grants} uploads without a token, the most a run without "
            f"one takes ({MAX_FORK_UPLOADS})"
        )
    if group not in run.groups and run.declared:
        raise Conflict(
            f"{f'job {group}' if group else 'a shard pushed by codspeed-client'} is not among what run "
            f"{run.run_id} of {run.project} was opened expecting ({run.describe()})"
        )
    if group in run.groups:
        manifest.agree(run.groups[group], group)
        run.groups[group].admit(shard)


def admit_size(run: RunRecord, asked: AskedUpload) -> None:
    if asked.group not in run.groups and len(run.groups) >= MAX_GROUPS:
        raise Unprocessable(
            f"run {run.run_id} of {run.project} holds {len(run.groups)} jobs, the most a run holds ({MAX_GROUPS}; "
            f"a matrix is one): job {asked.group} cannot join it"
        )
    if (count := len({*run.variants, *asked.variants()})) > MAX_VARIANTS:
        raise Unprocessable(
            f"run {run.run_id} of {run.project} would hold {count} kinds of upload (a job's executor and run "
            f"index), more than a run holds ({MAX_VARIANTS})"
        )
