"""Confidence of SL301 on a join a caller's flag turns off (model/flow/flagjoins.py), on a value made only from a place
of unknown type (flow/guessedresults.py) and on the other owners of a
rebound attribute (flow/unsets.storage_owners): fixtures/rules/sl301_caller_flag_joins.py and
sl301_owner_keeps_storage.py say where the findings are; this says how sure they are."""

from pathlib import Path

from harness import lint_text

from streamlint.finding import Confidence

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rules"


def _confidences(name: str, tmp_path) -> dict[int, Confidence]:
    code = (FIXTURES / name).read_text()
    return {f.span.start_line: f.confidence for f in lint_text(code, tmp=tmp_path)
            if f.code == "SL301"}


def _line(name: str, marker: str) -> int:
    lines = (FIXTURES / name).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def test_a_join_only_the_callers_flag_skips_is_medium(tmp_path):
    found = _confidences("sl301_caller_flag_joins.py", tmp_path)
    name = "sl301_caller_flag_joins.py"
    assert found[_line(name, "medium: only when the caller passes sync=False")] is Confidence.MEDIUM
    assert found[_line(name, "non_blocking=True))  # expect: SL301 -- medium")] is Confidence.MEDIUM  # `if not sync: return`
    assert found[_line(name, "medium, nested")] is Confidence.MEDIUM  # (an `if sync:` in an `else:` block)
    assert found[_line(name, "medium: blocking=False")] is Confidence.MEDIUM  # a device-wide synchronize joins too
    assert found[_line(name, "high: debug")] is Confidence.HIGH  # ... not in an arm of host I/O only
    assert found[_line(name, "medium: logged")] is Confidence.MEDIUM  # ... unless the flag's default takes that arm
    assert found[_line(name, "high: prefetch only")] is Confidence.HIGH  # a synchronize of another stream
    assert sorted(c.value for c in found.values()).count("high") == 5  # verbose flag, another stream, own flag, debug


def test_a_local_owner_never_recorded_stays_high(tmp_path):
    found = _confidences("sl301_owner_keeps_storage.py", tmp_path)
    name = "sl301_owner_keeps_storage.py"
    assert found[_line(name, "`before` dies at the return, never recorded")] is Confidence.HIGH
    assert found[_line(name, "a record on the allocating stream protects nothing")] is Confidence.HIGH
    assert found[_line(name, "handed back, not recorded")] is Confidence.MEDIUM


def test_a_value_made_only_from_a_place_of_unknown_type_is_low(tmp_path):
    found = _confidences("sl301_guessed_place_results.py", tmp_path)
    name = "sl301_guessed_place_results.py"
    assert found[_line(name, "low: a tensor only if `self.loader.graph` is one")] is Confidence.LOW
    assert found[_line(name, "high: made from the index tensor handed in")] is Confidence.HIGH
    assert found[_line(name, "high: `self.features` was used as a tensor above")] is Confidence.HIGH


def test_a_flag_whose_else_arm_is_taken_does_not_crash(tmp_path):
    code = (FIXTURES / "sl301_caller_flag_joins.py").read_text()
    assert [f.message for f in lint_text(code, tmp=tmp_path) if f.code == "SL000"] == []


def test_a_field_the_class_fills_on_the_device_is_no_guess(tmp_path):
    found = _confidences("sl301_lifetime_evidence_edges.py", tmp_path)
    name = "sl301_lifetime_evidence_edges.py"
    assert found[_line(name, "high: the class filled `self.features` on the device")] is Confidence.HIGH
    assert found[_line(name, "high: used as a tensor after the call")] is Confidence.HIGH
    assert found[_line(name, "is rebound next round")] is Confidence.HIGH


def test_a_flag_every_seen_caller_sets_is_no_hazard_and_an_unknown_one_stays_medium(tmp_path):
    """fixtures/projects/sl301_caller_flag_values: the loader's `sync` reaches it through the engine's `**kwargs`
    as `True` from the adapter (a caller without the key raises first), so its flag-clear path is never taken; the
    saver's callers pass `sync=is_first`, a value the analysis cannot evaluate: medium (flow/flagvalues.py); the
    prefetch's package caller passes `True`, a test `False`: low."""
    from harness import lint_project

    root = FIXTURES.parent / "projects" / "sl301_caller_flag_values"
    found = {(Path(f.path).name, f.span.start_line): f.confidence for f in lint_project(root) if f.code == "SL301"}
    lines = (root / "kvconn" / "connector.py").read_text().splitlines()
    saver = next(i for i, text in enumerate(lines, 1) if "gather_layer(" in text)
    prefetch = next(i for i, text in enumerate(lines, 1) if "slot_mapping_full)  # expect: SL301" in text)
    # (the prefetch's flag-clear path is taken only by a test module: low)
    assert found == {("connector.py", saver): Confidence.MEDIUM, ("connector.py", prefetch): Confidence.LOW}
