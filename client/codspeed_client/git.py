"""What git says of the checkout a job runs in: its top folder and commit, the paths a change
touches, a commit's ancestors, a remote's project; None wherever git cannot tell."""

from __future__ import annotations


def run(*args: str) -> str | None:
    # here, not above: a CI job asks git for a pull request's merge base only, and the import costs 4 ms
    import subprocess

    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def checkout(fallback: str | None) -> tuple[str | None, str | None]:
    """The repository's top folder and its ``HEAD`` commit, as CodSpeed's runner finds them: from the
    current folder up, else in ``fallback`` (the CI's checkout folder); None where git cannot tell."""
    found = (run("rev-parse", "--show-toplevel", "HEAD") or "").splitlines()
    if len(found) == 2:
        return found[0], found[1]
    return None, run("-C", fallback, "rev-parse", "HEAD") if fallback else None


def rooted(top: str | None, fallback: str) -> str:
    """``repositoryRootPath`` as the runner writes it: the checkout's top folder with a trailing slash."""
    return f"{top or fallback.rstrip('/')}/"


def merge_base(root: str | None, tip: str | None, head: str | None) -> str | None:
    """Where a pull request's head left its base branch, when the clone holds both histories
    (actions/checkout's default depth-1 clone does not: then the base branch's tip, which
    ``pull_request.base.sha`` is, stands in)."""
    if not tip or not head:
        return None
    return run(*(("-C", root) if root else ()), "merge-base", tip, head)


def ancestors(root: str | None, commit: str, count: int) -> list[str]:
    """Up to ``count`` first-parent ancestors of ``commit``, the nearest first, as far as the
    clone holds them (none in a depth-1 clone): where the baseline is looked for when no run
    was forwarded at the base commit itself."""
    found = run(*(("-C", root) if root else ()), "rev-list", "--first-parent", f"--max-count={count + 1}", commit)
    return found.split()[1:] if found else []


def changed_files(root: str | None, base: str, head: str | None = None) -> list[str] | None:
    """The paths the change touches, None when the clone cannot tell. Checked out as a merge commit
    of ``head`` (actions/checkout's ``refs/pull/N/merge``): what the merge adds to its first parent,
    the base branch as it was merged into, and nothing the base branch gained since ``base``; else
    the paths changed since ``base`` (the merge base)."""

    def git(*args: str) -> str | None:
        return run(*(("-C", root) if root else ()), *args)

    if head and git("rev-parse", "--verify", "--quiet", "HEAD^2") == head:
        found = git("diff", "--name-only", "HEAD^1", "HEAD")
        return found.splitlines() if found else []
    found = git("diff", "--name-only", f"{base}...HEAD")
    if found is None:
        listed = git("rev-parse", "--verify", f"{base}^{{commit}}")
        return [] if listed else None  # no output: nothing changed, when git knows the base
    return found.splitlines()


def tracked_files(root: str | None) -> list[str] | None:
    """The repository's files as git tracks them, None when git cannot tell."""
    found = run(*(("-C", root) if root else ()), "ls-files")
    return found.splitlines() if found is not None else None


def project_of_remote(remote: str) -> str | None:
    """``owner/repo`` (or ``group/subgroup/repo``) of a git remote URL; None for a local path."""
    remote = remote.strip().removesuffix("/").removesuffix(".git")
    if remote.startswith(("/", ".", "file:")) or "://" not in remote and ":" not in remote:
        return None
    path = remote.split("://", 1)[1].split("/", 1)[-1] if "://" in remote else remote.split(":", 1)[1]
    return path if path.count("/") >= 1 else None


def host(remote: str) -> str:
    """The host of a git remote URL (``https://host/…``, ``git@host:…``)."""
    return remote.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].rpartition("@")[2]


def resolved(commit: str | None) -> str | None:
    """A commit the CI may name symbolically (Buildkite's ``HEAD`` for a build started by hand) as
    its SHA, read from the checkout; None when git cannot tell."""
    from codspeed_rules.names import is_commit

    if not commit or is_commit(commit):
        return commit
    return run("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
