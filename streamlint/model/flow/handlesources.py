"""Where a returned handle travels between the methods of its class before it is read (issue 16, [cross-method]).

:mod:`~streamlint.model.flow.returnedhandles` ties a consumer's local to the producer method that builds the record
(the side-stream copies and the event recorded after them) by the call that returned it. A prefetching loader hands
the record on through other methods first: a getter that returns the producer's result or the record prefetched
earlier, kept in a field (``return self._upload(k)`` on a miss, else ``batch = self._next; self._next = None;
return batch``), and a field filled by the producer in another method (``self._next = self._upload(k + 1)``), or by a
worker thread running it (``self._next = self._pool.submit(self._upload, k + 1)``, taken with ``.result()``).

:func:`handle_sources` answers per producer, to a fixpoint: the *forwarders*, methods of the class (not the
producer) every ``return`` of which is None or a handle source, at least one not None; and the *handle fields*,
``self.F`` every store of which in the class is None, a handle source call, or an executor's ``submit`` of the
producer or a forwarder (``X.submit(self.<m>, ...)``), at least one not None. A handle source is a call of
``self.<producer>`` or of a forwarder, a handle field, its ``.result()``, a conditional of those, or a local of the
method bound only to them. The consumer's other checks (no wait, no join, no escape of the handle) are
:mod:`returnedhandles`'."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import normalized_code

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.project import Project


def handle_sources(project: Project, file: FileModel, cls: ClassInfo, producer: FunctionInfo) \
        -> tuple[frozenset[str], frozenset[str]]:
    """(method names whose call gives the producer's record: the producer and its forwarders, handle fields)."""
    memo = derived(project, "handle_sources")
    key = (id(cls), id(producer))
    if key not in memo:
        memo[key] = _sources(file, cls, producer)
    return memo[key]


def is_source(file: FileModel, fn: FunctionInfo, value: cst.BaseExpression, calls, fields, pool=(), depth=0) -> bool:
    """Is ``value`` (in ``fn``) a handle source, or None? (``pool``: locals of ``fn`` already taken for handles.)"""
    if isinstance(value, cst.IfExp):
        return is_source(file, fn, value.body, calls, fields, pool, depth) \
            and is_source(file, fn, value.orelse, calls, fields, pool, depth)
    if isinstance(value, cst.Name):
        if value.value == "None" or value.value in pool:
            return True
        bound = fn.name_assigns.get(value.value, ())
        return depth < 2 and bool(bound) and all(is_source(file, fn, v, calls, fields, pool, depth + 1) for v in bound)
    if isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Attribute) \
            and value.func.attr.value == "result":
        value = value.func.value  # (a Future of it: ``self._next.result()``)
        return _field(file, value) in fields
    if isinstance(value, cst.Attribute):
        return _field(file, value) in fields
    return isinstance(value, cst.Call) and _field(file, value.func) in calls


def not_none(value: cst.BaseExpression | None) -> bool:
    return value is not None and not (isinstance(value, cst.Name) and value.value == "None")


def _field(file: FileModel, node: cst.BaseExpression) -> str | None:
    text = normalized_code(file.code(node))
    parts = text.split(".")
    return parts[1] if len(parts) == 2 and parts[0] == "self" and parts[1].isidentifier() else None


def _submitted(file: FileModel, value: cst.BaseExpression, calls) -> bool:
    """``pool.submit(self.<m>, ...)`` with ``m`` in ``calls``: a Future of its result."""
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "submit" \
        and bool(value.args) and _field(file, value.args[0].value) in calls


def _sources(file: FileModel, cls: ClassInfo, producer: FunctionInfo) -> tuple[frozenset[str], frozenset[str]]:
    calls, fields = {producer.node.name.value}, set()
    stores: dict[str, list[tuple[FunctionInfo, cst.BaseExpression]]] = {}
    for m in cls.methods.values():
        for a in m.assigns:
            parts = a.target.split(".")
            if a.function is m and len(parts) == 2 and parts[0] == "self":
                stores.setdefault(parts[1], []).append((m, a.value))
    changed = True
    while changed:
        changed = False
        for name, values in stores.items():
            if name not in fields and any(not_none(v) for _, v in values) and all(
                    not not_none(v) or _submitted(file, v, calls) or is_source(file, m, v, calls, fields)
                    for m, v in values):
                fields.add(name)
                changed = True
        for m in cls.methods.values():
            name = m.node.name.value
            if name in calls or m.params[:1] != ("self",) or not m.returns:
                continue
            values = [r.value for r in m.returns]
            if any(not_none(v) for v in values) and all(not not_none(v) or is_source(file, m, v, calls, fields)
                                                       for v in values):
                calls.add(name)
                changed = True
    return frozenset(calls), frozenset(fields)


__all__ = ["handle_sources", "is_source", "not_none"]
