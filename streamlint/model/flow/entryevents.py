"""Entries of a container field handed out without waiting on the event they carry (issue 16, "Across the
methods of one class").

Weight streamers and offload pools keep one entry per staged block in a container of the object
(``self.live[index] = Resident(state, ready, ...)``): ``stage()`` copies the block to the device on a side
stream (``with torch.cuda.stream(self.transfer_stream): state = {n: t.to(dev, non_blocking=True) ...}``,
or hands a reader the buffer and the event), records an event on that stream after the copies and stores
both in the entry. The method that hands the block to the forward (``acquire(index)``: ``item =
self.live[index]`` ... ``return item.state``) is the protocol's join: it must make the consumer wait on
``item.ready`` before the tensors leave the object. When it never names the event (but to test it for
presence: ``if item.ready is not None:``), never calls a method of the entry or hands the entry to a call
that may wait (``item.wait()``, ``self._wait(item)``; not a builtin, logging, or project code that neither names
the event field nor waits: ``item.touch()``), never joins the stream and never synchronises,
the caller's compute reads the block before its copies land.

:func:`unwaited_entries` finds, per class, such a hand-out. The entry's tensor fields are those the producer
binds to values made inside its side-stream scope (the copies, or a buffer allocated there that a reader
fills; or made there before the event's record when a host fallback branch binds them elsewhere); a field the
hand-out method sets from one of them (``item.state = materialize(item.blob)``) counts too. Fields are mapped
from the construction by keyword or position (``Resident(state, ev)``: the ``__init__`` parameters by the
fields they are stored into, else the dataclass fields; :func:`~streamlint.model.handedevents.construction_fields`),
the class possibly in another module. The event field is one recorded on that stream after device work in the
same scope (by the producer, or by a method of the class it hands the event to:
``self.readers.submit(self._read_and_copy, ..., ready)``); a timing event recorded before the work (``start``)
is none. Silent when the hand-out names the event otherwise than by a presence test (a wait, handing it on),
calls a method of the entry or hands the entry on, joins the stream or synchronises, when another method of
the class reads that event field otherwise than by a presence test or waits on it (a join step the caller may
run first), or when another method joins the stream otherwise than aside
(:mod:`~streamlint.model.flow.asidejoins`). Reported at medium confidence (SL201): the
order of stage and hand-out is the class's protocol, assumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, normalized_code

if TYPE_CHECKING:
    from streamlint.model.project import Project

_WAITS = ("wait_event", "wait", "synchronize", "query")


@dataclass(frozen=True)
class UnwaitedEntry:
    """A method handing out tensors of a container entry without waiting on the entry's event."""

    method: FunctionInfo  # the hand-out (``acquire``)
    node: cst.CSTNode  # its return statement
    handed: str  # ``item.state``
    event: str  # ``item.ready``
    stream: str  # ``self.transfer_stream``
    producer: FunctionInfo  # the method storing the entry (``stage``)
    record: cst.CSTNode  # the event's record after the work


_norm = normalized_code


def held_stream_scopes(file: FileModel, fn: FunctionInfo, any_stream: bool = False) -> list[tuple[cst.With, str]]:
    """The ``with X.stream(self.S):`` scopes of ``fn`` on a stream the object holds, with ``self.S`` (any
    stream argument with ``any_stream``: ``with X.stream(copy_stream):``)."""
    out = []
    for site in fn.scopes:
        for call in site.calls:
            name = file.code(call.func).rsplit(".", 1)[-1]
            if "stream" not in name.lower() or not call.args:
                continue
            arg = _norm(file.code(call.args[0].value))
            if arg.startswith("self.") and arg.count(".") == 1 or any_stream and arg != "None" and "current_stream" not in arg:
                out.append((site.with_node, arg))
    return out


def within(node: cst.CSTNode, scope: cst.With) -> bool:
    return any(n is node for n in local_nodes(scope.body))


def recorded_after_work(file: FileModel, fn: FunctionInfo, name: str,
                         any_stream: bool = False) -> tuple[str, cst.CSTNode] | None:
    """``name.record(...)`` in a side-stream scope of ``fn`` after a statement of device work there (not an
    event made or recorded): (the stream, the record)."""
    for scope, stream in held_stream_scopes(file, fn, any_stream):
        seen_work = False
        for stmt in scope.body.body:
            text = file.code(stmt)
            record = next((n for n in local_nodes(stmt) if isinstance(n, cst.Call)
                           and isinstance(n.func, cst.Attribute) and n.func.attr.value == "record"
                           and isinstance(n.func.value, cst.Name) and n.func.value.value == name), None)
            if record is not None:
                if seen_work:
                    return stream, record
                continue
            if "Event(" not in text and ".record(" not in text and not isinstance(stmt, cst.Pass):
                seen_work = True
    return None


def _handed_to_recorder(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo,
                        name: str) -> tuple[str, cst.CSTNode, FunctionInfo] | None:
    """``name`` handed to a method of the class that records it after work: ``self.m(a, name)`` or a call
    taking the bound method first (``pool.submit(self.m, a, name)``)."""
    for site in fn.calls:
        args = list(site.node.args)
        pos = next((i for i, a in enumerate(args) if isinstance(a.value, cst.Name) and a.value.value == name
                    and a.keyword is None), None)
        if pos is None:
            continue
        target, offset = None, 0
        func = site.node.func
        if isinstance(func, cst.Attribute) and _norm(file.code(func.value)) == "self" \
                and func.attr.value in cls.methods:
            target = cls.methods[func.attr.value]
        else:
            for i, a in enumerate(args[:pos]):
                text = _norm(file.code(a.value))
                if text.startswith("self.") and text[5:] in cls.methods:
                    target, offset = cls.methods[text[5:]], i + 1
        if target is None or target is fn:
            continue
        params = target.params[1:]
        index = pos - offset
        if 0 <= index < len(params):
            found = recorded_after_work(file, target, params[index])
            if found is not None:
                return found[0], found[1], target
    return None


def entry_fields(project: Project, file: FileModel, call: cst.Call) -> dict[str, cst.BaseExpression]:
    """The fields a constructor call sets: keywords, and positionals by the class's ``__init__`` parameters
    (named by the fields they are stored into) or its annotated fields
    (:func:`~streamlint.model.handedevents.construction_fields`); keywords only for a class not in the project."""
    from streamlint.model.handedevents import construction_fields
    name = file.code(call.func)
    cls = file.classes.get(name)
    if cls is None:
        qualname = file.resolve(call.func, None)
        sym = project.symbol(qualname, file) if qualname is not None else None
        cls = sym[0] if sym is not None and isinstance(sym[0], ClassInfo) else None
    if cls is None:
        return {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    return construction_fields(project, file, cls, call)


def _stored_entries(file: FileModel, fn: FunctionInfo):
    """(container ``self.F``, the constructor call) for ``self.F[k] = C(...)`` or ``x = C(...); self.F[k] = x``."""
    for node in local_nodes(fn.node.body):
        if not (isinstance(node, cst.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0].target, cst.Subscript)):
            continue
        container = _norm(file.code(node.targets[0].target.value))
        if not (container.startswith("self.") and container.count(".") == 1):
            continue
        value = node.value
        if isinstance(value, cst.Name):
            values = fn.name_assigns.get(value.value, ())
            value = values[0] if len(values) == 1 else None
        if isinstance(value, cst.Call):
            yield container, value


def _taken(file: FileModel, fn: FunctionInfo, container: str) -> list[str]:
    """Local names bound to an entry of ``container``: ``item = self.live[index]`` / ``.get(k)``."""
    out = []
    for name, values in fn.name_assigns.items():
        if len(values) == 1 and _norm(file.code(values[0])).startswith((container + "[", container + ".get(")):
            out.append(name)
    return out


def _derived_from(file: FileModel, fn: FunctionInfo, value: cst.BaseExpression, refs: tuple[str, ...],
                  depth: int = 0) -> bool:
    text = _norm(file.code(value))
    if any(r in text for r in refs):
        return True
    if depth < 3 and isinstance(value, cst.Name):
        return any(_derived_from(file, fn, v, refs, depth + 1) for v in fn.name_assigns.get(value.value, ()))
    return False


def unwaited_entries(project: Project, file: FileModel, cls: ClassInfo) -> list[UnwaitedEntry]:
    memo = derived(project, "unwaited_entries")
    if id(cls) in memo:
        return memo[id(cls)]
    memo[id(cls)] = out = []
    for producer in cls.methods.values():
        if producer.params[:1] != ("self",) or producer.node.name.value == "__init__":
            continue
        scopes = held_stream_scopes(file, producer)
        if not scopes:
            continue
        for container, call in _stored_entries(file, producer):
            fields = entry_fields(project, file, call)
            event = tensors = None
            tensors = []
            for field, value in fields.items():
                if not isinstance(value, cst.Name):
                    continue
                found = recorded_after_work(file, producer, value.value)
                if found is not None:
                    event = event or (field, *found, producer)
                    continue
                handed = _handed_to_recorder(project, file, cls, producer, value.value)
                if handed is not None:
                    event = event or (field, *handed)
                    continue
                made = producer.name_assigns.get(value.value, ())
                inside = [v for v in made if any(within(v, scope) for scope, _ in scopes)]
                if inside and "Event(" not in file.code(made[0]):
                    tensors.append((field, inside))
            if event is None:
                continue
            tensors = [f for f, inside in tensors
                       if len(inside) == len(producer.name_assigns.get(fields[f].value, ()))
                       or _made_before_record(file, producer, inside, event)]
            if not tensors:
                continue
            out += _hand_outs(project, file, cls, producer, container, event, tensors,
                              entry_class(project, file, call))
    return out


def _made_before_record(file: FileModel, producer: FunctionInfo, inside: list, event: tuple) -> bool:
    """Some binding of the value is in the scope the producer records the entry's event in, before the record
    (other bindings elsewhere: a host fallback branch that needs no wait)."""
    record, recorder = event[2], event[3]
    if recorder is not producer:
        return False
    line = file.span(record).start_line
    scope = next((sc for sc, _ in held_stream_scopes(file, producer) if within(record, sc)), None)
    return scope is not None and any(within(v, scope) and file.span(v).start_line < line for v in inside)


def _hand_outs(project, file, cls, producer, container, event, tensors, entry=None) -> list[UnwaitedEntry]:
    from streamlint.model.flow.asidejoins import aside_joins_only
    from streamlint.model.flow.protocols import class_joins, joined_keys, synchronizes_device
    field, stream, record, recorder = event
    out = []
    if _field_waited_in_class(file, cls, field) or _field_read_elsewhere(file, cls, field, (producer, recorder)) \
            or _cleared_after_wait(cls, field) or class_joins(project, file, cls, stream) and aside_joins_only(project, file, cls, stream, producer) is None:
        return out
    for method in cls.methods.values():
        if method in (producer, recorder) or method.params[:1] != ("self",) or method.node.name.value == "__init__":
            continue
        for item in _taken(file, method, container):
            if names_event(file, method, item, field) or handed_on(project, file, method, item, field, entry) \
                    or stream in joined_keys(file, method) \
                    or synchronizes_device(project, file, method):
                continue
            refs = tuple(f"{item}.{t}" for t in tensors)
            set_here = {_norm(file.code(n.targets[0].target)): n.value for n in local_nodes(method.node.body)
                        if isinstance(n, cst.Assign) and len(n.targets) == 1}
            for ret in method.returns:
                value = ret.value
                text = _norm(file.code(value)) if value is not None else ""
                if not text.startswith(item + ".") or not text[len(item) + 1:].isidentifier():
                    continue
                if text in refs or text in set_here and _derived_from(file, method, set_here[text], refs):
                    out.append(UnwaitedEntry(method, ret, text, f"{item}.{field}", stream, producer, record))
                    break
    return out


# calls that take the entry and cannot wait on it: host builtins and logging
_INERT_BUILTINS = frozenset({"len", "isinstance", "print", "id", "repr", "str", "hash", "type", "bool", "hasattr",
                             "format"})
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})


def entry_class(project: Project, file: FileModel, call: cst.Call) -> tuple[ClassInfo, FileModel] | None:
    """The project class a construction builds, with its module."""
    cls = file.classes.get(file.code(call.func))
    if cls is not None:
        return cls, file
    qualname = file.resolve(call.func, None)
    sym = project.symbol(qualname, file) if qualname is not None else None
    return (sym[0], sym[1]) if sym is not None and isinstance(sym[0], ClassInfo) else None


def _inert_call(file: FileModel, call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in _INERT_BUILTINS
    if isinstance(func, cst.Attribute) and func.attr.value in _LOG_METHODS:
        receiver = _norm(file.code(func.value)).rsplit(".", 1)[-1].lower()
        return "log" in receiver or _norm(file.code(func)) == "warnings.warn"
    return False


def _may_wait(project: Project, fn: FunctionInfo, file: FileModel, field: str) -> bool:
    """A callee the entry is handed to may wait on it: it names the event field, waits, joins or synchronises,
    or hands a parameter on to another call."""
    from streamlint.model.flow.protocols import synchronizes_device
    if re.search(rf"\.{re.escape(field)}\b", file.code(fn.node.body)) \
            or any(s.method in (*_WAITS, "wait_stream") for s in fn.calls) or synchronizes_device(project, file, fn):
        return True
    params = set(fn.params) - {"self", "cls"}
    return any(isinstance(a.value, cst.Name) and a.value.value in params
               for s in fn.calls for a in s.node.args)


def _entry_method(project: Project, entry, name: str):
    """``(method, module)`` of the entry's class (or a project base, one level up), or None when unknown."""
    if entry is None:
        return None
    cls, module = entry
    if name in cls.methods:
        return cls.methods[name], module
    for base in cls.bases:
        sym = project.symbol(base, module)
        if sym is not None and isinstance(sym[0], ClassInfo) and name in sym[0].methods:
            return sym[0].methods[name], sym[1]
    return None


def handed_on(project: Project, file: FileModel, method: FunctionInfo, item: str, field: str,
               entry=None) -> bool:
    """The hand-out calls a method of the entry (``item.wait()``) or hands the entry itself to a call
    (``self._wait(item)``) that may wait on it: unknown, or project code naming the event field, waiting,
    joining or synchronising (:func:`_may_wait`). Host builtins (``len``, ``isinstance``), logging and project
    code that does none of it (``item.touch()`` stamping a time) are no hand-on."""
    for node in local_nodes(method.node.body):
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == item:
            target = _entry_method(project, entry, func.attr.value)
            if target is None or _may_wait(project, target[0], target[1], field):
                return True
            continue
        if not any(isinstance(a.value, cst.Name) and a.value.value == item for a in node.args) \
                or _inert_call(file, node):
            continue
        site = file.call_site(node)
        targets = project.call_targets(file, site) if site is not None else []
        if not targets or any(_may_wait(project, fn, module, field) for fn, module in targets):
            return True
    return False


def presence_tests(file: FileModel, method: FunctionInfo) -> set[int]:
    """The expressions ``method`` only tests for presence (``x is None`` / ``is not None``, ``if x:``, ``not x``)."""
    tests: set[int] = set()
    for node in local_nodes(method.node.body):
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 \
                and isinstance(node.comparisons[0].operator, (cst.Is, cst.IsNot)) \
                and _norm(file.code(node.comparisons[0].comparator)) == "None":
            tests.add(id(node.left))
        elif isinstance(node, (cst.If, cst.While)):
            tests.add(id(node.test))
        elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            tests.add(id(node.expression))
    return tests


def names_event(file: FileModel, method: FunctionInfo, item: str, field: str) -> bool:
    """The hand-out names ``item.field`` otherwise than testing it for presence (``if item.ready is not None:``,
    ``if item.ready:``): a wait, a query, handing it on."""
    tests = presence_tests(file, method)
    return any(isinstance(n, cst.Attribute) and n.attr.value == field and isinstance(n.value, cst.Name)
               and n.value.value == item and id(n) not in tests for n in local_nodes(method.node.body))


def _field_waited_in_class(file: FileModel, cls: ClassInfo, field: str) -> bool:
    """A method of the class waits on (or synchronises, queries) an event field of that name of an entry."""
    for method in cls.methods.values():
        for site in method.calls:
            node = site.node
            if site.method not in _WAITS:
                continue
            held = node.args[0].value if site.method == "wait_event" and node.args else \
                node.func.value if isinstance(node.func, cst.Attribute) and site.method != "wait_event" else None
            if isinstance(held, cst.Attribute) and held.attr.value == field:
                return True
    return False


def _cleared_after_wait(cls: ClassInfo, field: str) -> bool:
    """A method of the class waits (synchronises, queries) and sets an entry's event field to None
    (``ev.synchronize(); self.live[i].ready = None``): the field's presence is the completion protocol, so a
    hand-out that only tests it for presence (``while item.ready is not None: cv.wait()``) is the wait."""
    for method in cls.methods.values():
        if not any(site.method in _WAITS for site in method.calls):
            continue
        for node in local_nodes(method.node.body):
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value == "None" \
                    and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == field for t in node.targets):
                return True
    return False


def _field_read_elsewhere(file: FileModel, cls: ClassInfo, field: str, skip: tuple) -> bool:
    """Another method of the class reads the entry's event field (``ev = entry.ready`` handed to a helper that
    waits, an accessor ``return self.live[i].ready`` the caller waits on): the event leaves the hand-out, so the
    join may be elsewhere. Not a read: storing it, testing it for presence, or timing with it
    (``start.elapsed_time(item.ready)``)."""
    for method in cls.methods.values():
        if method in skip:
            continue
        reads = [n for n in local_nodes(method.node.body) if isinstance(n, cst.Attribute) and n.attr.value == field]
        if not reads:
            continue
        skipped = presence_tests(file, method)
        for n in local_nodes(method.node.body):
            if isinstance(n, cst.Assign):
                skipped.update(id(t.target) for t in n.targets)
            elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "elapsed_time":
                skipped.update(id(a.value) for a in n.args)
                skipped.add(id(n.func.value))
        if any(id(r) not in skipped for r in reads):
            return True
    return False
