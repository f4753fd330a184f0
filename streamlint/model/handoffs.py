"""Objects a pipeline hands from a producer stream to its consumers, recorded together.

A pipeline stage that takes the results of another stream's work (the output of an input
distribution, its per-module context, a prefetched batch) orders its consumer after the producer
(``cur.wait_stream(dist_stream)``, ``cur.wait_event(done)``) and then records each object it hands on
with the consumer stream (``kjt.record_stream(cur)``, ``ctx.record_stream(cur)``), so that the producer's
allocator pool does not take their blocks back while the consumer still reads them. The objects are
opaque to the dataflow (awaitable results, entries of a context's dicts, objects implementing the
``record_stream`` protocol), so their device contents are presumed from the function itself: when two
objects taken out of the same hand-off are given to one consumer call, and the function records one
of them on a stream it does not record the other on, the other one's blocks can be reused by the
producer while that stream still uses them.

Only hand-off functions are judged: the function orders a stream after another (a ``wait_stream`` or
``wait_event``) and records on a stream. An object counts as handed over when every binding of its
local takes it out of a container or an awaitable (``ctx = contexts[name]``, ``contexts.pop(name)``,
``request.wait()``); streams, parameters and objects the module keeps are not. Its device contents are
presumed only on evidence: the function records it on another stream, it (or the local container it
is taken from) is made inside a stream scope (the producer's), or the field it is taken from is
declared (``module_contexts: Dict[str, Multistreamable]``, a dataclass field of any project class with
that name) to hold tensors or objects of a class implementing ``record_stream``.

The producer side, between methods of one object (:func:`unrecorded_stored_siblings`): a method that makes
tensors on its current stream and stores them together in a field for a sibling method (an embedding
cache's prefetch appending ``(locations, rows)`` for ``forward`` to pop, a KV prefetch of the next layer)
records them on the stream that reader runs on, a stream the method does nothing else with (a caller's
``forward_stream``). An element stored with a recorded sibling but not recorded there is the same hole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from streamlint._lazy import cst

from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.lifetimes import persistent_kind
from streamlint.model.placement import device_like, host_value
from streamlint.model.project import Project
from streamlint.model.streams import MAIN_STREAM, STREAM, local_kind
from streamlint.model.syntax import class_field_annotation, local_nodes, target_names
from streamlint.model.walk import descendants

PROTOCOL = "record_stream"
_JOINS = frozenset({"wait_stream", "wait_event"})
_TAKES = frozenset({"pop", "get", "wait", "popleft", "result"})
_STREAM_NAME = re.compile(r"(^|_)stream$")


@dataclass(frozen=True)
class UnrecordedSibling:
    """``obj`` is given to ``node`` (a consumer call) with ``sibling``, which the function records on
    ``stream``; ``obj`` is not recorded there."""

    node: cst.CSTNode  # the consumer call; for a stored tuple (:func:`unrecorded_stored_siblings`), the store
    obj: str
    sibling: str
    stream: str
    function: FunctionInfo
    recorded_elsewhere: bool  # obj is recorded on some other stream


def unrecorded_siblings(project: Project, file: FileModel) -> list[UnrecordedSibling]:
    out: list[UnrecordedSibling] = []
    for fn in file.functions.values():
        if fn.node.name.value == PROTOCOL or not any(site.method in _JOINS for site in fn.calls):
            continue
        records: dict[str, dict[str, cst.Call]] = {}
        for site in fn.calls:
            if site.method == PROTOCOL and isinstance(site.receiver, cst.Name) and len(site.node.args) == 1:
                records.setdefault(site.receiver.value, {}).setdefault(file.code(site.node.args[0].value), site.node)
            elif _recorder_call(site.node):  # `record_all(ctx, stream)`: a helper records what it is given
                args = [a.value for a in site.node.args]
                streams = [file.code(a) for a in args if _stream_like(project, file, fn, a)]
                for a in args:
                    if isinstance(a, cst.Name) and streams and not _stream_like(project, file, fn, a):
                        for stream in streams:
                            records.setdefault(a.value, {}).setdefault(stream, site.node)
        if not records:
            continue
        reported: set[str] = set()
        for site in sorted(fn.calls, key=lambda s: file.span(s.node).start_line):
            if site.method in (PROTOCOL, *_JOINS) or _recorder_call(site.node):
                continue
            names = [a.value.value for a in site.node.args if isinstance(a.value, cst.Name) and not a.star]
            handed = [n for n in dict.fromkeys(names) if _handed_over(project, file, fn, n)]
            for obj in handed:
                if obj in reported:
                    continue
                mine = records.get(obj, {})
                if not mine and not _produced_in_scope(project, file, fn, obj) \
                        and not _declared_recordable(project, file, fn, obj):
                    continue
                for sibling in handed:
                    missing = [s for s in records.get(sibling, {}) if s not in mine and s not in (obj, sibling)]
                    if sibling != obj and missing:
                        out.append(UnrecordedSibling(site.node, obj, sibling, missing[0], fn, bool(mine)))
                        reported.add(obj)
                        break
    return out


_STORES = {"append": 0, "appendleft": 0, "put": 0, "put_nowait": 0, "insert": 1}
_CURRENT = re.compile(r"(current|default)_stream\(")
_TO_DEVICE = frozenset({"cuda", "npu"})


def unrecorded_stored_siblings(project: Project, file: FileModel) -> list[UnrecordedSibling]:
    """Tensors a function stores together in a field of the object (``self.ready.append((locs, rows))``,
    ``self.slots[k] = (k_buf, v_buf)``, a local tuple stored whole) for a sibling method, recording some of
    them on a stream the function does nothing else with (only ``record_stream`` and tests like ``if stream
    is not None``: the stream the field's reader runs on, a caller's ``forward_stream``), where another stored
    element, evidently device memory, is not recorded on that stream. Not when the element is given to a call
    together with the stream (a record helper), when the stream is the current one (the allocating stream:
    no statement about a reader), nor when a function reading the field records what it takes out. Elements
    are local names; slots and keys are not compared. One per store."""
    out: list[UnrecordedSibling] = []
    for fn in file.functions.values():
        if not any(site.method == PROTOCOL for site in fn.calls):
            continue
        records, recorded_any = _records_by_name(project, file, fn)
        if not records:
            continue
        verdicts: dict[str, bool] = {}

        def reader_stream(stream: str) -> bool:  # (a stream fn does nothing else with: a reader's)
            if stream not in verdicts:
                verdicts[stream] = _only_recorded_on(file, fn, stream)
            return verdicts[stream]

        reported: set[tuple[str, str]] = set()  # (element, stream): one missing record is one finding
        for node, field, names in _field_stores(file, fn):
            streams = sorted(dict.fromkeys(s for n in names for s in records.get(n, ())),
                             key=lambda s: s not in fn.all_params)  # (a caller's stream first: the reader's)
            for stream in streams:
                recorded = [n for n in names if stream in records.get(n, ())]
                # an element recorded on another reader's stream (another stream parameter fn only records on) goes
                # to that reader: an MoE stage storing the shared expert's input for one stream, the routed experts'
                # for another
                missing = [n for n in names if stream not in records.get(n, ())
                           and _device_evidence(fn, n, recorded_any) and (n, stream) not in reported
                           and not any(o != stream and o in fn.all_params and reader_stream(o)
                                       for o in records.get(n, ()))]
                if not recorded or not missing:
                    continue
                if reader_stream(stream) and not _reader_records(file, fn, field):
                    reported.add((missing[0], stream))
                    out.append(UnrecordedSibling(node, missing[0], recorded[0], stream, fn,
                                                 bool(records.get(missing[0]))))
                    break
    return out


def _records_by_name(project: Project, file: FileModel, fn: FunctionInfo) -> tuple[dict[str, set[str]], set[str]]:
    """Local name -> streams it is recorded on in ``fn`` (not the current stream), by ``x.record_stream(s)``,
    a loop over a tuple recording each element, or a call given both (a record helper); and every name
    recorded on any stream."""
    records: dict[str, set[str]] = {}
    recorded_any: set[str] = set()

    def note(name: str, stream: cst.BaseExpression) -> None:
        recorded_any.add(name)
        text = file.code(stream)
        if _CURRENT.search(text) or isinstance(stream, cst.Name) and \
                local_kind(project, file, fn, stream.value) == MAIN_STREAM:
            return
        records.setdefault(name, set()).add(text)

    for site in fn.calls:
        if site.method == PROTOCOL and isinstance(site.receiver, cst.Name) and len(site.node.args) == 1:
            note(site.receiver.value, site.node.args[0].value)
    streams = {file.code(site.node.args[0].value) for site in fn.calls
               if site.method == PROTOCOL and len(site.node.args) == 1}
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name):
            elements = _elements(fn, node.iter)
            for sub in local_nodes(node.body):
                if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Attribute) \
                        and sub.func.attr.value == PROTOCOL and isinstance(sub.func.value, cst.Name) \
                        and sub.func.value.value == node.target.value and len(sub.args) == 1:
                    for name in elements:
                        note(name, sub.args[0].value)
        elif isinstance(node, cst.Call) and not (isinstance(node.func, cst.Attribute)
                                                 and node.func.attr.value == PROTOCOL):
            # a call given the stream (also inside an argument: `tree_map(lambda t: t.record_stream(s), data)`)
            given = [sub for a in node.args for sub in descendants(a.value)
                     if isinstance(sub, (cst.Name, cst.Attribute)) and dotted(sub) in streams]
            for arg in node.args:
                for name in _elements(fn, arg.value) if given else ():
                    for stream in given:
                        note(name, stream)
    return records, recorded_any


def _elements(fn: FunctionInfo, expr: cst.BaseExpression) -> list[str]:
    """The local names a stored / iterated expression holds: ``(a, b)``, ``[a, b]``, a local bound only to
    such literals, or a single name."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        return [e.value.value for e in expr.elements if isinstance(e.value, cst.Name)]
    if isinstance(expr, cst.Name):
        values = fn.name_assigns.get(expr.value, ())
        if values and all(isinstance(v, (cst.Tuple, cst.List)) for v in values):
            return list(dict.fromkeys(n for v in values for n in _elements(fn, v)))
        return [expr.value]
    return []


def _self_root(expr: cst.BaseExpression) -> str | None:
    """``self.ready`` for ``self.ready``, ``self.ready[k]``, ``self.slots[k].bufs``; else None."""
    field = None
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            field = f"self.{expr.attr.value}"
        expr = expr.value
    return field if isinstance(expr, cst.Name) and expr.value == "self" else None


def _field_stores(file: FileModel, fn: FunctionInfo) -> list[tuple[cst.CSTNode, str, list[str]]]:
    """(statement or call, field, stored local names) for each store of two or more locals into a field."""
    out = []
    for node in local_nodes(fn.node.body):
        field, value = None, None
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _STORES:
            index = _STORES[node.func.attr.value]
            positional = [a.value for a in node.args if a.keyword is None and not a.star]
            if len(positional) == index + 1:
                field, value = _self_root(node.func.value), positional[index]
        elif isinstance(node, cst.Assign) and len(node.targets) == 1:
            field, value = _self_root(node.targets[0].target), node.value
        if field is None or value is None:
            continue
        names = list(dict.fromkeys(_elements(fn, value)))
        if len(names) >= 2:
            out.append((node, field, names))
    return out


def _device_evidence(fn: FunctionInfo, name: str, recorded_any: set[str]) -> bool:
    """Is the local evidently device memory: recorded on some stream, or bound only to non-host values at
    least one of which places it on a device (``device=self.device``, ``.cuda()``, ``.to(dev)``)?"""
    if name in recorded_any:
        return True
    values = fn.name_assigns.get(name, ())
    if not values or any(host_value(v) for v in values):
        return False
    for value in values:
        node = value
        while isinstance(node, cst.Call):
            method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
            if method in _TO_DEVICE or any(a.keyword is not None and a.keyword.value == "device"
                                           and device_like(a.value) for a in node.args) \
                    or method == "to" and any((a.keyword is None or a.keyword.value == "device")
                                              and device_like(a.value) for a in node.args[:1]):
                return True
            node = node.func.value if isinstance(node.func, cst.Attribute) else None
            while isinstance(node, (cst.Attribute, cst.Subscript)):
                node = node.value
    return False


def _only_recorded_on(file: FileModel, fn: FunctionInfo, stream: str) -> bool:
    """Does ``fn`` (with the functions it defines) mention ``stream`` only as the argument of ``record_stream``
    and in tests (``if stream:``, ``if stream is not None:``)? Any other use (a stream scope, a wait, a call
    given it) is work of its own there, which its records may be for."""
    allowed: set[int] = set()
    mentions = []
    for node in descendants(fn.node.body):  # (nested functions too: a hook's use of the stream is a use)
        if isinstance(node, (cst.If, cst.While)):
            allowed.update(id(sub) for sub in descendants(node.test))
        elif isinstance(node, cst.IfExp):
            allowed.update(id(sub) for sub in descendants(node.test))
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value == PROTOCOL and len(node.args) == 1:
            allowed.add(id(node.args[0].value))
        elif isinstance(node, (cst.Name, cst.Attribute)) and dotted(node) == stream:
            mentions.append(node)
    return bool(mentions) and all(id(m) in allowed for m in mentions)


def _reader_records(file: FileModel, fn: FunctionInfo, field: str) -> bool:
    """Does another function of the file take values out of ``field`` (``a, b = self.ready.pop(0)``, ``for
    t in self.ready``) and record one of them?"""
    for other in file.functions.values():
        if other is fn or other.class_name != fn.class_name or not any(site.method == PROTOCOL for site in other.calls):
            continue
        taken: set[str] = set()
        for node in local_nodes(other.node.body):  # (program order: a local taken out, then looped over)
            if isinstance(node, cst.Assign) and _takes_from(node.value, field, taken):
                for target in node.targets:
                    taken.update(target_names(target.target))
            elif isinstance(node, cst.For) and _takes_from(node.iter, field, taken):
                taken.update(target_names(node.target))
        if any(site.method == PROTOCOL and isinstance(site.receiver, cst.Name) and site.receiver.value in taken
               for site in other.calls):
            return True
    return False


def _takes_from(expr: cst.BaseExpression, field: str, taken: set[str]) -> bool:
    """Does ``expr`` read the field itself (``self.ready.pop(0)``, not ``self.ready_meta``), or a local taken
    out of it (``bufs`` after ``bufs = self.ready.pop(layer)``)?"""
    if isinstance(expr, cst.Name):
        return expr.value in taken
    return any(isinstance(sub, (cst.Attribute, cst.Subscript)) and _self_root(sub) == field for sub in descendants(expr))


def _handed_over(project: Project, file: FileModel, fn: FunctionInfo, name: str) -> bool:
    """A local whose every binding takes an object out of a container or an awaitable, and that is no
    stream and nothing the module keeps."""
    values = fn.name_assigns.get(name)
    if not values or name in fn.all_params or local_kind(project, file, fn, name) in (STREAM, MAIN_STREAM):
        return False
    for value in values:
        if isinstance(value, cst.Subscript):
            continue
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _TAKES:
            continue
        return False
    return persistent_kind(file, fn, cst.Name(name)) is None


def _produced_in_scope(project: Project, file: FileModel, fn: FunctionInfo, name: str) -> bool:
    """Is ``name``, or the local container it is taken from, bound inside a ``with`` whose item is given
    a stream (``with torch.cuda.stream(dist)``, ``with stream_context(source_stream)``)?"""
    inside: set[str] = set()
    for node in local_nodes(fn.node.body):
        if not isinstance(node, cst.With) or not any(_given_stream(project, file, fn, item.item) for item in node.items):
            continue
        for sub in descendants(node.body):
            targets = [t.target for t in sub.targets] if isinstance(sub, cst.Assign) else (
                [sub.target] if isinstance(sub, (cst.AnnAssign, cst.AugAssign)) else [])
            for target in targets:
                while isinstance(target, (cst.Subscript, cst.Attribute)) and not isinstance(target, cst.Name):
                    target = target.value
                if isinstance(target, cst.Name):
                    inside.add(target.value)
    if name in inside:
        return True
    for value in fn.name_assigns.get(name, ()):
        base = _taken_from(value)
        if isinstance(base, cst.Name) and base.value in inside:
            return True
    return False


def _given_stream(project: Project, file: FileModel, fn: FunctionInfo, item: cst.BaseExpression) -> bool:
    return isinstance(item, cst.Call) and any(_stream_like(project, file, fn, arg.value) for arg in item.args)


def _stream_like(project: Project, file: FileModel, fn: FunctionInfo, value: cst.BaseExpression) -> bool:
    text = dotted(value)
    if text is None:
        return False
    return bool(_STREAM_NAME.search(text.rsplit(".", 1)[-1])) or (
        isinstance(value, cst.Name) and local_kind(project, file, fn, value.value) in (STREAM, MAIN_STREAM))


def _recorder_call(call: cst.Call) -> bool:
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return name != PROTOCOL and "record" in name.lower()


def _taken_from(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The container an object is taken out of: ``c`` in ``c[k]``, ``c.pop(k)``, ``c[k].wait()``."""
    while True:
        if isinstance(value, cst.Subscript):
            return value.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _TAKES:
            inner = value.func.value
            if isinstance(inner, cst.Subscript) or (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute)):
                value = inner
                continue
            return inner
        return None


def _declared_recordable(project: Project, file: FileModel, fn: FunctionInfo, name: str) -> bool:
    """Is every binding of ``name`` taken from a field (``ctx.module_contexts[k]``) that project classes
    declare with that name to hold tensors or objects implementing ``record_stream``?"""
    values = fn.name_assigns.get(name, ())
    if not values:
        return False
    for value in values:
        base = _taken_from(value)
        if not isinstance(base, cst.Attribute) or not _field_recordable(project, base.attr.value):
            return False
    return True


def _field_recordable(project: Project, field: str) -> bool:
    memo = project.derived("recordable_fields")  # (dropped with the other project facts when a file changes)
    if field not in memo:
        memo[field] = False
        found = []
        # a byte search, then the module summary (``ast``, cached by content): a module that only spells ``field:``
        # (a signature, a dict literal, a slice) is not parsed (sglang 0.5.23: one file's question parsed 343)
        for path in project.paths_containing((f"{field}:".encode(), f"{field} :".encode())):  # (`slots : T` too)
            summary = project.summary(path)
            model = project.file(path) if summary is None or summary.may_annotate_field(field) else None
            for cls in model.classes.values() if model is not None else ():
                annotation = class_field_annotation(cls.node, field)
                if annotation is not None:
                    found.append(_holds_recordable(project, model, annotation))
        memo[field] = bool(found) and all(found)
    return memo[field]


def _holds_recordable(project: Project, model: FileModel, annotation: cst.BaseExpression) -> bool:
    """Does a field annotation name a tensor or a project class with a ``record_stream`` method (itself
    or a base), as an element type (``Dict[str, Multistreamable]``, ``List[torch.Tensor]``)?"""
    for node in descendants(annotation):
        if not isinstance(node, (cst.Name, cst.Attribute)):
            continue
        text = dotted(node)
        if text is None:
            continue
        if text.rsplit(".", 1)[-1] == "Tensor":
            return True
        qual = model.resolve_dotted(text, None)
        sym = project.symbol(qual, model) if qual else None
        if sym is not None and isinstance(sym[0], ClassInfo) and _implements_protocol(project, sym[0], sym[1]):
            return True
    return False


def _implements_protocol(project: Project, cls: ClassInfo, model: FileModel) -> bool:
    todo, seen = [(cls, model)], set()
    while todo and len(seen) < 16:
        current, mod = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if PROTOCOL in current.methods:
            return True
        for base in current.bases:
            sym = project.symbol(base, mod) if base else None
            if sym is not None and isinstance(sym[0], ClassInfo):
                todo.append(sym)
    return False


__all__ = ["UnrecordedSibling", "unrecorded_siblings", "unrecorded_stored_siblings"]
