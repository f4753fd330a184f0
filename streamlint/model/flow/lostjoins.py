"""Join methods that lost their join: a pending flag cleared with no join, a loop over side streams joining none.

Two shapes of one question, "where does the class join the side-stream work its other methods queued, and does
that method still join it": the join method is known by what it consumes (the pending flag; the container of
side streams it walks), not by its name.

Pending flags (:func:`unjoined_flag_clears`).

An overlap helper queues work on a side stream of the object in one method (a per-layer hook, a prefetch), records
an event the object holds after it, and raises a flag field (``self._pending = True``); a fence / flush method
called before the results are read tests the flag, clears it (``self._pending = False``) and makes the current
stream wait for the work (``current_stream().wait_event(self._event)``). The flag says where the class's join is:
the method that consumes it. When that method clears the flag and orders nothing after the side stream, every
reader after it runs unordered after the work the flag marked, and the reader is in the caller (another class,
another call path), out of reach of the dataflow of one function. :func:`unjoined_flag_clears` reports the clear
(SL201, medium: the reader is not seen).

A *pending flag* is a ``self.F`` field whose every ``= True`` outside the construction methods follows, in the same
method, a record of an event the object holds (``self.E.record(...)``, ``self.E[i].record(...)``, ``s.record_event(
self.E)``) or a stream scope (``with torch.cuda.stream(self.S):``). A *clear* is ``self.F = False`` in another
method (not a construction method) that also tests the flag (``if not self.F: return``): the method decides on it.

Idle stream loops (:func:`idle_stream_loops`). A loop over a container field of side streams the project made
(:func:`~streamlint.model.streamjoins.stream_container_store`: ``self.reduce_streams.append(torch.cuda.Stream())``)
whose body never uses the element (``for s in self.reduce_streams: pass``, the ``cur.wait_stream(s)`` gone) joins
none of them: SL201 medium at the loop. Using the element in any way (a call argument or receiver, stored, returned,
a ``with`` item, captured) is a use; a bare test (``if s is None``) is not. The body must do nothing else either
(only ``pass`` / ``...`` / ``continue`` / ``break`` / ``if`` tests with such branches): a loop that counts the
streams, logs or resets a per-stream counter walks the container for another purpose. Silent in a function that
enters a stream scope itself (its own work is the dataflow's) or synchronises the device.

Silent when the clearing method drops what the producer made (``self.buf = None``: the work is abandoned), or
joins anything (a call of ``wait_event`` / ``wait_stream`` / ``synchronize`` / ``wait`` / ``query`` on any
receiver, a device synchronisation, a project helper doing one up to ``_HELPER_DEPTH`` calls down), hands the event
or stream field (or ``self``) to any call, returns it, or calls a method of the object that does one of these (up to
``_HELPER_DEPTH`` levels, each method once): the analysis does not compare which stream it joins, only that the
method joins at all (precision first). Silent too (the one class-form mechanism for issue 16's pending-flag fences,
with :mod:`~streamlint.model.flow.pendingmarks`' safeguards) when the producer's record is on the current stream (a
marker, a timer) or on a stream another method of the class joins after the work
(:mod:`~streamlint.model.flow.deadevents`), every caller of the clearing method joins right after the call, the
clearing method is the producer's named join step (judged by :mod:`~streamlint.model.flow.joinsteps`), or the
join is elsewhere: another method of the class names the event (a waiter through a local, a getter) or joins /
hands on the stream, code outside the class waits on a field of that name or reaches it on the object. Not such
evidence: another method
testing and clearing the same flag (alternatives of one join: one waiting does not make up for another clearing
with no wait), a helper only those call, a method the producer calls before its work (a wait on the previous round).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, self_attribute

if TYPE_CHECKING:
    from streamlint.model.project import Project

_JOINS = frozenset({"wait_event", "wait_stream", "synchronize", "wait", "query", "stream_synchronize",
                    "event_synchronize", "device_synchronize", "elapsed_time"})


@dataclass(frozen=True)
class FlagClear:
    """``method`` clears the pending flag ``flag`` that ``producer`` raises after its side-stream work ``work``
    (the record or the scope), and joins nothing."""

    method: FunctionInfo
    node: cst.CSTNode  # the clearing assignment
    flag: str  # ``self._pending``
    producer: FunctionInfo
    work: cst.CSTNode
    handle: str  # the event or stream field the producer marks its work with (``self._event``)


def _self_field(expr: cst.BaseExpression | None) -> str | None:
    """``self.x`` / ``self.x[i]`` -> ``x``."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return self_attribute(expr)


def _work_before(project: Project, file: FileModel, fn: FunctionInfo, node: cst.CSTNode) \
        -> tuple[cst.CSTNode, str] | None:
    """The last side-stream mark of ``fn`` before ``node`` (program order): a record of an event the object holds,
    or a stream scope entered on a stream the object holds; with that field."""
    order = file.lexical_index(fn.node)
    if id(node) not in order:
        return None
    at = order[id(node)][0]
    found: tuple[int, cst.CSTNode, str] | None = None
    for site in fn.calls:
        call = site.node
        target = call.func.value if site.method == "record" and isinstance(call.func, cst.Attribute) else \
            call.args[0].value if site.method == "record_event" and call.args else None
        field = _self_field(target)
        if field is not None and not _side_record(file, site):
            continue  # a mark on the current stream (a timer's start): no side-stream work behind it
        if field is not None and id(call) in order and order[id(call)][0] < at:
            if found is None or order[id(call)][0] > found[0]:
                found = (order[id(call)][0], call, f"self.{field}")
    for scope in fn.scopes:
        if not project.scope_use(file, scope).roles() & apis.STREAM_SCOPE_ROLES:
            continue
        for call in scope.calls:
            field = next((_self_field(a.value) for a in call.args if _self_field(a.value)), None)
            if field is not None and id(call) in order and order[id(call)][0] < at:
                if found is None or order[id(call)][0] > found[0]:
                    found = (order[id(call)][0], call, f"self.{field}")
    return None if found is None else (found[1], found[2])


def _side_record(file: FileModel, site) -> bool:
    """A record on a side stream: inside a ``with`` (a stream scope), ``ev.record(side)`` handed a stream that is
    not the current / default one, or ``side.record_event(ev)`` on a receiver that is not one."""
    if site.scope is not None:
        return True
    call = site.node
    stream = call.args[0].value if site.method == "record" and call.args else \
        call.func.value if site.method == "record_event" and isinstance(call.func, cst.Attribute) else None
    if stream is None:
        return False
    text = file.code(stream)
    return "current_stream" not in text and "default_stream" not in text


def _joins(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo, handle: str, depth: int = 0,
           seen: set[int] | None = None) -> bool:
    """Does ``fn`` join anything (a join primitive, a device synchronisation, a project function doing one up to
    ``_HELPER_DEPTH`` levels down: :func:`~streamlint.model.flow.pendingmarks._joins_anything`), hand the
    producer's handle or ``self`` on, return the handle, or call a method of the object that does (up to
    ``_HELPER_DEPTH`` levels down, each method once)?"""
    from streamlint.model.flow.pendingmarks import _HELPER_DEPTH, _joins_anything
    from streamlint.model.flow.protocols import synchronizes_device

    seen = set() if seen is None else seen
    seen.add(id(fn))
    if synchronizes_device(project, file, fn) or depth == 0 and _joins_anything(project, file, fn):
        return True
    field = handle[5:]
    if any(r.value is not None and any(_self_field(n) == field for n in local_nodes(r.value)
                                       if isinstance(n, cst.Attribute)) for r in fn.returns):
        return True  # the handle goes back to the caller, whose join it is
    for site in fn.calls:
        call = site.node
        if site.method in _JOINS:
            return True
        if any(_self_field(a.value) == field or isinstance(a.value, cst.Name) and a.value.value == "self"
               for a in call.args):
            return True  # the handle, or the whole object (``_wait_side(self)``), handed to a helper that may join
        func = call.func
        if depth + 1 < _HELPER_DEPTH and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                and func.value.value == "self" and func.attr.value in cls.methods:
            callee = cls.methods[func.attr.value]
            if id(callee) not in seen and _joins(project, file, cls, callee, handle, depth + 1, seen):
                return True
    return False


def _discards(fn: FunctionInfo, producers: list[FunctionInfo], flag: str) -> bool:
    """Does ``fn`` drop what a producer made (``self.buf = None`` for a ``self.buf`` a producer assigns)? Then it
    abandons the pending work (a cancel, a teardown): nobody reads its result, no join is owed."""
    made = {a.target for p in producers for a in p.assigns if a.target != f"self.{flag}"}
    return any(a.target in made and isinstance(a.value, cst.Name) and a.value.value == "None" for a in fn.assigns)


def _consumes_field(fn: FunctionInfo, field: str, event: bool) -> bool:
    """Does ``fn`` take ``self.<field>`` over: for an event, any mention of it (a wait, a getter, a local alias
    handed on); for a stream, a join or query of it, a return of it or a hand-on to a call that is neither a
    stream scope nor a record (``stream(self.S)`` issues more work on it, it joins nothing)."""
    from streamlint.model.flow.protocols import _STREAM_CALLS

    mentions = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.Attribute) and _self_field(n) == field]
    if event or not mentions:
        return bool(mentions)
    held = {id(n) for n in mentions}
    if any(r.value is not None and any(id(n) in held for n in local_nodes(r.value)) for r in fn.returns):
        return True
    for site in fn.calls:
        call = site.node
        if site.method in _JOINS and (isinstance(call.func, cst.Attribute) and id(call.func.value) in held
                                      or any(id(a.value) in held for a in call.args)):
            return True
        if site.method not in _STREAM_CALLS and site.method != "record_stream" \
                and any(id(a.value) in held for a in call.args):
            return True
    return False


def _self_calls(fn: FunctionInfo, cls: ClassInfo, before: int | None = None, order=None) -> list[FunctionInfo]:
    """The methods of the class ``fn`` calls as ``self.m(...)`` (only those before lexical position ``before``)."""
    out = []
    for site in fn.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                and func.attr.value in cls.methods and (before is None or id(site.node) in order
                                                        and order[id(site.node)][0] < before):
            out.append(cls.methods[func.attr.value])
    return out


def _settled_elsewhere(project: Project, file: FileModel, cls: ClassInfo, handle: str, producers: list[FunctionInfo],
                       marks: list[tuple[FunctionInfo, cst.CSTNode]], drains: list[FunctionInfo],
                       construction: set[str]) -> bool:
    """Does code other than the flag's protocol take the producer's handle over -- so the flag is bookkeeping and
    the join is elsewhere? A method of the class naming the event (waiting on it, through a local too; handing it
    out) or joining the stream, code outside the class waiting on a field of that name, or reaching it on the
    object. Not evidence: the drains themselves (every method testing and lowering the flag: alternatives of one
    join, a lost wait in one is not made up by another) and the helpers only they call, nor a method the producer
    calls before its work (it waits on the previous round, not on this one)."""
    from streamlint.model.flow.leaves import names_stream
    from streamlint.model.flow.protocols import reached_outside
    from streamlint.model.options import MAX_CALLER_FILES
    from streamlint.model.waits import consumes_event

    field, event = handle[5:], not any(isinstance(work, cst.Call) and not _is_record(work) for _, work in marks)
    own = {id(m) for m in drains}
    callers: dict[int, set[int]] = {}
    for m in cls.methods.values():
        for callee in _self_calls(m, cls):
            callers.setdefault(id(callee), set()).add(id(m))
    grown = True
    while grown:
        grown = False
        for m in cls.methods.values():
            if id(m) not in own and callers.get(id(m)) and callers[id(m)] <= own:
                own.add(id(m))
                grown = True
    for producer, work in marks:
        order = file.lexical_index(producer.node)
        if id(work) in order:
            own |= {id(m) for m in _self_calls(producer, cls, order[id(work)][0], order)}
    for name, m in cls.methods.items():
        if name in construction or m in producers or id(m) in own:
            continue
        if _consumes_field(m, field, event):
            return True
    paths = project.paths_containing((field.encode(),))
    if len(paths) > MAX_CALLER_FILES:
        return True
    for model in filter(None, map(project.file, paths)):
        for other in model.iter_functions():
            if model is file and other.class_name == cls.name:
                continue
            if any(consumes_event(site, lambda e: names_stream(e, field)) for site in other.calls):
                return True
    return reached_outside(project, file, cls, field)


def _is_record(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and (call.func.attr.value == "record_event" or
                                                     call.func.attr.value == "record" and apis.event_record_shape(call))


def unjoined_flag_clears(project: Project, file: FileModel) -> list[FlagClear]:
    """Every method of the file's classes that clears a pending flag and joins nothing (module docstring)."""
    from streamlint.model.flow.callerwaits import joined_before_calls
    from streamlint.model.flow.deadevents import recorded_on_joined_stream
    from streamlint.model.flow.joinsteps import _callers_join, _join_step_for
    from streamlint.model.flow.pendingflags import flag_assigns, tests_field
    from streamlint.model.flow.pendingmarks import _on_current_stream
    from streamlint.model.stepstate import _construction

    memo = derived(project, "unjoined_flag_clears")
    if id(file) in memo:
        return memo[id(file)]
    memo[id(file)] = []
    out: list[FlagClear] = []
    for cls in file.classes.values():
        construction = _construction(cls)
        methods = [m for name, m in cls.methods.items() if name not in construction and m.params[:1] == ("self",)]
        raised: dict[str, list[tuple[FunctionInfo, cst.CSTNode]]] = {}
        for m in methods:
            for field, node in flag_assigns(m, "True"):
                raised.setdefault(field, []).append((m, node))
        for field, raises in raised.items():
            found = [(m, _work_before(project, file, m, node)) for m, node in raises]
            if not all(mark is not None for _, mark in found) or len({mark[1] for _, mark in found}) != 1:
                continue  # a raise with no side-stream work before it: the flag means something else
            marks = [(m, mark[0]) for m, mark in found]
            producers = [m for m, _ in marks]
            producer, work, handle = producers[0], marks[0][1], found[0][1][1]
            if any(_is_record(w) and (_on_current_stream(p, w) or recorded_on_joined_stream(project, file, cls, p, w))
                   for p, w in marks):
                continue  # a marker / timer on the current stream, or a stream other code of the class joins after
            drains = [m for m in methods if m not in producers and tests_field(m, field)
                      and any(f == field for f, _ in flag_assigns(m, "False"))]
            if not drains or _settled_elsewhere(project, file, cls, handle, producers, marks, drains, construction):
                continue
            for m in drains:
                clear = next(node for f, node in flag_assigns(m, "False") if f == field)
                if _join_step_for(cls, producer) is m or _joins(project, file, cls, m, handle) \
                        or _discards(m, producers, field) or _callers_join(project, file, m) \
                        or joined_before_calls(project, file, m, handle):
                    continue  # (the join step joinsteps names for the producer is judged there)
                out.append(FlagClear(m, clear, f"self.{field}", producer, work, handle))
    memo[id(file)] = out
    return out


def _iterated_field(loop: cst.For) -> tuple[str, list[str]] | None:
    """(``F``, element names) of ``for x in self.F`` -- also through ``list(...)`` / ``tuple(...)`` / a slice /
    ``.values()`` / ``.items()`` / ``enumerate(...)`` (the names bound to the values, not the keys or indices)."""
    expr, keyed = loop.iter, False
    while True:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") \
                and len(expr.args) == 1:
            expr = expr.args[0].value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "enumerate" \
                and expr.args:
            expr, keyed = expr.args[0].value, True
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and not expr.args \
                and expr.func.attr.value in ("values", "items"):
            keyed = keyed or expr.func.attr.value == "items"
            expr = expr.func.value
        else:
            break
    field = _self_field(expr) if isinstance(expr, cst.Attribute) else None
    if field is None:
        return None
    target = loop.target
    if isinstance(target, cst.Name) and not keyed:
        return field, [target.value]
    if isinstance(target, cst.Tuple) and keyed and len(target.elements) == 2 \
            and isinstance(target.elements[1].value, cst.Name):
        return field, [target.elements[1].value.value]
    return None


def _inert(body: cst.CSTNode) -> bool:
    """Does a loop body do nothing at all (``pass``, ``...``, ``continue`` / ``break``, and ``if`` tests whose
    branches do nothing)? Only such a body is a join whose wait was lost; a body counting the streams, logging
    or resetting a per-stream counter walks the container for another purpose."""
    for node in local_nodes(body):
        if isinstance(node, cst.Call) or isinstance(node, cst.BaseCompoundStatement) and not isinstance(node, cst.If):
            return False
        if isinstance(node, cst.BaseSmallStatement) and not isinstance(node, (cst.Pass, cst.Continue, cst.Break)) \
                and not (isinstance(node, cst.Expr) and isinstance(node.value, (cst.Ellipsis, cst.SimpleString))):
            return False
    return True


def idle_stream_loops(project: Project, file: FileModel, fn: FunctionInfo) \
        -> list[tuple[cst.For, str, tuple[FileModel, cst.CSTNode]]]:
    """(loop, ``self.F``, where a side stream is stored into ``F``) for each loop of ``fn`` over a container
    field of side streams that never uses its element (module docstring)."""
    from streamlint.model.flow.joinsteps import handled
    from streamlint.model.flow.protocols import synchronizes_device
    from streamlint.model.streamjoins import issues_stream_work, stream_container_store

    if not fn.has_loop or fn.class_name is None:
        return []
    out = []
    for node in local_nodes(fn.node.body):
        if not isinstance(node, cst.For):
            continue
        parsed = _iterated_field(node)
        if parsed is None or any(handled(node.body, n) for n in parsed[1]) or not _inert(node.body):
            continue  # (a body that counts, logs or resets state walks the streams for something else)
        if issues_stream_work(fn) or synchronizes_device(project, file, fn):
            break
        evidence = stream_container_store(project, file, fn, parsed[0], fn.class_name)
        if evidence is not None:
            out.append((node, f"self.{parsed[0]}", evidence))
    return out


__all__ = ["FlagClear", "idle_stream_loops", "unjoined_flag_clears"]
