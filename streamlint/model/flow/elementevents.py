"""Side-stream products carried between methods in container fields, with their events in a container too
(issue 16, [cross-method]: data prefetchers, layer streamers, offload managers with pending-event dicts).

A prefetcher's fetch method copies a batch to the device on a side stream and keeps it for a sibling method,
with an event recorded on that stream after the copy, one element per container field::

    with torch.cuda.stream(self.stream):
        batch = batch.to(dev, non_blocking=True)
    self._batches.append(batch)          # or self._ready[key] = batch, self._q.put((batch, ev)) ...
    ev.record(self.stream)
    self._events.append(ev)

The consumer (``__next__``, ``get(key)``) takes one element of each (``ev = self._events.pop(0)`` ...
``batch = self._batches.pop(0)``) and must make the current stream wait on the event before the batch leaves
the object. When it takes the event and drops it (never waits it, hands it nowhere), the caller reads the batch
before its copy lands: SL201 at the hand-out (``return batch`` / ``yield``), medium (the fetch-before-take order
and the caller's current stream are the class's protocol, assumed).

:func:`unwaited_elements` finds such hand-outs per class. A container field is one element kind: every store
into it (``append`` / ``appendleft`` / ``insert`` / ``put`` / ``put_nowait`` / ``[k] =`` / ``setdefault``) in a
method (one, no construction method) stores a name (or a tuple of names) the producer made inside its ``with
X.stream(self.S):`` scope (data) or recorded on ``self.S`` after device work there (an event); a field filled
anywhere else with another value (``extend``, ``update``, ``+=``, a store of an unclassified value, a rebinding to
anything but an empty container) is no element container, and the class is left alone. The consumer's take of
the data element and of its event must be related: the same key text, or both in arrival order (``pop(0)`` /
``popleft()`` / ``get()``), or one tuple element holding both. Silent when the consumer names the taken event
anywhere but its binding (a wait, a helper it is handed to, a store), takes an event element inside another
expression (``self._events.pop(0).wait()``), joins the stream, synchronises (itself or through a ``self``
method it calls), when another method of the class waits on an element of the event container, or when a
method of the class joins the stream otherwise than aside (:mod:`~streamlint.model.flow.asidejoins`); silent too
when the consumer uses the event field otherwise than by a take (a loop waiting every element, the field handed
whole to a helper), when the producer synchronises or waits, or when code outside the class reaches the stream
(a caller may join it). Products are device values only (no ``.tolist()`` / ``.item()`` / ``.cpu()`` / Python
values); reads under the copy stream's own scope are ordered and no hand-out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.entryevents import held_stream_scopes
from streamlint.model.flow.protocols import class_joins, joined_keys, reached_outside, synchronizes_device
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, normalized_code

if TYPE_CHECKING:
    from streamlint.model.project import Project

_norm = normalized_code
_STORES = {"append": 0, "appendleft": 0, "put": 0, "put_nowait": 0, "insert": 1, "setdefault": 1}
_FILLS = ("extend", "extendleft", "update", "__setitem__", "__iadd__")
_TAKES = ("pop", "popleft", "get", "get_nowait", "__getitem__")
_EMPTY = ("[]", "{}", "list()", "dict()", "()", "set()")
_EMPTY_CALLS = ("deque", "Queue", "SimpleQueue", "LifoQueue", "OrderedDict", "defaultdict", "list", "dict")
_CONSTRUCTION = ("__init__", "reset", "_reset", "setup", "_setup", "init", "_init", "clear", "close", "__del__")


@dataclass(frozen=True)
class UnwaitedElement:
    """A method handing out a side-stream product taken from a container field without waiting on the event
    taken with it."""

    method: FunctionInfo  # the consumer (``__next__``)
    node: cst.CSTNode  # its return / yield
    handed: str  # ``batch``
    data: str  # ``self._batches``
    events: str  # ``self._events`` (the same field for a tuple element)
    event: str  # ``event`` (the taken event's name)
    stream: str  # ``self._prefetch_stream``
    producer: FunctionInfo  # the method storing the elements (``_fetch_next_batch``)
    record: cst.CSTNode  # the event's record (after the work; before it when ``early``)
    early: bool = False  # the event is waited here, but recorded before the copy it should cover

    @property
    def handed_out(self) -> bool:
        """Returned / yielded to the caller (else read here, on the current stream)."""
        return isinstance(self.node, (cst.Return, cst.Yield))


def _self_field(file: FileModel, expr: cst.BaseExpression) -> str | None:
    text = _norm(file.code(expr))
    return text if text.startswith("self.") and text.count(".") == 1 and text[5:].isidentifier() else None


def _stores(file: FileModel, fn: FunctionInfo):
    """(field, stored value, key text or ``"fifo"``, node) for each element store of ``fn``."""
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in _STORES:
            field = _self_field(file, node.func.value)
            index = _STORES[node.func.attr.value]
            if field is None or len(node.args) <= index:
                continue
            name = node.func.attr.value
            key = "fifo" if name in ("append", "put", "put_nowait") else \
                _norm(file.code(node.args[0].value)) if name == "setdefault" else "?"
            yield field, node.args[index].value, key, node
        elif isinstance(node, cst.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0].target, cst.Subscript):
            target = node.targets[0].target
            field = _self_field(file, target.value)
            if field is not None:
                key = _norm(file.code(target.slice[0].slice)) if len(target.slice) == 1 \
                    and isinstance(target.slice[0].slice, cst.Index) else "?"
                yield field, node.value, _norm(key), node


def _filled_otherwise(file: FileModel, cls: ClassInfo, field: str) -> bool:
    """``field`` gets values some other way than an element store: ``extend`` / ``update`` / ``+=``, or a
    rebinding to anything but an empty container (outside construction too)."""
    for method in cls.methods.values():
        for node in local_nodes(method.node.body):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                    and node.func.attr.value in _FILLS and _self_field(file, node.func.value) == field:
                return True
            if isinstance(node, cst.AugAssign) and _self_field(file, node.target) == field:
                return True
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
                [node.target] if isinstance(node, cst.AnnAssign) and node.value is not None else []
            if any(_self_field(file, t) == field for t in targets):
                value = node.value
                text = _norm(file.code(value))
                call = value.func if isinstance(value, cst.Call) else None
                callee = file.code(call).rsplit(".", 1)[-1] if call is not None else ""
                if text not in _EMPTY and not (callee in _EMPTY_CALLS and callee not in ("list", "dict")
                                               or callee in ("list", "dict") and not value.args):
                    return True
    return False


def _line(file: FileModel, node: cst.CSTNode) -> int:
    return file.span(node).start_line


def _work_lines(file: FileModel, scope: cst.With) -> list[int]:
    return [_line(file, s) for s in scope.body.body
            if not isinstance(s, cst.Pass) and "Event(" not in file.code(s) and ".record(" not in file.code(s)
            and "record_event(" not in file.code(s)]


def _event_record(file: FileModel, fn: FunctionInfo, name: str, scopes) -> tuple[str, str, cst.CSTNode] | None:
    """``name.record(...)`` / ``S.record_event(name)`` / ``name = S.record_event()`` in ``fn``, on a stream
    ``self.S`` of a scope of ``fn``: ("event", ``self.S``, the record) when some record follows device work of
    that scope; ("early", ...) when the one record of ``name`` precedes every work of the scopes of ``self.S``
    that follow it (recorded before the copy it should cover)."""
    records = []
    for node in local_nodes(fn.node.body):
        if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
            continue
        attr, recv = node.func.attr.value, _norm(file.code(node.func.value))
        stream = None
        if attr == "record" and recv == name:
            stream = _norm(file.code(node.args[0].value)) if node.args else ""
        elif attr == "record_event" and (node.args and _norm(file.code(node.args[0].value)) == name
                                         or not node.args and any(_norm(file.code(v)) == file.code(node)
                                                                  for v in fn.name_assigns.get(name, ()))):
            stream = recv
        if stream is not None:
            records.append((node, stream))
    early = None
    for node, stream in records:
        line = _line(file, node)
        for scope, s in scopes:
            inside = any(n is node for n in local_nodes(scope.body))
            if stream not in ("", s) or stream == "" and not inside:
                continue
            work = _work_lines(file, scope)
            if any(w < line for w in work):
                return "event", s, node
            if work and len(records) == 1 and all(w > line for w in work):
                early = ("early", s, node)
    return early


def _made_in(file: FileModel, fn: FunctionInfo, name: str, scopes, before: int) -> str | None:
    """The stream ``self.S`` of the scope the last binding of ``name`` in ``fn`` above line ``before`` is made
    in (not an event), when that binding is at the scope's top level (no branch there may skip it)."""
    made = [v for v in fn.name_assigns.get(name, ()) if _line(file, v) < before]
    if not made or any("Event(" in file.code(v) or "record_event(" in file.code(v) for v in made):
        return None
    last = max(made, key=lambda v: _line(file, v))
    if sum(1 for v in made if _line(file, v) == _line(file, last)) != 1:
        return None
    if not _device_value(file, last):
        return None
    for scope, s in scopes:
        for stmt in scope.body.body:
            if isinstance(stmt, cst.SimpleStatementLine) and any(n is last for n in local_nodes(stmt)):
                return s
    return None


_HOST_RESULTS = ("tolist", "item", "cpu", "numpy", "tobytes", "size", "dim", "numel", "data_ptr", "keys",
                 "values", "items", "get", "pop", "split", "strip")
_PY_CALLS = ("len", "int", "float", "bool", "str", "list", "dict", "tuple", "set", "sum", "max", "min", "sorted",
             "range", "next", "iter", "enumerate", "zip", "map", "filter", "id", "hash", "repr", "round", "abs")


def _device_value(file: FileModel, value: cst.CSTNode) -> bool:
    """A binding whose value may be a device tensor (a call that is no host read-back / Python value):
    ``x.to(dev, non_blocking=True)`` yes; ``x.tolist()``, ``x.item()``, ``x.cpu()``, ``len(x)``, literals no."""
    if not isinstance(value, cst.Call):
        return False
    text = file.code(value)
    if any(f".{m}()" in text for m in ("tolist", "item", "numpy", "cpu", "tobytes")):
        return False
    func = value.func
    if isinstance(func, cst.Attribute):
        return func.attr.value not in _HOST_RESULTS
    return not (isinstance(func, cst.Name) and func.value in _PY_CALLS)


def _kinds(file: FileModel, fn: FunctionInfo, value: cst.BaseExpression, scopes, store: cst.CSTNode):
    """Per position of the stored value (one name, or a tuple of names): ("event" / "early", stream, record) /
    ("data", stream, None); None when a position is neither."""
    parts = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
    out = []
    for part in parts:
        if not isinstance(part, cst.Name):
            return None
        rec = _event_record(file, fn, part.value, scopes)
        if rec is not None:
            out.append(rec)
            continue
        stream = _made_in(file, fn, part.value, scopes, _line(file, store))
        if stream is None:
            return None
        out.append(("data", stream, None))
    return out


def _containers(file: FileModel, cls: ClassInfo):
    """{field: (producer, key, kinds)} for container fields each filled with one element kind only."""
    found: dict[str, list] = {}
    bad: set[str] = set()
    for method in cls.methods.values():
        if method.params[:1] != ("self",):
            continue
        scopes = held_stream_scopes(file, method)
        for field, value, key, node in _stores(file, method):
            kinds = _kinds(file, method, value, scopes, node) if scopes else None
            if kinds is None or method.node.name.value in _CONSTRUCTION:
                bad.add(field)
                continue
            found.setdefault(field, []).append((method, key, kinds))
    out = {}
    for field, stores in found.items():
        shapes = {tuple((k, s) for k, s, _ in kinds) for _, _, kinds in stores}
        if field in bad or len(shapes) != 1 or len({id(m) for m, _, _ in stores}) != 1 \
                or _filled_otherwise(file, cls, field):
            continue
        method, key, kinds = stores[0]
        out[field] = (method, key if all(k == key for _, k, _ in stores) else "?", kinds)
    return out


def _take(file: FileModel, value: cst.BaseExpression, field: str) -> str | None:
    """The key of a take of one element of ``field`` (``"fifo"`` for ``pop(0)`` / ``popleft()`` / ``get()``)."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _TAKES \
            and _self_field(file, value.func.value) == field:
        name, args = value.func.attr.value, value.args
        if name == "popleft" or name in ("get", "get_nowait") and not args \
                or name == "pop" and len(args) == 1 and _norm(file.code(args[0].value)) == "0":
            return "fifo"
        return _norm(file.code(args[0].value)) if args else "lifo"
    if isinstance(value, cst.Subscript) and _self_field(file, value.value) == field and len(value.slice) == 1 \
            and isinstance(value.slice[0].slice, cst.Index):
        return _norm(file.code(value.slice[0].slice.value))
    return None


def _removes(value: cst.BaseExpression) -> bool:
    """A take that removes the element (``pop`` / ``popleft`` / a queue's ``get()``): no other method can wait
    on that element for this one."""
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
        value.func.attr.value in ("pop", "popleft", "get_nowait") or value.func.attr.value == "get" and not value.args)


def _taken(file: FileModel, fn: FunctionInfo, field: str, removing: bool = True):
    """(target, key, statement) for each statement ``x = <take of field>`` / ``x, e = <take>`` (target None for
    a take dropped by an expression statement); and whether ``fn`` takes an element of ``field`` in any other
    expression (not a store target; with ``removing`` false, not a removing take either)."""
    bound, other = [], False
    skipped: set[int] = set()
    for node in local_nodes(fn.node.body):
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            skipped.update(id(t) for t in targets)
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            key = _take(file, node.value, field)
            if key is not None and (removing or not _removes(node.value)):
                bound.append((node.targets[0].target, key, node))
            skipped.add(id(node.value))
        elif isinstance(node, cst.Expr):  # ``self._pending.pop(k)``: taken and dropped
            key = _take(file, node.value, field)
            if key is not None and (removing or not _removes(node.value)):
                bound.append((None, key, node))
            skipped.add(id(node.value))
    for node in local_nodes(fn.node.body):
        if isinstance(node, (cst.Call, cst.Subscript)) and id(node) not in skipped \
                and _take(file, node, field) is not None and (removing or not _removes(node)):
            other = True
    return bound, other


def _names_used(file: FileModel, fn: FunctionInfo, name: str | None, binding: cst.CSTNode) -> bool:
    """``name`` is referenced in ``fn`` anywhere but as the target of ``binding`` (no name: a dropped take)."""
    if name is None:
        return False
    skip = {id(n) for n in local_nodes(binding.targets[0].target)} | {id(binding.targets[0].target)}
    return any(isinstance(n, cst.Name) and n.value == name and id(n) not in skip
               for n in local_nodes(fn.node.body))


def _joins(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo, stream: str, depth: int = 0) -> bool:
    if stream in joined_keys(file, fn) or synchronizes_device(project, file, fn):
        return True
    if depth >= 2:
        return False
    for site in fn.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and _norm(file.code(func.value)) == "self" \
                and func.attr.value in cls.methods and cls.methods[func.attr.value] is not fn:
            if _joins(project, file, cls, cls.methods[func.attr.value], stream, depth + 1):
                return True
    return False


_BENIGN_CALLS = ("len", "bool", "isinstance", "id", "type")


def _field_used(file: FileModel, fn: FunctionInfo, field: str) -> bool:
    """``fn`` uses the event container ``field`` otherwise than by a take or a store: iterates it (``for ev in
    self._events: ev.wait()``), hands it whole to a call (``wait_pending(self._pending, key)``), aliases it --
    its elements may be waited there. (``len(...)``, a truth test, a method call on it are no such use.)"""
    parents: dict[int, cst.CSTNode] = {}
    hits = []
    for node in local_nodes(fn.node.body):
        for child in node.children:
            parents[id(child)] = node
        if isinstance(node, cst.Attribute) and _self_field(file, node) == field:
            hits.append(node)
    for node in hits:
        parent = parents.get(id(node))
        if isinstance(parent, cst.Attribute) and parent.value is node:
            continue  # ``self._events.pop(0)``: a take / store / query (the takes are judged by the caller)
        if isinstance(parent, (cst.UnaryOperation, cst.If, cst.While, cst.BooleanOperation, cst.Comparison,
                               cst.ComparisonTarget)):
            continue
        if isinstance(parent, cst.Arg):
            call = parents.get(id(parent))
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in _BENIGN_CALLS:
                continue
        return True
    return False


def _producer_syncs(project: Project, file: FileModel, producer: FunctionInfo, stream: str) -> bool:
    """The producer itself waits for its copy on the host: ``ev.synchronize()`` / ``S.synchronize()`` / a device
    synchronisation (the event it stores is then kept for bookkeeping only)."""
    if synchronizes_device(project, file, producer):
        return True
    return any(site.method in ("synchronize", "wait") for site in producer.calls) \
        or stream in joined_keys(file, producer)


def _waited_elsewhere(file: FileModel, cls: ClassInfo, events: str, skip: FunctionInfo) -> bool:
    """Another method takes or iterates an element of ``events`` and names it in anything but its binding."""
    for method in cls.methods.values():
        if method is skip:
            continue
        body = _norm(file.code(method.node.body))
        if events not in body:
            continue
        bound, other = _taken(file, method, events, removing=False)
        if other or any(isinstance(t, cst.Name) and _names_used(file, method, t.value, node) or
                        t is not None and not isinstance(t, cst.Name) for t, _, node in bound):
            return True
        if any(isinstance(n, cst.For) and _self_field(file, n.iter) == events or isinstance(n, cst.For)
               and events in _norm(file.code(n.iter)) for n in local_nodes(method.node.body)):
            return True
    return False


def element_rooted(project: Project, file: FileModel, fn: FunctionInfo, pending: list) -> list:
    """A consumer's class-protocol inputs (:func:`~streamlint.model.flow.protocols.protocol_inputs`) without the
    container families when it takes an element's event and drops it: that is the root cause, reported here at
    the same hand-out, naming the event."""
    cls = file.classes.get(fn.class_name or "")
    if cls is None or not any(p.family for p in pending) \
            or not any(u.method is fn for u in unwaited_elements(project, file, cls)):
        return pending
    return [p for p in pending if not p.family]


def unwaited_elements(project: Project, file: FileModel, cls: ClassInfo) -> list[UnwaitedElement]:
    memo = derived(project, "unwaited_elements")
    hit = memo.get(id(cls))
    if hit is not None and hit[0] is cls:  # (the class object is kept with its answer: its id stays unique)
        return hit[1]
    out: list[UnwaitedElement] = []
    memo[id(cls)] = (cls, out)
    containers = _containers(file, cls)
    seen: set[int] = set()
    events = {f: v for f, v in containers.items() if any(k in ("event", "early") for k, _, _ in v[2])}
    if not events:
        return out
    for method in cls.methods.values():
        if method.params[:1] != ("self",) or method.node.name.value in _CONSTRUCTION:
            continue
        found = _consumer(project, file, cls, method, containers, events)
        if found is not None and not (found.early and id(found.record) in seen):
            seen.add(id(found.record))
            out.append(found)
    return out


def _consumer(project, file, cls, method, containers, events) -> UnwaitedElement | None:
    from streamlint.model.flow.asidejoins import aside_joins_only
    for data, (producer, dkey, dkinds) in containers.items():
        if producer is method:
            continue
        bound, _ = _taken(file, method, data)
        for target, key, node in bound:
            if target is None:
                continue
            names = [target] if not isinstance(target, cst.Tuple) else [e.value for e in target.elements]
            if len(names) != len(dkinds) or not all(isinstance(n, cst.Name) for n in names):
                continue
            handed = [n.value for n, (k, _, _) in zip(names, dkinds) if k == "data"]
            if not handed:
                continue
            stream = next(s for k, s, _ in dkinds if k == "data")
            pair = _event_for(file, method, data, key, dkinds, names, node, events, producer, stream)
            if pair is None:
                continue
            evfield, evname, record, kind = pair
            if _field_used(file, method, evfield) or _producer_syncs(project, file, producer, stream) \
                    or stream.startswith("self.") and reached_outside(project, file, cls, stream[5:]) \
                    or _joins(project, file, cls, method, stream) \
                    or kind == "event" and _waited_elsewhere(file, cls, evfield, method) \
                    or class_joins(project, file, cls, stream) \
                    and aside_joins_only(project, file, cls, stream, producer) is None:
                continue
            ret = _hand_out(file, method, handed, stream)
            if ret is not None:
                return UnwaitedElement(method, ret[0], ret[1], data, evfield, evname, stream, producer, record,
                                       kind == "early")
    return None


def _event_for(file, method, data, key, dkinds, names, node, events, producer, stream):
    """The event taken with the data element: (its field, its name, its record, "early" or "event") when it
    is an event recorded after the copy and dropped here, or one recorded before the copy and waited here."""

    def fits(kind: str, name: str | None, binding) -> bool:
        if kind == "event":
            return not _names_used(file, method, name, binding)
        return kind == "early" and name is not None and name in joined_keys(file, method)

    for (kind, s, record), name in zip(dkinds, names):  # one tuple element holding both
        if kind in ("event", "early") and s == stream:
            return (data, name.value, record, kind) if fits(kind, name.value, node) else None
    for field, (evproducer, _, ekinds) in events.items():
        if field == data or evproducer is not producer or len(ekinds) != 1 or ekinds[0][1] != stream:
            continue
        bound, other = _taken(file, method, field)
        if other:
            return None
        for target, ekey, enode in bound:
            name = target.value if isinstance(target, cst.Name) else None
            if (target is None or name is not None) and ekey == key and key not in ("?", "lifo") \
                    and fits(ekinds[0][0], name, enode):
                return field, name or file.code(enode.value), ekinds[0][2], ekinds[0][0]
    return None


def _hand_out(file: FileModel, method: FunctionInfo, handed: list[str], stream: str):
    """The first hand-out or current-stream read of a handed name: ``return x`` / ``yield x`` (also inside a
    tuple), a tensor-only method on it (``x.view(...)``, ``x.add_(...)``), or ``torch.f(..., x, ...)``."""
    from streamlint.model.tensoruse import tensor_only_method

    def named(expr) -> str | None:
        return expr.value if isinstance(expr, cst.Name) and expr.value in handed else None

    ordered = {id(n) for scope, s in held_stream_scopes(file, method) if s == stream
               for n in local_nodes(scope.body)}
    for node in local_nodes(method.node.body):
        if id(node) in ordered:
            continue  # (read on the copy's own stream: ordered after it)
        if isinstance(node, (cst.Return, cst.Yield)) and node.value is not None:
            value = node.value
            parts = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
            for part in parts:
                if named(part):
                    return node, named(part)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if named(node.func.value) and tensor_only_method(node.func.attr.value) \
                    and node.func.attr.value != "record_stream":
                return node, named(node.func.value)
            if file.code(node.func).startswith("torch.") and file.code(node.func).count(".") == 1:
                hit = next((named(a.value) for a in node.args if named(a.value)), None)
                if hit:
                    return node, hit
    return None
