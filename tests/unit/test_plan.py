"""Which shards a change affects: the repository's shard config against the changed files."""

import pytest

from codspeed_client.errors import CONFIG, ClientError
from codspeed_client.plan import load

CONFIG_TEXT = """
always = ["Cargo.lock", ".github/workflows/bench.yml"]

[shards.linter]
paths = ["crates/oxc_linter/**", "crates/oxc_semantic/**"]

[shards.parser]
paths = ["crates/oxc_parser/**", "!crates/oxc_parser/README.md"]
on_default_branch = false

[shards.codegen]
paths = ["crates/oxc_codegen/**"]
"""


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "shards.toml"
    path.write_text(CONFIG_TEXT)
    return load(str(path))


def test_a_change_runs_the_shards_whose_paths_it_touches_and_says_why_it_skips_the_others(config):
    plan = config.plan(["crates/oxc_semantic/src/scope.rs", "crates/oxc_parser/README.md", "docs/intro.md"], False)
    assert plan.runs == {"linter": "crates/oxc_semantic/src/scope.rs changed"}
    assert plan.skips == {
        "parser": "no change under crates/oxc_parser/**, !crates/oxc_parser/README.md",
        "codegen": "no change under crates/oxc_codegen/**",
    }
    assert plan.names == ["linter", "parser", "codegen"]


def test_a_global_path_runs_every_shard_and_the_default_branch_runs_those_marked(config):
    assert set(config.plan(["Cargo.lock"], False).runs.values()) == {"Cargo.lock changed, which affects every shard"}
    pushed = config.plan(["docs/intro.md"], True)
    assert pushed.runs == {
        "linter": "the default branch runs it always",
        "codegen": "the default branch runs it always",
    }
    assert list(pushed.skips) == ["parser"]
    assert config.plan(None, False).runs["parser"] == "no base to compare with: every shard runs"
    nothing = config.plan([], False)
    assert nothing.runs == {} and list(nothing.skips) == ["linter", "parser", "codegen"]


@pytest.mark.parametrize(
    "text, says",
    [
        ("always = []\n", "names no shards: give each a [shards.NAME] table with its paths"),
        ("[shards.a]\npaths = ['src/\\']\n", "shards.a.paths pattern 'src/\\\\' does not parse as a gitignore pattern"),
        ("[shards.a]\npaths = 'src/**'\n", "shards.a.paths must be a list of path patterns"),
        ("[shards.'a b']\npaths = []\n", "shard name 'a b' is not usable"),
        (
            "[shards.a]\non_default_branch = 'yes'\n",
            "[shards.a] takes paths (a list) and on_default_branch (true or false)",
        ),
        ("[shards.a\n", "is not valid TOML"),
        (
            "[shards.a]\npath = ['src/**']\n",  # planned nothing: the shard never ran on a pull request, always carried
            "shards.a key 'path' (line 2) is not one it takes (paths and on_default_branch): did you mean 'paths'?",
        ),
        (
            "alway = ['Cargo.lock']\n[shards.a]\npaths = []\n",
            "key 'alway' (line 1) is not one it takes (always and shards): did you mean 'always'?",
        ),
        (b"\xff\xfe[shards]", "is not text (UTF-8): a shard config is TOML"),
    ],
)
def test_a_config_that_cannot_plan_is_one_sentence_with_the_configuration_exit_code(tmp_path, text, says):
    path = tmp_path / "shards.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ClientError) as refused:
        load(str(path))
    assert says in str(refused.value) and refused.value.exit_code == CONFIG and "\n" not in str(refused.value)
    with pytest.raises(ClientError, match="no shard config at"):
        load(str(tmp_path / "none.toml"))
    with pytest.raises(ClientError, match="cannot read the shard config .*: Is a directory") as folder:
        load(str(tmp_path))
    assert folder.value.exit_code == CONFIG


def test_planning_uses_no_pattern_kind_pathspec_deprecates(tmp_path):
    """pathspec 1 deprecates its "gitwildmatch" patterns: a plan in a CI job prints no warning for them."""
    import warnings

    path = tmp_path / "shards.toml"
    path.write_text(CONFIG_TEXT)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        planned = load(str(path)).plan(["crates/oxc_parser/src/lexer.rs", "crates/oxc_parser/README.md"], False)
    assert list(planned.runs) == ["parser"]


@pytest.mark.parametrize(
    "pattern, says",
    [
        ("*a*a*a*a*a*a*a*a*a*a*b", "has 11 '*' in its segment '*a*a*a*a*a*a*a*a*a*a*b': at most 2"),
        ("src/*bench*_*.rs", "has 3 '*' in its segment '*bench*_*.rs': at most 2"),
        ("**/a/**/b/**/c", "has 3 '**' segments: at most 2"),
    ],
)
def test_a_pattern_that_could_match_for_hours_is_refused_naming_it(tmp_path, pattern, says):
    path, said = _refused(tmp_path, pattern)
    assert (
        said == f"{path}: shards.linter.paths pattern {pattern!r} {says}, so that matching cannot take hours; split it "
        "into simpler patterns"
    )


def _refused(tmp_path, pattern: str) -> tuple:
    """A plan whose linter shard has ``pattern``, refused: its path and what the refusal says (a config error)."""
    path = tmp_path / "shards.toml"
    path.write_text(f'[shards.linter]\npaths = ["{pattern}"]\n')
    with pytest.raises(ClientError) as refused:
        load(str(path))
    assert refused.value.exit_code == CONFIG
    return path, str(refused.value)


def test_patterns_within_the_limits_still_plan(tmp_path):
    path = tmp_path / "shards.toml"
    path.write_text('[shards.linter]\npaths = ["crates/**/src/**/*_bench*.rs", "*a*b"]\n')
    plan = load(str(path)).plan(["crates/oxc/src/deep/x_bench1.rs"], False)
    assert plan.runs == {"linter": "crates/oxc/src/deep/x_bench1.rs changed"}


@pytest.mark.parametrize("pattern", ["../x/**", "./crates/**", "crates/../x.rs", "!../y"])
def test_a_pattern_that_can_never_match_is_refused_naming_it(tmp_path, pattern):
    """``../x/**`` was accepted: its shard then never ran for any change, silently."""
    path, said = _refused(tmp_path, pattern)
    assert said == (
        f"{path}: shards.linter.paths pattern {pattern!r} has a '.' or '..' segment: it can match no file, "
        "since the changed paths are the repository's own (write it from the repository's root, as a/b/**)"
    )


def test_a_pattern_that_matches_no_file_of_the_repository_is_a_warning_and_the_plan_still_runs(
    tmp_path, capsys, monkeypatch
):
    """A typo (``crates/oxc_lintr/**``) or a path since moved never runs its shard: said once, at plan."""
    import subprocess

    from codspeed_client.cli import main
    from tests.factories import git_commit

    for name in ("GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI", "GITHUB_OUTPUT"):
        monkeypatch.delenv(name, raising=False)
    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path)], check=True)
    for path in ("Cargo.lock", "crates/oxc_linter/src/lib.rs", "crates/oxc_parser/src/lib.rs"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x\n")
    (tmp_path / ".codspeed").mkdir()
    (tmp_path / ".codspeed" / "shards.toml").write_text(
        CONFIG_TEXT.replace("crates/oxc_linter/**", "crates/oxc_lintr/**")
    )
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    git_commit(tmp_path, "the repository")
    (tmp_path / "changed.txt").write_text("crates/oxc_parser/src/lib.rs\n")
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--changed", "changed.txt"]) == 0
    out, err = capsys.readouterr()
    said = "matches no file of the repository: a change there never runs the shard (a typo, or a path since moved?)"
    assert err.splitlines() == [
        f"::warning title=codspeed-client::{where} pattern {pattern!r} {said}"
        for where, pattern in (
            ("always", ".github/workflows/bench.yml"),
            ("shards.linter.paths", "crates/oxc_lintr/**"),
            ("shards.linter.paths", "crates/oxc_semantic/**"),
            ("shards.codegen.paths", "crates/oxc_codegen/**"),
        )
    ]
    assert "runs parser: crates/oxc_parser/src/lib.rs changed" in out  # the negation (!…README.md) is not warned about
