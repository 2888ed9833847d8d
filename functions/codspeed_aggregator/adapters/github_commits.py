"""GitHub's pulls, compare and commits APIs: where a pull request left its base branch, for a run
whose upload could not tell (a depth-1 clone, or CodSpeed's runner, which sends no base commit)."""

from urllib.parse import quote

from .github_api import GitHubApi


class GitHubCommits(GitHubApi):
    def merge_base(self, project: str, number: int, ancestors: int) -> tuple[str, list[str]]:
        """Pull request ``number``'s merge base with its base branch, and up to ``ancestors`` of
        its first-parent ancestors, the nearest first."""
        pull = self.call("GET", f"/repos/{project}/pulls/{number}")
        base, head = pull["base"]["ref"], pull["head"]["sha"]
        found = self.call("GET", f"/repos/{project}/compare/{quote(base, safe='')}...{head}")["merge_base_commit"][
            "sha"
        ]
        listed = self.call("GET", f"/repos/{project}/commits", params={"sha": found, "per_page": ancestors + 1})
        parents = {
            c["sha"]: (c.get("parents") or [{}])[0].get("sha") for c in listed
        }  # the history, not only first parents
        chain: list[str] = []
        at = parents.get(found)
        while at is not None and at in parents and len(chain) < ancestors:
            chain.append(at)
            at = parents[at]
        return found, chain
