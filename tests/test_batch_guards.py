"""A race resting on two different tests of one caller-given object is medium (flow/batchguards.py); a stream
parameter annotated `Any` that the function enters as a stream scope is a caller-chosen stream (model/tensors.py)."""
from __future__ import annotations

from harness import FIXTURES, lint_paths

GUARDS = FIXTURES / "rules" / "sl201_correlated_batch_guards.py"
OPAQUE = FIXTURES / "rules" / "sl201_opaque_stream_param.py"


def _found(path) -> dict[tuple[int, str], object]:
    return {(f.span.start_line, f.code): f for f in lint_paths(path.parent, [str(path)])}


def test_a_race_under_two_tests_of_one_batch_is_medium() -> None:
    found = _found(GUARDS)
    finding = found[(42, "SL201")]
    assert finding.confidence.value == "medium"
    assert "different test of `batch`" in (finding.hint or "")
    for line in (54, 76):  # the store under no test of the batch; a producer on both arms of the test
        assert found[(line, "SL201")].confidence.value == "high", line


def test_tests_of_another_object_or_of_its_presence_keep_the_race_high() -> None:
    found = _found(GUARDS)
    lines = GUARDS.read_text().splitlines()
    for marker in ("not this `batch`", "implies `meta is not None`"):
        line = next(i for i, text in enumerate(lines, 1) if marker in text)
        assert found[(line, "SL201")].confidence.value == "high", marker


def test_an_opaque_stream_parameter_is_the_callers_stream() -> None:
    found = _found(OPAQUE)
    lines = OPAQUE.read_text().splitlines()
    chosen, own = (next(i for i, text in enumerate(lines, 1) if marker in text)
                   for marker in ("the caller chose `copy_stream`", "its own new stream"))
    assert found[(chosen, "SL201")].confidence.value == "medium"
    assert "is a parameter" in (found[(chosen, "SL201")].hint or "")
    assert found[(own, "SL201")].confidence.value == "high"
