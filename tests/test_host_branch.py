"""Confidence of the races kept next to a branch taken only for host tensors (hostguards.host_branch):
fixtures/rules/sl201_host_branch_arguments.py says where the findings are; this says they keep the confidence
they had before the branch was read (the host branch silences only its own uses)."""

from pathlib import Path

from harness import lint_text

from streamlint.finding import Confidence

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "rules" / "sl201_host_branch_arguments.py"


def _lines(marker: str) -> list[int]:
    return [i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1) if marker in text]


def test_races_beside_the_host_branch_keep_their_confidence(tmp_path):
    found = {f.span.start_line: f.confidence for f in lint_text(FIXTURE.read_text(), tmp=tmp_path)
             if f.code == "SL201"}
    assert not any(line in found for line in _lines("# ok: SL201"))
    moved = _lines("rebound to a copy the current stream makes")
    expected = [line for line in _lines("# expect: SL201") if line not in moved]
    assert len(expected) == 5 and len(moved) == 1 and len(_lines("# ok: SL201")) == 4
    assert all(found.get(line) is Confidence.MEDIUM for line in expected)
    assert found.get(moved[0]) is Confidence.HIGH  # the current stream's own copy, seen here
