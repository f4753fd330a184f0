"""Loops whose iterations alternate streams (issue 16 §3): loop-carried cross-stream ordering (mixin of
:class:`~streamlint.model.flow.interp.Interp`).

A ``for i in range(...)`` loop whose body picks its stream from a literal list of streams by the counter
(``streams[i % 2]``, ``streams[i - 1]``, ``streams[(i + 1) % n]``) runs a step on one stream and the next
step on another. When the steps write the same tensor in place (``dk.add_``, ``out[:, s].copy_``), each
step's stream must wait for the previous step's (``wait_event`` on an event the previous step recorded,
``wait_stream``): without it the two streams race on the tensor. Reading such a loop as its first
iterations with the counter's real values (``i = start, start + 1, start + 2``: :data:`COUNTER_ROUNDS`)
gives each step its real stream, so the vector clocks see the write-write / write-read race of two
consecutive steps when the wait is missing, and the wait when it is there (``if i > 1: wait_event(..)``
is decided by the counter's value).

Bounds that are not constants (``range(len(chunks) + 1)``, ``if i < len(chunks):``) are kept per path as
an interval of the bound's value (an *atom*: the expression's text, with a literal offset folded in), so a
path does not take ``i < len(chunks)`` false in one step and still run the next step."""

from __future__ import annotations

from dataclasses import dataclass

from streamlint._lazy import cst
from streamlint.model.flow.values import KVal, SVal, State, TupVal
from streamlint.model.streams import STREAM
from streamlint.model.syntax import int_literal, mentions_name
from streamlint.model.walk import children

COUNTER_ROUNDS = 3  # the steps read: two transitions from one step to the next
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_OPS = {"LessThan": "<", "LessThanEqual": "<=", "GreaterThan": ">", "GreaterThanEqual": ">=", "Equal": "==",
        "NotEqual": "!="}  # by class name: LibCST is imported lazily


@dataclass(frozen=True)
class NVal:
    """A known integer: the counter of an alternating-streams loop in one of its read steps, or a value
    computed from it (``i - 1``, ``i % 2``)."""

    n: int


def _holds(lo: int | None, hi: int | None, op: str, t: int) -> bool | None:
    """Does ``x op t`` hold for every x in [lo, hi] (True), for none (False), or is it open (None)?"""
    if op in ("<", "<="):
        bound = t if op == "<" else t + 1  # x < bound
        if hi is not None and hi < bound:
            return True
        if lo is not None and lo >= bound:
            return False
        return None
    if op in (">", ">="):
        bound = t if op == ">" else t - 1  # x > bound
        if lo is not None and lo > bound:
            return True
        if hi is not None and hi <= bound:
            return False
        return None
    inside = (lo is None or lo <= t) and (hi is None or hi >= t)
    if op == "==":
        return True if lo == hi == t else (None if inside else False)
    return False if lo == hi == t else (None if inside else True)


def _narrow(lo: int | None, hi: int | None, op: str, t: int) -> tuple[int | None, int | None]:
    if op == "<":
        hi = t - 1 if hi is None else min(hi, t - 1)
    elif op == "<=":
        hi = t if hi is None else min(hi, t)
    elif op == ">":
        lo = t + 1 if lo is None else max(lo, t + 1)
    elif op == ">=":
        lo = t if lo is None else max(lo, t)
    elif op == "==":
        lo, hi = t, t
    return lo, hi


class Counters:
    """Interp state it uses: ``cfile``, ``counted_loops``, ``depth``, ``focus``, ``single``. It asks exprs (ev),
    orderings (kind_of)."""

    def counter_rounds(self, st: State, node: cst.For) -> list[int] | None:
        """The counter values to read a ``for i in range([start,] stop)`` loop with, when its body picks
        a stream from a literal list of two or more streams by an index computed from ``i``."""
        it = node.iter
        if not (isinstance(node.target, cst.Name) and isinstance(it, cst.Call) and isinstance(it.func, cst.Name)
                and it.func.value == "range" and 1 <= len(it.args) <= 2
                and not any(a.keyword is not None or a.star for a in it.args)) \
                or self.single and (self.focus is None or self.depth):
            return None  # an inlined helper's loop runs once
        start = int_literal(it.args[0].value) if len(it.args) == 2 else 0
        if start is None or not self._picks_stream(st, node.body, node.target.value):
            return None
        if not any(loop is node for loop in self.counted_loops):
            self.counted_loops.append(node)
        return [start + k for k in range(COUNTER_ROUNDS)]

    def _picks_stream(self, st: State, body: cst.CSTNode, name: str) -> bool:
        stack = [body]
        while stack:
            n = stack.pop()
            if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(n, cst.Subscript) and len(n.slice) == 1 and isinstance(n.slice[0].slice, cst.Index) \
                    and mentions_name(n.slice[0].slice.value, name):
                coll = self.ev(st, n.value) if isinstance(n.value, (cst.Name, cst.Attribute)) else None
                if isinstance(coll, TupVal) and len(coll.items) >= 2 \
                        and all(isinstance(v, (SVal, KVal)) for v in coll.items) \
                        and any(isinstance(v, SVal) or self.kind_of(st, v) == STREAM for v in coll.items) \
                        and len({v.key for v in coll.items}) == len(coll.items):
                    return True  # `[torch.cuda.current_stream(), ctx.cp_stream]`: two streams told apart
            stack.extend(children(n))
        return False

    def counter_in_range(self, st: State, node: cst.For, value: int) -> bool:
        """Can the loop reach its step with counter ``value`` on this path (``value < stop``)? Narrows
        the stop bound's interval when it can."""
        stop = node.iter.args[-1].value
        return self._compare(st, NVal(value), "<", stop, narrow=True) is not False

    def counter_arith(self, left: object, op: cst.BaseBinaryOp, right: object) -> NVal | None:
        if not (isinstance(left, NVal) and isinstance(right, NVal)):
            return None
        a, b = left.n, right.n
        if isinstance(op, cst.Add):
            return NVal(a + b)
        if isinstance(op, cst.Subtract):
            return NVal(a - b)
        if isinstance(op, cst.Multiply):
            return NVal(a * b)
        if isinstance(op, cst.Modulo) and b:
            return NVal(a % b)
        if isinstance(op, cst.FloorDivide) and b:
            return NVal(a // b)
        return None

    def counter_test(self, st: State, test: cst.BaseExpression, outcome: bool | None = None) -> bool | None:
        """A comparison of a counter-derived integer with a literal or with a bound's atom: its value on this
        path (None: open); with ``outcome``, narrow the atom's interval to it."""
        negate = False
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negate = test.expression, not negate
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return None
        op = _OPS.get(type(test.comparisons[0].operator).__name__)
        if op is None:
            return None
        left, right = test.left, test.comparisons[0].comparator
        lv = self.counter_value(st, left)
        if not isinstance(lv, NVal):
            rv = self.counter_value(st, right)
            if not isinstance(rv, NVal):
                return None
            left, right, lv, op = right, left, rv, _FLIP[op]
        if outcome is not None:
            op = op if outcome != negate else _NEGATE[op]
            self._compare(st, lv, op, right, narrow=True)
            return None
        known = self._compare(st, lv, op, right, narrow=False)
        return None if known is None else known != negate

    def counter_value(self, st: State, e: cst.BaseExpression) -> object:
        """The known integer an expression of counters and literals denotes (no side effect), else None."""
        if isinstance(e, cst.Name) and isinstance(st.env.get(e.value), NVal):
            return st.env[e.value]
        if isinstance(e, cst.BinaryOperation):
            v = self.counter_arith(self.counter_value(st, e.left), e.operator, self.counter_value(st, e.right))
            if v is not None:
                return v
        n = int_literal(e)
        return NVal(n) if n is not None else None

    def _compare(self, st: State, v: NVal, op: str, other: cst.BaseExpression, narrow: bool) -> bool | None:
        """``v op other``: decided when ``other`` is a known integer, else by the interval of its atom."""
        ov = self.counter_value(st, other)
        if isinstance(ov, NVal):
            return {"<": v.n < ov.n, "<=": v.n <= ov.n, ">": v.n > ov.n, ">=": v.n >= ov.n,
                    "==": v.n == ov.n, "!=": v.n != ov.n}[op]
        offset = 0
        if isinstance(other, cst.BinaryOperation) and isinstance(other.operator, (cst.Add, cst.Subtract)) \
                and int_literal(other.right) is not None:
            offset = int_literal(other.right) * (1 if isinstance(other.operator, cst.Add) else -1)
            other = other.left
        if any(isinstance(st.env.get(n), NVal) for n in names_in(other)):
            return None  # `i < 2 * i - n`: no atom of its own
        atom = self.cfile.code(other)
        # v op atom + offset  <=>  atom flip(op) v - offset
        aop, t = _FLIP[op], v.n - offset
        lo, hi = st.bounds.get(atom, (None, None))
        known = _holds(lo, hi, aop, t)
        if narrow and known is None:
            st.bounds[atom] = _narrow(lo, hi, aop, t)
        return known


def counter_part(e: cst.Subscript, index: NVal) -> str | None:
    """The part of a tensor ``x[..., i - 1]`` selects in a step of a counted loop (two steps select disjoint
    parts), when every other subscript element is a full slice ``:``; a part along another dimension than
    the first is told by its dimension too."""
    dim = None
    for k, el in enumerate(e.slice):
        if isinstance(el.slice, cst.Index):
            dim = k
        elif not (isinstance(el.slice, cst.Slice) and el.slice.lower is None and el.slice.upper is None
                  and el.slice.step is None):
            return None
    return None if dim is None else str(index.n) if dim == 0 else f"dim{dim}:{index.n}"


def names_in(node: cst.CSTNode) -> list[str]:
    """Every name ``node`` mentions (attribute names and keywords included), in walk order."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            out.append(n.value)
        stack.extend(children(n))
    return out


__all__ = ["COUNTER_ROUNDS", "Counters", "NVal", "counter_part", "names_in"]
