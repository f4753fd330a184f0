"""The rounds of a collapsed ``for`` loop told apart (mixin of :class:`~streamlint.model.flow.interp.Interp`).

A loop the interpreter reads as ``LOOP_UNROLL`` rounds (no stream / event collection walked, no alternating-streams
counter) still binds an integer index anew in every round when it is ``for i in range(...)`` or ``for i, x in
enumerate(xs)`` (:func:`loop_index`):

* ``pieces[i]`` (basic indexing by it, e.g. the ``torch.split`` pieces of one pinned buffer, each device stream
  writing back its own) is a part of its own per round: two iterations' accesses never conflict, an access of the
  whole buffer still does (:meth:`Rounds.index_part`, ``Access.part``);
* the first round is the first iteration (``i`` is the start), every later one is past it: ``if i > 0:`` /
  ``if i:`` / ``if i == 0:`` are decided per round (:meth:`Rounds.first_round_test`), so a wait skipped only in
  the first iteration is done on every path reaching a second one;
* the first round binds the element variable to ``xs[0]``: an ``lru_cache``'d stream factory called with it gives
  the stream of ``factory(xs[0])`` (:meth:`Rounds.memo_key`): device 0's cached stream *is* the staging stream
  made by the same call before the loop, so no cross-stream use is left in that iteration;
* the index compared with a bound the loop does not know (``if layer < self.num_layers:``) tells the path about
  the bound: round ``r`` is iteration ``start + r`` (the second round is the one right after the first), so a
  path that took ``layer < n`` in the first round has ``n >= 1`` and decides ``0 < layer <= n`` in the second
  (:meth:`Rounds.bound_test`, :meth:`Rounds.note_bound`): a layerwise generator that used a buffer on a side
  stream in its first round and synchronises in the next one before it can end. A literal offset is read too
  (``if i < n - 1:``), and a path leaving ``for i in range(n)`` after its last round ran ``i == n - 1`` there: one
  whose rounds took ``i < n - 1`` in that round (another iteration follows) is not a way out of the loop
  (:meth:`Rounds.leave_rounds`)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.flow.counters import _OPS
from streamlint.model.flow.values import LOOP_UNROLL, State
from streamlint.model.syntax import int_literal, local_nodes, strip_not

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}  # `n > i` is `i < n`


def index_comparison(test: cst.BaseExpression) -> tuple[str, str, int] | None:
    """``i`` / ``i OP literal`` (a test with ``not`` stripped) as ``(name, op, value)``: ``if i:`` is ``i != 0``."""
    if isinstance(test, cst.Name):
        return test.value, "!=", 0
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
        comp = test.comparisons[0]
        op, value = _OPS.get(type(comp.operator).__name__), int_literal(comp.comparator)
        if op is not None and value is not None:
            return test.left.value, op, value
    return None


def compare(a: int, op: str, b: int) -> bool:
    """``a OP b`` for the comparison operators :func:`index_comparison` reads."""
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def loop_index(node: cst.For) -> str | None:
    """The integer a ``for`` binds anew in every iteration, distinct from the other iterations' values: ``i`` of
    ``for i in range(...)`` (a step-less range) or of ``for i, x in enumerate(xs)``. Two iterations' ``x[i]``
    (basic indexing of a tensor by it, e.g. the ``torch.split`` pieces of one buffer) select disjoint rows."""
    it, target = node.iter, node.target
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name)) or any(a.star for a in it.args):
        return None
    if it.func.value == "range" and isinstance(target, cst.Name) and 1 <= len(it.args) <= 2 \
            and not any(a.keyword is not None for a in it.args):
        return target.value
    if it.func.value == "enumerate" and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2 \
            and isinstance(target.elements[0].value, cst.Name):
        return target.elements[0].value.value
    return None


def first_element_of(node: cst.For) -> tuple[str, str] | None:
    """(the element variable, the text of the element the first iteration binds it to) for ``for x in xs`` and
    ``for i, x in enumerate(xs)`` over a plain name or attribute chain: ``("x", "xs[0]")``."""
    it, target = node.iter, node.target
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate" \
            and len(it.args) == 1 and it.args[0].keyword is None and not it.args[0].star \
            and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
        it, target = it.args[0].value, target.elements[1].value
    text = dotted(it) if isinstance(it, (cst.Name, cst.Attribute)) else None
    return (target.value, f"{text}[0]") if text is not None and isinstance(target, cst.Name) else None


def index_start(node: cst.For) -> int | None:
    """The first value of a :func:`loop_index` (``range(n)``, ``enumerate(xs)``: 0; ``range(1, n)``,
    ``enumerate(xs, 1)``: 1); None when it is not a literal."""
    it = node.iter
    args = [a.value for a in it.args if a.keyword is None]
    start = next((a.value for a in it.args if a.keyword is not None and a.keyword.value == "start"), None)
    if it.func.value == "range":
        return int_literal(args[0]) if len(args) == 2 else 0
    start = args[1] if len(args) == 2 else start
    return 0 if start is None else int_literal(start)


def _rebound(node: cst.For, names: tuple) -> bool:
    """Is one of ``names`` (the loop index, the range's bound) assigned in the body of ``node``?"""
    for sub in local_nodes(node.body):
        targets = [t.target for t in sub.targets] if isinstance(sub, cst.Assign) else \
            [sub.target] if isinstance(sub, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For)) else []
        if any(dotted(t) in names for t in targets if isinstance(t, (cst.Name, cst.Attribute))) or any(
                isinstance(t, (cst.Tuple, cst.List)) and any(dotted(e.value) in names for e in t.elements
                                                            if isinstance(e.value, (cst.Name, cst.Attribute)))
                for t in targets):
            return True
    return False


class Rounds:
    """Loop rounds told apart (mixin of the interpreter).

    Interp state it uses: ``first_elements``, ``index_loops``, ``index_rounds`` (filled by ``ControlFlow.loop``);
    it asks orderings (render)."""

    def note_round(self, st: State, node: cst.For, round_no: int) -> None:
        """A collapsed loop's round ``round_no`` has bound its targets: keep its index's round and the element its
        first round binds (keyed by the stamps of the bindings, ``State.bound_at``)."""
        index = loop_index(node)
        if index is not None and index in st.bound_at:  # each round binds another integer: `x[i]`, its own rows
            self.index_loops.add((id(node), index))
            self.index_rounds[st.bound_at[index][0]] = (index_start(node), round_no)
        first = first_element_of(node) if round_no == 0 else None
        if first is not None and first[0] in st.bound_at:  # `devices[0]` (memo_key)
            self.first_elements[st.bound_at[first[0]][0]] = first[1]

    def note_handed(self, st: State, key: str) -> None:
        """Event ``key`` is put in a container or a field: a use of its last record, and (a new object of its
        creation site) a record after it still reaches the holder (``State.event_stamps``, ``Orderings.record``)."""
        st.used_events.add(key)
        if key in st.event_stamps:
            st.event_stamps[key] = (st.event_stamps[key][0], self.stamp())

    def memo_key(self, st: State, e: cst.Call, fn) -> str | None:
        """The identity of a stream an ``lru_cache``'d factory hands back: the factory and its arguments' values
        (``copy_stream(devices[0])``); the same arguments give the very same stream object. A loop variable in the
        first round of a loop over ``xs`` is ``xs[0]`` (:meth:`first_element`). None when an argument has no
        stable text (a call, an expression)."""
        args = []
        for a in e.args:
            if a.star or not isinstance(a.value, (cst.Name, cst.Attribute, cst.Subscript, cst.Integer,
                                                      cst.SimpleString)):
                return None
            text = self.first_element(st, a.value) or self.render(st, a.value)
            args.append(f"{a.keyword.value}={text}" if a.keyword is not None else text)
        return f"{fn.node.name.value}({', '.join(args)})"

    def first_element(self, st: State, e: cst.BaseExpression) -> str | None:
        """``device`` bound by the first round of ``for device in devices`` / ``for i, device in enumerate(devices)``:
        ``devices[0]`` (control.loop records the element a first round binds)."""
        if not isinstance(e, cst.Name):
            return None
        bound = st.bound_at.get(e.value)
        return self.first_elements.get(bound[0]) if bound is not None else None

    def index_part(self, st: State, name: str) -> str | None:
        """``pieces[i]`` with ``i`` the index of a range / enumerate loop (:func:`~streamlint.model.flow.control.
        loop_index`), not rebound since: each iteration selects its own rows, told apart by the stamp of the
        binding (two iterations' accesses never conflict; an access of the whole still does)."""
        bound = st.bound_at.get(name)
        return f"row@{bound[0]}" if bound is not None and (bound[1], name) in self.index_loops else None

    def first_round_test(self, st: State, test: cst.BaseExpression) -> bool | None:
        """``if i > 0:`` / ``if i:`` / ``if i == 0:`` on the index of a range / enumerate loop read as its rounds:
        the first round is the first iteration (``i`` is the start), every later one is past it (``i > start``).
        So a fork or join the code skips only in the first iteration (``if i > 0: s.wait_event(ready)``) is done
        on every path that runs a second iteration."""
        test, positive = strip_not(test)
        if (parsed := index_comparison(test)) is None:
            return None
        name, op, value = parsed
        bound = st.bound_at.get(name)
        if bound is None or (bound[1], name) not in self.index_loops or bound[0] not in self.index_rounds:
            return None
        start, round_no = self.index_rounds[bound[0]]
        if start is None:
            return None
        if round_no == 0:
            held = compare(start, op, value)
        elif op in (">", ">=") and value <= start + (1 if op == ">=" else 0) or op == "!=" and value == start:
            held = True  # every later round is past the start: `i > start`, `i >= start + 1`, `i != start`
        elif op in ("<", "<=") and value <= start + (1 if op == "<" else 0) or op == "==" and value == start:
            held = False
        else:
            return None
        return held == positive

    def index_value(self, st: State, name: str) -> int | None:
        """The value of a range / enumerate loop's index in this round: round ``r`` is iteration ``start + r``
        (the interpreter runs a second round only as the iteration right after the first)."""
        bound = st.bound_at.get(name)
        if bound is None or (bound[1], name) not in self.index_loops or bound[0] not in self.index_rounds:
            return None
        start, round_no = self.index_rounds[bound[0]]
        return None if start is None else start + round_no

    def index_bound(self, st: State, test: cst.BaseExpression) -> tuple[str, int, bool] | None:
        """``i OP n`` with ``i`` a loop index of known value and ``n`` a name or attribute chain (the bound the
        loop does not know): ``(n's text, m, positive)``, the test holding exactly when ``(n >= m) == positive``."""
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return None
        op = _OPS.get(type(test.comparisons[0].operator).__name__)
        left, right = test.left, test.comparisons[0].comparator
        if op not in _FLIP:
            return None
        if not isinstance(left, cst.Name) or self.index_value(st, left.value) is None:
            left, right, op = right, left, _FLIP[op]
        c = 0  # `i < n - 1`: the bound with a literal offset
        if isinstance(right, cst.BinaryOperation) and isinstance(right.operator, (cst.Add, cst.Subtract)) \
                and int_literal(right.right) is not None:
            c = int_literal(right.right) * (1 if isinstance(right.operator, cst.Add) else -1)
            right = right.left
        if not isinstance(left, cst.Name) or not isinstance(right, (cst.Name, cst.Attribute)) \
                or isinstance(right, cst.Name) and self.index_value(st, right.value) is not None:
            return None
        v = self.index_value(st, left.value)
        if v is None:
            return None
        text = self.render(st, right)
        return {"<": (text, v + 1 - c, True), "<=": (text, v - c, True), ">": (text, v - c, False),
                ">=": (text, v + 1 - c, False)}[op]

    def leave_rounds(self, states: list[State], node, rounds: int) -> list[State]:
        """The paths leaving ``for i in range(n)`` / ``range(start, n)`` after its last round (not by a break): that
        round was the last iteration, ``i == n - 1``, so ``n`` is ``start + rounds``. A path whose last round took a
        test of ``n`` that says otherwise (``if i < n - 1: send(...)`` taken there: another iteration would follow)
        cannot leave here and is dropped (unless every path is such: then nothing is learnt)."""
        if self.single or not isinstance(node, cst.For) or loop_index(node) is None or node.iter.func.value != "range" \
                or not isinstance(node.iter.args[-1].value, (cst.Name, cst.Attribute)):
            return states
        start = index_start(node)
        if start is None or not states or _rebound(node, (loop_index(node), dotted(node.iter.args[-1].value))):
            return states  # (`n += 1` in the body: the test's `n` is no longer the range's bound)
        n = start + rounds

        def feasible(st: State) -> bool:  # (only what the last round learnt: an earlier round's `i < n - 2` taken
            # says the loop runs longer than the rounds walked, not that this way out does not exist)
            prefix = f"<last@{id(node)} {self.render(st, node.iter.args[-1].value)} >= "
            return all((n >= int(key[len(prefix):-1])) == held for key, held in st.assume.items()
                       if key.startswith(prefix))

        kept = [st for st in states if feasible(st)]
        return kept or states

    def bound_test(self, st: State, test: cst.BaseExpression) -> bool | None:
        """``i OP n`` decided by what the path learnt of ``n`` from earlier rounds' tests (:meth:`note_bound`)."""
        test, positive = strip_not(test)
        asked = self.index_bound(st, test)
        if asked is None:
            return None
        text, m, sign = asked
        prefix = f"<{text} >= "
        for key, held in st.assume.items():
            if not key.startswith(prefix):
                continue
            known = int(key[len(prefix):-1])
            if held and known >= m or not held and known <= m:
                return (held == sign) == positive
        return None

    def note_bound(self, st: State, test: cst.BaseExpression, outcome: bool) -> None:
        """The path took ``test`` with ``outcome``: keep what it says of a bound compared with a loop index (each
        operand of ``a and b`` taken, of ``a or b`` not taken)."""
        test, positive = strip_not(test)
        outcome = outcome == positive
        if isinstance(test, cst.BooleanOperation):
            if isinstance(test.operator, cst.And) == outcome:
                self.note_bound(st, test.left, outcome)
                self.note_bound(st, test.right, outcome)
            return
        asked = self.index_bound(st, test)
        if asked is not None:
            text, m, sign = asked
            st.assume[f"<{text} >= {m}>"] = outcome == sign
            names = [e.value for e in (test.left, test.comparisons[0].comparator)
                     if isinstance(e, cst.Name) and self.index_value(st, e.value) is not None]
            bound = st.bound_at.get(names[0]) if names else None
            if bound is not None and not self.single and self.index_rounds[bound[0]][1] == LOOP_UNROLL - 1:
                st.assume[f"<last@{bound[1]} {text} >= {m}>"] = outcome == sign  # (leave_rounds)


__all__ = ["Rounds", "first_element_of", "index_start", "loop_index"]
