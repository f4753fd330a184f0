"""Events nobody consumes, on a stream joined otherwise (issue 16, [dead-event]).

A class records an event the object holds (``self._round_done.record()`` after a round's last replay) and no
code of the project waits on it, queries it, synchronises it or hands it on. The join step's ``class-event``
evidence (:mod:`~streamlint.model.flow.joinsteps`) takes that as a lost wait. It is one only when the work it
marks is joined by nobody: when the stream the event is recorded on is joined after its work by other code of
the class (``pending.stream.wait_stream(self._round_stream)``, ``self._round_stream.synchronize()``), the
event is a leftover that guards nothing, and the missing wait on it is no race. "After" is a path: the join is
below the record in the recorder, below the recorder's call in a method calling it, or in a method that picks
up the work state such a caller leaves in the object (``self._pending``); a join in a method unrelated to
the recording (a start-up ``reset()``) keeps the finding. The recording stream is the
record's own argument (``self.done.record(self.copy_stream)``, ``self.copy_stream.record_event()``) or, for a
record on the current stream, the stream scope around it: in the recorder, else around every call of the
recorder in the class (``with torch.cuda.stream(self._round_stream): self._launch_chain(rows)``). Unknown
streams, and records made outside any scope (the caller's current stream), keep the finding."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import ClassInfo, FunctionInfo
    from streamlint.model.project import Project


def recorded_on_joined_stream(project: Project, file: FileModel, cls: ClassInfo, recorder: FunctionInfo,
                              record: cst.CSTNode) -> bool:
    """Is every stream the event of ``record`` (in method ``recorder`` of ``cls``) can be recorded on a named
    stream of the object that another method of the class joins after its work (:func:`stream_joined_after`)?"""
    streams = _record_streams(file, cls, recorder, record)
    return bool(streams) and all(s is not None and stream_joined_after(project, file, cls, s, recorder, record)
                                 for s in streams)


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


def stream_joined_after(project: Project, file: FileModel, cls: ClassInfo, name: str, recorder: FunctionInfo,
                        record: cst.CSTNode) -> bool:
    """Does a method of ``cls`` order other work after its stream ``self.<name>`` (``X.wait_stream(self.name)``,
    ``self.name.synchronize()``, also through a local bound to it), other than a teardown quiescing every stream
    (``asidejoins``), on a path that follows the record (:func:`_after_record`)? A record on it or a fork of it is
    no join; a stream of that name another class holds is another stream."""
    from streamlint.model.flow.asidejoins import _joins, _quiesces

    wanted = f"self.{name}"
    after = _after_record(file, cls, recorder, record)
    return any((site.method == "wait_stream" or not _quiesces(project, file, fn, wanted)) and after(fn, site)
               for fn in cls.methods.values() for site in _joins(file, fn, wanted))


def _after_record(file: FileModel, cls: ClassInfo, recorder: FunctionInfo, record: cst.CSTNode):
    """Which joins follow the record: a join below it in the recorder, or below a call of the recorder in a
    method calling it (``self._launch_chain(rows)``); or a join in a method that picks up the work state a caller
    of the recorder leaves in the object (``self._pending = pending`` in ``finish_round``, read by
    ``complete_round``, which joins: the class's protocol runs it after), also through a method picking up what
    such a method leaves (three steps). A method that shares no such state with the recorder's callers -- a
    start-up ``reset()`` joining the stream before any work -- is no join after the record."""
    name = recorder.node.name.value
    below: dict[int, int] = {id(recorder): file.span(record).start_line}
    for m in cls.methods.values():
        lines = [file.span(c.node).start_line for c in m.calls if c.method == name
                 and isinstance(c.node.func, cst.Attribute) and isinstance(c.node.func.value, cst.Name)
                 and c.node.func.value.value == "self"]
        if lines and m is not recorder:
            below[id(m)] = min(lines)
    fields = {m: _self_fields(m) for m in cls.methods.values()}
    left = {f for m in cls.methods.values() if id(m) in below and m is not recorder for f in fields[m][1]}
    followers: set[int] = set()
    for _step in range(3):
        new = {id(m) for m in cls.methods.values() if id(m) not in below and id(m) not in followers
               and m.node.name.value != "__init__" and fields[m][0] & left}
        if not new:
            break
        followers |= new
        left |= {f for m in cls.methods.values() if id(m) in new for f in fields[m][1]}

    def after(fn: FunctionInfo, site) -> bool:
        if id(fn) in followers:
            return True
        start = below.get(id(fn))
        return start is not None and file.span(site.node).start_line > start

    return after


def _self_fields(fn: FunctionInfo) -> tuple[set[str], set[str]]:
    """The fields of ``self`` a method reads and those it assigns (``self.f = ...``, ``self.f += ...``)."""
    from streamlint.model.syntax import local_nodes

    written: set[str] = set()
    targets: set[int] = set()
    for node in local_nodes(fn.node):
        tgts = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
            [node.target] if isinstance(node, (cst.AugAssign, cst.AnnAssign)) else []
        for t in tgts:
            for el in (t.elements if isinstance(t, cst.Tuple) else [t]):
                el = el.value if isinstance(el, cst.Element) else el
                f = _field(el)
                if f is not None:
                    written.add(f)
                    targets.add(id(el))
    read = {f for node in local_nodes(fn.node) if isinstance(node, cst.Attribute) and id(node) not in targets
            for f in [_field(node)] if f is not None}
    return read, written


__all__ = ["recorded_on_joined_stream", "stream_joined_after"]
