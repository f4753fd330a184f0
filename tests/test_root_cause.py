"""One defect, one finding: a missing join whose wait also clears a lifetime finding (SL301) is reported once, at
the join (SL201), with the lifetime issue as a related location — unless the SL201 is not reported (suppressed,
not selected, ignored for the file), in which case the SL301 stands on its own."""

from __future__ import annotations

from pathlib import Path

from harness import lint_text
from streamlint.finding import Confidence, Finding, Location, Severity, Span, fold_root_causes

# A shared expert forked onto a side stream: `h` (current-stream memory) is read there, and the current stream
# never waits for the side stream before reading `shared` and returning (so `h` may be freed under the read).
SOURCE = """
import torch


class SharedExpertMoE(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.side = torch.cuda.Stream()
        self.shared = torch.nn.Linear(dim, dim)
        self.routed = torch.nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(x){noqa301}
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            shared = self.shared(h){noqa301b}
        routed = self.routed(h)
        return routed + shared{noqa201}
"""


def _lint(tmp_path: Path, noqa201: str = "", noqa301b: str = "", **settings) -> list[Finding]:
    code = SOURCE.format(noqa301="", noqa301b=noqa301b, noqa201=noqa201)
    return [f for f in lint_text(code, tmp=tmp_path, **settings) if f.code in ("SL201", "SL301")]


def test_lifetime_issue_folded_into_the_join(tmp_path: Path) -> None:
    findings = _lint(tmp_path)
    assert [(f.code, f.span.start_line) for f in findings] == [("SL201", 17)]
    folded = [r for r in findings[0].related if r.message.startswith("SL301:")]
    assert [r.span.start_line for r in folded] == [15]
    assert "`h`" in folded[0].message


def test_suppressed_join_leaves_the_lifetime_finding(tmp_path: Path) -> None:
    findings = _lint(tmp_path, noqa201="  # noqa: SL201")
    assert [(f.code, f.span.start_line) for f in findings] == [("SL301", 15)]


def test_suppressing_the_folded_finding_is_not_unused(tmp_path: Path) -> None:
    findings = lint_text(SOURCE.format(noqa301="", noqa301b="  # noqa: SL301", noqa201=""), tmp=tmp_path)
    assert [(f.code, f.span.start_line) for f in findings] == [("SL201", 17)]
    assert not any(r.message.startswith("SL301:") for r in findings[0].related)


def test_with_the_join_rule_ignored_the_lifetime_finding_is_reported(tmp_path: Path) -> None:
    findings = _lint(tmp_path, ignore=("SL201",))
    assert [(f.code, f.span.start_line) for f in findings] == [("SL301", 15)]


def _finding(code: str, line: int, confidence: Confidence, absorbs=()) -> Finding:
    return Finding(code, code.lower(), f"{code} here", Severity.ERROR, confidence, "m.py", Span(line, 0, line, 5),
                   absorbs=tuple(absorbs))


def test_a_less_sure_finding_does_not_hide_a_surer_one() -> None:
    low = _finding("SL201", 9, Confidence.LOW, [("SL301", Span(4, 0, 4, 5))])
    high = _finding("SL301", 4, Confidence.HIGH)
    assert [f.code for f in fold_root_causes([high, low])] == ["SL301", "SL201"]
    medium = _finding("SL201", 9, Confidence.MEDIUM, [("SL301", Span(4, 0, 4, 5))])
    sure = fold_root_causes([_finding("SL301", 4, Confidence.MEDIUM), medium])
    assert [f.code for f in sure] == ["SL201"]
    assert sure[0].related == (Location("m.py", Span(4, 0, 4, 5), "SL301: SL301 here (the same remedy clears it)"),)


def test_no_chains_and_no_self_fold() -> None:
    a = _finding("SL201", 9, Confidence.HIGH, [("SL301", Span(4, 0, 4, 5))])
    b = _finding("SL301", 4, Confidence.HIGH, [("SL201", Span(9, 0, 9, 5))])
    out = fold_root_causes([a, b])
    assert len(out) == 2  # each absorbs the other: neither is folded (a finding that absorbs stays reported)
    c = _finding("SL201", 9, Confidence.HIGH, [("SL201", Span(9, 0, 9, 5))])
    assert fold_root_causes([c]) == [c]
