"""Hand-offs to another process (issue 16, [ipc-consumer]): a channel whose reader runs on a stream of its own.

A device tensor put on a queue of ``multiprocessing`` / ``torch.multiprocessing`` (``Queue``, ``SimpleQueue``,
``JoinableQueue``, one made by a context, ``mp.get_context("spawn").Queue()``, or by a manager) is pickled through
torch's CUDA IPC reduction: the sender records an IPC event on the current stream when the tensor is shared and
the receiving process waits on that event before it reads. Work on the tensor queued on a side stream that was
never joined into the current stream is not covered: the other process reads what the side stream may still be
writing. So a put on such a queue reads its device tensors on the current stream at the put (SL201 at the put when
they are pending on a side stream), as ``reduce_tensor(t)`` and a pipe's ``conn.send(t)`` (calls of code the
analysis does not read) already do; host tensors are the host-read rules' (``hostreads.host_consumer_call``).
A queue of ``queue`` / ``threading`` (another thread of the same process, whose consumers the thread hand-off
rules follow: :mod:`~streamlint.model.flow.queuehandoffs`) and a receiver of unknown class stay escapes only.

The channel is known by what the code says of the receiver: a parameter annotated with such a class, a local or a
``self`` field bound to such a construction (in any method of the class), a field declared with such a class.

``event.ipc_handle()`` is the event itself for the process it is handed to: that process rebuilds it
(``Event.from_ipc_handle``) and waits on it. Returning or sending the handle hands the event over, as returning the
event does (an early record is then reported against the work it should cover: :func:`event_handle_call`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint.model import apis
from streamlint._lazy import cst
from streamlint.model.flow.values import EVal, TupVal
from streamlint.model.syntax import self_attribute

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo

_PROCESS_MODULES = frozenset({"multiprocessing", "torch.multiprocessing"})
_QUEUE_CLASSES = frozenset({"Queue", "SimpleQueue", "JoinableQueue"})
_CONTEXT_GETTERS = frozenset({"get_context", "Manager", "SyncManager"})
PUTS = frozenset({"put", "put_nowait"})


def event_handle_call(call: cst.Call) -> bool:
    """``ev.ipc_handle()``: the handle another process rebuilds the event ``ev`` from."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "ipc_handle" and not call.args


def _process_queue_name(qualname: str | None) -> bool:
    """``torch.multiprocessing.Queue``, ``multiprocessing.queues.SimpleQueue``: a queue class of a process module."""
    return qualname is not None and apis.in_modules(qualname, _PROCESS_MODULES) \
        and qualname.rsplit(".", 1)[-1] in _QUEUE_CLASSES


def _process_queue_value(file: FileModel, fn: FunctionInfo | None, value: cst.BaseExpression, depth: int = 0) -> bool:
    """Is ``value`` the construction of a process queue: ``mp.Queue(n)``, ``ctx.Queue()`` with ``ctx`` bound to
    ``mp.get_context(...)``, ``mp.get_context("spawn").Queue()``, ``mp.Manager().Queue()``?"""
    if not isinstance(value, cst.Call) or depth > 2:
        return False
    func = value.func
    if _process_queue_name(file.resolve(func, fn) if isinstance(func, (cst.Name, cst.Attribute)) else None):
        return True
    if not isinstance(func, cst.Attribute) or func.attr.value not in _QUEUE_CLASSES:
        return False
    maker = func.value
    if isinstance(maker, cst.Name) and fn is not None:
        bound = fn.name_assigns.get(maker.value, [])
        return len(bound) == 1 and _context_value(file, fn, bound[0])
    return _context_value(file, fn, maker)


def _context_value(file: FileModel, fn: FunctionInfo | None, value: cst.BaseExpression) -> bool:
    """``mp.get_context("spawn")`` / ``mp.Manager()`` of a process module."""
    if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
        return False
    target = file.resolve(value.func, fn)
    return target is not None and apis.in_modules(target, _PROCESS_MODULES) \
        and target.rsplit(".", 1)[-1] in _CONTEXT_GETTERS


def _annotated_queue(file: FileModel, fn: FunctionInfo | None, annotation: cst.BaseExpression) -> bool:
    """``q: mp.Queue``, ``q: "torch.multiprocessing.Queue"`` is not read (a string), ``Optional[mp.Queue]``."""
    if isinstance(annotation, cst.Subscript):
        return any(isinstance(el.slice, cst.Index) and _annotated_queue(file, fn, el.slice.value)
                   for el in annotation.slice)
    if isinstance(annotation, cst.BinaryOperation):  # `mp.Queue | None`
        return _annotated_queue(file, fn, annotation.left) or _annotated_queue(file, fn, annotation.right)
    return isinstance(annotation, (cst.Name, cst.Attribute)) and _process_queue_name(file.resolve(annotation, fn))


def _param_annotation(fn: FunctionInfo, name: str) -> cst.BaseExpression | None:
    params = fn.node.params
    for p in (*params.posonly_params, *params.params, *params.kwonly_params):
        if p.name.value == name:
            return p.annotation.annotation if p.annotation is not None else None
    return None


def process_queue(file: FileModel, fn: FunctionInfo, recv: cst.BaseExpression) -> bool:
    """Is ``recv`` (the receiver of a ``put``) a queue to another process, by what the code says of it?"""
    if isinstance(recv, cst.Name):
        name = recv.value
        if name in fn.all_params:
            ann = _param_annotation(fn, name)
            return ann is not None and _annotated_queue(file, fn, ann)
        bound = fn.name_assigns.get(name, [])
        return bool(bound) and all(_process_queue_value(file, fn, v) for v in bound)
    field = self_attribute(recv)
    if field is None or fn.class_name is None or fn.class_name not in file.classes:
        return False
    cls = file.classes[fn.class_name]
    if _process_queue_name(cls.attr_types.get(field)):
        return True
    values = [(a.value, a.function) for m in cls.methods.values() for a in m.assigns if a.target == f"self.{field}"]
    if values and all(_process_queue_value(file, f, v) or _handed_queue(file, f, v) for v, f in values):
        return True
    return any(isinstance(stmt, cst.SimpleStatementLine) and isinstance(s, cst.AnnAssign)
               and isinstance(s.target, cst.Name) and s.target.value == field
               and _annotated_queue(file, None, s.annotation.annotation)
               for stmt in cls.node.body.body if isinstance(stmt, cst.SimpleStatementLine) for s in stmt.body)


def _handed_queue(file: FileModel, fn: FunctionInfo | None, value: cst.BaseExpression) -> bool:
    """``self.q = q`` with the parameter ``q: mp.Queue``."""
    if fn is None or not isinstance(value, cst.Name) or value.value not in fn.all_params:
        return False
    ann = _param_annotation(fn, value.value)
    return ann is not None and _annotated_queue(file, fn, ann)


def handed_event_keys(values: list) -> list[str]:
    """The events handed in ``values`` (directly, or as items of a tuple / record: ``q.put((out, ready))``)."""
    out: list[str] = []
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, EVal):
            out.append(v.key)
        elif isinstance(v, TupVal):
            stack.extend(v.items)
    return out
