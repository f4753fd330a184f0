"""Element sets of containers of streams / events (streamlint/model/flow/elementsets.py)."""

import libcst as cst

from streamlint.model.flow.elementsets import ALL, FIRST_OUT, LAST_OUT, ONE, SOME, element_origins, origins

SRC = '''
def step(self, reqs, targets, pool):
    for dev, ev in self.ready.items():
        pass
    for dev, skipped in list(self.ready.items())[1:]:
        pass
    pending = [r.restored for r in reqs]
    for p in pending[:-1]:
        pass
    for u in list({id(t.done): t.done for t in targets if t.done is not None}.values())[1:]:
        pass
    for w in list({id(t.done): t.done for t in targets if t.rank > 0}.values()):
        pass
    done = self._layer_done
    one = done[3]
    for i, (lane, arrival) in enumerate(zip(pool.lanes, pool.arrivals)):
        pass
    for odd in self.events[1::2]:
        pass
'''


def _origins():
    module = cst.parse_module(SRC)
    fn = module.body[0]
    found = {name: [(module.code_for_node(o.container), o.field, o.reach) for o in os]
             for name, os in origins(fn).items()}
    return module, fn, found


def test_loop_targets_reach_their_container_elements():
    _, _, found = _origins()
    assert found["ev"] == [("self.ready", None, ALL)]
    assert found["skipped"] == [("self.ready", None, FIRST_OUT)]
    assert found["p"] == [("reqs", "restored", LAST_OUT)]
    assert found["u"] == [("targets", "done", FIRST_OUT)]
    assert found["w"] == [("targets", "done", SOME)]  # a filter that is not the element's presence
    assert found["one"] == [("self._layer_done", None, ONE)]
    assert found["lane"] == [("pool.lanes", None, ALL)]
    assert found["arrival"] == [("pool.arrivals", None, ALL)]
    assert found["odd"] == [("self.events", None, SOME)]
    assert "dev" not in found  # a dict key is no element


def test_subscripts_of_aliases_and_fields_of_elements():
    module, fn, _ = _origins()
    sub = cst.parse_expression("done[k]")
    assert [(module.code_for_node(o.container), o.reach) for o in element_origins(fn, sub)] == \
        [("self._layer_done", ONE)]
    field = cst.parse_expression("lane.ready")
    assert [(module.code_for_node(o.container), o.field) for o in element_origins(fn, field)] == \
        [("pool.lanes", "ready")]
    assert element_origins(fn, cst.parse_expression("unrelated")) == []
