"""Joins of a ``self.*`` side stream made aside from the class's event protocol (issue 16, "Across the
methods of one class").

A class that hands its side-stream work to its consumers through an event (``prefetch()`` copies into a
staging buffer on ``self.copy_stream`` and records ``self.ready[i]``; ``wait_layer()`` makes the current
stream wait on ``self.ready[i]``) often joins that stream elsewhere too, for reasons of its own:

* a method joins the work it queued there itself (``begin()`` copies a snapshot on the copy stream, then
  ``self.copy_stream.synchronize()`` before reading it on the host), before or after the protocol's
  producers run;
* a teardown quiesces every stream at once before freeing the buffers (``drain()``:
  ``self.transfer_stream.synchronize(); self.compute_stream.synchronize()``, or a device-wide
  ``torch.cuda.synchronize()`` next to the stream's), not between one producer and its consumer.

* an alternative to the event's waiter: a method joining the stream only while a pending flag the producer raises
  is up, and lowering it (``drain()``: ``if self._pending: self.side.synchronize(); self._pending = False``), where
  the event's waiter tests and lowers the same flag (``fence()``): whichever runs first lowers it and the other
  skips (:func:`~streamlint.model.flow.pendingflags.gated_by_mark`).

None is a join step a caller runs between the producer and the event's waiters, so neither covers the
work a producer queues after its last record of the event. :func:`aside_joins_only` tells the early-record
check (:meth:`~streamlint.model.flow.orderings.Orderings.uncovered_records`) that every join of the stream
by another method of the class is of these kinds; it then reports the record at medium confidence, and
only for an event some code of the project waits on by a device wait (the class's consumers rely on it).

Such a join still covers the work after the record for whoever reads its results after the join: a stream
synchronize (or a wait on the stream) joins all the work queued there before it, whatever that work wrote
(``read_stats()`` synchronises the copy stream, then reads the statistics a producer copied after its record).
Only the event's waiters rely on the record. :func:`waiters_read` tells whether any of them may read what the
uncovered work writes: the ``self.F`` fields its statements write with device work (eventguards' write
shapes, through the class's own methods too), against the fields every function waiting on an event field of
that name touches (and the methods of its class it calls on ``self``; for a waiting method, the functions
calling it, which read after its wait). Work whose outputs are not all known
fields (a guessed call on another object, a free helper, a local) counts as read: the finding stays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.syntax import normalized_code
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes

if TYPE_CHECKING:
    from streamlint.model.project import Project


_norm = normalized_code


def _names(file: FileModel, method: FunctionInfo, expr: cst.BaseExpression, wanted: str) -> bool:
    """``expr`` is the stream ``wanted``, by its text or through a local bound to it on some branch."""
    if _norm(file.code(expr)) == wanted:
        return True
    if isinstance(expr, cst.Name):
        for value in method.name_assigns.get(expr.value, ()):
            options = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
            if any(_norm(file.code(o)) == wanted for o in options):
                return True
    return False


def _joins(file: FileModel, method: FunctionInfo, wanted: str) -> list:
    """The sites of ``method`` that join ``wanted``: ``x.wait_stream(wanted)``, ``wanted.synchronize()``."""
    out = []
    for site in method.calls:
        node = site.node
        if site.method == "wait_stream" and node.args and _names(file, method, node.args[0].value, wanted) \
                or site.method == "synchronize" and isinstance(node.func, cst.Attribute) \
                and _names(file, method, node.func.value, wanted):
            out.append(site)
    return out


def _own_work_before(file: FileModel, method: FunctionInfo, wanted: str, line: int) -> bool:
    """``method`` queues work of its own on ``wanted`` before ``line``: a stream scope naming it
    (``with torch.cuda.stream(self.copy_stream):``) that ends before the join."""
    stack: list[cst.CSTNode] = [method.node.body]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(n, cst.With) and file.span(n).end_line < line and any(
                isinstance(item.item, cst.Call) and any(_norm(file.code(a.value)) == wanted for a in item.item.args)
                for item in n.items) and n.body.body:
            return True
        stack.extend(n.children)
    return False


def _quiesces(project: Project, file: FileModel, method: FunctionInfo, wanted: str) -> bool:
    """``method`` host-synchronises ``wanted`` together with another stream of the object (or the current
    stream), or the whole device: a teardown draining everything, not a step of the hand-off."""
    from streamlint.model.flow.protocols import synchronizes_device
    if synchronizes_device(project, file, method):
        return True
    for site in method.calls:
        func = site.node.func
        if site.method == "synchronize" and isinstance(func, cst.Attribute):
            other = _norm(file.code(func.value))
            if other != wanted and (other.startswith("self.") and "stream" in other.rsplit(".", 1)[-1].lower()
                                    or other.endswith("current_stream()")):
                return True
    return False


def _aside(project: Project, file: FileModel, method: FunctionInfo, wanted: str) -> bool:
    from streamlint.model.flow.pendingflags import gated_by_mark

    for site in _joins(file, method, wanted):
        line = file.span(site.node).start_line
        if _own_work_before(file, method, wanted, line):
            continue
        if site.method == "synchronize" and _quiesces(project, file, method, wanted):
            continue
        if gated_by_mark(file, method, site):
            continue  # an alternative to the event's waiter, both lowering one pending flag (pendingmarks.py)
        return False
    return True


def aside_joins_only(project: Project, file: FileModel, cls: ClassInfo, wanted: str, skip: FunctionInfo,
                     depth: int = 0) -> str | None:
    """The name of a method of ``cls`` (or of a project base class, three levels up) other than ``skip`` that
    joins the stream ``wanted`` (``self.copy_stream``), when every such join is aside from the event protocol
    (the method's own work before it, or a teardown quiescing every stream); ``None`` when there is no join or
    one may be a join step between producer and consumer."""
    memo = derived(project, "aside_joins_only")
    key = (id(cls), wanted, id(skip), depth)
    if key in memo:
        return memo[key]
    memo[key] = None
    found: str | None = None
    ok = depth <= 3
    for method in cls.methods.values() if ok else ():
        if method is skip or not _joins(file, method, wanted):
            continue
        if not _aside(project, file, method, wanted):
            ok = False
            break
        found = found or method.node.name.value
    for base in cls.bases if ok else ():
        sym = project.symbol(base, file)
        if sym is None or not isinstance(sym[0], ClassInfo):
            continue
        from streamlint.model.flow.protocols import class_joins
        if not class_joins(project, sym[1], sym[0], wanted, skip):
            continue
        inherited = aside_joins_only(project, sym[1], sym[0], wanted, skip, depth + 1)
        if inherited is None:
            ok = False
            break
        found = found or inherited
    memo[key] = found if ok else None
    return memo[key]


def _fields_touched(project: Project, file: FileModel, fn: FunctionInfo, depth: int = 0) -> set[str]:
    """The attribute names ``fn`` names (``x.F``, ``self.F[i]``), and those of its class's methods it calls on
    ``self`` (one level)."""
    out = {n.attr.value for n in local_nodes(fn.node.body) if isinstance(n, cst.Attribute)}
    cls = file.classes.get(fn.class_name or "") if depth == 0 else None
    for site in fn.calls if cls is not None else ():
        recv = site.receiver
        method = cls.methods.get(site.method or "") if isinstance(recv, cst.Name) and recv.value == "self" else None
        if method is not None and method is not fn:
            out |= _fields_touched(project, file, method, depth + 1)
    return out


def _touched_by_callers(project: Project, method: str) -> set[str] | None:
    """The fields the functions calling a method named ``method`` (``x.wait_layer(i)``) touch; None if too wide."""
    paths = project.paths_containing((f".{method}(".encode(),))
    if len(paths) > MAX_CALLER_FILES:
        return None
    out: set[str] = set()
    for path in paths:
        model = project.file(path)
        for fn in model.iter_functions() if model is not None else ():
            if any(site.method == method for site in fn.calls):
                out |= _fields_touched(project, model, fn)
    return out


def _waiters_touch(project: Project, event_field: str) -> frozenset[str] | None:
    """The fields the functions of the project waiting on an event field named ``event_field`` touch, and, for a
    waiting method (``wait_layer()``), the functions calling it: they read after its wait (memoised per project);
    None when the search is too wide to be sure."""
    from streamlint.model.flow.calls import waited_expr
    memo = derived(project, "aside_waiters_touch")
    if event_field not in memo:
        memo[event_field] = None
        paths = project.paths_containing((event_field.encode(),))
        if len(paths) > MAX_CALLER_FILES:
            return None
        out: set[str] = set()
        for path in paths:
            model = project.file(path)
            for fn in model.iter_functions() if model is not None else ():
                if any(isinstance(held := waited_expr(site), cst.Attribute) and held.attr.value == event_field
                       for site in fn.calls):
                    out |= _fields_touched(project, model, fn)
                    callers = _touched_by_callers(project, fn.node.name.value) if fn.class_name else set()
                    if callers is None:
                        return None
                    out |= callers
        memo[event_field] = frozenset(out)
    return memo[event_field]


def waiters_read(project: Project, file: FileModel, cls: ClassInfo, event_field: str,
                 statements: list[cst.CSTNode]) -> bool:
    """May a waiter of the event field ``event_field`` read what ``statements`` (the work queued after its
    record; see the module doc) write? False only when every statement writes known ``self`` fields with
    device work and no waiter touches any of them."""
    from streamlint.model.eventguards import _method_writes, _writes
    written: set[str] = set()
    for stmt in statements:
        fields = _writes(stmt, "self")
        for n in local_nodes(stmt):
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name) \
                    and n.func.value.value == "self":
                fields |= _method_writes(project, file, cls, n.func.attr.value)
        if not fields:
            return True  # (what this work writes is unknown)
        written |= fields
    touched = _waiters_touch(project, event_field)
    return not statements or touched is None or bool(written & touched)
