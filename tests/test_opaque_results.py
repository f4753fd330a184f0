"""Side-stream work of code the analysis does not read, handed back to the caller (model/flow/opaqueresults.py:
an opaque callable's result; model/flow/nativewrites.py: a native collective writing what it is handed): the
finding says what it rests on, medium when the call is handed device data, low when nothing is known."""

from pathlib import Path

from harness import lint_paths

from streamlint.finding import Confidence
from streamlint.model.flow.nativewrites import collective_name
from streamlint.model.flow.values import collapsed_members

RULES = Path(__file__).parent.parent / "fixtures/rules"


def _sl201(name: str) -> dict[int, object]:
    path = RULES / name
    found = lint_paths(path.parent, [str(path)], [str(path)])
    return {f.span.start_line: f for f in found if f.code == "SL201"}


def test_opaque_results_rest_on_what_the_call_is_handed():
    found = _sl201("sl201_opaque_callable_results.py")
    assert sorted(found) == [60, 73, 80], sorted(found)
    assert found[60].confidence == Confidence.LOW  # `outs[k] = branch()`: a thunk, handed nothing
    assert found[73].confidence == Confidence.MEDIUM  # `step(hidden)`: handed a tensor
    assert found[80].confidence == Confidence.LOW  # `staged.append(load_next())`
    assert "call of code not seen" in found[80].hint


def test_native_collectives_are_medium():
    found = _sl201("sl201_native_collective_writes.py")
    expected = [i for i, line in enumerate((RULES / "sl201_native_collective_writes.py").read_text().splitlines(), 1)
                if "# expect: SL201" in line]
    assert len(expected) == 3 and sorted(found) == expected, sorted(found)
    assert all(f.confidence == Confidence.MEDIUM for f in found.values())


def test_collective_names():
    assert collective_name("allreduce_inplace") and collective_name("all_gather") and collective_name("recv")
    assert collective_name("reduce_scatter") and collective_name("alltoall_v_inplace")
    assert not collective_name("send") and not collective_name("allocate") and not collective_name("gather_stats")


def test_collapsed_members():
    assert collapsed_members("lanes[k - 1]") == ("lanes[0]", "lanes[1]", "lanes[-1]")
    assert collapsed_members("self.streams[i]") == ("self.streams[0]", "self.streams[1]", "self.streams[-1]")
    assert collapsed_members("lanes[0]") is None and collapsed_members("lanes[-1]") is None
    assert collapsed_members("streams[I[*]]") is None and collapsed_members("side") is None
