"""Which elements of a container a name stands for (issue 16 §3, "Tensors in containers", "Streams the way
training frameworks hold them").

Streams and events are often kept in containers: ``self.events[d]``, ``self.streams[d]``, ``h2d_end_events[i]``,
``tracker.event_sets[i]``, ``{id(t.ready): t.ready for t in targets}``, ``list(self.events.items())``. Code then
records or waits on a *name* bound from the container (a loop target, ``ev = self.events[i]``, a comprehension
over the elements' ``.ready`` fields), and every question about that event -- who waits on it, which of the
container's elements a join loop reaches -- needs the name's origin: the container it came from, the field of
each element it takes, and which elements it reaches.

An :class:`Origin` is that answer, computed syntactically per function (one pass, memoised):

* ``container``: the container's expression (``self.events``, ``reqs``; a local alias ``evs = self.events`` is
  read through);
* ``field``: the attribute taken of each element (``r.ready`` -> ``"ready"``), None for the element itself;
* ``reach``: the elements reached -- ``ALL`` (a loop over the whole container, its ``.values()`` / ``.items()``
  / ``enumerate`` / ``zip`` / a comprehension over it, filtered only by the element's presence), ``FIRST_OUT``
  / ``LAST_OUT`` (a slice ``[1:]`` / ``[:-1]`` of those), ``ONE`` (a subscript or ``.get(k)`` / ``.pop(k)``)
  or ``SOME`` (any other slice or filter: a subset of unknown shape).

Consumers: :func:`~streamlint.model.flow.calls.event_field_waited` (an event field is waited when a wait
takes an element of it through any such name: the waiter of an event recorded in another method),
:func:`~streamlint.model.waits.partial_joins` (a join loop reaching a strict subset of a container whose
every element a producer loop records after its work).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamlint._lazy import cst
from streamlint.model.syntax import local_nodes, slice_drop

ALL, FIRST_OUT, LAST_OUT, ONE, SOME = "all", "first", "last", "one", "some"

_TAKE = frozenset({"get", "pop", "popleft", "setdefault"})
_WRAPPERS = frozenset({"list", "tuple"})


@dataclass(frozen=True)
class Origin:
    container: cst.BaseExpression
    field: str | None
    reach: str
    node: cst.CSTNode  # the binding: a ``for`` / comprehension, an assignment

    @property
    def holder(self) -> str | None:
        """The container's last name: ``self.events`` -> ``events``, ``evs`` -> ``evs``."""
        e = self.container
        while isinstance(e, cst.Subscript):
            e = e.value
        return e.attr.value if isinstance(e, cst.Attribute) else e.value if isinstance(e, cst.Name) else None


# a collection's iteration: (path into the loop target, container, field) per element kind it yields, its reach
Shape = "tuple[tuple[tuple[tuple[int, ...], cst.BaseExpression, str | None], ...], str]"


def _slice_reach(sl: cst.BaseSlice) -> str:
    return {"none": ALL, "first": FIRST_OUT, "last": LAST_OUT}.get(slice_drop(sl), SOME)


def _presence_filter(ifs, target: cst.BaseExpression) -> bool:
    """``if t.ready is not None`` / ``if t.ready`` / ``if e is not None``: keeps every element that has one."""
    names = {target.value} if isinstance(target, cst.Name) else set()
    for clause in ifs:
        test = clause.test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
                and isinstance(test.comparisons[0].operator, cst.IsNot) \
                and isinstance(test.comparisons[0].comparator, cst.Name) \
                and test.comparisons[0].comparator.value == "None":
            test = test.left
        root = test
        while isinstance(root, cst.Attribute):
            root = root.value
        if not (isinstance(root, cst.Name) and root.value in names):
            return False
    return True


class _Resolver:
    def __init__(self) -> None:
        self.aliases: dict[str, Shape] = {}
        self.origins: dict[str, list[Origin]] = {}

    def shape(self, e: cst.BaseExpression) -> Shape | None:
        """How iterating ``e`` yields container elements (None: not a container this module knows)."""
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value in _WRAPPERS \
                and len(e.args) == 1 and not e.args[0].star:
            return self.shape(e.args[0].value)
        if isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Slice):
            inner = self.shape(e.value)
            if inner is None:
                return None
            reach = _slice_reach(e.slice[0].slice) if inner[1] == ALL else SOME
            return inner[0], reach
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and not e.args \
                and e.func.attr.value in ("values", "items"):
            base = e.func.value
            if isinstance(base, cst.DictComp):
                got = self._comprehension(base, base.value)
            else:
                got = (((((), base, None),), ALL) if self._plain(base) else None) \
                    if not (isinstance(base, cst.Name) and base.value in self.aliases) else self.aliases[base.value]
            if got is None:
                return None
            if e.func.attr.value == "items":
                return tuple(((1, *p), c, f) for p, c, f in got[0]), got[1]
            return got
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value in ("enumerate", "zip") \
                and e.args and not any(a.star or a.keyword is not None for a in e.args):
            parts = e.args if e.func.value == "zip" else e.args[:1]
            if e.func.value == "enumerate" and len(e.args) != 1:
                return None
            kinds, reach = [], ALL
            for i, a in enumerate(parts):
                got = self.shape(a.value)
                if got is None:
                    continue
                pos = 1 if e.func.value == "enumerate" else i
                kinds += [((pos, *p), c, f) for p, c, f in got[0]]
                reach = got[1] if reach == ALL else (reach if got[1] == ALL else SOME)
            return (tuple(kinds), reach) if kinds else None
        if isinstance(e, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self._comprehension(e, e.elt)
        if isinstance(e, cst.Name) and e.value in self.aliases:
            return self.aliases[e.value]
        if self._plain(e):
            return (((), e, None),), ALL
        return None

    @staticmethod
    def _plain(e: cst.BaseExpression) -> bool:
        """A container named by a chain of attributes and indices (``self.recv_events[chunk]``)."""
        while isinstance(e, cst.Attribute) or isinstance(e, cst.Subscript) and len(e.slice) == 1 \
                and isinstance(e.slice[0].slice, cst.Index):
            e = e.value
        return isinstance(e, cst.Name)

    def _comprehension(self, comp, elt: cst.BaseExpression) -> Shape | None:
        """``[r.ready for r in reqs]`` -> the ``ready`` field of each element of ``reqs``."""
        clause = comp.for_in
        if clause.inner_for_in is not None or not isinstance(clause.target, cst.Name):
            return None
        inner = self.shape(clause.iter)
        if inner is None or len(inner[0]) != 1 or inner[0][0][0] != () or inner[0][0][2] is not None:
            return None
        container = inner[0][0][1]
        reach = inner[1] if not clause.ifs or _presence_filter(clause.ifs, clause.target) else SOME
        var = clause.target.value
        if isinstance(elt, cst.Name) and elt.value == var:
            return (((), container, None),), reach
        if isinstance(elt, cst.Attribute) and isinstance(elt.value, cst.Name) and elt.value.value == var:
            return (((), container, elt.attr.value),), reach
        return None

    def bind_target(self, target: cst.BaseExpression, shape: Shape, node: cst.CSTNode) -> None:
        kinds, reach = shape
        for path, container, field in kinds:
            t = target
            for i in path:
                if not isinstance(t, (cst.Tuple, cst.List)) or i >= len(t.elements):
                    t = None
                    break
                t = t.elements[i].value
            if isinstance(t, cst.Name):
                self.origins.setdefault(t.value, []).append(Origin(container, field, reach, node))

    def element(self, e: cst.BaseExpression) -> tuple[cst.BaseExpression, str] | None:
        """``xs[i]`` / ``xs.get(k)`` / ``xs.pop()`` -> (``xs``, reach)."""
        if isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
            return e.value, ONE
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in _TAKE:
            return e.func.value, ONE
        return None

    def run(self, fn_node: cst.FunctionDef) -> None:
        for node in local_nodes(fn_node.body):
            if isinstance(node, (cst.For, cst.CompFor)):
                got = self.shape(node.iter)
                if got is not None:
                    self.bind_target(node.target, got, node)
            elif isinstance(node, cst.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0].target, cst.Name):
                name, value = node.targets[0].target.value, node.value
                taken = self.element(value)
                if taken is not None:
                    base = taken[0]
                    if isinstance(base, cst.Name) and base.value in self.aliases:
                        kinds = self.aliases[base.value][0]
                        if len(kinds) == 1 and kinds[0][0] == ():
                            self.origins.setdefault(name, []).append(Origin(kinds[0][1], kinds[0][2], ONE, node))
                    elif self._plain(base) or isinstance(base, cst.Subscript):
                        self.origins.setdefault(name, []).append(Origin(base, None, ONE, node))
                    continue
                if isinstance(value, cst.Name) and value.value == name:
                    continue
                got = self.shape(value)
                if got is not None:
                    self.aliases[name] = got
                else:
                    self.aliases.pop(name, None)


_MEMO: dict[int, tuple[cst.CSTNode, dict[str, list[Origin]], dict[str, Shape]]] = {}


def _resolved(fn_node: cst.FunctionDef) -> tuple[dict[str, list[Origin]], dict[str, Shape]]:
    hit = _MEMO.get(id(fn_node))
    if hit is not None and hit[0] is fn_node:
        return hit[1], hit[2]
    r = _Resolver()
    r.run(fn_node)
    if len(_MEMO) > 4096:
        _MEMO.clear()
    _MEMO[id(fn_node)] = (fn_node, r.origins, r.aliases)
    return r.origins, r.aliases


def forget_nodes(live: "set[int]") -> None:
    """Drop the memo's answers but those for the functions whose node's id is in ``live`` (each holds its
    node: a tree the engine let go must not stay alive here, issue 15)."""
    for key in [key for key in _MEMO if key not in live]:
        del _MEMO[key]


def origins(fn_node: cst.FunctionDef) -> dict[str, list[Origin]]:
    """Per local name of the function, the container elements it is bound to (see the module docstring)."""
    return _resolved(fn_node)[0]


def element_origins(fn_node: cst.FunctionDef, e: cst.BaseExpression) -> list[Origin]:
    """The container elements an expression used as a stream or event stands for: a name bound from a
    container, ``xs[i]`` / ``xs.get(k)`` (through a local alias of ``xs``), ``o.ready`` of an element ``o``."""
    found, aliases = _resolved(fn_node)
    if isinstance(e, cst.Name):
        return list(found.get(e.value, ()))
    if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name):
        return [Origin(o.container, e.attr.value, o.reach, o.node) for o in found.get(e.value.value, ())
                if o.field is None]
    r = _Resolver()
    r.aliases = aliases
    taken = r.element(e)
    if taken is None:
        return []
    base = taken[0]
    if isinstance(base, cst.Name) and base.value in aliases:
        kinds = aliases[base.value][0]
        return [Origin(kinds[0][1], kinds[0][2], ONE, e)] if len(kinds) == 1 and kinds[0][0] == () else []
    return [Origin(base, None, ONE, e)]


__all__ = ["ALL", "FIRST_OUT", "LAST_OUT", "ONE", "SOME", "Origin", "element_origins", "origins"]
