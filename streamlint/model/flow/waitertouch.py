"""Does the work after an early record touch what the event's waiters touch? (issue 16, [cross-method])

The threaded-waiter and release-guard paths of the early-record check
(:mod:`~streamlint.model.flow.threadwaiters`, :mod:`~streamlint.model.flow.releaseguards`) report a field event
recorded before work its waiters are not ordered with. That work only matters to them when it touches what they
touch: it reads a field they write (the uploader overwrites the slot the matmul still reads) or writes a field
they read. A prefetcher that hands a slot back right after its last read and then runs a norm on a fresh tensor,
or writes a field no waiter names, is correct as written::

    h = torch.matmul(x, self.slots[slot])
    self.consumed[slot].record()      # ok: the work after it reads `h`, a tensor the uploader cannot reach
    x = torch.nn.functional.layer_norm(h, h.shape[-1:])

:func:`work_meets_waiters` looks at each storage the work queued on the stream after the record (at ``time``,
up to its last work ``last``) reads or writes. A field of ``self`` (``self.slots[k]``, by name) touches the
waiters when they write it (for a read) or name it (for a write; every attribute a waiter or the ``self``
methods it calls names counts as read). A local of this function that was never stored away is invisible to
another method or thread. Anything else (a parameter, a value taken from a queue or a call, a local stored
into a field or handed on) is of unknown owner: a write of it touches the waiters, and so does a read when
the waiters write any field. Statements the flow did not follow (an inlined helper's call site) count by
their syntax: the ``self`` fields they name and write. When the waiters' fields cannot be gathered (too many
files) the answer is yes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.asidejoins import _fields_touched, _waiters_touch
from streamlint.model.streams import derived
from streamlint.model.syntax import node_memo

if TYPE_CHECKING:
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.flow.values import State


def _field(name: str | None) -> str | None:
    """``self.slots[k]`` / ``self.slots`` -> ``slots``; None for anything not a ``self`` field."""
    if not name or not name.startswith("self."):
        return None
    head = name[5:].split("[", 1)[0].split(".", 1)[0]
    return head if head.isidentifier() else None


def _waiter_sets(interp, key: str, thread: str | None) -> tuple[set[str], set[str]] | None:
    """(fields the waiters name, fields they write with device work); None when unknown."""
    from streamlint.model.eventguards import _method_writes, _writes
    cls = interp.file.classes.get(interp.fn.class_name or "")
    if thread is not None:
        method = cls.methods.get(thread) if cls is not None else None
        if method is None:
            return None
        return _fields_touched(interp.project, interp.file, method), _method_writes(interp.project, interp.file,
                                                                                     cls, thread)
    attr = key[5:].split("[", 1)[0].split(".", 1)[0] if key.startswith("self.") else None
    if attr is None or not attr.isidentifier():
        return None
    touched = _waiters_touch(interp.project, attr)
    if touched is None:
        return None
    waiters: list[FunctionInfo] = [w for w in derived(interp.project, "event_field_stream_waiters")[
        attr, ("wait_event", "wait")] if w.node is not interp.fn.node]
    written: set[str] = set()
    for w in waiters:
        written |= _writes(w.node.body, "self")
    return set(touched), written


def work_meets_waiters(interp, st: State, key: str, stream: str, time: int, last: int,
                       thread: str | None = None) -> bool:
    """Whether the work on ``stream`` after the record of ``key`` (at ``time``; last work at ``last``) touches
    what the event's waiters touch (see the module doc); ``thread`` names the waiter method on a thread of its
    own, else the waiters are the project's stream waiters of the field."""
    from streamlint.model.eventguards import _writes
    sets = _waiter_sets(interp, key, thread)
    if sets is None:
        return True
    named, written = sets
    named.discard(key[5:].split("[", 1)[0] if key.startswith("self.") else "")
    within = lambda a: a is not None and a.stream == stream and time < a.time <= last  # noqa: E731
    for S in st.stores.values():
        wrote = within(S.last_write) or any(within(a) for a in S.parts)
        read = any(within(a) for a in S.reads) or any(within(a) for a in S.uses)
        if not (wrote or read):
            continue
        field = _field(S.name)
        if field is not None:
            if wrote and field in named or read and field in written:
                return True
        elif S.kind == "local" and (not S.escaped or S.name and S.name.split("[", 1)[0] not in
                                    node_memo("names_into_self", interp.fn.node, _names_into_self)):
            continue  # (this function's own tensor, returned at most: no other method or thread reaches it)
        elif wrote or written:
            return True
    for t, node in interp.work_sites.get(stream, ()):
        if not time < t <= last or any(t == u for u, _ in interp.op_sites.get(stream, ())):
            continue  # (work the flow followed is in the storages above)
        names = {n.attr.value for n in _self_attrs(node)}
        if _writes(node, "self") & named or names & written:
            return True
    return False


def _self_rooted(e: cst.BaseExpression) -> bool:
    while isinstance(e, (cst.Attribute, cst.Subscript, cst.Call)):
        e = e.func if isinstance(e, cst.Call) else e.value
    return isinstance(e, cst.Name) and e.value == "self"


def _in_place(func: cst.BaseExpression) -> bool:
    return isinstance(func, cst.Attribute) and func.attr.value.endswith("_") and not func.attr.value.startswith("_")


def _names_into_self(fn_node: cst.CSTNode) -> frozenset[str]:
    """The names the function stores into a ``self`` field (``self.f[k] = x``) or hands to a call that reaches
    one (``self.q.put((k, x))``, ``hand(x, self.q)``): its locals another method or thread may reach. A tensor
    op given a field (``torch.matmul(x, self.w)``) and an in-place op of one (``self.out.copy_(x)``) copy data,
    they store no reference."""
    from streamlint.model.syntax import local_nodes
    out: set[str] = set()
    for n in local_nodes(fn_node):
        if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and n.value is not None:
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            if any(_self_rooted(t) for t in targets):
                out |= {m.value for m in local_nodes(n.value) if isinstance(m, cst.Name)}
        elif isinstance(n, cst.Call) and (_self_rooted(n.func) and not _in_place(n.func)
                                          or isinstance(n.func, cst.Name)
                                          and any(_self_rooted(a.value) for a in n.args)):
            out |= {m.value for a in n.args for m in local_nodes(a.value) if isinstance(m, cst.Name)}
    return frozenset(out)


def _self_attrs(node: cst.CSTNode):
    from streamlint.model.syntax import local_nodes
    for n in local_nodes(node):
        if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == "self":
            yield n


__all__ = ["work_meets_waiters"]
