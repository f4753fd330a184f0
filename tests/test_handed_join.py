"""A side stream ordered after, or joined onto, a stream the caller hands in through a closure's enclosing function
(flow/chosenstreams.handed_wait): the race rests on that stream being another than the caller's current one (low);
no ordering, one before the work, or a stream the method may pick itself keep medium."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, lint_paths
from streamlint.discovery import discover

ROOT = FIXTURES / "projects" / "sl201_handed_join"
PARKER = ROOT / "parking" / "parker.py"


def _findings() -> dict[int, object]:
    files = [str(f) for f in discover([str(ROOT)], ROOT).files]
    return {f.span.start_line: f for f in lint_paths(ROOT, files) if f.code == "SL201" and f.path.endswith("parker.py")}


def _lines(marker: str) -> list[int]:
    return [i for i, text in enumerate(Path(PARKER).read_text().splitlines(), 1) if marker in text]


def test_a_closure_ordered_after_its_parents_stream_parameter_is_low() -> None:
    found = _findings()
    low = _lines("# expect: SL201 -- low")
    assert len(low) == 2
    for line in low:
        assert found[line].confidence.value == "low", line
        assert "a stream the caller hands in" in (found[line].hint or ""), line
    medium = _lines("# expect: SL201 -- medium")
    assert len(medium) == 4
    for line in medium:
        assert found[line].confidence.value == "medium", line
