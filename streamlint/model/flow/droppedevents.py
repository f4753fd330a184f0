"""Events of an object dropped with no wait, and events recorded and never named again (the join step of
the stream protocols of :mod:`.protocols`, for SL201).

:func:`dropped_events`: a method that tests the object's event (or one taken from its container, ``ev =
self.events.get(k)``) and drops it (``self.event = None``, ``self.events[k] = None``) with no wait, no host
sync, not handing it on, while another method records it after its work. :func:`unheld_events`: an event a
function makes and records and never names again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.joinedreads import served_joined
from streamlint.model.flow.protocols import (_JOINS, _STREAM_CALLS, _norm, joined_keys, reached_outside,
                                             synchronizes_device)
from streamlint.model.streams import derived
from streamlint.model.syntax import call_name
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project


@dataclass(frozen=True)
class DroppedEvent:
    """A method that tests an event of the object and drops it (``self.event = None``) without a wait."""

    method: FunctionInfo
    node: cst.CSTNode  # the ``self.event = None`` statement
    event: str  # ``self.event``, ``self.events[k]``
    handle: str  # what a wait would take: ``self.event``, the local name the slot was read into
    recorder: FunctionInfo  # a method recording it after work
    record: cst.CSTNode


def _records(file: FileModel, fn: FunctionInfo, event: str) -> cst.CSTNode | None:
    """A record of ``event`` in ``fn``: ``event.record(...)``, ``s.record_event(event)``, ``event =
    s.record_event()``."""
    for site in fn.calls:
        node = site.node
        if site.method == "record" and isinstance(node.func, cst.Attribute) \
                and _norm(file.code(node.func.value)) == event:
            return node
        if site.method == "record_event" and node.args and _norm(file.code(node.args[0].value)) == event:
            return node
    for a in fn.assigns:
        if _norm(a.target) == event and isinstance(a.value, cst.Call) and isinstance(a.value.func, cst.Attribute) \
                and a.value.func.attr.value == "record_event":
            return a.node
    return None


def dropped_events(project: Project, file: FileModel, cls: ClassInfo) -> list[DroppedEvent]:
    """Events of the object that one method records after its work (the join handle of that work) and
    another method, having tested the event, drops (``if self.ev is not None: ...; self.ev = None``)
    with no wait on it, no host synchronisation, and without handing it on: the recorded work is then
    never joined. Silent when code outside the class can reach the event."""
    memo = derived(project, "dropped_events")
    if id(cls) in memo:
        return memo[id(cls)]
    memo[id(cls)] = []
    out: list[DroppedEvent] = []
    for m in cls.methods.values():
        if m.params[:1] not in (("self",), ("cls",)) or m.node.name.value == "__init__":
            continue
        out += _dropped_slots(project, file, cls, m)
        if m.params[:1] != ("self",):
            continue
        for a in m.assigns:
            event = _norm(a.target)
            if not (event.startswith("self.") and event.count(".") == 1 and isinstance(a.value, cst.Name)
                    and a.value.value == "None"):
                continue
            if not any(event in _norm(file.code(g.test)) for g in a.guards) or _records(file, m, event) is not None:
                continue  # not a test-then-drop of a handle (a reset), or it records the event itself
            if event in joined_keys(file, m) or synchronizes_device(project, file, m) or passed_on(file, m, event):
                continue
            recorder = next(((r, node) for r in cls.methods.values() if r is not m
                             for node in [_records(file, r, event)] if node is not None), None)
            if recorder is None or reached_outside(project, file, cls, event[5:]) \
                    or served_joined(project, file, cls, event):  # (every reader of the results waits it first)
                continue
            out.append(DroppedEvent(m, a.node, event, event, recorder[0], recorder[1]))
    memo[id(cls)] = out
    return out


@dataclass(frozen=True)
class UnheldEvent:
    """A function that creates an event, records it and never names it again: no one can wait on it."""

    function: FunctionInfo
    node: cst.CSTNode  # its first record (``ev.record(s)``, ``ev = s.record_event()``)
    event: str  # the local name


def unheld_events(project: Project, file: FileModel) -> list[UnheldEvent]:
    """Events a function makes for itself (``ev = torch.cuda.Event()``, ``ev = s.record_event()``), records, and
    then never names again: not waited on, synchronised, queried, returned, stored or handed to anyone, on any
    path (also not in a nested function, not a ``global`` / ``nonlocal`` the enclosing code reads). An event is
    the handle by which the host or another stream is ordered after the work queued before its record; one that
    nobody holds orders nothing, so the work it was recorded after is never joined through it (a host-wait
    helper ``ev.record(stream)`` whose ``ev.synchronize()`` is gone). Silent when anything after the record
    in the function joins (a wait, a synchronisation, a query, a call named for one such as ``wait_swap()``:
    another event recorded later may cover the work), for names bound otherwise too (a loop variable, a parameter), and in nested functions (the enclosing
    code calling them may join after the call)."""
    memo = derived(project, "unheld_events")
    if id(file) in memo:
        return memo[id(file)]
    out: list[UnheldEvent] = []
    for fn in file.iter_functions():
        if fn.parent is not None:
            continue  # a nested function: the enclosing code that calls it may join after the call
        text = None
        for name, values in fn.name_assigns.items():
            if name in fn.all_params or not values or not all(fresh_event(file, fn, v) for v in values):
                continue
            records = [site for site in fn.calls if site.method == "record" and isinstance(site.node.func, cst.Attribute)
                       and isinstance(site.node.func.value, cst.Name) and site.node.func.value.value == name]
            made = [v for v in values if call_name(v) == "record_event"]
            if not records and not made:
                continue
            text = _names_in(fn.node) if text is None else text
            if text.get(name, 0) != len(values) + len(records) or name in text.get(" declared", ()):
                continue  # named elsewhere (a wait, a return, an argument, a nested function), bound otherwise (a
                # loop, a tuple), or a global / nonlocal other code reads
            first = min([site.node for site in records] + made, key=lambda n: file.span(n).start_line)
            line = file.span(first).start_line
            if any(site.method is not None and (site.method in _JOINS or "wait" in site.method.lower()
                                                 or "sync" in site.method.lower())
                   and file.span(site.node).start_line >= line for site in fn.calls):
                continue  # a join after the record, or a call named for one (`state.wait_swap()`, a helper
                # waiting on an event of its own recorded after the same work): it may cover that work
            out.append(UnheldEvent(fn, first, name))
    memo[id(file)] = out
    return out


def _names_in(node: cst.CSTNode) -> dict:
    """How many times each name occurs in ``node`` as a name (not an attribute, a keyword, a string), nested
    functions included; under ``" declared"`` the names a ``global`` / ``nonlocal`` statement lists."""
    counts: dict = {" declared": set()}
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            counts[n.value] = counts.get(n.value, 0) + 1
            continue
        if isinstance(n, (cst.Global, cst.Nonlocal)):
            counts[" declared"].update(item.name.value for item in n.names)
            continue
        if isinstance(n, cst.Attribute):
            stack.append(n.value)
            continue
        if isinstance(n, cst.Arg):
            stack.append(n.value)
            continue
        if isinstance(n, cst.FunctionDef) and n is not node:
            stack.append(n.body)
            continue
        stack.extend(children(n))
    return counts


def fresh_event(file: FileModel, fn: FunctionInfo, v: cst.BaseExpression) -> bool:
    """``torch.npu.Event()``, ``Event(enable_timing=False)`` (a device event of the API table, not a tracing
    class of that name), ``stream.record_event()``: a new event object."""
    if call_name(v) == "record_event":
        return True
    spec = apis.lookup(file.resolve(v.func, fn)) if isinstance(v, cst.Call) else None
    return spec is not None and spec.role is apis.Role.EVENT_NEW


def passed_on(file: FileModel, fn: FunctionInfo, event: str, local: bool = False) -> bool:
    """Does ``fn`` hand the event (``self.x``, or a local name) on: an argument of a call other than a
    join or a record (alone or in a tuple / list display: ``spans.append((self.start, end))``), bound to a name,
    stored elsewhere, returned?"""
    text = file.code(fn.node.body)
    ref = rf"\b{re.escape(event)}" if local else rf"\bself\.{re.escape(event[5:])}"
    if re.search(rf"(?:return|yield)\b[^\n]*{ref}\b", text) \
            or re.search(rf"=\s*{ref}\b(?!\s*(?:is|==|!=|\.|\[))", text):
        return True
    # (also inside a tuple / list display handed to the call: `spans.append((self.start, end))`)
    return any(m.group(1) not in _STREAM_CALLS for m in re.finditer(rf"(\w+)\(\s*[(\[]?[^()]*{ref}\b", text))


def _dropped_slots(project: Project, file: FileModel, cls: ClassInfo, m: FunctionInfo) -> list[DroppedEvent]:
    """The container form: ``ev = self.events.get(k)`` (or ``self.events[k]``), then under a test of ``ev``
    the slot is cleared (``self.events[k] = None``) with no wait on ``ev``, while a method of the class
    stores an event recorded after work in that container (``self.events[k] = s.record_event()``)."""
    out: list[DroppedEvent] = []
    holder = m.params[0]
    for a in m.assigns:
        target = a.node.targets[0].target if isinstance(a.node, cst.Assign) and len(a.node.targets) == 1 else None
        if not (isinstance(target, cst.Subscript) and isinstance(a.value, cst.Name) and a.value.value == "None"):
            continue
        container = _norm(file.code(target.value))
        if not container.startswith(holder + ".") or container.count(".") != 1:
            continue
        names = [n for n, values in m.name_assigns.items() if n not in m.all_params and values and all(
            _norm(file.code(v)).startswith((container + ".get(", container + "[")) for v in values)]
        ev = next((n for n in names if any(re.search(rf"\b{n}\b", file.code(g.test)) for g in a.guards)), None)
        if ev is None or ev in joined_keys(file, m) or synchronizes_device(project, file, m) \
                or passed_on(file, m, ev, local=True):
            continue
        attr = container.split(".", 1)[1]
        recorder = next(((x.function, x.node) for x in file.assigns  # its methods', or code naming the class
                         if x.function is not None and x.function is not m
                         and x.target.split("[", 1)[0] in (f"self.{attr}", f"cls.{attr}", f"{cls.name}.{attr}")
                         and (x.target.startswith(f"{cls.name}.") or x.function.class_name == cls.name)
                         and "record_event(" in file.code(x.value)), None)
        if recorder is None or reached_outside(project, file, cls, attr):
            continue
        out.append(DroppedEvent(m, a.node, file.code(target), ev, recorder[0], recorder[1]))
    return out
