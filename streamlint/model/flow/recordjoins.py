"""Results handed back inside a work record that joins their stream (issue 16, a caller protocol).

``return ExchangeWork(recv=recv, work=work, stream=stream)``: a function queues work on a side stream and hands
back, with its results, a record of a project class built with that very stream, and a method of the class makes
the current stream wait for the field holding it (``current_stream().wait_stream(self.stream)`` in ``wait()``).
The record is the join handle of that work, as a collective's work object is: the caller reads the results after
``work.wait()``, which is the record's protocol, not a missing join here (:func:`record_joins`). A record whose
methods never join the field (a ``wait()`` that only waits the collective's handle) is no such handle, nor is a
plain tuple ``(result, stream)``."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.filefacts import ClassInfo
from streamlint.model.flow.escapes import handed_value
from streamlint.model.flow.protocols import class_joins
from streamlint.model.handedevents import construction_fields


def _constructions(fn, value: cst.BaseExpression | None) -> list[cst.Call]:
    """The calls ``value`` is: itself, or every binding of a local name it is (``work = Cls(...); return work``)."""
    if isinstance(value, cst.Call):
        return [value]
    if isinstance(value, cst.Name) and value.value not in fn.all_params:
        bound = fn.name_assigns.get(value.value, ())
        return list(bound) if bound and all(isinstance(v, cst.Call) for v in bound) else []
    return []


def record_joins(project, file, fn, node: cst.CSTNode | None, stream: str) -> bool:
    """Does the hand-back ``node`` (a ``return``) give the caller a record of a project class built with the stream
    ``stream`` (its text here) in a field some method of the class joins into the current stream?"""
    calls = _constructions(fn, handed_value(node))
    if not calls or not stream or stream.startswith("<"):
        return False
    for call in calls:
        target = file.resolve(call.func, fn) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
        sym = project.symbol(target, file) if target is not None else None
        if sym is None or not isinstance(sym[0], ClassInfo):
            return False
        cls, mod = sym
        fields = [f for f, v in construction_fields(project, mod, cls, call).items()
                  if file.code(v).replace('"', "'") == stream]
        if not fields or not any(class_joins(project, mod, cls, f"self.{f}") for f in fields):
            return False
    return True


__all__ = ["record_joins"]
