"""Tests on the representative rounds of a stream / event collection walk decided (mixin of
:class:`~streamlint.model.flow.interp.Interp`).

A loop over a collection of streams (:mod:`~streamlint.model.flow.elements`) runs once per representative element:
the first, one in the middle and the last. Code walking a list that starts with the caller's stream and goes on
with side streams (``streams = [main] + self.side_streams``, ``[main] + [torch.cuda.Stream() for _ in range(n -
1)]``, a literal ``[s0, s1]``) often skips the caller's own stream by a test in the loop body:

* on the element's index: ``for i, s in enumerate(streams): if i > 0: main.wait_stream(s)`` (and ``if i:``,
  ``if i != 0:``, ``if i == 0:``, the same in ``for i in range(len(streams))``). Each round knows its index
  (:meth:`RoundTests.note_round_indexes`): the first round is index 0, the middle one index 1 (of a literal list
  of two, its first item: index 0), the last one an index past the first (the walk takes it for another element
  than the first). A walk over a slice (``enumerate(streams[1:])``) counts from the slice: its index is not
  decided;
* on the element's identity: ``for s in streams: if s is not main: main.wait_stream(s)`` (``is``, ``is not``,
  ``==``, ``!=``). Two streams the walk names differently are decided different when they provably are two
  objects (:meth:`RoundTests.fresh_stream`): the stream current at the function's entry against a stream made by
  a constructor call (a local bound only to ``torch.cuda.Stream(...)`` calls, an element of a list field only
  ever built of them, an element of a run of new streams spliced into the list, :meth:`note_fresh_run`), or two
  such streams. A stream of unknown origin (a parameter, another object's field, a getter's result) may be the
  caller's: the test stays open and both outcomes are walked, as before.

So the join the code skips only for the caller's own stream is done in every side round, and a join skipped for a
real side stream (``if i > 1:``, ``if s is main:``) still leaves that round's work unordered.

A path that takes two stream names for one stream (an open identity test taken ``is`` / ``==``, or ``is not`` /
``!=`` not taken) knows from there on that the work queued under either name is that one stream's, in its order
(:meth:`RoundTests.same_stream`): a join skipped only where the element *is* the current stream skips nothing
(streams of unknown origin, handed in by the caller, included)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import dotted
from streamlint.model.flow.rounds import compare, index_comparison
from streamlint.model.flow.values import CVal, EVal, IVal, SVal, State, TupVal, TVal
from streamlint.model.streams import MAIN, STREAM
from streamlint.model.syntax import strip_not

_FIRST, _MIDDLE, _LAST = "0", "1", "-1"


def _plain(e: cst.BaseExpression) -> bool:
    """A name, an attribute chain, a subscript of one by a literal or a name, or a ``current_stream()`` call: an
    operand whose evaluation queues nothing."""
    if isinstance(e, cst.Call):
        return not e.args and (dotted(e.func) or "").rsplit(".", 1)[-1] in ("current_stream", "default_stream")
    if isinstance(e, cst.Subscript):
        return len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) \
            and isinstance(e.slice[0].slice.value, (cst.Name, cst.Integer, cst.UnaryOperation)) and _plain(e.value)
    return isinstance(e, cst.Name) or isinstance(e, cst.Attribute) and _plain(e.value)


class RoundTests:
    """Index and identity tests of a collection walk's rounds (mixin of the interpreter).

    Interp state it uses: ``cfile``, ``cfn``, ``file``, ``fn``, ``frames``, ``project``, ``round_indexes``,
    ``fresh_keys``. It asks exprs (ev), orderings (stream_key, kind_of)."""

    def note_round_indexes(self, node: cst.For, positions: tuple[str, ...], items: TupVal | None,
                           sliced: bool) -> None:
        """Keep the index each representative round of ``node`` binds: ``(exact value, least value)``."""
        if sliced:
            return
        for pos in positions:
            if items is not None:  # (elements.Elements._element: a list of two has no middle but its first)
                n = len(items.items)
                exact = 0 if pos == _FIRST or n <= 1 else (1 if n > 2 else 0) if pos == _MIDDLE else None
                least = exact if exact is not None else 1
            else:
                exact = {_FIRST: 0, _MIDDLE: 1}.get(pos)
                least = exact if exact is not None else 1
            self.round_indexes[(id(node), pos)] = (exact, least)

    def note_fresh_run(self, keys: tuple[str, ...], node: cst.BaseExpression) -> None:
        """``keys`` name the representative elements of a run spliced into a stream list: new streams when the run
        is a comprehension of stream constructor calls (``[torch.cuda.Stream() for _ in range(n)]``)."""
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)) and self._constructed(node.elt):
            self.fresh_keys.update(keys)

    def round_test(self, st: State, test: cst.BaseExpression) -> bool | None:
        """The outcome of an index or identity test in this round, None when the round does not decide it."""
        bare, positive = strip_not(test)
        held = self._index_test(st, bare)
        if held is None:
            held = self._identity_test(st, bare)
        return None if held is None else held == positive

    def _index_test(self, st: State, test: cst.BaseExpression) -> bool | None:
        if (parsed := index_comparison(test)) is None or not isinstance(st.env.get(parsed[0]), IVal):
            return None
        name, op, value = parsed
        bound = st.bound_at.get(name)
        fact = self.round_indexes.get((bound[1], st.env[name].pos)) if bound is not None else None
        if fact is None:
            return None
        exact, least = fact
        if exact is not None:
            return compare(exact, op, value)
        if op in (">", "!=") and value < least or op == ">=" and value <= least:
            return True  # (the last element is past the first: `i > 0`, `i != 0`, `i >= 1`)
        if op in ("<=", "==") and value < least or op == "<" and value <= least:
            return False
        return None

    def _identity_test(self, st: State, test: cst.BaseExpression) -> bool | None:
        """``a is b`` / ``a == b`` on two streams: False when they are provably two objects, else None."""
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return None
        op = test.comparisons[0].operator
        if not isinstance(op, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)):
            return None
        operands = (test.left, test.comparisons[0].comparator)
        if not all(_plain(e) for e in operands):
            return None  # (`a.sum() == 0`: evaluating it here would queue its work twice)
        sides = [self.ev(st, e) for e in operands]
        if not all(isinstance(v, SVal) for v in sides):
            return None
        a, b = (self.stream_key(st, v, None) for v in sides)
        if a == b:
            return None  # (the same stream: stream_compare decides it)
        fresh_a, fresh_b = self.fresh_stream(a), self.fresh_stream(b)
        if not (fresh_a and fresh_b or fresh_a and b == MAIN or fresh_b and a == MAIN):
            return None
        return isinstance(op, (cst.NotEqual, cst.IsNot))

    def same_stream(self, st: State, a: str, b: str) -> None:
        """The path takes streams ``a`` and ``b`` for one stream (``if s is main:`` taken, ``if s is not main:``
        not): one name stands for the other from here on, and the work queued so far under either name is the
        same stream's, in its order, so each knows all of the other's (``for s in streams: if s is not main:
        main.wait_stream(s)`` skips the join only where there is nothing to join)."""
        st.same[b if b != MAIN else a] = a if b != MAIN else b
        self.wait_stream(st, a, b)
        self.wait_stream(st, b, a)

    def fresh_stream(self, key: str) -> bool:
        """Is the stream the walk names ``key`` made by a constructor call of its own: an element of a spliced run
        of new streams, a local of this function bound only to constructor calls, an element of a list field of the
        class only ever built of them (and never changed in place)?"""
        if key in self.fresh_keys:
            return True
        if key.isidentifier():
            values = self.cfn.name_assigns.get(key)
            return bool(values) and key not in self.cfn.all_params and all(self._constructed(v) for v in values)
        base, _, rest = key.partition("[")
        if not rest or not base.startswith("self.") or base.count(".") != 1 or not rest[:-1].lstrip("-").isdigit():
            return False
        from streamlint.model.flow.callerscopes import _field_births

        frame_file, frame_fn = next(((f, fn) for f, fn in reversed(self.frames) if fn.class_name),
                                    (self.file, self.fn))
        cls = frame_file.classes.get(frame_fn.class_name or "")
        return cls is not None and _field_births(self.project, frame_file, cls, base, True) is not None

    def _constructed(self, value: cst.BaseExpression) -> bool:
        spec = apis.lookup(self.cfile.resolve(value.func, self.cfn)) if isinstance(value, cst.Call) else None
        return spec is not None and spec.role is apis.Role.STREAM_NEW

    def stream_compare(self, st: State, expr: cst.BaseExpression) -> str | None:
        """``current_stream() != self.s``: a test key recording which two streams are compared."""
        if not (isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1):
            return None
        op = expr.comparisons[0].operator
        if not isinstance(op, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)):
            return None
        sides, known = [], 0
        for side in (expr.left, expr.comparisons[0].comparator):
            v = self.ev(st, side)
            if isinstance(v, SVal) or self.kind_of(st, v) == STREAM:
                known += 1
            elif not isinstance(side, (cst.Name, cst.Attribute)) or isinstance(v, (CVal, TVal, EVal)):
                return None  # a constant, a tensor, an event: not a stream identity test
            sides.append(self.stream_key(st, v, side))
        if not known:
            return None  # one known stream is enough: a stream compares equal only to a stream
        equal_when_true = isinstance(op, (cst.Equal, cst.Is))
        key = f"<same-stream:{sides[0]}|{sides[1]}>"
        self.stream_tests[key] = (sides[0], sides[1], equal_when_true)
        return key


__all__ = ["RoundTests"]
