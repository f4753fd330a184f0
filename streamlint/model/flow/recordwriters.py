"""Fields of a record class that functions outside the class leave written on a side stream (issue 16,
[container-roundtrip] / [unknown-type]).

A record (a dataclass, a plain class of fields) is often filled by code that is not its own: an offload
runtime walks the records it keeps in a container (``for cand in reversed(self.pending.get(key, ())):``, the
container annotated ``dict[K, list[SavedActivation]]``: :mod:`.elementtypes`), copies a record's host payload to
the device under a prefetch stream's scope and stores the device tensor and an event recorded after the copy on
the record (``cand.staged = staged; cand.staged_ready = ready``). Another function, handed the record (an
annotated parameter, :mod:`.typedholders`), reads ``rec.staged``: it is the record's consumer and must wait
``rec.staged_ready`` first.

:func:`record_writes` lists, per record class, those writes as :class:`~.protocols.Pending` fields spelt on the
record (``self.staged``, with ``self.staged_ready`` the event recorded after it): the writer runs the interpreter
as a producer (:func:`~.protocols._producer_pending` with the holder's prefix), and a write counts only when the
writer stores on the same record an event recorded after it on the write's stream (the record says how it is
meant to be joined). The writer's stream is its own (a pool's, a local): the consumer can join it only through
that event or a device synchronisation. :func:`~.protocols._holder_inputs` seeds them into a function holding the
record by an annotated name, unless it hands the record (or the event) to a callee that may wait the event
(:func:`handed_record`). The record's class and the writer's holder are the annotations' word: medium at most.

Only functions of the record class's own module are read as writers (the module that defines a record is where
its writers live; a writer elsewhere is not seen: no finding)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from streamlint._lazy import cst
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, normalized_code

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import ClassInfo, FunctionInfo
    from streamlint.model.project import Project

MAX_WRITERS = 8  # writers of one record class (past that: a framework's shared record, not one protocol)


def record_writes(project: Project, file: FileModel, cls: ClassInfo, mode: str,
                  producer: Callable[[FunctionInfo, str], list]) -> list:
    """The fields of ``cls`` (``file``'s class) functions of ``file`` outside the class leave written on a side
    stream through a name typed to ``cls``, with an event stored on the record after the write. ``producer(fn,
    prefix)``: what ``fn`` leaves pending on the fields of the name ``prefix`` spells (``protocols``' producer
    run), none when it opens no side-stream scope of its own."""
    memo = derived(project, "record_writes")
    key = (id(cls), mode)
    held = memo.get(key)
    if held is not None and held[0] is cls:
        return held[1]
    memo[key] = (cls, [])
    out = _record_writes(project, file, cls, mode, producer)
    memo[key] = (cls, out)
    return out


def _record_writes(project: Project, file: FileModel, cls: ClassInfo, mode: str,
                   producer: Callable[[FunctionInfo, str], list]) -> list:
    from dataclasses import replace

    writers = [(fn, name) for fn in file.functions.values() if cls.methods.get(fn.node.name.value) is not fn
               and fn.scopes and (name := _holder(project, file, fn, cls)) is not None]
    if len(writers) > MAX_WRITERS:
        return []
    out: list = []
    for fn, name in writers:
        prefix = f"{name}."
        for p in producer(fn, prefix):
            if not p.events or p.guessed:
                continue  # no event kept on the record: how the consumer is meant to join it is not said
            ren = lambda k: f"self.{k[len(prefix):]}" if k.startswith(prefix) else k  # noqa: E731
            stream = ren(p.stream) if p.stream.startswith(prefix) else \
                f"{fn.class_name}.{p.stream[5:]}" if p.stream.startswith("self.") and fn.class_name else p.stream
            # (the writer's own stream field is its object's, not the record's: spelt by its class)
            out.append(replace(p, field=ren(p.field), stream=stream, events=tuple(map(ren, p.events))))
    return out


def _holder(project: Project, file: FileModel, fn: FunctionInfo, cls: ClassInfo) -> str | None:
    """The one name of ``fn`` typed to ``cls`` (a loop variable over an annotated container, an annotated
    parameter or local) whose fields ``fn`` assigns (``cand.staged = ...``); None when none or several."""
    from streamlint.model.flow.elementtypes import loop_holders
    from streamlint.model.flow.typedholders import typed_holders

    assigned = {n.target.value.value for n in local_nodes(fn.node.body) if isinstance(n, cst.AssignTarget)
                and isinstance(n.target, cst.Attribute) and isinstance(n.target.value, cst.Name)
                and n.target.value.value != "self"}
    if not assigned:
        return None
    names = {n for n, c, m in (*loop_holders(project, file, fn), *typed_holders(project, file, fn))
             if c is cls and m is file and n in assigned}
    return next(iter(names)) if len(names) == 1 else None


def handed_record(project: Project, file: FileModel, fn: FunctionInfo, name: str, events: tuple[str, ...],
                  joined_keys: Callable[[FileModel, FunctionInfo], set[str]], stream_calls: frozenset[str]) -> bool:
    """Does ``fn`` hand the record ``name`` (or one of its ``events``) to a callee that may wait the event: a
    call the project cannot resolve, or a project function whose body waits the event's field of its parameter
    (``self._settle(rec)``, ``def _settle(self, r): r.ready.wait()``)? Methods called on the record itself and
    the stream calls (``wait_event(rec.ready)``: the consumer's own join) are not hand-offs."""
    attrs = {e.split(".", 1)[1] for e in events if "." in e}
    for site in fn.calls:
        if site.method in stream_calls:
            continue
        args = [a for a in site.node.args if _names(file, a.value, name, events)]
        if not args:
            continue
        targets = [project.call_target(file, site)]
        if targets[0] is None:
            targets = _instance_methods(project, file, fn, site)
        if not targets:
            return True
        for callee_fn, callee_file in targets:
            if {re.sub(r"^\w+\.", "", k) for k in joined_keys(callee_file, callee_fn)} & attrs:
                return True
    return False


def _instance_methods(project: Project, file: FileModel, fn: FunctionInfo, site) -> list:
    """``_RUNTIME.consume(rec)`` on a module-level instance of a project class (``_RUNTIME = Runtime()``): that
    class's method (devobjects.object_classes), else nothing."""
    from streamlint.model.devobjects import object_classes
    from streamlint.model.flow.typedholders import _class_method

    func = site.node.func
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, (cst.Name, cst.Attribute)):
        return []
    classes = object_classes(project, file, fn, func.value) or []
    found = [_class_method(project, cls, mod, func.attr.value) for cls, mod in classes]
    return found if found and all(f is not None for f in found) else []


def _names(file: FileModel, expr: cst.BaseExpression, name: str, events: tuple[str, ...]) -> bool:
    text = normalized_code(file.code(expr))
    return text == name or text in events


__all__ = ["handed_record", "record_writes"]
