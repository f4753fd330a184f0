"""Loops over an index collection that pick streams from a list (mixin of :class:`~streamlint.model.flow.interp.Interp`).

Work is often spread over streams through a collection of indices rather than the streams themselves: an
expert / a layer / a bucket is assigned ``self.expert_streams[e]``, an index into the list of streams, and
the fork loop runs ``with torch.cuda.stream(streams[self.expert_streams[e]]):`` for each ``e`` (one stream
key for every element: the collapsed reading of :mod:`~streamlint.model.flow.elements`). The join is then a
loop over the same index collection: ``for i in set(self.expert_streams): gate.wait_stream(streams[i])``
(or ``streams[i].wait_stream(gate)`` before the fork). Its loop variable walks *every* element of the
collection, so ``streams[i]`` stands for every stream ``streams[self.expert_streams[...]]`` at once: its key
is the *family key* ``streams[self.expert_streams[*]]``.

A loop covers the index collection ``I`` when it walks ``I`` itself, ``set(I)`` / ``frozenset(I)`` /
``list(I)`` / ``tuple(I)`` / ``sorted(I)`` / ``reversed(I)`` of it, ``I.values()``, the values of
``I.items()`` or the elements of ``enumerate(I)`` (its variable is ``I[*]``), or ``range(len(I))`` (its
variable is every index of ``I``: ``I[i]`` is ``I[*]``), and its body uses ``xs[<variable>]`` (``xs[I[i]]``)
as a stream (a join, a record, a stream scope, directly or through a local). A slice (``I[1:]``), a
comprehension filtering it, ``range(1, len(I))`` or any other collection is no cover: the variable keeps the
collapsed reading.

A join naming a family key applies to every stream key of the family (``streams[self.expert_streams[e]]``
for any index text ``e``, the family key itself included): waited on, each member the path has queued
work on is joined up to now; waiting, each member known now waits, and so does every member used later
(the family's clock, :attr:`State.families`, merged into a member's in ``State.know``)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.values import KVal, State, family_match, merge_clock
from streamlint.model.syntax import call_name
from streamlint.model.walk import children

WILD = "*"
_WRAPPERS = frozenset({"set", "frozenset", "list", "tuple", "sorted", "reversed"})
_STREAM_USES = frozenset({"wait_stream", "wait_event", "record_event", "synchronize", "query"})
_SCOPES = frozenset({"stream", "StreamContext"})


def _unwrap(it: cst.BaseExpression) -> cst.BaseExpression:
    """``sorted(set(I))`` -> ``I`` (the positional argument of the order / container builtins)."""
    while isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in _WRAPPERS \
            and len([a for a in it.args if a.keyword is None]) == 1 and not any(a.star for a in it.args) \
            and it.args[0].keyword is None and (it.func.value == "sorted" or len(it.args) == 1):
        it = it.args[0].value
    return it


def _collection(e: cst.BaseExpression) -> bool:
    """A named collection (``I``, ``self.I``, ``cfg.I``, ``self.map[k]``), not a slice or a call."""
    if isinstance(e, cst.Subscript):
        return len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) and _collection(e.value)
    return isinstance(e, cst.Name) or isinstance(e, cst.Attribute) and _collection(e.value)


def covering_parts(node: cst.For) -> list[tuple[str, cst.BaseExpression, str]]:
    """``[(loop variable, collection I, "element" | "index")]`` for a loop walking every element (every index)
    of a named collection; [] for any other loop."""
    it, target = _unwrap(node.iter), node.target
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range" \
            and len(it.args) == 1 and it.args[0].keyword is None and not it.args[0].star:
        n = it.args[0].value  # `range(len(I))`
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "len" and len(n.args) == 1 \
                and _collection(n.args[0].value) and isinstance(target, cst.Name):
            return [(target.value, n.args[0].value, "index")]
        return []
    pick = None
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate" \
            and len(it.args) == 1 and it.args[0].keyword is None:
        it, pick = _unwrap(it.args[0].value), 1
    elif isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args \
            and it.func.attr.value in ("values", "items"):
        pick = 1 if it.func.attr.value == "items" else None
        it = it.func.value
    if not _collection(it):
        return []
    if pick is not None:
        if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2
                and isinstance(target.elements[pick].value, cst.Name)):
            return []
        return [(target.elements[pick].value.value, it, "element")]
    return [(target.value, it, "element")] if isinstance(target, cst.Name) else []


def _picks_stream(body: cst.CSTNode, name: str, coll: cst.BaseExpression | None) -> bool:
    """Does the loop body use ``xs[name]`` (``coll`` given: ``xs[coll[name]]``) as a stream, directly or
    through a local bound to it?"""
    code = cst.Module([]).code_for_node
    wanted = code(coll) if coll is not None else None

    def index_ok(e: cst.BaseExpression) -> bool:
        if wanted is None:
            return isinstance(e, cst.Name) and e.value == name
        return isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) \
            and isinstance(e.slice[0].slice.value, cst.Name) and e.slice[0].slice.value.value == name \
            and code(e.value) == wanted

    def picked(e: cst.BaseExpression) -> bool:
        if isinstance(e, cst.Name):
            return e.value in aliases
        return isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) \
            and index_ok(e.slice[0].slice.value)

    aliases: set[str] = set()
    nodes: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        nodes.append(node)
        stack.extend(children(node))
    for node in nodes:
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
                and picked(node.value):
            aliases.add(node.targets[0].target.value)
    for node in nodes:
        if not isinstance(node, cst.Call):
            continue
        method = call_name(node)
        receiver = node.func.value if isinstance(node.func, cst.Attribute) else None
        args = [a.value for a in node.args]
        if method in _STREAM_USES and (receiver is not None and picked(receiver) or args and picked(args[0])):
            return True
        if method in _SCOPES and args and picked(args[0]):
            return True
    return False


class IndexSets:
    """Family keys of streams picked through a covered index collection (mixin of the interpreter).

    Interp state it uses: ``clock``. It asks orderings (``render``, ``wait_stream`` of the next mixin)."""

    def covering_bindings(self, st: State, node: cst.For) -> dict[str, object]:
        """The loop variables of a loop covering an index collection that picks streams: name -> the value
        whose rendering makes ``xs[name]`` (``xs[I[name]]``) the family key."""
        found: dict[str, object] = {}
        for name, coll, how in covering_parts(node):
            if not _picks_stream(node.body, name, coll if how == "index" else None):
                continue
            key = self.render(st, coll)
            if WILD in key or not key.replace("_", "a").replace(".", "a").replace("[", "a").replace("]", "a") \
                    .replace("'", "a").replace('"', "a").isalnum():
                continue
            found[name] = KVal(f"{key}[{WILD}]") if how == "element" else KVal(WILD)
            self.__dict__.setdefault("covers", set()).add(f"{key}[{WILD}]")
        return found

    def wait_stream(self, st: State, waiter: str, producer: str) -> None:
        covers = self.__dict__.get("covers", ())
        wild_waiter, wild_producer = _family(waiter, covers), _family(producer, covers)
        if wild_waiter == wild_producer:  # neither (or both: left as two plain keys)
            super().wait_stream(st, waiter, producer)  # type: ignore[misc]
            return
        if wild_producer:  # the join: every member queued so far
            for key in sorted(k for k in _stream_keys(st) if family_match(producer, k)):
                super().wait_stream(st, waiter, key)  # type: ignore[misc]
            return
        for key in sorted(k for k in _stream_keys(st) if family_match(waiter, k)):  # the fork: every member
            super().wait_stream(st, key, producer)  # type: ignore[misc]
        snap = st.know(producer)
        snap[producer] = self.clock
        merge_clock(st.families.setdefault(waiter, {}), snap)  # ... and every member used from now on


def _family(key: str, covers) -> bool:
    """Is ``key`` a family key: ``xs[I[*]]`` for a collection ``I`` a covering loop walks?"""
    return key.count(WILD) == 1 and any(key.endswith(f"[{c}]") for c in covers)


def _stream_keys(st: State) -> set[str]:
    """Every stream key the path knows: work queued, clocks, accesses of the storages."""
    keys = set(st.last_op) | set(st.work) | set(st.vc)
    for clock in st.vc.values():
        keys.update(clock)
    for S in st.stores.values():
        keys.update(a.stream for a in (S.last_write, S.born, *S.reads, *S.uses, *S.parts) if a is not None)
    return keys


__all__ = ["IndexSets", "covering_parts"]
