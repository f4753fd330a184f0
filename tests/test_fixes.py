"""Fixes: rule examples, safety classes, verification, conflicts, idempotence, byte-level preservation."""

from __future__ import annotations

import codecs
import os
import tempfile
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import REGISTRY, engine_for
from streamlint.config import Settings
from streamlint.engine import Engine
from streamlint.finding import FixSafety
from streamlint.fixes import FixPolicy, add_noqa_text, fix_file, unified_diff, write_atomic
from streamlint.registry import Registry
from streamlint.rule import Invalid, Rule, RuleContext, Valid
from streamlint.source import SourceFile

ALL_UNSAFE = FixPolicy(frozenset(REGISTRY.rules), unsafe=True)
SAFE_ONLY = FixPolicy(frozenset(REGISTRY.rules), unsafe=False)


def _write(directory: Path, text: str, name: str = "m.py", data: bytes | None = None) -> Path:
    path = directory / name
    path.write_bytes(data if data is not None else text.encode("utf-8"))
    return path


def _fix(directory: Path, path: Path, policy: FixPolicy = ALL_UNSAFE, registry: Registry | None = None):
    if registry is not None:
        policy = FixPolicy(frozenset(registry.rules), unsafe=True)
    if registry is None:
        engine = engine_for(directory, [str(path)])
    else:
        engine = Engine(Settings(select=("ALL",), project_root=str(directory)), registry,
                        project_root=str(directory), project_scope=[str(path)])
    return fix_file(engine, str(path), policy)


# ---- every rule's examples with `fixed=`

FIXED_EXAMPLES = [
    pytest.param(rule, example, id=f"{code}-invalid-{i}")
    for code, rule in REGISTRY.rules.items()
    for i, example in enumerate(rule.INVALID)
    if example.fixed is not None
]


@pytest.mark.parametrize("rule,example", FIXED_EXAMPLES)
def test_example_fix(rule, example, tmp_path):
    source = textwrap.dedent(example.code).lstrip("\n")
    path = _write(tmp_path, source)
    only_rule = FixPolicy(frozenset({rule.code}), unsafe=True)
    result = _fix(tmp_path, path, only_rule)
    assert result.text == textwrap.dedent(example.fixed).lstrip("\n")
    assert not result.rejected
    assert rule.code not in {f.code for f in result.report.findings}
    # the safety class the rule declares is enforced: unsafe fixes need --unsafe-fixes
    safe_only = _fix(tmp_path, path, FixPolicy(frozenset({rule.code}), unsafe=False))
    assert safe_only.changed == (rule.fix_safety is FixSafety.SAFE)


def test_fixes_declare_their_rule_safety(tmp_path):
    path = _write(tmp_path, "import torchair\nwith torchair.scope.npu_stream_switch(1, 2):\n    pass\n")
    report = engine_for(tmp_path, [str(path)]).lint_file(str(path))
    by_code = {f.code: f for f in report.findings}
    assert by_code["SL104"].fix.safety is FixSafety.SAFE
    assert by_code["SL105"].fix.safety is FixSafety.UNSAFE


def test_fixable_and_unfixable_settings():
    settings = Settings(fixable=("SL1",), unfixable=("SL105",))
    policy = FixPolicy.from_settings(settings, REGISTRY)
    assert "SL104" in policy.codes and "SL105" not in policy.codes
    assert FixPolicy.from_settings(Settings(unsafe_fixes=True), REGISTRY).unsafe
    assert not FixPolicy.from_settings(Settings(unsafe_fixes=True), REGISTRY, unsafe=False).unsafe


def test_sl104_fix_not_offered_through_wrappers_or_before_positional_args(tmp_path):
    path = _write(tmp_path, textwrap.dedent("""
        import torchair

        def switch(tag, prio):
            return torchair.scope.npu_stream_switch(tag, prio)

        with switch("a", 3):
            pass
        with torchair.scope.npu_stream_switch("b",  # why
                                              3):
            pass
    """).lstrip())
    report = engine_for(tmp_path, [str(path)]).lint_file(str(path))
    sl104 = [f for f in report.findings if f.code == "SL104"]
    assert sl104 and all(f.fix is None for f in sl104)


def test_multiline_call_keeps_layout(tmp_path):
    src = textwrap.dedent("""
        import torchair
        with torchair.scope.npu_stream_switch(
            "moe",
            stream_priority=3,
        ):
            pass
    """).lstrip()
    result = _fix(tmp_path, _write(tmp_path, src))
    assert result.text == src.replace('"moe",\n    stream_priority=3,', '"moe",')


# ---- verification: broken or ineffective fixes are dropped and reported

class _PassRule(Rule):
    """## What it does
    Test rule: flags `pass` statements at module level.
    """

    code = "XX901"
    name = "test-pass"
    markers = (b"pass",)
    fix_safety = FixSafety.SAFE
    replacement = "..."
    VALID = [Valid("x = 1")]
    INVALID = [Invalid("pass")]

    def check(self, ctx: RuleContext) -> None:
        if "crash" in ctx.file.source.text:
            raise RuntimeError("boom")
        for stmt in ctx.file.module.body:
            if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Pass):
                ctx.report(stmt.body[0], "pass", fix=ctx.fix("replace", ctx.replace(stmt.body[0], self.replacement)))


def _registry(**attrs) -> Registry:
    rule = type("Rule", (_PassRule,), attrs)
    return Registry({**REGISTRY.rules, rule.code: rule})


@pytest.mark.parametrize("replacement,reason", [
    ("pass(", "would not parse"),
    ("pass", "still reports"),
    ("x = '中'", "cannot be encoded as iso-8859-1"),
    ("crash_pass = 1", "a rule crashed on the fixed file"),
])
def test_bad_fix_is_discarded_and_reported(tmp_path, replacement, reason):
    data = "# -*- coding: latin-1 -*-\ns = 'caf\xe9'\npass\n".encode("latin-1")
    path = _write(tmp_path, "", data=data)
    result = _fix(tmp_path, path, registry=_registry(replacement=replacement))
    assert not result.changed and not result.applied
    assert [r.finding.code for r in result.rejected] == ["XX901"]
    assert reason in result.rejected[0].reason
    assert path.read_bytes() == data


def test_conflicting_fixes_first_wins_then_fixpoint(tmp_path):
    # two rules fixing the same node: the first in sort order (by code) wins; the second's finding is
    # then gone (its node was replaced), so it is neither applied nor rejected
    second = type("Second", (_PassRule,), {"code": "XX902", "name": "test-pass-2", "replacement": "None"})
    first = type("First", (_PassRule,), {"replacement": "..."})
    registry = Registry({**REGISTRY.rules, "XX901": first, "XX902": second})
    path = _write(tmp_path, "pass\npass\n")
    result = _fix(tmp_path, path, registry=registry)
    assert result.text == "...\n...\n"
    assert sorted(f.code for f in result.applied) == ["XX901", "XX901"]
    assert not result.rejected


# ---- idempotence (property)

TAGS = ["1", '"a"', "0x2", '"side"', "7"]
PRIOS = ["", ", 0", ", 3", ", stream_priority=5", ", 2,", ", stream_priority=1  # 优先级\n"]
LINE_ENDINGS = ["\n", "\r\n"]


@st.composite
def programs(draw):
    lines = ["import torchair as tng", ""]
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["with", "comment", "blank", "nested"]))
        if kind == "comment":
            lines.append("# 中文注释: 多流")
        elif kind == "blank":
            lines.append("")
        else:
            tag, prio = draw(st.sampled_from(TAGS)), draw(st.sampled_from(PRIOS))
            lines.append(f"with tng.scope.npu_stream_switch({tag}{prio}):  # 流")
            if kind == "nested":
                tag2, prio2 = draw(st.sampled_from(TAGS)), draw(st.sampled_from(PRIOS))
                lines.append(f"    with tng.scope.npu_stream_switch({tag2}{prio2}):")
                lines.append("        x = 1")
            else:
                lines.append("    x = 1")
    newline = draw(st.sampled_from(LINE_ENDINGS))
    return ("\n".join(lines) + "\n").replace("\n", newline), draw(st.booleans())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_fix_is_idempotent(program):
    text, unsafe = program
    policy = FixPolicy(frozenset(REGISTRY.rules), unsafe=unsafe)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        path = _write(directory, text)
        first = _fix(directory, path, policy)
        assert not first.rejected, [r.reason for r in first.rejected]
        if first.changed:
            write_atomic(str(path), first.new_bytes())
        data = path.read_bytes()
        SourceFile.from_bytes(str(path), data)  # still decodes
        cst.parse_module(data.decode("utf-8"))  # still parses
        assert (b"\r\n" in data) == ("\r\n" in text)
        second = _fix(directory, path, policy)
        assert not second.changed and not second.applied
        remaining = {f.code for f in second.report.findings}
        assert "SL104" not in remaining
        if unsafe:
            assert not any(f.code == "SL105" and f.fix is not None for f in second.report.findings)


# ---- bytes: BOM, CRLF, encodings; atomic write; CLI flags (in-process through click's runner)

def _cli(cwd: Path, *args: str, input: bytes | None = None):
    from click.testing import CliRunner

    from streamlint.cli import main

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, ["check", "--isolated", *args], input=input)
    finally:
        os.chdir(old)


BODY = "import torchair\r\nwith torchair.scope.npu_stream_switch(\"é\", 3):\r\n    pass\r\n"


@pytest.mark.parametrize("encoding,bom", [("utf-8", True), ("latin-1", False)])
def test_cli_fix_keeps_bom_encoding_and_crlf(tmp_path, encoding, bom):
    text = BODY if encoding == "utf-8" else "# -*- coding: latin-1 -*-\r\n" + BODY
    data = (codecs.BOM_UTF8 if bom else b"") + text.encode(encoding)
    path = _write(tmp_path, "", data=data)
    os.chmod(path, 0o640)
    proc = _cli(tmp_path, "--fix", str(path))
    assert proc.exit_code == 0, proc.output
    expected = data.replace(b", 3)", b")")
    assert path.read_bytes() == expected
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o640)
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]  # no temporary file left behind


def test_cli_diff_writes_nothing_and_exit_statuses(tmp_path):
    path = _write(tmp_path, "import torchair\nwith torchair.scope.npu_stream_switch(1, 3):\n    pass\n")
    before = path.read_bytes()
    run = lambda *a: _cli(tmp_path, *a, str(path))
    diff = run("--diff")
    assert diff.exit_code == 1 and path.read_bytes() == before
    assert diff.stdout.startswith("--- a/m.py\n+++ b/m.py\n")
    assert "+with torchair.scope.npu_stream_switch(1):" in diff.stdout
    unsafe = run("--diff", "--unsafe-fixes")
    assert '+with torchair.scope.npu_stream_switch("1"):' in unsafe.stdout
    fixed = run("--fix", "--show-fixes", "--output-format", "concise")
    assert fixed.exit_code == 1  # SL105 remains (its fix is unsafe)
    assert "Fixed 1 finding" in fixed.stderr and "SL104" in fixed.stderr
    assert "SL105" in fixed.stdout and "SL104" not in fixed.stdout
    last = run("--fix", "--unsafe-fixes", "--exit-non-zero-on-fix")
    assert last.exit_code == 1 and path.read_text() == ('import torchair\nwith torchair.scope.npu_stream_switch("1"):'
                                                         "\n    pass\n")
    assert run("--fix", "--exit-non-zero-on-fix").exit_code == 0
    assert run("--diff").exit_code == 0


def test_cli_fix_stdin_prints_fixed_source(tmp_path):
    proc = _cli(tmp_path, "--fix", "--stdin-filename", "x.py", "-",
                input=b"import torchair\nwith torchair.scope.npu_stream_switch('a', 1):\n    pass\n")
    assert proc.stdout_bytes == b"import torchair\nwith torchair.scope.npu_stream_switch('a'):\n    pass\n"
    assert proc.exit_code == 0


def test_unified_diff_marks_missing_final_newline():
    assert unified_diff("a\n", "b", "f.py").endswith("+b\n\\ No newline at end of file\n")


# ---- --add-noqa

def test_add_noqa_text_merges_and_skips_strings(tmp_path):
    src = textwrap.dedent('''
        import torchair as tng
        with tng.scope.npu_stream_switch(1, 3):
            pass
        with tng.scope.npu_stream_switch(1):  # noqa: E501 reason
            pass
        with tng.scope.npu_stream_switch(1):  # 中文
            pass
    ''').lstrip().replace("\n", "\r\n")
    path = _write(tmp_path, src)
    report = engine_for(tmp_path, [str(path)]).lint_file(str(path))
    text, count, skipped = add_noqa_text(report.source, report.findings)
    assert count == 3 and not skipped
    lines = text.split("\r\n")
    assert lines[1] == "with tng.scope.npu_stream_switch(1, 3):  # noqa: SL104, SL105"
    assert lines[3] == "with tng.scope.npu_stream_switch(1):  # noqa: E501, SL105 reason"
    assert lines[5] == "with tng.scope.npu_stream_switch(1):  # 中文  # noqa: SL105"
    path.write_text(text, encoding="utf-8", newline="")
    after = engine_for(tmp_path, [str(path)]).lint_file(str(path))
    assert after.findings == []


def test_cli_add_noqa(tmp_path):
    path = _write(tmp_path, "import torchair\nwith torchair.scope.npu_stream_switch(1):\n    pass\n")
    proc = _cli(tmp_path, "--add-noqa", str(path))
    assert proc.exit_code == 0 and "Added 1 noqa directive" in proc.stderr
    assert "npu_stream_switch(1):  # noqa: SL105\n" in path.read_text()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_add_noqa_silences_everything_once(program):
    text, _ = program
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        path = _write(directory, text)
        report = engine_for(directory, [str(path)]).lint_file(str(path))
        new_text, count, skipped = add_noqa_text(report.source, report.findings)
        assert count == len({f.span.start_line for f in report.findings}) - len({f.span.start_line for f in skipped})
        path.write_bytes(new_text.encode("utf-8"))
        after = engine_for(directory, [str(path)]).lint_file(str(path))
        assert [f for f in after.findings if f not in skipped] == []
        again, count2, _ = add_noqa_text(after.source, after.findings)
        assert count2 == 0 and again == new_text
