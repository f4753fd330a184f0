"""Configuration: file lookup, extend, validation (file and key named), per-file ignores, rule options."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import REGISTRY
from streamlint.cli import main
from streamlint.config import ConfigError, Settings, find_config, load_settings
from streamlint.engine import Engine
from streamlint.finding import Severity
from streamlint.registry import Registry
from streamlint.rule import Option, Rule

BAD = "import torchair\nwith torchair.scope.npu_stream_switch(1, 3):\n    pass\n"


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def settings_for(path: Path, **kw) -> Settings:
    return load_settings(REGISTRY, path, **kw)


def error_for(root: Path, config: str, name: str = "streamlint.toml", registry: Registry = REGISTRY) -> ConfigError:
    write(root, name, config)
    with pytest.raises(ConfigError) as info:
        load_settings(registry, root / "a.py")
    return info.value


# ---------------------------------------------------------------- lookup
def test_defaults_without_config(root: Path) -> None:
    s = settings_for(root / "a.py")
    assert s.config_path is None
    assert s.project_root == str(root)
    assert s.select == ("SL0", "SL1", "SL2", "SL3", "SL4", "SL5")
    assert set(s.enabled_codes(REGISTRY)) == set(REGISTRY.rules)


@pytest.mark.parametrize("name, text", [
    ("pyproject.toml", "[tool.streamlint]\nignore = ['SL104']\n"),
    ("streamlint.toml", "ignore = ['SL104']\n"),
    (".streamlint.toml", "ignore = ['SL104']\n"),
])
def test_each_config_file_kind(root: Path, name: str, text: str) -> None:
    write(root, name, text)
    s = settings_for(root / "pkg" / "a.py")
    assert s.config_path == str(root / name)
    assert s.ignore == ("SL104",)
    assert s.project_root == str(root)


def test_pyproject_without_tool_table_is_skipped(root: Path) -> None:
    write(root, "streamlint.toml", "ignore = ['SL105']\n")
    write(root, "sub/pyproject.toml", "[project]\nname = 'x'\n")
    assert settings_for(root / "sub" / "a.py").config_path == str(root / "streamlint.toml")


def test_same_directory_precedence(root: Path) -> None:
    write(root, "pyproject.toml", "[tool.streamlint]\nignore = ['SL104']\n")
    write(root, ".streamlint.toml", "ignore = ['SL105']\n")
    assert settings_for(root / "a.py").ignore == ("SL105",)
    write(root, "streamlint.toml", "ignore = ['SL001']\n")
    assert settings_for(root / "a.py").ignore == ("SL001",)


def test_nearest_config_wins(root: Path) -> None:
    write(root, "pyproject.toml", "[tool.streamlint]\nignore = ['SL104']\n")
    write(root, "sub/streamlint.toml", "ignore = ['SL105']\n")
    assert settings_for(root / "sub" / "deep" / "x.py").ignore == ("SL105",)
    assert settings_for(root / "other" / "x.py").ignore == ("SL104",)
    assert find_config(root / "sub") == root / "sub" / "streamlint.toml"
    # the nearest file does not merge with the outer one unless it says `extend`
    assert settings_for(root / "sub" / "x.py").project_root == str(root / "sub")


def test_nearest_config_through_the_cli(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(root, "streamlint.toml", "ignore = ['SL104']\n")
    write(root, "sub/streamlint.toml", "ignore = ['SL105']\n")
    write(root, "sub/a.py", BAD)
    monkeypatch.chdir(root)
    out = CliRunner().invoke(main, ["sub/a.py", "--output-format", "concise"]).stdout
    assert [line.split()[1] for line in out.splitlines()] == ["SL104"]


# ---------------------------------------------------------------- extend
def test_extend_inherits_and_overrides(root: Path) -> None:
    write(root, "pyproject.toml", """
        [tool.streamlint]
        ignore = ['SL104']
        extend-exclude = ['generated']
        mode = 'ge'
    """)
    write(root, "sub/streamlint.toml", "extend = '../pyproject.toml'\nmode = 'eager'\n")
    s = settings_for(root / "sub" / "a.py")
    assert s.ignore == ("SL104",) and s.extend_exclude == ("generated",)
    assert s.mode == "eager"  # the extending file wins
    assert s.config_path == str(root / "sub" / "streamlint.toml")


def test_extend_chain(root: Path) -> None:
    write(root, "base.toml", "ignore = ['SL104']\n")
    write(root, "mid.toml", "extend = 'base.toml'\nmode = 'cuda'\n")
    write(root, "streamlint.toml", "extend = 'mid.toml'\n")
    s = settings_for(root / "a.py")
    assert (s.ignore, s.mode) == (("SL104",), "cuda")


def test_circular_extend(root: Path) -> None:
    write(root, "other.toml", "extend = 'streamlint.toml'\n")
    err = error_for(root, "extend = 'other.toml'\n")
    assert err.key == "extend" and "circular extend" in str(err)
    assert err.source.endswith(".toml")


def test_self_extend_and_missing_extend(root: Path) -> None:
    assert "circular" in str(error_for(root, "extend = 'streamlint.toml'\n"))
    err = error_for(root, "extend = 'missing.toml'\n")
    assert str(err).startswith(f"{root / 'streamlint.toml'}: extend: no such file")
    assert "expected a path string" in str(error_for(root, "extend = ['a.toml']\n"))


def test_error_in_extended_file_names_that_file(root: Path) -> None:
    write(root, "base.toml", "colour = true\n")
    err = error_for(root, "extend = 'base.toml'\n")
    assert str(err).startswith(f"{root / 'base.toml'}: colour: unknown key")


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize("config, key, message", [
    ("selct = ['SL1']\n", "selct", "unknown key"),
    ("[tool]\nx = 1\n", "tool", "unknown key"),
    ("select = 'SL1'\n", "select", "expected a list of strings"),
    ("ignore = [104]\n", "ignore", "expected a list of strings"),
    ("exclude = 'build'\n", "exclude", "expected a list of strings"),
    ("respect-gitignore = 'yes'\n", "respect-gitignore", "expected true or false"),
    ("unsafe-fixes = 1\n", "unsafe-fixes", "expected true or false"),
    ("mode = 3\n", "mode", "expected a string"),
    ("mode = 'graph'\n", "mode", "expected one of auto, ge, reduce-overhead, npugraph_ex, eager, cuda, got 'graph'"),
    ("output-format = 'xml'\n", "output-format", "expected one of"),
    ("per-file-ignores = ['tests/*']\n", "per-file-ignores", "expected a table"),
    ("[per-file-ignores]\n'tests/*' = 'SL104'\n", "per-file-ignores.tests/*", "expected a list of codes"),
    ("[per-path-mode]\n'aclgraph/**' = 'gpu'\n", "per-path-mode.aclgraph/**", "expected one of"),
    ("[per-path-mode]\n'aclgraph/**' = ['ge']\n", "per-path-mode.aclgraph/**", "expected one of"),
    ("rules = 3\n", "rules", "expected a table"),
    ("[rules]\nSL104 = 1\n", "rules.SL104", "expected a table of options"),
    ("[rules.SL1]\nx = 1\n", "rules.SL1", "one rule"),
    ("[rules.SL999]\nx = 1\n", "rules.SL999", "unknown rule code or name"),
    ("[rules.SL104]\nfoo = 1\n", "rules.SL104.foo", "unknown option (known: none)"),
])
def test_bad_values_name_file_and_key(root: Path, config: str, key: str, message: str) -> None:
    err = error_for(root, config)
    assert err.source == str(root / "streamlint.toml")
    assert err.key == key
    assert str(err).startswith(f"{root / 'streamlint.toml'}: {key}: ")
    assert message in str(err)


def test_pyproject_errors_name_the_pyproject(root: Path) -> None:
    err = error_for(root, "[tool.streamlint]\nignroe = []\n", name="pyproject.toml")
    assert str(err).startswith(f"{root / 'pyproject.toml'}: ignroe: unknown key")


def test_invalid_toml(root: Path) -> None:
    err = error_for(root, "select = [\n")
    assert err.key is None and "invalid TOML" in str(err) and str(root / "streamlint.toml") in str(err)


@pytest.mark.parametrize("key", ["select", "extend-select", "ignore", "fixable", "unfixable"])
def test_unknown_codes_in_selectors(root: Path, key: str) -> None:
    err = error_for(root, f"{key} = ['SL104', 'SL9999']\n")
    assert (err.key, str(err).split(": ")[-1]) == (key, "unknown rule code or name 'SL9999'")


def test_unknown_code_in_per_file_ignores(root: Path) -> None:
    err = error_for(root, "[per-file-ignores]\n'tests/*' = ['SL104', 'E501']\n")
    assert err.key == "per-file-ignores.tests/*" and "'E501'" in str(err)


def test_selectors_by_code_prefix_name_all(root: Path) -> None:
    write(root, "streamlint.toml", "select = ['SL0', 'reserved-stream-priority']\nignore = ['SL002']\n")
    enabled = settings_for(root / "a.py").enabled_codes(REGISTRY)
    assert set(enabled) == {"SL000", "SL001", "SL003", "SL104"}
    write(root, "streamlint.toml", "select = ['ALL']\nignore = ['invalid-stream-tag']\n")
    assert "SL105" not in settings_for(root / "a.py").enabled_codes(REGISTRY)


def test_bad_config_exit_2_through_cli(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(root, "pyproject.toml", "[tool.streamlint]\nmode = 'fast'\n")
    write(root, "a.py", BAD)
    monkeypatch.chdir(root)
    result = CliRunner().invoke(main, ["a.py"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"streamlint: error: {root / 'pyproject.toml'}: mode: expected one of auto, ge, reduce-overhead, "
        "npugraph_ex, eager, cuda, got 'fast'")


def test_paths_resolved_relative_to_their_file(root: Path) -> None:
    write(root, "cfg/streamlint.toml", "baseline = 'baseline.json'\ncache-dir = '.cache'\n")
    s = settings_for(root / "cfg" / "a.py")
    assert s.baseline == str(root / "cfg" / "baseline.json")
    assert s.cache_dir == str(root / "cfg" / ".cache")


def test_valid_modes_and_per_path_mode(root: Path) -> None:
    for mode in ("auto", "ge", "reduce-overhead", "npugraph_ex", "eager", "cuda"):
        write(root, "streamlint.toml", f"mode = '{mode}'\n[per-path-mode]\n'acl/**' = '{mode}'\n")
        s = settings_for(root / "a.py")
        assert (s.mode, s.per_path_mode) == (mode, (("acl/**", mode),))


def test_overrides_and_isolated(root: Path) -> None:
    write(root, "streamlint.toml", "ignore = ['SL104']\n")
    s = settings_for(root / "a.py", overrides={"ignore": ["SL105"]})
    assert s.ignore == ("SL105",) and s.provenance["ignore"] == "command line"
    assert settings_for(root / "a.py", isolated=True).ignore == ()
    with pytest.raises(ConfigError, match="command line: select: unknown rule code or name 'SL77'"):
        settings_for(root / "a.py", overrides={"select": ["SL77"]})


def test_per_file_ignores_globs(root: Path) -> None:
    write(root, "streamlint.toml", """
        [per-file-ignores]
        "tests/**" = ["SL104"]
        "*_gen.py" = ["SL1"]
        "pkg/special.py" = ["invalid-stream-tag"]
    """)
    files = {rel: write(root, rel, BAD) for rel in
             ("a.py", "tests/unit/t.py", "pkg/model_gen.py", "pkg/special.py", "pkg/other.py")}
    s = settings_for(root / "a.py")
    engine = Engine(s, REGISTRY)
    found = {rel: sorted(f.code for f in engine.lint_file(str(p)).findings) for rel, p in files.items()}
    assert found == {
        "a.py": ["SL104", "SL105"],
        "tests/unit/t.py": ["SL105"],
        "pkg/model_gen.py": [],
        "pkg/special.py": ["SL104"],
        "pkg/other.py": ["SL104", "SL105"],
    }


# ---------------------------------------------------------------- per-rule options
class _Tunable(Rule):
    """## What it does
    Test rule with options."""

    code = "XO001"
    name = "tunable"
    severity = Severity.WARNING
    options = (
        Option("limit", int, 3, "a number"),
        Option("strict", bool, False, "a flag"),
        Option("names", list, [], "some names"),
        Option("label", str, "x", "a string"),
    )

    def check(self, ctx) -> None:  # pragma: no cover - options only
        pass


OPTION_REGISTRY = Registry({**REGISTRY.rules, "XO001": _Tunable})


def test_rule_options_validated_and_stored(root: Path) -> None:
    write(root, "streamlint.toml", """
        [rules.XO001]
        limit = 5
        strict = true
        names = ["a", "b"]
        [rules.tunable]
        label = "y"
    """)
    s = load_settings(OPTION_REGISTRY, root / "a.py")
    assert s.rule_options == {"XO001": {"limit": 5, "strict": True, "names": ["a", "b"], "label": "y"}}


@pytest.mark.parametrize("line, key, message", [
    ("limitt = 1", "rules.XO001.limitt", "unknown option; did you mean 'limit'? (known: limit, strict, names, label)"),
    ("limit = '5'", "rules.XO001.limit", "expected int, got str '5'"),
    ("limit = true", "rules.XO001.limit", "expected int, got bool True"),
    ("strict = 1", "rules.XO001.strict", "expected bool, got int 1"),
    ("names = 'a'", "rules.XO001.names", "expected list"),
    ("names = [1]", "rules.XO001.names", "expected list"),
    ("label = 2", "rules.XO001.label", "expected str"),
])
def test_rule_option_errors(root: Path, line: str, key: str, message: str) -> None:
    err = error_for(root, f"[rules.XO001]\n{line}\n", registry=OPTION_REGISTRY)
    assert err.key == key and message in str(err)


# ---------------------------------------------------------------- min-confidence
UNSURE = """
import torch

side = torch.cuda.Stream()


def shared_expert(x, w):
    with torch.cuda.stream(side):
        h = torch.matmul(x, w)  # noqa: SL201 (the caller joins)
    return h


def gate(x, w):
    y = torch.matmul(x, w)
    with torch.cuda.stream(side):
        z = y * 2
    return z


def scale_on(stream, x, w):  # the stream is the unseen caller's choice: the race and the lifetime are low
    y = torch.matmul(x, w)
    with torch.cuda.stream(stream):
        z = y * 2
    return z
"""


def _confidences(root: Path, *args: str) -> list[tuple[str, int, str]]:
    import json
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "json", *args, str(root / "moe.py")])
    assert result.exit_code in (0, 1), result.output
    return sorted((f["code"], f["start"]["line"], f["confidence"]) for f in json.loads(result.stdout))


def test_min_confidence_hides_less_sure_findings_only(root: Path) -> None:
    write(root, "moe.py", UNSURE)
    every = _confidences(root, "--min-confidence", "low")
    assert {c for _, _, c in every} == {"high", "medium", "low"}, every  # the program has every kind
    assert _confidences(root) == [f for f in every if f[2] != "low"]  # the default hides only the unsure
    assert _confidences(root, "--min-confidence", "high") == [f for f in every if f[2] == "high"]
    # the configured threshold; the command line overrides it
    write(root, "streamlint.toml", "min-confidence = 'high'\n")
    assert _confidences(root) == [f for f in every if f[2] == "high"]
    assert _confidences(root, "--min-confidence", "low") == every


def test_min_confidence_default_says_what_it_hides(root: Path) -> None:
    write(root, "moe.py", UNSURE)
    said = CliRunner().invoke(main, ["check", "--no-cache", str(root / "moe.py")])
    assert "2 less sure findings hidden by min-confidence" in said.stderr, said.stderr
    quiet = CliRunner().invoke(main, ["check", "--no-cache", "-q", str(root / "moe.py")])
    shown = CliRunner().invoke(main, ["check", "--no-cache", "--min-confidence", "low", str(root / "moe.py")])
    assert "hidden by min-confidence" not in quiet.stderr + shown.stderr


def test_min_confidence_keeps_suppressions_used(root: Path) -> None:
    # the noqa on a medium finding still suppresses it: no SL002 when the threshold hides that finding
    write(root, "moe.py", UNSURE)
    codes = [c for c, _, _ in _confidences(root, "--min-confidence", "high")]
    assert "SL002" not in codes and codes


def test_min_confidence_is_validated(root: Path) -> None:
    assert settings_for(root / "a.py").min_confidence == "medium"
    err = error_for(root, "min-confidence = 'certain'\n")
    assert err.key == "min-confidence" and "expected one of high, medium, low" in str(err)


def test_min_confidence_baseline_is_the_same_at_any_threshold(root: Path) -> None:
    # one code on two lines of the same text (their fingerprints differ only by occurrence), one finding medium
    # (it assumes what the caller did), one high: a baseline written at one threshold holds at the other
    write(root, "moe.py", """
        import torch


        class SharedExpert:
            def __init__(self):
                self.side = torch.cuda.Stream()

            def scale_input(self, h: torch.Tensor):
                with torch.cuda.stream(self.side):
                    out = h * 2
                torch.cuda.current_stream().wait_stream(self.side)
                return out

            def scale_residual(self, x: torch.Tensor):
                h = x + 1
                with torch.cuda.stream(self.side):
                    out = h * 2
                torch.cuda.current_stream().wait_stream(self.side)
                return out
    """)
    every = _confidences(root)
    assert [c for _, _, c in every] == ["medium", "high"], every
    for written, read in (("high", "low"), ("low", "high"), ("medium", "low")):
        base = str(root / f"baseline-{written}.json")
        result = CliRunner().invoke(main, ["check", "--no-cache", "--min-confidence", written, "--write-baseline",
                                           base, str(root / "moe.py")])
        assert result.exit_code == 0, result.output
        assert _confidences(root, "--baseline", base, "--min-confidence", read) == [], (written, read)


def test_min_confidence_hidden_findings_are_not_fixed() -> None:
    from streamlint.finding import Confidence, Edit, Finding, Fix, FixSafety, Severity, Span
    from streamlint.fixes import FixPolicy

    span = Span(3, 4, 3, 9)
    fix = Fix("record it", FixSafety.SAFE, (Edit(span, "t.record_stream(s)"),))
    medium = Finding("SL301", "missing-record-stream", "m", Severity.ERROR, Confidence.MEDIUM, "a.py", span, fix=fix)
    high = Finding("SL301", "missing-record-stream", "m", Severity.ERROR, Confidence.HIGH, "a.py", span, fix=fix)
    assert FixPolicy(frozenset({"SL301"})).allows(medium)
    assert not FixPolicy(frozenset({"SL301"}), min_confidence="high").allows(medium)
    assert FixPolicy(frozenset({"SL301"}), min_confidence="high").allows(high)
