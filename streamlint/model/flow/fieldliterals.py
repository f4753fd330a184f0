"""Conditions that follow a call: the literal a method stores in a field of the object decides the caller's tests.

A method the step calls first often *chooses* what the step does later and records the choice in a field of
the object as a literal: ``self.sync_at = "before_exchange"`` on one branch, ``"before_sort"`` on another
(a capacity / drop mode, a schedule), and the step then tests it (``if self.sync_at == "before_sort":
stream.synchronize()``). The interpreter keeps on each path the string / integer literal last assigned to a
``self.*`` field (``State.literals``, in the function or in a helper it inlined), and a test of that field
against a literal (``==``, ``!=``, ``in`` / ``not in`` a tuple, list or set of literals) is decided on the path:
the value is the one assigned, and a literal never assigned there makes ``==`` false. A field no statement of
the path assigned (an unseen writer: ``__init__``, another caller) decides nothing: both outcomes run.
Boolean literals keep their older home, ``State.assume`` (``self._pending = True``).

An inlined helper runs on one path (``single`` mode: :meth:`FieldLiterals._preferred` picks one outcome of each
branch), so the choices the helper makes on its other paths would never reach the caller. :func:`steer_points`
lists, for a function that tests a field against literals, the assignments of a literal to that field in the
methods of the object it calls whose paths also queue non-blocking device-to-host copies (their results
pending in fields or handed back: :mod:`~streamlint.model.flow.hostreads`); the function is run again once per
such assignment (``Interp.steer``, :func:`~streamlint.model.dataflow.function_flow`), the inlined helper taking the
branches that hold it (then, where nothing steers, the branches that queue such copies), with the helper's
branch tests constraining its later ones as in a path-sensitive run. The caller's later host reads of those
copies then meet the synchronisation its tests pick for that choice, or miss it (SL201, medium: one chosen
path through the helper stands for the configurations that take it).
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import string_value
from streamlint.model.flow.coarse import branch_ends as _returns
from streamlint.model.flow.hostreads import async_host_copy_call
from streamlint.model.flow.values import CVal, State
from streamlint.model.syntax import contains, local_nodes, self_attribute
from streamlint.model.walk import children

MAX_STEERS = 8  # extra runs of one function, one per literal assignment a callee makes


def _literal(e: cst.BaseExpression) -> object:
    """The value of a string / integer literal (``None`` for anything else)."""
    if isinstance(e, cst.SimpleString):
        return string_value(e)
    if isinstance(e, cst.Integer):
        return e.evaluated_value
    return None


def _literals(e: cst.BaseExpression) -> tuple | None:
    """The literals of a tuple / list / set display of literals only."""
    if not isinstance(e, (cst.Tuple, cst.List, cst.Set)):
        return None
    values = tuple(_literal(el.value) for el in e.elements)
    return None if any(v is None for v in values) else values


def field_literal_tests(fn) -> frozenset[str]:
    """The ``self.*`` fields ``fn`` tests against a literal (``if self.mode == "drop":``)."""
    found = set()
    for n in local_nodes(fn.node):
        if isinstance(n, cst.Comparison) and len(n.comparisons) == 1:
            comp = n.comparisons[0]
            for a, b in ((n.left, comp.comparator), (comp.comparator, n.left)):
                if (name := self_attribute(a)) is not None and (_literal(b) is not None or _literals(b) is not None):
                    found.add(name)
    return frozenset(found)


def _queues_host_copies(node: cst.CSTNode) -> bool:
    """Does ``node`` hold a call queuing a non-blocking device-to-host copy (``x.to("cpu", non_blocking=True)``)?"""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and async_host_copy_call(n, n.func.attr.value):
            return True
        stack.extend(children(n))
    return False


def _assigned(n: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(n, cst.Assign):
        return [t.target for t in n.targets]
    return [n.target] if isinstance(n, (cst.AugAssign, cst.AnnAssign)) else []


def steer_points(project, file, fn) -> list[cst.CSTNode]:
    """The assignments of a literal to a field ``fn`` tests against literals, in the methods of the object ``fn``
    calls (``self.plan(...)``) that also queue non-blocking device-to-host copies: one steered run each."""
    tested = field_literal_tests(fn) if fn.class_name else frozenset()
    if not tested:
        return []
    points: list[cst.CSTNode] = []
    for site in fn.calls:
        func = site.node.func
        if not (isinstance(func, cst.Attribute) and self_attribute(func) is not None):
            continue
        found = project.call_target(file, site)
        if found is None or found[0] is fn or not _queues_host_copies(found[0].node):
            continue
        for n in local_nodes(found[0].node):
            if isinstance(n, cst.Assign) and len(n.targets) == 1 and self_attribute(n.targets[0].target) in tested \
                    and _literal(n.value) is not None and n not in points:
                points.append(n)
    return points[:MAX_STEERS]


class FieldLiterals:
    """Literals stored in ``self.*`` fields and the tests they decide (mixin of the interpreter).

    Interp state it uses: ``depth``, ``focus``, ``steer``; it asks orderings (render)."""

    steer: cst.CSTNode | None = None  # a steered run: the literal assignment an inlined helper's path runs through

    def note_literal(self, st: State, key: str, v: object) -> None:
        """``self.<field> = v``: a boolean is an assumption (``if self._pending:``); a string / integer literal the
        field's value on this path; anything else forgets it."""
        if not key.startswith("self."):
            return
        if isinstance(v, CVal) and isinstance(v.value, bool):
            st.assume[key] = v.value  # `self._pending = True`: a later `if self._pending:` on this path knows
        if isinstance(v, CVal) and isinstance(v.value, (str, int)) and not isinstance(v.value, bool):
            st.literals[key] = v.value
        else:
            st.literals.pop(key, None)

    def forget_literals(self, st: State, e: cst.Call, found) -> None:
        """``self.m(...)`` not run here (not inlined): the fields ``m`` assigns (every field when ``m`` is not
        found) may hold another value after it."""
        if not st.literals or not (isinstance(e.func, cst.Attribute) and self_attribute(e.func) is not None):
            return
        fields = None if found is None else {f"self.{name}" for n in local_nodes(found[0].node)
                                             for t in _assigned(n) if (name := self_attribute(t)) is not None}
        for key in [k for k in st.literals if fields is None or k in fields]:
            del st.literals[key]

    def literal_test(self, st: State, test: cst.BaseExpression) -> bool | None:
        """``self.f == "x"`` / ``!=`` / ``in ("x", "y")`` / ``not in`` when this path assigned ``self.f`` a literal."""
        if not st.literals or not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return None
        comp = test.comparisons[0]
        for field, other in ((test.left, comp.comparator), (comp.comparator, test.left)):
            if not isinstance(field, cst.Attribute):
                continue
            key = self.render(st, field)
            if key not in st.literals:
                continue
            value = st.literals[key]
            if isinstance(comp.operator, (cst.Equal, cst.NotEqual)) and (lit := _literal(other)) is not None:
                return (value == lit) == isinstance(comp.operator, cst.Equal)
            if isinstance(comp.operator, (cst.In, cst.NotIn)) and other is comp.comparator \
                    and (lits := _literals(other)) is not None:
                return (value in lits) == isinstance(comp.operator, cst.In)
        return None

    def _preferred(self, todo):
        """The one outcome a single-path run takes at a branch: through the focus statement, through the steered
        assignment (then a branch queuing a non-blocking host copy), else one that mentions an ordering."""
        if self.focus is not None and self.depth == 0:  # the one path through a given statement
            for outcome, runner in todo:
                if getattr(runner, "node", None) is not None and contains(runner.node, self.focus):
                    return outcome, runner
            for outcome, runner in todo:  # a branch that returns would end the path before it
                if not _returns(runner):
                    return outcome, runner
        if self.steer is not None and self.depth > 0:
            nodes = [(x, getattr(x[1], "node", None)) for x in todo]
            for x, node in nodes:
                if node is not None and contains(node, self.steer):
                    return x
            for x, node in nodes:
                if node is not None and not _returns(x[1]) and _queues_host_copies(node):
                    return x
        relevant = [(o, r) for o, r in todo if getattr(r, "relevant", False)]  # not a returning one of them (an
        # inlined helper's early return would drop its work and result), nor one raising (its caller stops there)
        return next((x for x in relevant if len(relevant) < 2 or not _returns(x[1])),
                    (relevant or [x for x in todo if not _returns(x[1], raises=True)] or todo)[0])
