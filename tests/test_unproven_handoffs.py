"""A hand-off through a field whose reader lost the class's only join is reported at LOW, with the assumption said
(flow/unproven.py); a class-attribute stream bound to a local in the producer is keyed by that attribute, so a
reader joining it is silent; the class's evidence (an event after the write) keeps MEDIUM; a reader joining an
event the producer records too early is the early record's one finding; a method of the class running the producer
and then the reader proves the order (MEDIUM)."""
from __future__ import annotations

from harness import FIXTURES, lint_paths

HANDOFFS = FIXTURES / "rules" / "sl201_attribute_handoffs.py"


def _found() -> dict[tuple[int, str], object]:
    return {(f.span.start_line, f.code): f for f in lint_paths(HANDOFFS.parent, [str(HANDOFFS)])}


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(HANDOFFS.read_text().splitlines(), 1) if marker in text)


def test_a_reader_with_no_join_anywhere_in_the_class_is_low() -> None:
    found = _found()
    for marker in ("out = out + self._dense_out", "acts.mul_(self.scale)"):
        finding = found[(_line(marker), "SL201")]
        assert finding.confidence.value == "low", marker
        assert "nothing in the class does" in (finding.hint or ""), marker


def test_the_class_evidence_keeps_medium_and_the_early_record_is_one_finding() -> None:
    found = _found()
    assert found[(_line("return self.slots[slot].clone()  # expect"), "SL201")].confidence.value == "medium"
    early = _line("self.gathered.record()  # expect")
    assert found[(early, "SL201")].confidence.value == "high"
    assert not [k for k in found if k[1] == "SL201" and early < k[0] <= early + 6]


def test_a_method_running_the_producer_then_the_reader_makes_it_medium() -> None:
    finding = _found()[(_line("return routed + self._dense_out"), "SL201")]
    assert finding.confidence.value == "medium"
    assert "`forward()` runs `dispatch()` before this method" in (finding.hint or "")
