"""Which shards a change can affect, from a config in the repository (``.codspeed/shards.toml``):
each shard's path patterns (gitignore-style, matched by pathspec), the paths that affect every
shard, and whether a shard always runs on the default branch.

    always = ["Cargo.lock", ".github/workflows/bench.yml"]   # a change here runs every shard

    [shards.linter]
    paths = ["crates/oxc_linter/**", "crates/oxc_semantic/**"]

    [shards.parser]
    paths = ["crates/oxc_parser/**"]
    on_default_branch = false      # default true: a push to the default branch runs it whatever changed
"""

from __future__ import annotations

import sys

from .errors import CONFIG, ClientError

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

    from pathspec import GitIgnoreSpec

CONFIG_PATH = ".codspeed/shards.toml"


class ShardPlan:
    """The shards a change runs and those it skips, each with the reason, in the config's order."""

    def __init__(self, runs: dict[str, str], skips: dict[str, str]) -> None:
        self.runs, self.skips = runs, skips

    @property
    def names(self) -> list[str]:
        return [*self.runs, *self.skips]


TOP_KEYS = ("always", "shards")
SHARD_KEYS = ("paths", "on_default_branch")


class ShardConfig:
    def __init__(self, path: str, document: dict[str, Any], text: str = "") -> None:
        import pathspec

        from codspeed_rules.names import is_shard_name

        _known_keys(path, text, document, TOP_KEYS, "")
        shards = document.get("shards")
        if not isinstance(shards, dict) or not shards:
            raise ClientError(f"{path} names no shards: give each a [shards.NAME] table with its paths", CONFIG)
        self.always = self._spec(pathspec, path, "always", document.get("always", []))
        self.always_patterns: list[str] = document.get("always", [])
        self.shards: dict[str, tuple[list[str], GitIgnoreSpec, bool]] = {}
        for name, shard in shards.items():
            if not is_shard_name(name):
                raise ClientError(f"{path}: shard name {name!r} is not usable: letters, digits and _.=+@- only", CONFIG)
            if not isinstance(shard, dict) or not isinstance(shard.get("on_default_branch", True), bool):
                raise ClientError(
                    f"{path}: [shards.{name}] takes paths (a list) and on_default_branch (true or false)", CONFIG
                )
            _known_keys(path, text, shard, SHARD_KEYS, f"shards.{name}")
            patterns = shard.get("paths", [])
            self.shards[name] = (
                patterns,
                self._spec(pathspec, path, f"shards.{name}.paths", patterns),
                shard.get("on_default_branch", True),
            )

    @staticmethod
    def _spec(pathspec: ModuleType, path: str, where: str, patterns: object) -> GitIgnoreSpec:
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise ClientError(f"{path}: {where} must be a list of path patterns", CONFIG)
        for pattern in patterns:
            if problem := _never_matches(pattern) or _slow_to_match(pattern):
                raise ClientError(f"{path}: {where} pattern {pattern!r} {problem}", CONFIG)
            try:
                pathspec.GitIgnoreSpec.from_lines([pattern])
            except (ValueError, TypeError) as exc:
                raise ClientError(
                    f"{path}: {where} pattern {pattern!r} does not parse as a gitignore pattern ({exc})", CONFIG
                ) from exc
        # git's own rules (pathspec 1 deprecates "gitwildmatch")
        spec: GitIgnoreSpec = pathspec.GitIgnoreSpec.from_lines(patterns)
        return spec

    def unmatched(self, files: list[str]) -> list[tuple[str, str]]:
        """(where, pattern) of each pattern that matches none of ``files`` (the repository's): a typo
        there never runs its shard. A negation (``!x``) narrows another pattern, and is left out."""
        import pathspec

        if not files:
            return []
        listed = [("always", p) for p in self.always_patterns]
        listed += [(f"shards.{name}.paths", p) for name, (patterns, _, _) in self.shards.items() for p in patterns]
        return [
            (where, pattern)
            for where, pattern in listed
            if not pattern.startswith("!") and not any(pathspec.GitIgnoreSpec.from_lines([pattern]).match_files(files))
        ]

    def plan(self, changed: list[str] | None, on_default_branch: bool) -> ShardPlan:
        """``changed``: the files the change touches, None when there is nothing to compare with
        (every shard runs)."""
        runs, skips = {}, {}
        everything = next((f for f in changed if self.always.match_file(f)), None) if changed is not None else None
        for name, (patterns, spec, on_default) in self.shards.items():
            hit = next((f for f in changed if spec.match_file(f)), None) if changed is not None else None
            if changed is None:
                runs[name] = "no base to compare with: every shard runs"
            elif everything is not None:
                runs[name] = f"{everything} changed, which affects every shard"
            elif on_default_branch and on_default:
                runs[name] = "the default branch runs it always"
            elif hit is not None:
                runs[name] = f"{hit} changed"
            else:
                skips[name] = f"no change under {', '.join(patterns) or 'its paths (it lists none)'}"
        return ShardPlan(runs, skips)


def _known_keys(path: str, text: str, table: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    """Refuse a key the config does not know (``path`` for ``paths`` planned nothing: that shard
    never ran on a pull request and was always carried), naming it, its line and the keys it takes."""
    for key in table:
        if key in known:
            continue
        import difflib
        import re

        line = next(
            (
                n
                for n, said in enumerate(text.splitlines(), start=1)
                if re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", said)
            ),
            None,
        )
        at = f" (line {line})" if line else ""
        close = difflib.get_close_matches(key, known, n=1)
        hint = f": did you mean {close[0]!r}?" if close else ""
        takes = " and ".join(known)
        raise ClientError(
            f"{path}: {where + ' ' if where else ''}key {key!r}{at} is not one it takes ({takes}){hint}", CONFIG
        )


MAX_STARS = 2  # '*' in one path segment
MAX_GLOBSTARS = 2  # '**' segments in one pattern
MAX_PATH = 4096  # a changed path's characters (Linux's PATH_MAX)


def _never_matches(pattern: str) -> str | None:
    """Why a pattern can match no file of the repository, or None: changed paths are the repository's
    own (``a/b.py``), never with a ``.`` or ``..`` segment or a leading ``./``."""
    segments = pattern.lstrip("!").strip("/").split("/")
    if any(s in (".", "..") for s in segments):
        return (
            "has a '.' or '..' segment: it can match no file, since the changed paths are the repository's own "
            "(write it from the repository's root, as a/b/**)"
        )
    return None


def _slow_to_match(pattern: str) -> str | None:
    """Why a pattern could take minutes or hours to match, or None. A pattern is a regular
    expression that backtracks: each more wildcard multiplies the work by a path's length (three
    '*' in one segment took 0.85 s on a 255-character name, four '**' segments over two minutes on a
    deep path). Within these limits, a path of MAX_PATH characters matches in a fraction of a second."""
    segments = pattern.strip("/").split("/")
    crowded = next((s for s in segments if s != "**" and s.count("*") > MAX_STARS), None)
    if crowded is not None:
        return (
            f"has {crowded.count('*')} '*' in its segment {crowded!r}: at most {MAX_STARS}, so that matching "
            "cannot take hours; split it into simpler patterns"
        )
    if segments.count("**") > MAX_GLOBSTARS:
        return (
            f"has {segments.count('**')} '**' segments: at most {MAX_GLOBSTARS}, so that matching cannot take "
            "hours; split it into simpler patterns"
        )
    return None


def long_path(paths: list[str]) -> str | None:
    """The first changed path too long to be one (a path is matched against every pattern)."""
    return next((p for p in paths if len(p) > MAX_PATH), None)


def load(path: str) -> ShardConfig:
    if sys.version_info >= (3, 11):  # noqa: UP036 -- the client runs on Python 3.10 too (client/pyproject.toml)
        import tomllib  # novermin -- behind its version check
    else:  # Python before 3.11
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            raw = f.read()
        text = raw.decode()
        return ShardConfig(path, tomllib.loads(text), text)
    except FileNotFoundError as exc:
        raise ClientError(
            f"no shard config at {path}: write one (see codspeed-client plan --help) or pass --config", CONFIG
        ) from exc
    except OSError as exc:  # a folder, no permission
        raise ClientError(f"cannot read the shard config {path}: {exc.strerror}", CONFIG) from exc
    except UnicodeDecodeError as exc:
        raise ClientError(f"{path} is not text (UTF-8): a shard config is TOML", CONFIG) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ClientError(f"{path} is not valid TOML: {exc}", CONFIG) from exc
