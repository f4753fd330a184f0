"""The precise conditions under which a finding that was high on real code is less sure (issue 16, session 41):
each fixture's positive is less sure (low since session 43: no finding of these six conditions was a bug on real
code, bench/quality-journal.md), and its tricky negative keeps the rule's own confidence (high)."""
from __future__ import annotations

from harness import FIXTURES, lint_paths

RULES = FIXTURES / "rules"


def _by_marker(name: str, code: str) -> dict[str, object]:
    """marker text -> the finding of ``code`` on the fixture line carrying it (``-- low:`` / ``-- medium:`` /
    ``-- high:``)."""
    path = RULES / name
    found = {(f.span.start_line, f.code): f for f in lint_paths(path.parent, [str(path)])}
    out = {}
    for i, text in enumerate(path.read_text().splitlines(), 1):
        if f"expect: {code}" in text and text.split(" -- ", 1)[-1].startswith(("low", "medium", "high")):
            out[text.split(" -- ", 1)[1]] = found.get((i, code))
    return out


def _check(name: str, code: str, hint: str) -> None:
    marked = _by_marker(name, code)
    assert marked, name
    for marker, finding in marked.items():
        assert finding is not None, marker
        want = marker.split(":", 1)[0]
        assert finding.confidence.value == want, (marker, finding.confidence.value)
        if want != "high":
            assert hint in (finding.hint or ""), finding.hint


def test_work_after_a_record_under_a_parameter_test_is_low() -> None:
    _check("sl201_early_record_optional_work.py", "SL201", "(a parameter) is set")


def test_a_read_whose_value_only_reaches_an_fstring_is_low() -> None:
    _check("sl201_discarded_reads.py", "SL201", "only inside f-strings")


def test_a_wait_on_the_objects_own_event_field_makes_the_race_low() -> None:
    _check("sl201_sibling_event_fields.py", "SL201", "kept on the same object")


def test_another_element_of_the_producers_stream_collection_makes_the_race_medium() -> None:
    _check("sl201_stream_collection_elements.py", "SL201", "an element of the same stream collection")


def test_an_unseen_self_method_in_between_makes_the_race_low() -> None:
    _check("sl201_unseen_base_methods.py", "SL201", "is defined by no class of the project")


def test_a_free_after_a_use_by_a_handed_callable_is_low() -> None:
    _check("sl301_handed_callable_use.py", "SL301", "code the caller hands in")


def test_a_dropped_pure_warmup_read_is_no_race() -> None:
    path = RULES / "sl201_discarded_reads.py"
    lines = path.read_text().splitlines()
    warm = next(i for i, text in enumerate(lines, 1) if "warm-up result dropped" in text)
    found = {(f.span.start_line, f.code) for f in lint_paths(path.parent, [str(path)])}
    assert (warm, "SL201") not in found
