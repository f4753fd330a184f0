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

Neither is a join step a caller runs between the producer and the event's waiters, so neither covers the
work a producer queues after its last record of the event. :func:`aside_joins_only` tells the early-record
check (:meth:`~streamlint.model.flow.orderings.Orderings.uncovered_records`) that every join of the stream
by another method of the class is of these kinds; it then reports the record at medium confidence, and
only for an event some code of the project waits on by a device wait (the class's consumers rely on it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.syntax import normalized_code
from streamlint.model.file import ClassInfo, FileModel, FunctionInfo
from streamlint.model.streams import derived

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
    from streamlint.model.flow.protocols import _syncs_device
    if _syncs_device(project, method, file):
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
    for site in _joins(file, method, wanted):
        line = file.span(site.node).start_line
        if _own_work_before(file, method, wanted, line):
            continue
        if site.method == "synchronize" and _quiesces(project, file, method, wanted):
            continue
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
