"""A race whose producer needs the batch in some members of its mode enum and whose use needs it in others, read
from the project's enum methods and from the statements that set the part the producer tests, is low
(flow/modesets.py); a producer whose part is also set for decode steps (a mixed-or-decode test), or set where the
step is built (no test read), keeps the batch-guard race medium (flow/batchguards.py)."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, engine_for, lint_project

PROJECT = FIXTURES / "projects" / "sl201_mode_enum_guards"
INDEXER = PROJECT / "kvserve" / "indexer.py"


def _found() -> dict[int, object]:
    return {f.span.start_line: f for f in lint_project(PROJECT)
            if f.code == "SL201" and Path(f.path).name == "indexer.py"}


def test_disjoint_modes_are_low_and_overlapping_ones_medium() -> None:
    found = _found()
    lines = INDEXER.read_text().splitlines()
    expected = {i: ("low" if "-- low:" in text else "medium") for i, text in enumerate(lines, 1)
                if "# expect: SL201" in text}
    assert {line: f.confidence.value for line, f in found.items()} == expected
    low = next(line for line, level in expected.items() if level == "low")
    assert "flow/modesets.py" in (found[low].hint or "")


def test_enum_members_and_presence_sets() -> None:
    from streamlint.model.flow.modesets import _enum_method, _method_body, _presence

    project = engine_for(PROJECT).project
    cls, fn = _enum_method(project, "is_ring_prefill")
    assert _method_body(project, cls, fn, 0) == {"PREFILL", "MIXED", "VERIFY"}
    cls, fn = _enum_method(project, "is_decode_or_idle")
    assert _method_body(project, cls, fn, 0) == {"DECODE", "IDLE"}
    assert _presence(project, "ring", 1) == {"mode:StepMode": frozenset({"PREFILL", "MIXED", "VERIFY"})}
    assert _presence(project, "draft_rows", 1) == {"mode:StepMode": frozenset({"DECODE", "MIXED"})}
    assert _presence(project, "pages", 1) == {}  # (a keyword of the step's construction: not read)
