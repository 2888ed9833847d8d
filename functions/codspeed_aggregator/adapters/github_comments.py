"""GitHub's issue comments API (a pull request is an issue): the sticky comment, posted once,
then edited in place."""

from .github_api import GitHubApi


class GitHubComments(GitHubApi):
    host = "GitHub"
    thread = "pull request"  # what the comment is on, as the host says it
    needs = "pull requests: write"  # what a refused token lacks
    body_limit = 65_536  # GitHub's: a longer comment body is refused (422)

    def create(self, project: str, number: int, body: str) -> int:
        """Post a comment on pull request ``number``; answers its id."""
        return int(self.call("POST", f"/repos/{project}/issues/{number}/comments", {"body": body})["id"])

    def edit(self, project: str, number: int, comment_id: int, body: str) -> None:
        self.call("PATCH", f"/repos/{project}/issues/comments/{comment_id}", {"body": body})
