"""A pull request's merge base asked of GitHub, for a run whose upload could not tell it: CodSpeed's
runner sends no base commit, and a depth-1 clone (actions/checkout's default) gives only the base
branch's tip, with no ancestors."""

import logging
from dataclasses import dataclass, field, replace

from requests import RequestException

from codspeed_rules.names import MAX_ANCESTORS, pull_request

from ..adapters.github_commits import GitHubCommits
from ..domain.records import RunRecord

log = logging.getLogger(__name__)


@dataclass
class MergeBases:
    github: GitHubCommits | None  # GitHub: the pull request, its compare with its base, the commits before
    _refused: set[str] = field(default_factory=set, init=False, repr=False)  # projects whose token may not read them

    def resolved(self, run: RunRecord) -> RunRecord:
        """``run`` with its base commit where GitHub says its pull request left the base branch,
        and that commit's ancestors; as it is when its upload sent the ancestors (the clone had
        the history), when it is no pull request, or when GitHub cannot answer (warned)."""
        number = pull_request(run.ref)
        if self.github is None or number is None or not self._asks(run):
            return run
        try:
            base, ancestors = self.github.merge_base(run.project, number, MAX_ANCESTORS)
        except (RequestException, KeyError, TypeError, ValueError) as exc:
            status = getattr(getattr(exc, "response", None), "status_code", None)
            if status in (401, 403):
                self._refused.add(run.project)
            log.warning(
                "GitHub did not tell the merge base of %s#%s (%s): the baseline is looked for at %s",
                run.project,
                number,
                status or type(exc).__name__,
                run.base_commit or "the base branch's latest run",
            )
            return run
        return replace(run, base_commit=base.lower(), base_ancestors=tuple(a.lower() for a in ancestors))

    def _asks(self, run: RunRecord) -> bool:
        """GitHub is asked for a run on GitHub whose upload sent no ancestors, while its token may read them."""
        return not run.base_ancestors and run.project not in self._refused and run.provider in (None, "GITHUB")
