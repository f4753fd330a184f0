"""File discovery: recursion, .gitignore, exclude / extend-exclude, --force-exclude, odd paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamlint.cli import main
from streamlint.discovery import DEFAULT_EXCLUDE, discover


def tree(root: Path, *paths: str) -> None:
    for rel in paths:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("/"):
            path.mkdir(exist_ok=True)
        else:
            path.write_text("x = 1\n", encoding="utf-8")


def rel(root: Path, files: list[str]) -> list[str]:
    return [Path(os.path.relpath(f, root)).as_posix() for f in files]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_recursion_suffixes_and_order(root: Path) -> None:
    tree(root, "b.py", "a.py", "stubs/t.pyi", "pkg/__init__.py", "pkg/sub/z.py", "pkg/README.md",
         "pkg/script", "pkg/data.pyc", "pkg/x.py.txt")
    result = discover(["."], root)
    assert rel(root, result.files) == ["a.py", "b.py", "pkg/__init__.py", "pkg/sub/z.py", "stubs/t.pyi"]
    assert result.errors == [] and result.warnings == []


def test_default_excludes(root: Path) -> None:
    tree(root, "ok.py", ".venv/lib/x.py", "venv/x.py", "build/x.py", "dist/x.py", "node_modules/x.py",
         "__pycache__/x.py", ".git/hooks/x.py", ".tox/x.py", "src/build/deep.py", "src/mybuild/ok2.py")
    assert rel(root, discover(["."], root).files) == ["ok.py", "src/mybuild/ok2.py"]
    assert "build" in DEFAULT_EXCLUDE


def test_exclude_replaces_defaults_and_extend_exclude_adds(root: Path) -> None:
    tree(root, "ok.py", "build/x.py", "generated/g.py", "src/gen_a.py", "src/keep.py")
    assert rel(root, discover(["."], root, ("generated",)).files) == ["build/x.py", "ok.py", "src/gen_a.py",
                                                                      "src/keep.py"]
    exclude = (*DEFAULT_EXCLUDE, "generated/", "src/gen_*.py")
    assert rel(root, discover(["."], root, exclude).files) == ["ok.py", "src/keep.py"]


def test_exclude_patterns_are_root_relative(root: Path) -> None:
    tree(root, "a/fixtures/x.py", "fixtures/y.py", "a/b/only_root.py", "only_root.py")
    files = rel(root, discover(["."], root, ("/only_root.py", "fixtures")).files)
    assert files == ["a/b/only_root.py"]


def test_gitignore_nested_and_negated(root: Path) -> None:
    tree(root, "keep.py", "secret.py", "out/x.py", "pkg/local.py", "pkg/gen_1.py", "pkg/gen_keep.py")
    (root / ".gitignore").write_text("secret.py\nout/\n", encoding="utf-8")
    (root / "pkg" / ".gitignore").write_text("gen_*.py\n!gen_keep.py\nlocal.py\n", encoding="utf-8")
    assert rel(root, discover(["."], root).files) == ["keep.py", "pkg/gen_keep.py"]
    everything = rel(root, discover(["."], root, respect_gitignore=False).files)
    assert everything == ["keep.py", "out/x.py", "pkg/gen_1.py", "pkg/gen_keep.py", "pkg/local.py", "secret.py"]


def test_gitignore_above_the_repository_is_not_read(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.py\n", encoding="utf-8")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    tree(repo, "a.py")
    assert rel(repo, discover([str(repo)], repo).files) == ["a.py"]


def test_named_files_bypass_excludes_unless_force_exclude(root: Path) -> None:
    tree(root, "build/x.py", "ignored.py", "notes.txt")
    (root / ".gitignore").write_text("ignored.py\n", encoding="utf-8")
    named = ["build/x.py", "ignored.py", "notes.txt"]
    assert discover(named, root).files == ["build/x.py", "ignored.py", "notes.txt"]
    assert discover(named, root, force_exclude=True).files == ["notes.txt"]
    assert discover(["build"], root).files == []  # a named excluded directory: walked, nothing excluded inside
    assert discover(["build"], root, force_exclude=True).files == []


def test_force_exclude_on_the_cli(root: Path) -> None:
    tree(root, "build/x.py", "ok.py")
    out = CliRunner().invoke(main, ["--show-files", "build/x.py", "ok.py"]).stdout.split()
    assert out == ["build/x.py", "ok.py"]
    out = CliRunner().invoke(main, ["--show-files", "--force-exclude", "build/x.py", "ok.py"]).stdout.split()
    assert out == ["ok.py"]


def test_config_excludes_on_the_cli(root: Path) -> None:
    tree(root, "a.py", "gen/b.py", "build/c.py")
    (root / "streamlint.toml").write_text("extend-exclude = ['gen']\n", encoding="utf-8")
    assert CliRunner().invoke(main, ["--show-files"]).stdout.split() == ["a.py"]
    (root / "streamlint.toml").write_text("exclude = ['gen']\n", encoding="utf-8")
    assert CliRunner().invoke(main, ["--show-files"]).stdout.split() == ["a.py", "build/c.py"]


def test_duplicates_and_symlinks_are_linted_once(root: Path) -> None:
    tree(root, "pkg/a.py")
    os.symlink("a.py", root / "pkg" / "alias.py")
    os.symlink("pkg", root / "pkg_link")
    result = discover(["pkg", "pkg/a.py", "./pkg/a.py", "pkg_link"], root)
    assert len(result.files) == 1 and os.path.realpath(result.files[0]) == str(root / "pkg" / "a.py")


def test_symlink_loop_is_a_warning(root: Path) -> None:
    tree(root, "loop/a.py")
    os.symlink("..", root / "loop" / "up")
    os.symlink("self", root / "loop" / "self")  # a link to itself
    result = discover(["loop"], root)
    assert rel(root, result.files) == ["loop/a.py"]
    assert result.errors == []
    assert any("loop/up" in path and "symbolic link loop" in msg for path, msg in result.warnings)


def test_missing_and_broken_paths_are_errors(root: Path) -> None:
    tree(root, "a.py")
    os.symlink("gone.py", root / "broken.py")
    os.symlink("gone.py", root / "dir_broken.py")
    result = discover(["missing.py", "broken.py", "a.py"], root)
    assert result.files == ["a.py"]
    assert result.errors == [("missing.py", "no such file or directory"), ("broken.py", "broken symbolic link")]
    walked = discover(["."], root)
    assert rel(root, walked.files) == ["a.py"]
    assert sorted(os.path.basename(p) for p, _ in walked.warnings) == ["broken.py", "dir_broken.py"]


def test_directory_named_like_a_python_file(root: Path) -> None:
    tree(root, "x.py/inner.py", "x.py/notes.txt")
    assert rel(root, discover(["."], root).files) == ["x.py/inner.py"]
    assert rel(root, discover(["x.py"], root).files) == ["x.py/inner.py"]


def test_fifo_is_never_opened(root: Path) -> None:
    os.mkfifo(root / "pipe.py")
    tree(root, "a.py")
    assert rel(root, discover(["."], root).files) == ["a.py"]  # skipped in a walk
    result = discover(["pipe.py"], root)  # named: an error, not a hang
    assert result.files == [] and result.errors == [("pipe.py", "not a regular file")]


def test_combined_exclude_matcher_agrees_with_pathspec() -> None:
    import itertools

    import pathspec

    from streamlint.discovery import DEFAULT_EXCLUDE, spec_matcher

    specs = [
        DEFAULT_EXCLUDE,
        ("build", "/dist", "*.pyi", "a/**/b", "gen_*.py", "docs/", "**/tmp/**"),
        ("*.py", "!keep.py", "/vendor"),  # a negation: pathspec's own matching is kept
        (),
    ]
    parts = ["build", "dist", "a", "b", "src", "docs", "tmp", "keep.py", "x.pyi", "gen_1.py", "m.py", ".venv"]
    paths = {"/".join(combo) for n in (1, 2, 3) for combo in itertools.product(parts, repeat=n)}
    for lines in specs:
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        match = spec_matcher(spec)
        for path in sorted(paths):
            for probe in (path, path + "/"):
                assert match(probe) == spec.match_file(probe), (lines, probe)
