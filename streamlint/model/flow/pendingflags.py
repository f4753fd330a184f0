"""Pending flags: the flag a recorder raises next to its event record, and the methods that test and lower it
(issue 16, [cross-method]; the low half of :mod:`~streamlint.model.flow.pendingmarks`, kept free of the join-step
modules so that :mod:`~streamlint.model.flow.asidejoins` can ask it).

``fences``: for a method recording an event field (``self._event.record(side)``) and raising a flag
(``self._pending = True``), the other methods of its class that test the flag and lower it (``fence()``, ``drain()``).
``gated_by_mark``: a join of the recording stream made only while such a flag is up, in a method lowering it,
while another fence of that flag waits on the event -- the two are alternatives, so the join is aside from the
event protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from streamlint._lazy import cst
from streamlint.model.apis import event_record_shape
from streamlint.model.syntax import local_nodes, node_code, self_attribute

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import ClassInfo, FunctionInfo


def recorded_fields(cls: ClassInfo, skip: Callable[[FunctionInfo], bool] | None = None) \
        -> list[tuple[FunctionInfo, str, cst.CSTNode]]:
    """(method, field, the record) for each ``self.<field>`` event a method of the class (not the constructor, nor
    one ``skip`` names) records on a stream: ``self.F.record(s)``, ``s.record_event(self.F)``, ``self.F =
    s.record_event()``."""
    out: list[tuple[FunctionInfo, str, cst.CSTNode]] = []
    for m in cls.methods.values():
        if m.params[:1] != ("self",) or m.node.name.value == "__init__" or skip is not None and skip(m):
            continue
        for site in m.calls:
            node, target = site.node, None
            if site.method == "record" and isinstance(node.func, cst.Attribute) and event_record_shape(node):
                target = node.func.value
            elif site.method == "record_event" and node.args:
                target = node.args[0].value
            field = self_attribute(target)
            if field is not None:
                out.append((m, field, node))
        for a in m.assigns:
            field = a.target[5:] if a.target.startswith("self.") else None
            if field and field.isidentifier() and isinstance(a.value, cst.Call) \
                    and isinstance(a.value.func, cst.Attribute) and a.value.func.attr.value == "record_event":
                out.append((m, field, a.node))
    return out


def flag_assigns(fn: FunctionInfo, value: str) -> list[tuple[str, cst.Assign]]:
    """(field, assignment) for each ``self.<field> = <value>`` of ``fn`` (``self._pending = True``): the target
    is compared as a CST ``Attribute`` of ``self``, never as text."""
    out: list[tuple[str, cst.Assign]] = []
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value == value:
            out.extend((field, node) for t in node.targets if (field := self_attribute(t.target)) is not None)
    return out


def _self_flag_sets(fn: FunctionInfo, value: str) -> set[str]:
    """The fields ``fn`` sets to the literal ``value`` (``self._pending = True``)."""
    return {field for field, _ in flag_assigns(fn, value)}


def _reads(expr: cst.CSTNode, field: str) -> bool:
    """Does ``expr`` read ``self.<field>`` (an ``Attribute`` node: ``self.busy_count`` is not ``self.busy``)?"""
    return any(isinstance(n, cst.Attribute) and self_attribute(n) == field for n in local_nodes(expr))


def tests_field(fn: FunctionInfo, field: str) -> bool:
    """Does an ``if`` / ``while`` test (or a conditional expression) of ``fn`` read ``self.<field>``?"""
    return any(isinstance(node, (cst.If, cst.While, cst.IfExp)) and _reads(node.test, field)
               for node in local_nodes(fn.node.body))


def fences(cls: ClassInfo, recorder: FunctionInfo) -> list[tuple[FunctionInfo, str]]:
    """(method, flag) for each other method of the class that tests a flag ``recorder`` raises and lowers it."""
    raised = _self_flag_sets(recorder, "True")
    out = []
    for m in cls.methods.values():
        if m is recorder or m.params[:1] != ("self",) or m.node.name.value.startswith("__"):
            continue
        for flag in sorted(raised & _self_flag_sets(m, "False")):
            if flag not in _self_flag_sets(m, "True") and tests_field(m, flag):
                out.append((m, flag))
                break
    return out


def _waits_field(fn: FunctionInfo, field: str) -> bool:
    """``X.wait_event(self.<field>)``, ``self.<field>.wait()`` / ``.synchronize()`` in ``fn``."""
    for site in fn.calls:
        node = site.node
        if site.method == "wait_event" and node.args and node_code(node.args[0].value) == f"self.{field}":
            return True
        if site.method in ("wait", "synchronize") and isinstance(node.func, cst.Attribute) \
                and node_code(node.func.value) == f"self.{field}":
            return True
    return False


def _marks_gating(fn: FunctionInfo, node: cst.CSTNode) -> set[str]:
    """The ``self`` flags a test gates ``node`` on in ``fn``: an ``if`` holding it whose test reads ``self.F`` (not
    ``not self.F``), or an earlier statement of the body ``if not self.F: return``."""
    out: set[str] = set()
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else []
    for stmt in local_nodes(fn.node.body):
        if isinstance(stmt, cst.If) and any(n is node for n in local_nodes(stmt.body)):
            negated = {id(n.expression) for n in local_nodes(stmt.test)
                       if isinstance(n, cst.UnaryOperation) and isinstance(n.operator, cst.Not)}
            out |= {field for a in local_nodes(stmt.test) if isinstance(a, cst.Attribute)
                    and id(a) not in negated and (field := self_attribute(a)) is not None}
    for stmt in body:
        if any(n is node for n in local_nodes(stmt)):
            break
        if isinstance(stmt, cst.If) and isinstance(stmt.test, cst.UnaryOperation) \
                and isinstance(stmt.test.operator, cst.Not) and self_attribute(stmt.test.expression) is not None and any(
                isinstance(n, cst.Return) for n in local_nodes(stmt.body)):
            out.add(stmt.test.expression.attr.value)
    return out


def gated_by_mark(file: FileModel, method: FunctionInfo, site) -> bool:
    """Is the join ``site`` of ``method`` gated on a pending flag that ``method`` lowers and that another method of
    the class -- the waiter of an event field whose recorder raises that flag -- tests and lowers too? The two are
    alternatives (``drain()`` synchronising the stream, ``fence()`` waiting on the event): whichever runs first
    lowers the flag and the other skips, so the join is no step between the recorder and the waiter's readers
    (:mod:`~streamlint.model.flow.asidejoins`)."""
    cls = file.classes.get(method.class_name or "")
    if cls is None:
        return False
    flags = _marks_gating(method, site.node) & _self_flag_sets(method, "False")
    if not flags:
        return False
    for recorder, field, _node in recorded_fields(cls):
        for fence, flag in fences(cls, recorder):
            if fence is not method and flag in flags and _waits_field(fence, field):
                return True
    return False


__all__ = ["fences", "flag_assigns", "gated_by_mark", "recorded_fields", "tests_field"]
