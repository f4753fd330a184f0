"""Confidence of the findings the stream-list round tests (model/flow/roundtests.py) and the host reads of values of
unknown placement (model/flow/hostreads.maybe_synced) leave: the real races stay high, the undecidable one is medium."""

from harness import FIXTURES, lint_paths

from streamlint.finding import Confidence


def _confidences(name: str) -> dict[int, Confidence]:
    path = FIXTURES / "rules" / name
    return {f.span.start_line: f.confidence for f in lint_paths(path.parent, [str(path)], [str(path)])
            if f.code == "SL201"}


def test_stream_list_races_left_by_round_tests_stay_high():
    found = _confidences("sl201_stream_list_round_tests.py")
    assert found and set(found.values()) == {Confidence.HIGH}


def test_item_of_unknown_placement_lowers_the_pending_exit_to_medium():
    text = (FIXTURES / "rules" / "sl201_item_of_unknown_placement.py").read_text().splitlines()
    lines = {n: i + 1 for i, line in enumerate(text) for n in ("step_unsynced", "step_item_of_unknown",
                                                               "step_item_on_other_stream", "step_item_of_host_counts")
             if line.strip().startswith(f"def {n}(")}
    found = _confidences("sl201_item_of_unknown_placement.py")
    at = {n: next(ln for ln in sorted(found) if ln > lines[n]) for n in lines}
    assert found[at["step_unsynced"]] == Confidence.HIGH
    assert found[at["step_item_of_unknown"]] == Confidence.MEDIUM
    assert found[at["step_item_on_other_stream"]] == Confidence.HIGH
    assert found[at["step_item_of_host_counts"]] == Confidence.HIGH  # `.item()` of evidently host data waits for nothing
