"""A race whose producer and use run under tests naming two different phases of one batch (prefill, decode) is
low (flow/phaseguards.py); one phase on both sides, a mixed batch, a test naming no phase or a negated one, or
two tests of the row sets a batch carries (no test of its mode) keep the batch-guard race medium
(flow/batchguards.py)."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, lint_project

PROJECT = FIXTURES / "projects" / "sl201_phase_guarded_summaries"
SUMMARIZER = PROJECT / "routecache" / "summarizer.py"


def _found() -> dict[int, object]:
    return {f.span.start_line: f for f in lint_project(PROJECT)
            if f.code == "SL201" and Path(f.path).name == "summarizer.py"}


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(SUMMARIZER.read_text().splitlines(), 1) if marker in text)


def test_prefill_producer_and_decode_reader_are_low() -> None:
    found = _found()
    for marker in ("low: `sharded_step` needs a prefill step",):
        finding = found[_line(marker)]
        assert finding.confidence.value == "low", marker
        assert "one phase of `step`" in (finding.hint or ""), marker


def test_same_phase_mixed_unnamed_or_negated_stay_medium() -> None:
    found = _found()
    for marker in ("medium: `prefill_sharding` is a flag, no test of the phase", "medium: a sharded prefill step races", "medium: a mixed step holds prefill rows",
                   "medium: the shard test names no phase", "medium: a negated test pins no phase",
                   "medium: a mixed step has both row sets"):
        finding = found[_line(marker)]
        assert finding.confidence.value == "medium", marker
        assert "different test of `step`" in (finding.hint or ""), marker


def test_tests_that_let_one_step_take_both_branches_stay_medium() -> None:
    """A test holding where a part is absent (``is None``), a disjunction with a part naming no phase, a feature
    flag, the rows a mixed step carries, or a predicate that may return True before it asks the phase: the race
    stays medium; two tests of the step's phase naming two phases make it low (review of prec36b)."""
    path = PROJECT / "routecache" / "lookahead.py"
    found = {f.span.start_line: f.confidence.value for f in lint_project(PROJECT)
             if f.code == "SL201" and Path(f.path).name == "lookahead.py"}
    lines = path.read_text().splitlines()
    expected = {i: ("low" if "-- low:" in text else "medium") for i, text in enumerate(lines, 1)
                if "# expect: SL201" in text}
    assert found == expected
