"""Release events do not cover the writes of the work they follow (issue 16, [cross-method] record-event-early).

A swap-in path often records two events on its transfer stream for one copy: a field event the consumer method
waits before reading the destination (``self.block_ready[req]``, waited in ``attend()``), and a release event of
the source handed back with it to the free list it came from (``self.bounce_free.append((bounce, released))``:
the next swap refills ``bounce`` once ``released`` completes)::

    with torch.cuda.stream(self.swap_stream):
        self.block_ready[req].record()              # SL201: recorded before the copy its waiter relies on
        self.kv_blocks[req].copy_(bounce, non_blocking=True)
        released.record()                           # guards `bounce` only: its waiter refills the source
    self.bounce_free.append((bounce, released))

The early-record check (:meth:`~streamlint.model.flow.orderings.Orderings.uncovered_records`) takes any event
recorded after the last work on the stream as the join of that work: its waiters order everything before it.
That holds for whoever waits on it. A release event kept only in records with other values (every hand-over of
it in this function is a tuple, none holding the written tensor: the free list's ``(bounce, released)``) is waited
by the owner of those values, not by the readers of what the work writes. :func:`release_only` tells the check
so when every event recorded after the work is of that kind and the work writes a tensor none of them is kept
with, a tensor that outlives the function (handed out, kept in a field or handed in): the field event recorded
before the write is then the only handle its readers have, and the record is reported at medium confidence
(the readers are in another method or thread; the pairing of the field event with the written tensor is
presumed from the class's protocol, not seen). Only when that work touches what the field's waiters touch
(:mod:`~streamlint.model.flow.waitertouch`). An index or key item in the tuple (``(slot, released)``) is taken
as a value like any other: the check rests on the waiters reading what the work writes, not on the pairing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.syntax import local_nodes, node_memo

if TYPE_CHECKING:
    from streamlint.model.flow.values import State


def _root(e: cst.BaseExpression) -> str | None:
    """``host`` for ``host`` / ``host[k]`` / ``host.data``; ``self.bufs`` for ``self.bufs[k]``."""
    while isinstance(e, (cst.Subscript, cst.Attribute)):
        if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self":
            return f"self.{e.attr.value}"
        e = e.value
    return e.value if isinstance(e, cst.Name) else None


def _name_root(name: str) -> str:
    """``self.bufs[k]`` -> ``self.bufs``; ``dev[k]`` -> ``dev``."""
    head = name.split("[", 1)[0]
    parts = head.split(".")
    return ".".join(parts[:2]) if parts[0] == "self" and len(parts) > 1 else parts[0]


def kept_with(fn_node: cst.CSTNode, name: str) -> set[str] | None:
    """The names event ``name`` is kept with when every mention of it in the function (``fn_node``) other than its
    own methods (``name.record()``, ``name.synchronize()``) and its bindings (a ``for`` / assignment target) is an
    element of a tuple / list display of two or more items (``pool.put((host, name))``); None otherwise (it is
    handed alone, passed as an argument, waited on by a stream, or never handed). Memoised per function and
    name: the early-record check asks it at every path end."""
    return node_memo(f"kept_with:{name}", fn_node, lambda node: _kept_with(node, name))


def _parents(fn_node: cst.CSTNode) -> tuple[list[cst.CSTNode], dict[int, cst.CSTNode]]:
    """The function's own nodes and the parent of each (memoised per function)."""
    def compute(node: cst.CSTNode) -> tuple[list[cst.CSTNode], dict[int, cst.CSTNode]]:
        nodes = list(local_nodes(node))
        parents: dict[int, cst.CSTNode] = {}
        for n in nodes:
            for c in n.children:
                parents[id(c)] = n
        return nodes, parents
    return node_memo("kept_with_parents", fn_node, compute)


def _kept_with(fn_node: cst.CSTNode, name: str) -> set[str] | None:
    nodes, parents = _parents(fn_node)
    others: set[str] = set()
    handed = False
    for n in nodes:
        if not (isinstance(n, cst.Name) and n.value == name):
            continue
        up = parents.get(id(n))
        if isinstance(up, cst.Attribute) and up.value is n:
            continue  # `name.record()`: its own method
        if isinstance(up, cst.Element):
            display = parents.get(id(up))
            holder = parents.get(id(display))
            if isinstance(display, (cst.Tuple, cst.List)) and len(display.elements) >= 2:
                if isinstance(holder, (cst.For, cst.AssignTarget, cst.CompFor)) \
                        and getattr(holder, "target", None) is display:
                    continue  # `for host, name in ...`: a binding
                handed = True
                others.update(r for el in display.elements if el.value is not n and (r := _root(el.value)))
                continue
        if isinstance(up, (cst.AssignTarget, cst.For)) and getattr(up, "target", None) is n:
            continue
        return None
    return others if handed else None


def release_only(interp, st: State, covers: list[str], stream: str, time: int, last: int) -> str | None:
    """The first of ``covers`` (events recorded on ``stream`` after its last work, at ``last``) when each is only a
    release guard of other values (see the module doc) and the work queued after ``time`` (the early record)
    writes a long-lived tensor none of them is kept with; else None."""
    kept: set[str] = set()
    for key in covers:
        if not key.isidentifier():
            return None  # a field event, an element: whoever waits on it may read anything the stream wrote
        with_ = kept_with(interp.fn.node, key)
        if not with_:
            return None  # never handed out, or handed alone (a join handle of its own)
        kept |= with_
    for S in st.stores.values():
        lw = S.last_write
        if lw is None or lw.stream != stream or not time < lw.time <= last or not S.name:
            continue
        root = _name_root(S.name)
        if root.replace("self.", "", 1).isidentifier() and root not in kept and root != "self" \
                and (S.escaped or S.kind != "local"):
            return covers[0]
    return None


__all__ = ["kept_with", "release_only"]
