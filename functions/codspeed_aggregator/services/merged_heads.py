"""The pull request's head a run's merge commit merges: what people are shown of a run whose uploads
said only the commit they checked out (CodSpeed's runner on a pull request: GitHub's merge commit)."""

import logging
from dataclasses import dataclass, field

from codspeed_rules.names import pull_request

from ..adapters.github_status import GitHubStatuses
from ..domain.records import RunRecord
from .shard_summaries import trim_oldest

log = logging.getLogger(__name__)
KNOWN_HEADS = 1000  # merge commits remembered by one process, the oldest forgotten first


@dataclass
class MergedHeads:
    statuses: GitHubStatuses | None  # GitHub: a commit's parents, asked with the stack's token
    # (project, merge commit) -> the head it merges (None: not a merge of two), as GitHub has it
    _known: dict[tuple[str, str], str | None] = field(default_factory=dict, init=False, repr=False)

    def head_of(self, run: RunRecord) -> str | None:
        """The merge commit's second parent, asked of GitHub once per commit; None when it cannot tell
        (not a pull request's run, no GitHub token, GitHub failing): the report then shows the commit
        sent, and no status is posted (GitHub never shows one posted on a merge commit). A fault is said
        and asked again at the next publish, never taken for an answer."""
        if self.statuses is None or not run.commit or pull_request(run.ref) is None or run.provider == "GITLAB":
            return None
        key = (run.project, run.commit)
        if key not in self._known:
            try:
                parents = self.statuses.parents(run.project, run.commit)
            except Exception as exc:
                log.warning("the head %s of %s merges is not known: %s", run.commit[:12], run.project, exc)
                return None
            self._known[key] = parents[1] if len(parents) == 2 else None
            trim_oldest(self._known, KNOWN_HEADS)
        return self._known.get(key)
