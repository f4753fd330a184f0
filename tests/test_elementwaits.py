"""flow/elementwaits.py: a wait on a collection element by an unresolved index joins what the recorded elements cover."""
from streamlint.model.flow.elementwaits import sibling_record, unresolved_element


def test_only_unresolved_trailing_indices_take_the_sibling_reading() -> None:
    assert unresolved_element("done[g][i - 1]") == "done[g]"
    assert unresolved_element("done[g][n_blocks[g] - 1]") == "done[g]"
    assert unresolved_element("done[g][0]") is None  # a representative position: exact key
    assert unresolved_element("done[g][-1]") is None
    assert unresolved_element("meta['ready']") is None
    assert unresolved_element("ready") is None


def test_every_element_recorded_so_far_is_joined() -> None:
    events = {"done[I[*]][0]": {"ws": 3, "s1": 5}, "done[I[*]][1]": {"ws": 9, "<main>": 2}, "other[1]": {"s": 20}}
    assert sibling_record(events, "done[g][i - 1]") == {"ws": 9, "s1": 5, "<main>": 2}
    assert sibling_record(events, "done[g][0]") is None  # resolved: no guess
    assert sibling_record(events, "pending[g][i - 1]") is None  # another collection
    assert sibling_record(events, "done[I[*]][1]") is None  # recorded itself: its own record applies
