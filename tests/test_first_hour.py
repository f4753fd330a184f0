"""A new user's first hour (issue 13) and per-file configuration (issue 14 item 5): CLI output compared
as text from several working directories, warm cache against cold, nested configurations."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from streamlint.cli import main
from harness import write

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SARIF_SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
# SL105 at 2:39 (int tag, unsafe fix), SL104 at 2:42 (reserved priority, safe fix)
BAD = "import torchair\nwith torchair.scope.npu_stream_switch(1, 3):\n    pass\n"


def run(args: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch, input: str | None = None):
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, args, input=input, catch_exceptions=False)
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository (``.git``) holding the showcase project in ``services/model``."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    shutil.copytree(FIXTURES / "showcase", root / "services" / "model")
    return root


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line]


# ---------------------------------------------------------------- 1. paths
def test_text_paths_are_relative_to_the_current_directory(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = repo / "services" / "model"
    from_repo = run(["services/model", "--output-format", "concise", "--no-cache"], repo, monkeypatch)
    assert from_repo.exit_code == 1
    lines = _lines(from_repo.stdout)
    assert lines[0].startswith("services/model/launcher.py:15:5: SL401 ")
    # related locations too, every one of them openable from the cwd
    assert "(related: services/model/moe_demo/attention.py:23:18, services/model/launcher.py:22:12)" in lines[0]
    assert any(line.startswith("services/model/moe_demo/moe.py:78:9: SL201") for line in lines)
    from_sub = run([".", "--output-format", "concise", "--no-cache"], model / "moe_demo", monkeypatch)
    sub_lines = _lines(from_sub.stdout)
    assert sub_lines[0].startswith("attention.py:23:18: SL102 ")
    assert any(line.startswith("moe.py:53:13: SL502") and f"(related: {model}/launcher.py:22:12)" in line
               for line in sub_lines)  # outside the cwd: absolute
    # the same findings, only the paths differ
    strip = lambda line: line.split(": ", 1)[1].split(" (related")[0]  # noqa: E731
    assert sorted(map(strip, sub_lines)) == sorted(strip(x) for x in lines if "/moe_demo/" in x.split(": ")[0])
    full = run(["moe_demo/moe.py", "--no-cache"], model, monkeypatch).stdout
    assert "moe_demo/moe.py:78:9: SL201" in full and "  = related: moe_demo/moe.py:75:13" in full
    # a path outside the current directory is printed absolute
    elsewhere = repo.parent / "elsewhere"
    elsewhere.mkdir()
    outside = _lines(run([str(model / "moe_demo" / "moe.py"), "--output-format", "concise", "--no-cache"],
                         elsewhere, monkeypatch).stdout)
    assert outside and all(line.startswith(f"{model}/moe_demo/moe.py:") for line in outside)


def test_machine_formats_resolve_from_any_directory(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = repo / "services" / "model"
    outputs = {}
    for cwd, target in ((repo, "services/model"), (model, "."), (model / "moe_demo", "..")):
        outputs[cwd] = {fmt: run([target, "--output-format", fmt, "--no-cache"], cwd, monkeypatch).stdout
                        for fmt in ("json", "json-lines", "sarif", "github")}
    first, *others = outputs.values()
    for other in others:
        assert other == first  # byte-identical whichever directory the run started from
    data = json.loads(first["json"])
    assert all(os.path.isabs(d["filename"]) and os.path.isfile(d["filename"]) for d in data)
    assert all(os.path.isfile(r["filename"]) for d in data for r in d["related"])
    assert [json.loads(line) for line in first["json-lines"].splitlines()] == data
    sarif = json.loads(first["sarif"])
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(sarif)
    run_ = sarif["runs"][0]
    base = run_["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base == repo.as_uri() + "/"
    for res in run_["results"]:
        for loc in res["locations"] + res.get("relatedLocations", []):
            art = loc["physicalLocation"]["artifactLocation"]
            assert art["uriBaseId"] == "%SRCROOT%"
            assert (repo / art["uri"]).is_file(), art["uri"]
    github = first["github"].splitlines()
    assert github and all(",".join(line.split(",")[:1]).split("file=")[1].startswith("services/model/")
                          for line in github)


# ---------------------------------------------------------------- 2. cached related locations
def test_warm_cache_from_another_directory_equals_cold(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = repo / "services" / "model"
    # the cache is filled by a run from the repository root
    assert run(["services/model", "--output-format", "concise"], repo, monkeypatch).exit_code == 1
    assert (model / ".streamlint_cache").is_dir()
    for cwd, target in ((model / "moe_demo", "."), (model / "moe_demo", ".."), (repo, "services/model")):
        for fmt in ("concise", "full", "json", "sarif"):
            warm = run([target, "--output-format", fmt], cwd, monkeypatch)
            cold = run([target, "--output-format", fmt, "--no-cache"], cwd, monkeypatch)
            assert warm.stdout == cold.stdout, (cwd, fmt)
            assert warm.exit_code == cold.exit_code == 1
    text = run([".", "--output-format", "concise"], model / "moe_demo", monkeypatch).stdout
    assert "moe_demo/launcher.py" not in text and "moe_demo/moe.py" not in text  # paths that do not exist


# ---------------------------------------------------------------- 3. nested configuration (and issue 14.5)
@pytest.fixture
def nested(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    write(root, "streamlint.toml", "select = ['ALL']\n")
    write(root, "main.py", BAD)
    write(root, "vendor/streamlint.toml", "ignore = ['SL104', 'SL105']\n")  # vendored: its own rules
    write(root, "vendor/lib.py", BAD)
    write(root, "pkg/streamlint.toml", "extend = '../streamlint.toml'\nignore = ['SL104']\n")
    write(root, "pkg/mod.py", BAD)
    return root


def _codes(stdout: str) -> list[tuple[str, str]]:
    return [(line.split(":")[0], line.split(": ")[1].split()[0]) for line in _lines(stdout)]


def test_each_file_is_governed_by_its_closest_config(nested: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run([".", "--output-format", "concise", "--no-cache"], nested, monkeypatch)
    assert _codes(result.stdout) == [("main.py", "SL105"), ("main.py", "SL104"), ("pkg/mod.py", "SL105")]
    assert result.exit_code == 1
    # the same per-file results linting a subfolder or a single file, from anywhere
    assert _codes(run(["pkg", "--output-format", "concise", "--no-cache"], nested, monkeypatch).stdout) == \
        [("pkg/mod.py", "SL105")]
    assert _codes(run(["mod.py", "--output-format", "concise", "--no-cache"], nested / "pkg",
                      monkeypatch).stdout) == [("mod.py", "SL105")]


@pytest.mark.parametrize("cache", [[], ["--no-cache"]])
def test_file_order_does_not_change_results(nested: Path, monkeypatch: pytest.MonkeyPatch, cache: list[str]) -> None:
    forward = run(["main.py", "vendor/lib.py", "--output-format", "concise", *cache], nested, monkeypatch)
    backward = run(["vendor/lib.py", "main.py", "--output-format", "concise", *cache], nested, monkeypatch)
    assert forward.stdout == backward.stdout
    assert forward.exit_code == backward.exit_code == 1
    assert _codes(forward.stdout) == [("main.py", "SL105"), ("main.py", "SL104")]
    only_vendor = run(["vendor/lib.py", "--output-format", "concise", *cache], nested, monkeypatch)
    assert (only_vendor.exit_code, only_vendor.stdout) == (0, "")


def test_show_settings_names_the_config_of_the_file(nested: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = run(["--show-settings", "pkg/mod.py"], nested, monkeypatch).stdout
    assert f"config file: {nested / 'pkg' / 'streamlint.toml'}" in out
    assert "SL104 reserved-stream-priority" in out and "off (ignore 'SL104'" in out
    assert "SL105 invalid-stream-tag" in out
    out = run(["--show-settings", "main.py"], nested, monkeypatch).stdout
    assert f"config file: {nested / 'streamlint.toml'}" in out
    out = run(["--show-settings", "lib.py"], nested / "vendor", monkeypatch).stdout
    assert f"config file: {nested / 'vendor' / 'streamlint.toml'}" in out


def test_cache_follows_the_governing_config(nested: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = [".", "--output-format", "concise"]
    assert _codes(run(args, nested, monkeypatch).stdout)[-1] == ("pkg/mod.py", "SL105")
    write(nested, "pkg/streamlint.toml", "extend = '../streamlint.toml'\nignore = ['SL105']\n")
    warm = run(args, nested, monkeypatch)
    assert _codes(warm.stdout)[-1] == ("pkg/mod.py", "SL104")
    assert warm.stdout == run([*args, "--no-cache"], nested, monkeypatch).stdout


def test_nested_config_excludes_apply_to_its_folder(nested: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(nested, "vendor/streamlint.toml", "extend-exclude = ['generated']\n")
    write(nested, "vendor/generated/x.py", BAD)
    write(nested, "generated/y.py", BAD)  # the root config does not exclude it
    files = run(["--show-files"], nested, monkeypatch).stdout.split()
    assert files == ["generated/y.py", "main.py", "pkg/mod.py", "vendor/lib.py"]


# ---------------------------------------------------------------- 4. missing paths, mistyped commands
def test_missing_path_is_an_error_and_nothing_reads_like_success(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    result = run(["nope.py"], tmp_path, monkeypatch)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "nope.py: no such file or directory" in result.stderr
    write(tmp_path, "ok.py", "x = 1\n")
    result = run(["ok.py", "nope.py"], tmp_path, monkeypatch)
    assert result.exit_code == 2
    assert "passed" not in result.stdout.lower() and "could not be linted" in result.stdout


@pytest.mark.parametrize("typo,command", [("chekc", "check"), ("rul", "rule"), ("clen", "clean")])
def test_mistyped_command_is_not_linted_as_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  typo: str, command: str) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path, "bad.py", BAD)
    result = run([typo, "."], tmp_path, monkeypatch)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert f"`{typo}` is neither a path nor a command; did you mean `{command}`?" in result.stderr
    # a missing file whose name is close to a command is still a missing path
    result = run(["clean.py"], tmp_path, monkeypatch)
    assert result.exit_code == 2 and "clean.py: no such file or directory" in result.stderr
    # an existing directory of that name is linted
    write(tmp_path, f"{typo}/x.py", BAD)
    assert run([typo, "--output-format", "concise"], tmp_path, monkeypatch).exit_code == 1


# ---------------------------------------------------------------- 5. syntax errors in skipped files
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_syntax_errors_in_files_the_prefilter_skips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    jobs: str) -> None:
    from streamlint import parallel

    monkeypatch.setattr(parallel, "LIGHT_SERIAL_BELOW", 0)  # -j 2: the syntax checks go to the pool
    (tmp_path / ".git").mkdir()
    write(tmp_path, "plain/broken.py", "def f(:\n    return 1\n")  # no marker of any rule
    write(tmp_path, "plain/ok.py", "def f():\n    return 1\n")
    write(tmp_path, "plain/nul.py", "x = 1\0\n")
    write(tmp_path, "plain/noqa.py", "def g():  # noqa: SL001\n    pass\n")  # SL002
    write(tmp_path, "bad.py", BAD)
    for cache in ([], ["--no-cache"], []):  # cold with the cache, without it, warm
        result = run([".", "--output-format", "concise", "-j", jobs, *cache], tmp_path, monkeypatch)
        assert result.exit_code == 1
        lines = _lines(result.stdout)
        assert lines[0].startswith("bad.py:2:39: SL105")
        assert lines[2] == "plain/broken.py:1:7: SL001 syntax error: invalid syntax"
        assert lines[3] == "plain/noqa.py:1:11: SL002 unused suppression for SL001"
        assert lines[4].startswith("plain/nul.py:1:") and " SL001 " in lines[4]
        assert len(lines) == 5  # ok.py is fine
    # named on the command line
    result = run(["plain/broken.py", "--output-format", "concise"], tmp_path, monkeypatch)
    assert (result.exit_code, _lines(result.stdout)) == (1, ["plain/broken.py:1:7: SL001 syntax error: invalid syntax"]), result.stderr
    # ignoring SL001 skips the check
    result = run(["plain", "--ignore", "SL001", "--output-format", "concise"], tmp_path, monkeypatch)
    assert (result.exit_code, result.stdout) == (0, "")


# ---------------------------------------------------------------- 6. fix counts
def test_fix_marks_and_counts_like_ruff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path, "bad.py", BAD)  # SL105: unsafe fix; SL104: safe fix
    concise = run(["bad.py", "--output-format", "concise", "--no-cache"], tmp_path, monkeypatch).stdout
    assert _lines(concise) == [
        "bad.py:2:39: SL105 stream tag 1 is an int; tags must be non-empty strings",
        "bad.py:2:42: SL104 `stream_priority=3` is reserved and has no effect [*]",
    ]
    full = run(["bad.py", "--no-cache"], tmp_path, monkeypatch).stdout
    assert "must be non-empty strings\n" in full and "has no effect [*]\n" in full
    assert full.endswith("[*] 1 fixable with the `--fix` option (1 hidden fix can be enabled with the "
                         "`--unsafe-fixes` option).\n")
    stats = run(["bad.py", "--statistics", "--output-format", "concise"], tmp_path, monkeypatch).stdout
    assert "    1  SL104  [*] reserved-stream-priority" in stats and "    1  SL105      invalid-stream-tag" in stats
    unsafe = run(["bad.py", "--unsafe-fixes", "--no-cache"], tmp_path, monkeypatch).stdout
    assert "must be non-empty strings [*]\n" in unsafe
    assert unsafe.endswith("[*] 2 fixable with the `--fix` option.\n")
    only_unsafe = run(["bad.py", "--select", "SL105"], tmp_path, monkeypatch).stdout
    assert only_unsafe.endswith("No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` "
                                "option).\n")
    write(tmp_path, "streamlint.toml", "unfixable = ['SL104']\n")
    unfixable = run(["bad.py", "--output-format", "concise"], tmp_path, monkeypatch).stdout
    assert "[*]" not in unfixable
    (tmp_path / "streamlint.toml").unlink()
    diff = run(["bad.py", "--diff"], tmp_path, monkeypatch)
    assert diff.exit_code == 1 and "-with torchair.scope.npu_stream_switch(1, 3):" in diff.stdout
    assert diff.stderr.strip() == ("Would fix 1 finding (1 hidden fix can be enabled with the `--unsafe-fixes` "
                                   "option).")
    diff = run(["bad.py", "--diff", "--unsafe-fixes"], tmp_path, monkeypatch)
    assert diff.stderr.strip() == "Would fix 2 findings."


# ---------------------------------------------------------------- 9. CLI polish
def test_every_option_has_help_text() -> None:
    import click

    commands = {"main": main, **main.commands}
    missing = [f"{name} {param.opts[0]}" for name, command in commands.items() for param in command.params
               if isinstance(param, click.Option) and not (param.help or "").strip()]
    assert missing == []
    help_text = CliRunner().invoke(main, ["check", "--help"]).stdout
    for option in ("--output-format", "--output-file", "--config", "--mode", "--quiet", "--verbose", "--color",
                   "--fix-only", "--exclude", "--extend-exclude"):
        assert option in help_text


def test_quiet_and_verbose_change_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path, "bad.py", BAD)
    write(tmp_path, "plain.py", "x = 1\n")
    normal = run(["."], tmp_path, monkeypatch)
    quiet = run([".", "-q"], tmp_path, monkeypatch)
    verbose = run([".", "-v", "--no-cache"], tmp_path, monkeypatch)
    assert "Found 2 findings" in normal.stdout and "fixable" in normal.stdout
    assert "bad.py:2:39: SL105" in quiet.stdout and "Found" not in quiet.stdout and "fixable" not in quiet.stdout
    assert quiet.stderr == ""
    assert verbose.stdout == normal.stdout
    assert "streamlint: 2 files governed by the defaults" in verbose.stderr
    assert "streamlint: checked 2 files in " in verbose.stderr and "1 analysed" in verbose.stderr
    assert "1 without a marker" in verbose.stderr
    assert "streamlint: checked 2 files in " in normal.stderr  # the one-line summary, unless -q


def test_color_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path, "bad.py", BAD)
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" in run(["bad.py", "--color", "always"], tmp_path, monkeypatch).stdout
    assert "\x1b[" not in run(["bad.py", "--color", "never"], tmp_path, monkeypatch).stdout
    assert "\x1b[" not in run(["bad.py"], tmp_path, monkeypatch).stdout  # auto: not a terminal


def test_did_you_mean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path, "bad.py", BAD)
    result = run(["bad.py", "--select", "SL2O1"], tmp_path, monkeypatch)
    assert result.exit_code == 2 and "unknown rule code or name 'SL2O1'; did you mean 'SL201'?" in result.stderr
    result = run(["rule", "missing-wait-at-jion"], tmp_path, monkeypatch)
    assert result.exit_code == 2 and "did you mean 'missing-wait-at-join'?" in result.stderr
    write(tmp_path, "streamlint.toml", "extend-selct = ['SL1']\n")
    result = run(["bad.py"], tmp_path, monkeypatch)
    assert result.exit_code == 2 and "extend-selct: unknown key; did you mean 'extend-select'?" in result.stderr
    write(tmp_path, "streamlint.toml", "[rules.SL201]\nge-explicit-join-wait = true\n")
    result = run(["bad.py"], tmp_path, monkeypatch)
    assert result.exit_code == 2 and "did you mean 'ge-explicit-join-waits'?" in result.stderr


def test_rule_documentation_prints_each_section_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlint.registry import load_registry

    for code in load_registry().rules:
        out = run(["rule", code], tmp_path, monkeypatch).stdout
        headings = [line for line in out.splitlines() if line.startswith("## ")]
        assert len(headings) == len(set(headings)), (code, headings)


def test_fix_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    bad = write(tmp_path, "bad.py", BAD)
    result = run(["bad.py", "--fix-only"], tmp_path, monkeypatch)
    assert (result.exit_code, result.stdout) == (0, "")  # SL105 (unsafe) remains, not reported
    assert result.stderr.strip() == "Fixed 1 finding."
    assert "npu_stream_switch(1)" in bad.read_text()
    assert run(["bad.py", "--fix-only"], tmp_path, monkeypatch).stderr == ""
    write(tmp_path, "bad.py", BAD)
    assert run(["bad.py", "--fix-only", "--exit-non-zero-on-fix"], tmp_path, monkeypatch).exit_code == 1


def test_gitlab_code_quality(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = repo / "services" / "model"
    outputs = [run([target, "--output-format", "gitlab", "--no-cache"], cwd, monkeypatch)
               for cwd, target in ((repo, "services/model"), (model / "moe_demo", ".."))]
    assert outputs[0].stdout == outputs[1].stdout and outputs[0].exit_code == 1
    issues = json.loads(outputs[0].stdout)
    schema = {  # GitLab's Code Quality report: the fields GitLab reads
        "type": "array", "items": {"type": "object", "required": ["description", "check_name", "fingerprint",
                                                                 "severity", "location"],
                                   "properties": {
                                       "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
                                       "location": {"type": "object", "required": ["path", "lines"],
                                                    "properties": {"lines": {"type": "object",
                                                                             "required": ["begin"]}}}}}}
    jsonschema.validate(issues, schema)
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    assert all((repo / i["location"]["path"]).is_file() for i in issues)
    assert issues[0]["location"] == {"path": "services/model/launcher.py", "lines": {"begin": 15, "end": 15}}
    assert issues[0]["check_name"] == "SL401 (single-stream-conflict)" and issues[0]["severity"] == "major"


# ---------------------------------------------------------------- 7. long runs
def test_exclude_and_extend_exclude_on_the_command_line(nested: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = run(["--show-files", "--extend-exclude", "pkg,vendor"], nested, monkeypatch).stdout.split()
    assert files == ["main.py"]
    write(nested, "build/gen.py", BAD)
    assert "build/gen.py" not in run(["--show-files"], nested, monkeypatch).stdout
    files = run(["--show-files", "--exclude", "vendor"], nested, monkeypatch).stdout.split()
    assert files == ["build/gen.py", "main.py", "pkg/mod.py"]  # replaces the defaults (build)


def test_slow_files_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlint import parallel

    monkeypatch.setattr(parallel, "SLOW_FILE_SECONDS", 0.0)
    (tmp_path / ".git").mkdir()
    write(tmp_path, "bad.py", BAD)
    result = run(["bad.py", "--no-cache"], tmp_path, monkeypatch)
    assert "streamlint: note: bad.py took " in result.stderr and " s to analyse" in result.stderr
    assert "note" not in run(["bad.py", "--no-cache", "-q"], tmp_path, monkeypatch).stderr


def test_project_index_reports_progress(tmp_path: Path) -> None:
    """The scan for compile sites (most of a first run on a large tree) reports its progress."""
    from harness import engine_for

    (tmp_path / ".git").mkdir()
    for i in range(5):
        write(tmp_path, f"m{i}.py", "import torch\nmodel = torch.compile(object())\n")
    engine = engine_for(tmp_path, [str(p) for p in sorted(tmp_path.glob("*.py"))])
    seen: list[tuple[int, int]] = []
    engine.project.index_progress = lambda done, total: seen.append((done, total))
    engine.project.compile_sites()
    assert seen == [(i, 5) for i in range(1, 6)]


def test_nested_config_errors_and_fix_policy(nested: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(nested, "vendor/streamlint.toml", "select = ['ALL']\nunfixable = ['SL104']\n")
    result = run([".", "--fix", "--no-cache"], nested, monkeypatch)
    assert "npu_stream_switch(1)" in (nested / "main.py").read_text()  # the root config: SL104 fixed
    assert "npu_stream_switch(1, 3)" in (nested / "vendor" / "lib.py").read_text()  # vendor: unfixable
    assert result.exit_code == 1
    write(nested, "vendor/streamlint.toml", "selct = ['ALL']\n")
    result = run([".", "--no-cache"], nested, monkeypatch)
    assert result.exit_code == 2
    assert f"{nested / 'vendor' / 'streamlint.toml'}: selct: unknown key; did you mean 'select'?" in result.stderr
