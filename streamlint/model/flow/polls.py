"""Polling a stream or an event: ``ev.query()`` / ``s.query()`` returns at once, True when the work it stands
for has completed, and orders nothing by itself. What the host may rely on follows from the branch the result
decides:

- ``if ev.query(): use(x)``: only the true arm runs after the host saw the event complete (the false arm, and
  what follows the ``if``, may run before);
- ``while not ev.query(): time.sleep(0)`` (or ``pass``): the loop is left only when the query returned True, a
  host wait for that event or stream as ``synchronize()`` is; ``if not ev.query(): return`` likewise orders
  what follows it;
- ``ev.query()`` as a statement of its own (the result dropped) orders nothing.

A query whose result is used otherwise (bound to a name, returned, handed on) keeps the reading of before: an
event's query is taken as a host synchronisation there (precision first), a stream's as none.

A mixin of the interpreter (see interp.Interp): the query call records, as it is evaluated, what it would
synchronise (:meth:`Polls.poll_now`); the branch on its result applies it to the outcome where the query
returned True (:meth:`Polls.poll_test`, called by flow/control.py)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.values import State, TVal, merge_clock
from streamlint.model.hostguards import host_outcome
from streamlint.model.streams import MAIN
from streamlint.model.syntax import forever, local_nodes, node_memo
from streamlint.model.walk import children

GATE, DISCARD = "gate", "discard"


def is_poll(node: cst.CSTNode) -> bool:
    """``x.query()`` with no arguments."""
    return isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute) \
        and node.func.attr.value == "query"


def true_polls(test: cst.BaseExpression, outcome: bool) -> list[cst.Call]:
    """The ``query()`` calls that must have returned True when ``test`` evaluated to ``outcome`` (``not``,
    ``and`` / ``or``, and ``q() is True`` / ``== False`` comparisons followed)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return true_polls(test.expression, not outcome)
    if is_poll(test):
        return [test] if outcome else []  # type: ignore[list-item]
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.And) and outcome or isinstance(test.operator, cst.Or) and not outcome:
            return true_polls(test.left, outcome) + true_polls(test.right, outcome)  # every operand had it
        return []
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and is_poll(test.left):
        comp = test.comparisons[0]
        if isinstance(comp.operator, (cst.Is, cst.Equal, cst.IsNot, cst.NotEqual)) \
                and isinstance(comp.comparator, cst.Name) and comp.comparator.value in ("True", "False"):
            same = isinstance(comp.operator, (cst.Is, cst.Equal)) == (comp.comparator.value == "True")
            return true_polls(test.left, outcome == same)
    return []


def break_polls(loop: cst.While) -> frozenset[int]:
    """The ``query()`` calls (ids) every ``break`` of the ``while True:`` loop ``loop`` is taken under, returning
    True (``while True: if ev.query(): break; time.sleep(0)``): a path still looping after the rounds the analysis
    runs leaves the loop by one of them, so it has seen them complete. Empty when a break is not so gated."""
    found: list[frozenset[int]] = []

    def walk(node: cst.CSTNode, gates: frozenset[int]) -> None:
        if isinstance(node, cst.Break):
            found.append(gates)
        elif isinstance(node, cst.If):
            walk(node.body, gates | {id(c) for c in true_polls(node.test, True)})
            if node.orelse is not None:
                walk(node.orelse, gates | {id(c) for c in true_polls(node.test, False)})
        elif not isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            for child in children(node):
                walk(child, gates)

    if not forever(loop):
        return frozenset()
    walk(loop.body, frozenset())
    return frozenset.intersection(*found) if found else frozenset()


def _operand_polls(test: cst.BaseExpression) -> list[cst.Call]:
    """The ``query()`` calls a test decides on through ``not`` / ``and`` / ``or`` / a comparison, whether or not one
    outcome of the whole test settles them (``if not blocking and not ev.query(): return``: falling through, the
    query returned True only where it ran; :meth:`Polls.poll_test` keeps it open for a later test to decide)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _operand_polls(test.expression)
    if isinstance(test, cst.BooleanOperation):
        return _operand_polls(test.left) + _operand_polls(test.right)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        return _operand_polls(test.left)
    return [test] if is_poll(test) else []  # type: ignore[list-item]


def _contexts(fn_node: cst.CSTNode) -> dict[int, str]:
    """id(query call) -> GATE (an ``if`` / ``while`` test decides on it) or DISCARD (a statement of its own)."""
    found: dict[int, str] = {}
    for node in local_nodes(fn_node):
        if isinstance(node, (cst.If, cst.While)):
            for call in true_polls(node.test, True) + true_polls(node.test, False) + _operand_polls(node.test):
                found[id(call)] = GATE
        elif isinstance(node, cst.Expr) and is_poll(node.value):
            found[id(node.value)] = DISCARD
    return found


class Polls:
    """What a branch outcome tells of the device (mixin of the interpreter): a ``query()`` that returned True
    (the host saw the work complete), a tensor whose ``is_cuda`` is false (host memory)."""

    def host_sees(self, st: State, e: cst.Call, name: str, seen: dict[str, int], default: bool) -> None:
        """``synchronize()`` / ``query()`` call ``e`` of an event or a stream: once it returns (a query: returns
        True) the host has seen ``seen`` (stream -> clock). A query a branch decides on is kept for that branch
        (:meth:`poll_test`); one whose result is dropped orders nothing; elsewhere ``default`` says."""
        context = node_memo("poll-contexts", self.cfn.node, _contexts).get(id(e)) if name == "query" else None
        if context == GATE:
            st.polls[id(e)] = (e, seen)
        elif name == "synchronize" or context is None and default:
            merge_clock(st.host, seen)

    def device_test(self, st: State, test: cst.BaseExpression, outcome: bool) -> None:
        """``if x.is_cuda:`` false: ``x`` is a host tensor on this path (no stream produced it)."""
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, outcome = test.expression, not outcome
        if not outcome and isinstance(test, cst.Attribute) and test.attr.value in ("is_cuda", "is_npu") \
                and isinstance(test.value, cst.Name) and isinstance(st.env.get(test.value.value), TVal):
            st.env[test.value.value] = self.host_tensor(st)
        elif (name := host_outcome(test, outcome)) is not None and isinstance(st.env.get(name), TVal):
            # `if x.device.type != "cpu":` false (hostguards.host_outcome): what the name holds on this path, also
            # for a name the function binds again later (`value = self._pin(value)` under the test: a host copy)
            st.env[name] = self.host_tensor(st)

    def poll_exits(self, states: list[State], loop: cst.CSTNode) -> None:
        """The paths still in a ``while`` loop after the rounds the analysis runs leave it later: with its test
        false (``while not ev.query():``), or by a ``break`` every one of which a query returning True gates
        (``while True: if ev.query(): break``)."""
        if not isinstance(loop, cst.While):
            return
        gated = break_polls(loop)
        for s in states:
            self.poll_test(s, loop.test, False)
            for ident in gated & set(s.polls):
                merge_clock(s.host, s.polls.pop(ident)[1])

    def poll_test(self, st: State, test: cst.BaseExpression, outcome: bool) -> None:
        """A branch on ``test`` took ``outcome``: the host has seen what each query that returned True stands for
        — a query the test decides (``if ev.query():`` true, ``while not ev.query():`` left), or one an earlier
        compound test left open that the path now knows was True (``if not blocking and not ev.query(): return``
        then ``if blocking: ...`` false)."""
        if not st.polls:
            return
        decided = {id(call) for call in true_polls(test, outcome)}
        for ident, (call, seen) in list(st.polls.items()):
            if ident in decided or self.decide(st, call) is True:
                merge_clock(st.host, seen)
                del st.polls[ident]


__all__ = ["Polls", "is_poll", "true_polls"]
