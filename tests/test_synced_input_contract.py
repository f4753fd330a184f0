"""Confidence of SL201's argument race when most seen callers hand in a result their host synchronised
(flow/syncedresults.py ``synced_share``): fixtures/rules/sl201_synced_input_contract.py says where the findings are;
this says how sure they are."""

from pathlib import Path

from harness import lint_text

from streamlint.finding import Confidence

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "rules" / "sl201_synced_input_contract.py"


def _found(tmp_path) -> dict[int, Confidence | None]:
    return {f.span.start_line: f.confidence for f in lint_text(FIXTURE.read_text(), tmp=tmp_path) if f.code == "SL201"}


def _line(marker: str) -> int:
    lines = [i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1) if marker in text]
    assert len(lines) == 1
    return lines[0]


def test_a_helper_most_of_whose_callers_hand_in_synchronised_inputs_is_low(tmp_path):
    assert _found(tmp_path)[_line("# expect: SL201 -- low")] is Confidence.LOW


def test_a_helper_whose_callers_mostly_hand_in_fresh_results_stays_medium(tmp_path):
    assert _found(tmp_path)[_line("# expect: SL201 -- medium")] is Confidence.MEDIUM
