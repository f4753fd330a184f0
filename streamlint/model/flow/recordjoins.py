"""Results handed back inside a work record that joins their stream (issue 16, a caller protocol).

``return ExchangeWork(recv=recv, work=work, stream=stream)``: a function queues work on a side stream and hands
back, with its results, a record of a project class built with that very stream, and a method of the class makes
the current stream wait for the field holding it (``current_stream().wait_stream(self.stream)`` in ``wait()``).
The record is the join handle of that work, as a collective's work object is: the caller reads the results after
``work.wait()``, which is the record's protocol, not a missing join here (:func:`record_joins`). A record whose
methods never join the field (a ``wait()`` that only waits the collective's handle) is no such handle, nor is a
plain tuple ``(result, stream)``.

The builder form (:func:`sibling_fence`): ``stage()`` queues a D2H on ``stream = self._pool.stream(dev)`` and hands
back the pinned target; ``finish()``, a sibling method of the same class, binds a stream from the very same getter,
records an event on it and hands the event on (in a fence record it returns): the class's protocol hands the
caller the join of what ``stage()`` queued. A sibling recording on another stream (the current one) fences nothing
of it."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.filefacts import ClassInfo
from streamlint.model.flow.droppedevents import passed_on
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


def _waits_field(cls: ClassInfo, field: str) -> bool:
    """Does a method of ``cls`` call ``self.<field>.wait()`` / ``.synchronize()`` (the handle it was given)?"""
    return any(site.method in ("wait", "synchronize") and isinstance(site.node.func, cst.Attribute)
               and isinstance(site.node.func.value, cst.Attribute) and isinstance(site.node.func.value.value, cst.Name)
               and site.node.func.value.value.value == "self" and site.node.func.value.attr.value == field
               for m in cls.methods.values() for site in m.calls)


def record_joins(project, file, fn, node: cst.CSTNode | None, stream: str, label: str | None = None) -> bool:
    """Does the hand-back ``node`` (a ``return``) give the caller a record of a project class built with the stream
    ``stream`` (its text here) in a field some method of the class joins into the current stream, or built with the
    handed-back value ``label`` itself in a field a method waits (``self.handle.wait()``: a collective's work handle
    the record waits for the caller)?"""
    calls = _constructions(fn, handed_value(node))
    if not calls or not stream or stream.startswith("<"):
        return False
    for call in calls:
        target = file.resolve(call.func, fn) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
        sym = project.symbol(target, file) if target is not None else None
        if sym is None or not isinstance(sym[0], ClassInfo):
            return False
        cls, mod = sym
        given = construction_fields(project, mod, cls, call).items()
        fields = [f for f, v in given if file.code(v).replace('"', "'") == stream]
        handles = [f for f, v in given if label is not None and file.code(v) == label]
        if not fields or not (any(class_joins(project, mod, cls, f"self.{f}") for f in fields)
                              or any(_waits_field(cls, f) for f in handles)):
            return False
    return True


def _getter(fn, name: str, file) -> str | None:
    """The one call text ``name`` is bound to in ``fn`` (``self._pool.stream``), when every binding is a call of it
    through an attribute of ``self``; else None."""
    values = fn.name_assigns.get(name, ()) if name.isidentifier() and name not in fn.all_params else ()
    funcs = {file.code(v.func) for v in values if isinstance(v, cst.Call)}
    if not values or len(funcs) != 1 or not all(isinstance(v, cst.Call) for v in values):
        return None
    func = next(iter(funcs))
    return func if func.startswith("self.") else None


def sibling_fence(project, file, fn, stream: str) -> bool:
    """Does a sibling method of ``fn``'s class bind a local stream from the same ``self.*`` getter as ``stream``
    (a local of ``fn``), record an event on it (``ev.record(s)``, ``ev = s.record_event()``) and hand that event on
    (an argument of a call, returned, stored: droppedevents.passed_on)?"""
    cls = file.classes.get(fn.class_name or "") if fn is not None else None
    getter = _getter(fn, stream, file) if cls is not None else None
    if getter is None:
        return False
    for m in cls.methods.values():
        if m is fn:
            continue
        locals_ = {n for n in m.name_assigns if _getter(m, n, file) == getter}
        if not locals_:
            continue
        events = set()
        for site in m.calls:
            func = site.node.func
            if site.method == "record" and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                    and site.node.args and file.code(site.node.args[0].value) in locals_:
                events.add(func.value.value)
        events |= {n for n, vs in m.name_assigns.items() if vs and all(
            isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "record_event"
            and file.code(v.func.value) in locals_ for v in vs)}
        if any(passed_on(file, m, ev, local=True) for ev in events):
            return True
    return False


__all__ = ["record_joins", "sibling_fence"]
