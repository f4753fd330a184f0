"""Messages tell the user where the fix goes (issue 13, item 8): a short first line ending with the
execution path tag, the detail in the related-location and ``fix:`` lines, streams named as the code
names them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from harness import REGISTRY, cli, fixture_cases, lint_paths, lint_text

PATHS = r"(ge|reduce-overhead|npugraph_ex|eager|cuda|xpu)(/(ge|reduce-overhead|npugraph_ex|eager|cuda|xpu))*"
TAGGED = sorted(code for code, rule in REGISTRY.rules.items() if rule.mode_tagged)


@pytest.mark.parametrize("case", fixture_cases(), ids=lambda c: c[0])
def test_first_line_is_short_and_tagged(case) -> None:
    """Every finding of the fixture corpus: one line of at most 120 characters; rules whose fix depends
    on the execution path end it with the path tag."""
    _, root, files = case
    problems = []
    for f in lint_paths(root, [str(p) for p in files], [str(p) for p in files] if root.name == "rules" else None):
        if len(f.message) > 120 or "\n" in f.message:
            problems.append(f"{f.code} {len(f.message)}: {f.message}")
        if f.code in TAGGED and not re.search(rf" \[{PATHS}\]$", f.message):
            problems.append(f"{f.code} without a path tag at the end: {f.message}")
    assert not problems, problems


def test_tagged_rules_document_the_tag() -> None:
    assert {"SL201", "SL301", "SL502"} <= set(TAGGED)
    for code in TAGGED:
        result = cli(["rule", code])
        assert result.exit_code == 0
        text = result.output
        assert "## Execution path tag" in text, code
        for tag in ("[ge]", "[reduce-overhead]", "[npugraph_ex]", "[eager]", "[cuda]", "[xpu]"):
            assert tag in text, (code, tag)


NAMED_MAIN = """
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.npu.Stream()

    def forward(self, x: torch.Tensor):
        main_stream = torch.npu.current_stream()
        self.side.wait_stream(main_stream)
        with torch.npu.stream(self.side):
            y = x * 2
        return x + y
"""


def test_the_entry_stream_is_named_as_the_code_names_it(tmp_path: Path) -> None:
    [f] = [f for f in lint_text(NAMED_MAIN, tmp=tmp_path) if f.code == "SL201"]
    assert f.message == "`y` is produced on `self.side` and used on `main_stream` with no wait [eager]"
    assert "current stream" not in f.message
    assert f.hint == ("add `main_stream.wait_stream(self.side)` after line 13 and before line 14 "
                      "(or wait on an event recorded on `self.side` there)")
    result = cli(["check", "--isolated", "--no-cache", str(tmp_path / "example.py")])
    assert "  = fix: add `main_stream.wait_stream(self.side)` after line 13 and before line 14" in result.output


SCALAR_DEFAULTS = """
import torch


def norm_keys(k, k_weight, alt_stream, eps=1e-6, *, flip=False, scale=-1.0):
    with torch.cuda.stream(alt_stream):
        k = torch.nn.functional.rms_norm(k, k.shape[-1:], k_weight, eps) * scale
        if flip:
            k = -k
    return k
"""


def test_parameters_defaulting_to_a_scalar_literal_are_not_named_as_tensors(tmp_path: Path) -> None:
    [f] = [f for f in lint_text(SCALAR_DEFAULTS, tmp=tmp_path) if f.code == "SL201"]
    assert f.message == "arguments `k`, `k_weight` are used on `alt_stream` with no wait on the caller's stream [cuda]"


def test_a_self_attribute_holding_the_current_stream_names_it(tmp_path: Path) -> None:
    code = NAMED_MAIN.replace("        self.side = torch.npu.Stream()\n",
                              "        self.side = torch.npu.Stream()\n"
                              "        self.main_stream = torch.npu.current_stream()\n")
    code = code.replace("        main_stream = torch.npu.current_stream()\n", "").replace("(main_stream)",
                                                                                         "(self.main_stream)")
    [f] = [f for f in lint_text(code, tmp=tmp_path) if f.code == "SL201"]
    assert f.message == "`y` is produced on `self.side` and used on `self.main_stream` with no wait [eager]"
    assert f.hint.startswith("add `self.main_stream.wait_stream(self.side)` after line 13 and before line 14")
    result = cli(["check", "--isolated", "--no-cache", "--output-format", "json", str(tmp_path / "example.py")])
    [entry] = [e for e in json.loads(result.stdout) if e["code"] == "SL201"]
    assert entry["hint"] == f.hint and entry["message"] == f.message


FORK_JOIN = """
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.npu.Stream()

    def forward(self, x: torch.Tensor):
        main_stream = torch.npu.current_stream()
        k = x * 2
        self.side.wait_stream(main_stream)
        with torch.npu.stream(self.side):
            k2 = k + 1
            k3 = k2 * 2
        return x + k3
"""


def test_sl301_fix_names_the_stream_and_the_line_and_one_join_clears_both(tmp_path: Path) -> None:
    findings = {(f.code, f.span.start_line): f for f in lint_text(FORK_JOIN, tmp=tmp_path)}
    # one root cause: the SL301 the join clears is folded into the SL201; alone (SL201 ignored) it says the same
    assert ("SL301", 14) not in findings
    assert [r.span.start_line for r in findings[("SL201", 16)].related if r.message.startswith("SL301: `k`")] == [14]
    alone = {(f.code, f.span.start_line): f for f in lint_text(FORK_JOIN, tmp=tmp_path, ignore=("SL201",))}
    sl301 = alone[("SL301", 14)]
    assert sl301.message == "`k` dies at return before `main_stream` waits on its use here on `self.side` [eager]"
    assert sl301.fix is not None
    assert sl301.fix.title.startswith("Add `k.record_stream(self.side)` after line 14")
    assert "record_stream(...)" not in sl301.hint
    assert "`main_stream.wait_stream(self.side)` after line 14 and before the return" in sl301.hint
    # the join that SL201 asks for at line 16 is the same wait: both findings say so
    assert "also clears SL201 at line 16" in sl301.hint
    assert sl301.fix.title == ("Add `k.record_stream(self.side)` after line 14 (or `main_stream.wait_stream(self.side)` "
                               "before line 16, which also clears the SL201 there)")
    sl201 = findings[("SL201", 16)]
    assert "`main_stream.wait_stream(self.side)`" in sl201.hint
    assert "also clears SL301 for `k` (line 14)" in sl201.hint


def test_sl502_names_the_call_to_replace(tmp_path: Path) -> None:
    code = REGISTRY.rules["SL502"].INVALID[0].code
    [f] = [f for f in lint_text(code, tmp=tmp_path) if f.code == "SL502"]
    assert f.message.endswith("[reduce-overhead]") and len(f.message) <= 120
    assert f.hint.startswith("replace `tng.scope.npu_wait_tensor(x, logits)` at line 7 with a tagged event")
    assert "so that `x` is used only after `logits` is produced" in f.hint


def test_the_join_both_findings_name_clears_both(tmp_path: Path) -> None:
    """The claim is true: inserting the wait SL201 names (before line 16) removes the SL201 and the SL301."""
    lines = FORK_JOIN.lstrip("\n").splitlines(keepends=True)
    fixed = "".join(lines[:15] + ["        main_stream.wait_stream(self.side)\n"] + lines[15:])
    remaining = [(f.code, f.span.start_line) for f in lint_text(fixed, tmp=tmp_path) if f.code in ("SL201", "SL301")]
    assert remaining == []


FORK = """
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.npu.Stream()

    def forward(self, x: torch.Tensor):
        with torch.npu.stream(self.side):
            y = x * 2
        z = x + y
        return z
"""


def test_the_fork_wait_also_clears_the_sl301_of_a_side_tensor(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    findings = {(f.code, f.span.start_line): f for f in lint_text(FORK, tmp=tmp_path / "a")}
    fork, sl301 = findings[("SL201", 11)], findings[("SL301", 12)]
    assert fork.hint.startswith("add `self.side.wait_stream(torch.npu.current_stream())` before line 11")
    assert "made at every entry onto `self.side`, the same wait also clears SL301 for `y` (line 12)" in fork.hint
    assert sl301.fix is not None and sl301.fix.title == (
        "Add `y.record_stream(torch.npu.current_stream())` after line 12 (or "
        "`self.side.wait_stream(torch.npu.current_stream())` at every entry onto `self.side`, the wait SL201 asks "
        "for at line 11, which clears both)")
    # and it does: with the fork wait, only the join (a different wait) is left
    waited = FORK.replace("        with torch.npu.stream", "        self.side.wait_stream(torch.npu.current_stream())\n"
                                                         "        with torch.npu.stream")
    left = [(f.code, f.span.start_line) for f in lint_text(waited, tmp=tmp_path / "b") if f.code in ("SL201", "SL301")]
    assert left == [("SL201", 13)]
