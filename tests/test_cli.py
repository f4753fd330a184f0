"""The command line: exit statuses, output formats, selection, configuration flags, stdin, `rule`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

import streamlint.cli as cli_module
from streamlint.cli import main
from harness import BAD, CLEAN, cli, write

SCHEMA_PATH = Path(cli_module.__file__).parent / "schemas" / "findings.schema.json"
ANSI = re.compile(r"\x1b\[")


run = cli


def concise(args: list[str], **kw) -> tuple[int, list[str]]:
    result = run([*args, "--output-format", "concise"], **kw)
    return result.exit_code, result.stdout.splitlines()


def codes(lines: list[str]) -> list[str]:
    return [line.split(": ")[1].split()[0] for line in lines]


def make_plugin(root: Path, monkeypatch: pytest.MonkeyPatch, body: str, prefix: str = "XT") -> str:
    """A rule module under development on sys.path, named by the user in $STREAMLINT_PLUGINS (unique name:
    no stale sys.modules entry between tests)."""
    name = f"slplug_{uuid.uuid4().hex[:8]}"
    plugins = root.parent / "plugins"  # outside the linted tree
    write(plugins, f"{name}.py", f"from streamlint.rule import Rule, Option\nPREFIX = {prefix!r}\n" + body)
    monkeypatch.syspath_prepend(str(plugins))
    monkeypatch.setenv("STREAMLINT_PLUGINS", ",".join(filter(None, (os.environ.get("STREAMLINT_PLUGINS"), name))))
    return name


CRASHING_RULE = '''
class Boom(Rule):
    """## What it does
    Always crashes."""
    code = "XT001"
    name = "always-crashes"
    def check(self, ctx):
        raise RuntimeError("kaboom")
'''


# ---------------------------------------------------------------- exit statuses
def test_exit_0_when_clean(project: Path) -> None:
    write(project, "ok.py", CLEAN)
    result = run(["ok.py"])
    assert result.exit_code == 0, result.output
    assert "All checks passed (1 file)." in result.stdout


def test_exit_1_with_findings(project: Path) -> None:
    write(project, "bad.py", BAD)
    code, lines = concise(["bad.py"])
    assert code == 1
    assert len(lines) == 2
    assert lines[0].startswith("bad.py:2:39: SL105 stream tag 1 is an int; tags must be non-empty strings")
    assert lines[1].startswith("bad.py:2:42: SL104 ")


def test_default_path_is_cwd(project: Path) -> None:
    write(project, "pkg/bad.py", BAD)
    code, lines = concise([])
    assert code == 1 and codes(lines) == ["SL105", "SL104"]


def test_exit_zero_forces_0_for_findings(project: Path) -> None:
    write(project, "bad.py", BAD)
    result = run(["bad.py", "--exit-zero"])
    assert result.exit_code == 0
    assert "SL105" in result.stdout


def test_exit_2_invalid_toml(project: Path) -> None:
    write(project, "streamlint.toml", "select = [\n")
    write(project, "bad.py", BAD)
    result = run(["bad.py"])
    assert result.exit_code == 2
    assert "streamlint.toml" in result.stderr and "invalid TOML" in result.stderr
    assert result.stdout == ""


def test_exit_2_unknown_code_in_config(project: Path) -> None:
    write(project, "pyproject.toml", "[tool.streamlint]\nignore = ['SL999']\n")
    write(project, "bad.py", BAD)
    result = run(["bad.py"])
    assert result.exit_code == 2
    assert "pyproject.toml: ignore: unknown rule code or name 'SL999'" in result.stderr


@pytest.mark.parametrize("flag", ["--select", "--extend-select", "--ignore"])
def test_exit_2_unknown_code_on_command_line(project: Path, flag: str) -> None:
    write(project, "bad.py", BAD)
    result = run(["bad.py", flag, "SL104,SL998"])
    assert result.exit_code == 2
    assert f"command line: {flag[2:]}: unknown rule code or name 'SL998'" in result.stderr


def test_exit_2_missing_path_but_others_linted(project: Path) -> None:
    write(project, "bad.py", BAD)
    result = run(["missing.py", "bad.py", "--output-format", "concise"])
    assert result.exit_code == 2
    assert "missing.py: no such file or directory" in result.stderr
    assert codes(result.stdout.splitlines()) == ["SL105", "SL104"]


def test_exit_2_missing_config_file(project: Path) -> None:
    write(project, "bad.py", BAD)
    result = run(["bad.py", "--config", "nope.toml"])
    assert result.exit_code == 2 and "nope.toml" in result.stderr


def test_exit_2_rule_crash_is_sl000_and_others_go_on(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = make_plugin(project, monkeypatch, CRASHING_RULE)
    write(project, "streamlint.toml", f"plugins = [{plugin!r}]\nextend-select = ['XT']\n")
    write(project, "bad.py", BAD)
    write(project, "ok.py", "x = 1\n")  # no marker of the built-in rules: a marker-less rule still runs
    code, lines = concise(["."])
    assert code == 2
    crashes = [re.sub(r"\.py:\d+\]$", ".py:N]", line) for line in lines if "SL000" in line]
    assert crashes == [
        f"bad.py:1:1: SL000 rule XT001 (always-crashes) crashed on this file: RuntimeError: kaboom [{plugin}.py:N]",
        f"ok.py:1:1: SL000 rule XT001 (always-crashes) crashed on this file: RuntimeError: kaboom [{plugin}.py:N]",
    ]
    assert {"SL104", "SL105"} <= set(codes(lines))  # the other rules still ran on the crashing file
    # --exit-zero does not hide a crash; a noqa does not either
    assert run([".", "--exit-zero"]).exit_code == 2
    write(project, "ok.py", "x = 1  # noqa: SL000\n")
    code, lines = concise(["ok.py", "--select", "XT"])  # SL000 is reported even when not selected
    assert code == 2 and codes(lines) == ["SL000"]


def test_plugin_rule_options_are_validated(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = make_plugin(project, monkeypatch, '''
class Opt(Rule):
    """## What it does
    Reports a configured message on line 1."""
    code = "XT002"
    name = "configured-message"
    options = (Option("message", str, "default", "what to say"), Option("count", int, 1, "how often"))
    def check(self, ctx):
        for _ in range(ctx.options["count"]):
            ctx.report(ctx.file.module.body[0], ctx.options["message"])
''')
    write(project, "a.py", "x = 1\n")
    write(project, "streamlint.toml", f"""
        plugins = [{plugin!r}]
        select = ["configured-message"]
        [rules.XT002]
        message = "hello"
        count = 2
    """)
    code, lines = concise(["a.py"])
    assert (code, lines) == (1, ["a.py:1:1: XT002 hello", "a.py:1:1: XT002 hello"])
    write(project, "streamlint.toml", f"plugins = [{plugin!r}]\n[rules.XT002]\ncount = 'many'\n")
    result = run(["a.py"])
    assert result.exit_code == 2 and "rules.XT002.count: expected int, got str 'many'" in result.stderr


# ---------------------------------------------------------------- output formats
def _json(project: Path, *extra: str) -> list[dict]:
    result = run(["bad.py", "--output-format", "json", *extra])
    assert result.exit_code == 1
    return json.loads(result.stdout)


def test_json_output_validates_against_schema(project: Path) -> None:
    write(project, "bad.py", BAD)
    data = _json(project)
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(data, schema)
    assert [(d["code"], d["filename"], d["start"], d["severity"]) for d in data] == [
        ("SL105", str(project / "bad.py"), {"line": 2, "column": 39}, "error"),
        ("SL104", str(project / "bad.py"), {"line": 2, "column": 42}, "info"),
    ]
    assert data[1]["name"] == "reserved-stream-priority"
    assert data[1]["url"] is None  # no documentation site; `streamlint rule SL104` is the documentation
    assert len({d["fingerprint"] for d in data}) == 2


def test_schema_rejects_malformed_findings(project: Path) -> None:
    write(project, "bad.py", BAD)
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    finding = _json(project)[0]
    for broken in ({**finding, "start": {"line": 0, "column": 1}}, {**finding, "severity": "fatal"},
                   {k: v for k, v in finding.items() if k != "fingerprint"}, {**finding, "extra": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate([broken], schema)


def test_json_lines_matches_json(project: Path) -> None:
    write(project, "bad.py", BAD)
    data = _json(project)
    result = run(["bad.py", "--output-format", "json-lines"])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert [json.loads(line) for line in lines] == data
    item_schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    for line in lines:
        jsonschema.validate([json.loads(line)], item_schema)


def test_json_empty_is_empty_array(project: Path) -> None:
    write(project, "ok.py", CLEAN)
    result = run(["ok.py", "--output-format", "json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    result = run(["ok.py", "--output-format", "json-lines"])
    assert result.exit_code == 0 and result.stdout == ""


def test_full_output(project: Path) -> None:
    write(project, "bad.py", BAD)
    result = run(["bad.py"])
    assert result.exit_code == 1
    out = result.stdout
    assert "bad.py:2:39: SL105 [error] stream tag 1 is an int" in out
    assert "    2 | with torchair.scope.npu_stream_switch(1, 3):" in out
    assert "      |                                       ^\n" in out  # underline under column 39
    assert "Found 2 findings (1 error, 1 info) in 1 file." in out
    assert not ANSI.search(out)


def test_output_format_from_config(project: Path) -> None:
    write(project, "bad.py", BAD)
    write(project, "streamlint.toml", 'output-format = "concise"\n')
    result = run(["bad.py"])
    assert result.stdout.startswith("bad.py:2:39: SL105 ")
    result = run(["bad.py", "--output-format", "json"])  # the flag wins
    assert json.loads(result.stdout)[0]["code"] == "SL105"


def test_output_file(project: Path) -> None:
    write(project, "bad.py", BAD)
    result = run(["bad.py", "-o", "out.json", "--output-format", "json"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert [d["code"] for d in json.loads((project / "out.json").read_text(encoding="utf-8"))] == ["SL105", "SL104"]
    result = run(["bad.py", "--output-file", "out.txt"])
    assert "Found 2 findings" in (project / "out.txt").read_text(encoding="utf-8")
    assert not ANSI.search((project / "out.txt").read_text(encoding="utf-8"))


def test_statistics(project: Path) -> None:
    write(project, "bad.py", BAD + BAD.replace("import torchair\n", ""))
    code, lines = concise(["bad.py", "--statistics"])
    assert code == 1
    stats = [line for line in lines if not line.startswith("bad.py:")]
    assert [line.split()[:2] for line in stats] == [["2", "SL104"], ["2", "SL105"]]
    assert stats[0].endswith("reserved-stream-priority")
    full = run(["bad.py", "--statistics"]).stdout
    assert re.search(r"^\s+2\s+SL105\s.*invalid-stream-tag$", full, re.M)


def test_no_ansi_with_no_color_even_on_a_tty(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(project, "bad.py", BAD)
    real = cli_module._stream

    class Tty:
        def __init__(self, stream):
            self._stream = stream

        def isatty(self) -> bool:
            return True

        def __getattr__(self, name):
            return getattr(self._stream, name)

    monkeypatch.setattr(cli_module, "_stream", lambda name: Tty(real(name)))
    assert ANSI.search(run(["bad.py"]).stdout)  # colour on a TTY ...
    assert not ANSI.search(run(["bad.py"], env={"NO_COLOR": "1"}).stdout)  # ... but never with NO_COLOR
    assert not ANSI.search(run(["bad.py", "--output-format", "concise"]).stdout)


def test_output_sorted_and_deterministic(project: Path) -> None:
    for rel in ("b.py", "a.py", "sub/c.py", "sub/a.py"):
        write(project, rel, BAD)
    code, first = concise(["sub", "b.py", "a.py"])
    assert code == 1
    paths = [line.split(":")[0] for line in first]
    assert paths == sorted(paths) == ["a.py"] * 2 + ["b.py"] * 2 + ["sub/a.py"] * 2 + ["sub/c.py"] * 2
    for _ in range(2):
        assert concise(["a.py", "sub", "b.py"])[1] == first
    # absolute and relative spellings mix: sorted by the path as displayed
    assert concise([str(project / "sub"), "b.py", str(project / "a.py")])[1] == first
    assert run(["."]).stdout == run(["."]).stdout


# ---------------------------------------------------------------- selection
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--select", "SL104"], ["SL104"]),
        (["--select", "reserved-stream-priority"], ["SL104"]),
        (["--select", "SL1"], ["SL105", "SL104"]),
        (["--select", "SL10"], ["SL105", "SL104"]),
        (["--select", "ALL"], ["SL105", "SL104"]),
        (["--ignore", "SL105"], ["SL104"]),
        (["--ignore", "invalid-stream-tag"], ["SL104"]),
        (["--ignore", "SL1"], []),
        (["--select", "SL0", "--extend-select", "SL105"], ["SL105"]),
        (["--select", "SL0", "--extend-select", "invalid-stream-tag,SL104"], ["SL105", "SL104"]),
        (["--select", "SL1", "--ignore", "SL104"], ["SL105"]),
    ],
)
def test_selection(project: Path, args: list[str], expected: list[str]) -> None:
    write(project, "bad.py", BAD)
    code, lines = concise(["bad.py", *args])
    assert codes(lines) == expected
    assert code == (1 if expected else 0)


def test_command_line_overrides_config(project: Path) -> None:
    write(project, "bad.py", BAD)
    write(project, "streamlint.toml", "ignore = ['SL104']\n")
    assert codes(concise(["bad.py"])[1]) == ["SL105"]
    assert codes(concise(["bad.py", "--ignore", "SL105"])[1]) == ["SL104"]


def test_config_flag_and_isolated(project: Path) -> None:
    write(project, "bad.py", BAD)
    write(project, "streamlint.toml", "ignore = ['SL104']\n")
    write(project, "elsewhere/strict.toml", "ignore = ['SL105']\n")
    assert codes(concise(["bad.py", "--config", "elsewhere/strict.toml"])[1]) == ["SL104"]
    assert codes(concise(["bad.py", "--isolated"])[1]) == ["SL105", "SL104"]
    write(project, "streamlint.toml", "broken = [\n")
    assert concise(["bad.py", "--isolated"])[0] == 1  # a broken config file is not even read


# ---------------------------------------------------------------- stdin
def test_stdin_dash(project: Path) -> None:
    result = run(["-", "--output-format", "concise"], input=BAD)
    assert result.exit_code == 1
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["-", "-"]
    assert run(["-"], input=CLEAN).exit_code == 0


def test_stdin_filename_uses_its_name_and_config(project: Path) -> None:
    write(project, "pkg/streamlint.toml", "[per-file-ignores]\n'tests/*' = ['SL104']\n")
    result = run(["--stdin-filename", "pkg/mod.py", "--output-format", "concise"], input=BAD)
    assert result.exit_code == 1
    # paths relative to the current directory, not to the configuration's folder
    assert [line.split(": ")[0] for line in result.stdout.splitlines()] == ["pkg/mod.py:2:39", "pkg/mod.py:2:42"]
    result = run(["-", "--stdin-filename", "pkg/tests/t.py", "--output-format", "concise"], input=BAD)
    assert codes(result.stdout.splitlines()) == ["SL105"]  # per-file-ignores apply to the stdin name
    assert not (project / "pkg/mod.py").exists()  # stdin is never written anywhere


def test_stdin_bytes_are_decoded_per_pep263(project: Path) -> None:
    data = ("# -*- coding: latin-1 -*-\n# caf\xe9\n" + BAD).encode("latin-1")
    result = run(["-", "--output-format", "concise"], input=data)
    assert codes(result.stdout.splitlines()) == ["SL105", "SL104"]


# ---------------------------------------------------------------- --show-settings / --show-files
def test_show_settings_explains_each_rule(project: Path) -> None:
    write(project, "streamlint.toml", "ignore = ['SL104']\n")
    result = run([".", "--show-settings", "--extend-select", "SL105"])
    assert result.exit_code == 0
    out = result.stdout
    config = str(project / "streamlint.toml")
    assert f"config file: {config}" in out
    rules = {line.split()[0]: line for line in out.splitlines() if line.startswith("  SL")}
    assert set(rules) >= {"SL000", "SL001", "SL002", "SL003", "SL104", "SL105"}
    assert re.search(rf"SL104 reserved-stream-priority\s+off \(ignore 'SL104' from {re.escape(config)}\)", out)
    assert re.search(r"SL105 invalid-stream-tag\s+on  \(extend-select 'SL105' from command line\)", out)
    assert re.search(r"SL001 syntax-error\s+on  \(select 'SL0' from default\)", out)
    out = run([".", "--show-settings", "--select", "SL105"]).stdout
    assert re.search(r"SL001 syntax-error\s+off \(not selected by select/extend-select from command line\)", out)


def test_show_files(project: Path) -> None:
    write(project, "a.py", BAD)
    write(project, "pkg/b.py", "")
    write(project, "pkg/c.pyi", "")
    write(project, "pkg/notes.txt", "")
    write(project, "build/gen.py", "")  # default exclude
    write(project, "ignored/d.py", "")
    write(project, ".gitignore", "ignored/\n")
    result = run(["--show-files"])
    assert result.exit_code == 0
    assert [os.path.normpath(p) for p in result.stdout.splitlines()] == ["a.py", "pkg/b.py", "pkg/c.pyi"]
    assert run(["--show-files", "nope"]).exit_code == 2


# ---------------------------------------------------------------- `rule`
@pytest.mark.parametrize("selector", ["SL104", "reserved-stream-priority"])
def test_rule_doc(selector: str) -> None:
    result = run(["rule", selector])
    assert result.exit_code == 0
    out = result.stdout
    assert out.startswith("# reserved-stream-priority (SL104)\n")
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert heading in out


def test_rule_unknown_or_missing() -> None:
    for args in (["rule", "SL999"], ["rule", "SL1"], ["rule"]):
        result = run(args)
        assert result.exit_code == 2 and "streamlint: error:" in result.stderr


def test_rule_all_text_and_json() -> None:
    lines = run(["rule", "--all"]).stdout.splitlines()
    listed = [line.split()[0] for line in lines]
    assert listed == sorted(listed)
    assert {"SL000", "SL001", "SL002", "SL003", "SL104", "SL105"} <= set(listed)
    assert re.match(r"SL104\s+reserved-stream-priority\s+info\s+Flags", lines[listed.index("SL104")])
    result = run(["rule", "--all", "--output-format", "json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert [d["code"] for d in data] == listed
    sl104 = next(d for d in data if d["code"] == "SL104")
    assert sl104["name"] == "reserved-stream-priority" and sl104["severity"] == "info"
    assert "## What it does" in sl104["documentation"]
    single = json.loads(run(["rule", "SL105", "--output-format", "json"]).stdout)
    assert single["code"] == "SL105"


def test_version_and_help() -> None:
    assert run(["--version"]).stdout.startswith("streamlint, version ")
    assert "--select" in run(["check", "--help"]).stdout


# ---------------------------------------------------------------- real processes
def test_module_and_console_script(tmp_path: Path) -> None:
    """`python -m streamlint` and the installed `streamlint` script behave the same."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "bad.py", BAD)
    script = Path(sys.executable).parent / "streamlint"
    env = {**os.environ, "NO_COLOR": "1"}
    outputs = []
    for cmd in ([sys.executable, "-m", "streamlint"], [str(script)]):
        proc = subprocess.run([*cmd, "bad.py", "--output-format", "concise"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1, proc.stderr
        err = "".join(line for line in proc.stderr.splitlines(keepends=True)  # a loaded machine may add a
                      if not (line.startswith("streamlint: note: ") and " to analyse" in line))  # "took N s" note
        assert err.startswith("streamlint: checked 1 file in ") and err.count("\n") == 1
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
    assert codes(outputs[0].splitlines()) == ["SL105", "SL104"]


# ---------------------------------------------------------------- no traceback reaches the user
def test_unwritable_output_file(project: Path) -> None:
    write(project, "bad.py", BAD)
    result = run(["bad.py", "-o", "no/such/dir/out.txt"])
    assert result.exit_code == 2
    assert "streamlint: error: cannot write no/such/dir/out.txt: No such file or directory" in result.stderr


def test_unexpected_internal_error_is_a_message(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(project, "bad.py", BAD)

    def explode(*args, **kwargs):
        raise ValueError("simulated bug")

    monkeypatch.setattr(cli_module, "discover", explode)
    result = run(["bad.py"])
    assert result.exit_code == 2
    assert result.stderr.startswith("streamlint: error: internal error: ValueError: simulated bug")
    assert "Traceback" in CliRunner().invoke(main, ["bad.py", "-v"]).stderr  # asked for


def test_model_crash_is_sl000(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlint.engine

    write(project, "bad.py", BAD)
    write(project, "ok.py", "x = 1\n")

    class Broken:
        def __init__(self, source, *args, **kwargs):
            if source.path.endswith("bad.py"):
                raise KeyError("simulated model bug")
            raise AssertionError("only bad.py has a marker")

    monkeypatch.setattr(streamlint.engine, "FileModel", Broken)
    code, lines = concise([".", "--no-cache", "-j", "1"])
    assert code == 2
    assert lines == ["bad.py:1:1: SL000 building the semantic model crashed on this file: KeyError: "
                     "'simulated model bug'"]


def test_full_underline_counts_terminal_cells(project: Path) -> None:
    from rich.cells import cell_len

    write(project, "cjk.py", 'import torchair\nx = "中文注释"; s = torchair.scope.npu_stream_switch(1)\n'
                             'if x:\n\tt = torchair.scope.npu_stream_switch(None)\n')
    out = run(["cjk.py", "--select", "SL105"]).stdout.splitlines()
    for line_no, token in ((2, "(1)"), (4, "(None)")):
        src = next(line for line in out if line.startswith(f"    {line_no} | "))
        caret = out[out.index(src) + 1]
        start = cell_len(src[:src.index(token) + 1])
        assert caret.index("^") == start
        assert caret.rstrip().endswith("^" * (len(token) - 2)) and len(caret.rstrip()) == start + len(token) - 2


def test_rule_documents_dev_plugins(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_plugin(project, monkeypatch, CRASHING_RULE)
    assert run(["rule", "always-crashes"]).stdout.startswith("# always-crashes (XT001)\n")
    assert "XT001" in run(["rule", "--all"]).stdout
    write(project, "streamlint.toml", "plugins = ['no_such_plugin_module_y']\n")  # a config imports nothing
    result = run(["rule", "SL104"])
    assert result.exit_code == 0 and result.stderr == ""


def test_plugin_module_next_to_the_config_is_not_imported(project: Path) -> None:
    name = f"slplug_{uuid.uuid4().hex[:8]}"  # in the project, not on sys.path
    write(project, f"tools/{name}.py", '''
        from streamlint.rule import Rule
        PREFIX = "XL"
        raise SystemExit("imported from the linted tree")
    ''')
    write(project, "tools/streamlint.toml", f"plugins = [{name!r}]\nselect = ['XL']\n")
    write(project, "tools/bad.py", BAD)
    result = run(["tools/bad.py"])
    assert result.exit_code == 2 and "'XL' needs the rule pack" not in result.stderr
    assert "unknown rule code or name 'XL'" in result.stderr
    write(project, "tools/streamlint.toml", f"plugins = [{name!r}]\n")
    code, lines = concise(["tools/bad.py"])
    assert code == 1 and name not in sys.modules and str(project / "tools") not in sys.path


def test_plugin_failing_at_import_is_exit_2(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = make_plugin(project, monkeypatch, "raise RuntimeError('broken plugin')\n")
    write(project, "bad.py", BAD)
    result = run(["bad.py"])
    assert result.exit_code == 2
    assert f"plugin module {plugin!r} failed to import: RuntimeError: broken plugin" in result.stderr
    monkeypatch.setenv("STREAMLINT_PLUGINS", "no_such_module_zz")
    result = run(["bad.py"])
    assert result.exit_code == 2 and "cannot import plugin module 'no_such_module_zz'" in result.stderr


def test_every_output_format_has_a_renderer() -> None:
    from streamlint.config import OUTPUT_FORMATS
    from streamlint.reporting import _RENDERERS

    assert set(_RENDERERS) == set(OUTPUT_FORMATS)
