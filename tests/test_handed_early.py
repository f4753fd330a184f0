"""Events recorded before writes of the tensors they are handed out with (model/flow/handedearly.py)."""

from pathlib import Path

from harness import lint_text

from streamlint.finding import Confidence

FIXTURE = Path(__file__).parent.parent / "fixtures/projects/sl201_handed_early_records/offload/review.py"


def test_a_record_the_base_reports_keeps_its_finding_and_confidence(tmp_path):
    found = [f for f in lint_text(FIXTURE.read_text(encoding="utf-8"), tmp=tmp_path) if f.code == "SL201"]
    spill = [f for f in found if "`spilled`" in f.message]
    assert len(spill) == 1
    assert "before the work it should guard" in spill[0].message
    assert spill[0].confidence == Confidence.HIGH
    handed = [f for f in found if "that it is handed out with" in f.message]
    assert handed and all(f.confidence == Confidence.MEDIUM for f in handed)
