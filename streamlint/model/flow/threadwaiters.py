"""Event fields waited on by a method the class runs on a thread of its own (issue 16, [cross-method]).

A pipelined class often splits its loop over threads: ``step()`` updates on the update stream and records
``self.slot_free[k]`` when it is through with a slot; ``_refill()``, started as
``threading.Thread(target=self._refill)``, makes the upload stream wait on ``self.slot_free[k]`` before it
overwrites that slot. The early-record check
(:meth:`~streamlint.model.flow.orderings.Orderings.uncovered_records`) takes a join of the side stream after
the record (the current stream's ``wait_stream`` at the end of ``run()``, a host synchronisation, a later event)
as ordering the work after the record for the event's waiters: they are presumed to run after this function, on
its current stream or after its caller's join. A waiter on another thread runs while this function still does:
none of those joins orders it, only the event does::

    with torch.cuda.stream(self.update_stream):
        self.slot_free[k].record()            # SL201: the refill thread overwrites the moments read below
        param.addcdiv_(grad, self.moment_slots[k].sqrt(), value=-lr)
    self.step_done.record(self.update_stream)
    torch.cuda.current_stream().wait_event(self.step_done)

:func:`thread_waiter` names the waiter when every function of the project waiting on the field's events with a
stream (``s.wait_event(self.slot_free[k])``, ``self.slot_free[k].wait()``) is a method of this class that the class itself
starts as a thread target (``Thread(target=self._refill)``, ``pool.submit(self._refill)``; also through a module alias of ``threading``). The
finding is medium: that the thread waits while this function runs is presumed from the thread start, not from an
ordering the analysis follows. Not when the host synchronised the stream after the work (the thread may be handed
its turn only after that, by a queue put) or when a later record of the same field covers the work (the thread may
wait on that element).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.escapes import field_stream_waited
from streamlint.model.flow.hostargs import thread_slot
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, node_memo

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import ClassInfo, FunctionInfo
    from streamlint.model.project import Project


def thread_targets(project: Project, cls: ClassInfo) -> frozenset[str]:
    """The methods of ``cls`` it starts as thread targets (``threading.Thread(target=self._refill)``,
    ``executor.submit(self._refill)``: :func:`~streamlint.model.flow.hostargs.thread_slot`): a fact of
    the class's own syntax, kept per class node (:func:`~streamlint.model.syntax.node_memo` holds the node, so an
    id is never answered for another class)."""
    return node_memo("class_thread_targets", cls.node, lambda _node: _thread_targets(cls))


def _thread_targets(cls: ClassInfo) -> frozenset[str]:
    found: set[str] = set()
    for m in cls.methods.values():
        for n in local_nodes(m.node.body):
            if isinstance(n, cst.Call):
                found.update(a.value.attr.value for i, a in enumerate(n.args)
                             if isinstance(a.value, cst.Attribute) and isinstance(a.value.value, cst.Name)
                             and a.value.value.value == "self" and thread_slot(n, i))
    return frozenset(found)


def thread_waiter(project: Project, file: FileModel, fn: FunctionInfo, key: str) -> str | None:
    """The method waiting on event ``key`` (a ``self.F`` field or element, recorded in ``fn``) on a thread of its
    own, when every stream waiter of field ``F`` in the project is such a method of ``fn``'s class; else None."""
    if not key.startswith("self."):
        return None
    attr = key[5:].split("[", 1)[0].split(".", 1)[0]
    cls = file.classes.get(fn.class_name or "")
    if cls is None or not attr.isidentifier() or not field_stream_waited(project, attr, fn):
        return None
    targets = thread_targets(project, cls)
    if not targets:
        return None
    waiters = [w for w in derived(project, "event_field_stream_waiters")[attr, ("wait_event", "wait")]
               if w.node is not fn.node]
    own = {id(cls.methods[t].node): t for t in targets if t in cls.methods}
    if not waiters or any(id(w.node) not in own for w in waiters):
        return None
    return own[id(waiters[0].node)]


__all__ = ["thread_targets", "thread_waiter"]
