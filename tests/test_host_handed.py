"""Confidence of SL201 when one access is a call of code not seen handed a field that certainly holds host memory
(flow/hostwrites.HostWrites.unseen_call_op, ``Race.host_handed``): fixtures/rules/host_pool_handed_to_library.py
says where the findings are; this says how sure they are."""

from pathlib import Path

from harness import lint_text

from streamlint.finding import Confidence

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
NAME = "host_pool_handed_to_library.py"


def _confidences(tmp_path) -> dict[int, Confidence]:
    code = (FIXTURES / NAME).read_text()
    return {f.span.start_line: f.confidence for f in lint_text(code, tmp=tmp_path) if f.code == "SL201"}


def _lines(marker: str) -> list[int]:
    return [i for i, text in enumerate((FIXTURES / NAME).read_text().splitlines(), 1) if marker in text]


def test_a_pinned_pool_handed_to_an_unseen_call_is_medium(tmp_path):
    found = _confidences(tmp_path)
    medium = _lines("# expect: SL201 -- medium")
    assert len(medium) == 3
    assert all(found[line] is Confidence.MEDIUM for line in medium)  # the read, and a later write after it


def test_stream_and_host_reads_of_the_pool_and_device_fields_stay_high(tmp_path):
    found = _confidences(tmp_path)
    high = _lines("# expect: SL201 -- high")
    assert len(high) == 4  # (torch.save of the pool: torch is seen, it reads the bytes)
    assert all(found[line] in (None, Confidence.HIGH) for line in high)
