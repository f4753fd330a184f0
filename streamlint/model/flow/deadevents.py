"""Events nobody consumes, on a stream joined otherwise (issue 16, [dead-event]).

A class records an event the object holds (``self._round_done.record()`` after a round's last replay) and no
code of the project waits on it, queries it, synchronises it or hands it on. The join step's ``class-event``
evidence (:mod:`~streamlint.model.flow.joinsteps`) takes that as a lost wait. It is one only when the work it
marks is joined by nobody: when the stream the event is recorded on is joined after its work by other code of
the class (``pending.stream.wait_stream(self._round_stream)``, ``self._round_stream.synchronize()``), the
event is a leftover that guards nothing, and the missing wait on it is no race. The recording stream is the
record's own argument (``self.done.record(self.copy_stream)``, ``self.copy_stream.record_event()``) or, for a
record on the current stream, the stream scope around it: in the recorder, else around every call of the
recorder in the class (``with torch.cuda.stream(self._round_stream): self._launch_chain(rows)``). Unknown
streams, and records made outside any scope (the caller's current stream), keep the finding."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst

if TYPE_CHECKING:
    from streamlint.model.file import ClassInfo, FileModel, FunctionInfo
    from streamlint.model.project import Project


def recorded_on_joined_stream(project: Project, file: FileModel, cls: ClassInfo, recorder: FunctionInfo,
                              record: cst.CSTNode) -> bool:
    """Is every stream the event of ``record`` (in method ``recorder`` of ``cls``) can be recorded on a named
    stream of the object that another method of the class joins after its work (:func:`stream_joined_after`)?"""
    streams = _record_streams(file, cls, recorder, record)
    return bool(streams) and all(s is not None and stream_joined_after(project, file, cls, s) for s in streams)


def _record_streams(file: FileModel, cls: ClassInfo, recorder: FunctionInfo, record: cst.CSTNode) -> list[str | None]:
    if isinstance(record, cst.Assign):  # `self.done = self.copy_stream.record_event()`
        value = record.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            return [_field(value.func.value)]
        return [None]
    if not isinstance(record, cst.Call) or not isinstance(record.func, cst.Attribute):
        return [None]
    if record.func.attr.value == "record_event":
        return [_field(record.func.value)]
    if record.args and "current_stream(" not in file.code(record.args[0].value):
        return [_field(record.args[0].value)]
    site = next((c for c in recorder.calls if c.node is record), None)
    if site is None:
        return [None]
    if site.scope is not None:
        return [_scope_stream(recorder, site.scope)]
    name = recorder.node.name.value
    callers = [c for m in cls.methods.values() if m is not recorder for c in m.calls
               if c.method == name and isinstance(c.node.func, cst.Attribute)
               and isinstance(c.node.func.value, cst.Name) and c.node.func.value.value == "self"]
    return [_scope_stream(c.function, c.scope) if c.scope is not None else None for c in callers] or [None]


def _scope_stream(fn: FunctionInfo | None, scope) -> str | None:
    """The object's stream a ``with torch.cuda.stream(self.S)`` scope makes current: ``S`` (also through a local
    every assignment of which in ``fn`` is ``self.S``: ``round_stream = self._round_stream``)."""
    for call in scope.calls:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "stream" and call.args:
            arg = call.args[0].value
            if isinstance(arg, cst.Name) and fn is not None:
                fields = {_field(v) for v in fn.name_assigns.get(arg.value, ())}
                return fields.pop() if len(fields) == 1 else None
            return _field(arg)
    return None


def _field(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


def stream_joined_after(project: Project, file: FileModel, cls: ClassInfo, name: str) -> bool:
    """Does a method of ``cls`` order other work after its stream ``self.<name>`` (``X.wait_stream(self.name)``,
    ``self.name.synchronize()``, also through a local bound to it), other than a teardown quiescing every stream
    (``asidejoins``)? A record on it or a fork of it is no join; a stream of that name another class holds is
    another stream."""
    from streamlint.model.flow.asidejoins import _joins, _quiesces

    wanted = f"self.{name}"
    return any(site.method == "wait_stream" or not _quiesces(project, file, fn, wanted)
               for fn in cls.methods.values() for site in _joins(file, fn, wanted))


__all__ = ["recorded_on_joined_stream", "stream_joined_after"]
