"""Tensors handed to a worker thread through a host queue with no device ordering (issue 16, [thread-handoff]).

A function run only on worker threads (:func:`~streamlint.model.flow.hostargs.worker_thread_only`) has a caller
whose current stream produced nothing it hands in; its argument races are moot when the producing thread ordered
the hand-off itself (a source event it completed, a synchronize) before it queued the work. But a queue is host
ordering only: ``q.put((key, kv))`` returns as soon as the item is enqueued, while the kernels that make ``kv`` may
still run on the producing thread's stream. When the worker's caller takes the argument off a queue field of its
object (``key, value = self.pending.get()``; through names and tuple unpacking, same position) and a method of the
same class puts there a tensor it was handed (a parameter annotated as a tensor, at that position of the item)
with no host synchronisation, event record or wait anywhere in that method, nothing orders the producer before
the worker's side stream: the argument is the producing thread's, made on its current stream, and the callee's
side-stream read of it with no fork races it (the usual argument race, "no wait on the caller's stream").

Not such a hand-off: an item built elsewhere (a list popped, a future, an executor's argument), a queue filled by
another object, a put of a local the method built (its own work: the method's own analysis), a put method that
synchronises, records or waits on anything (the item may carry the ordering), a position that does not match.

:func:`dropped_queue_events` (the reverse order, [cross-method]): a method of the class records an event after its
work and puts it on a hand-off field of the object together with that work's data (``ev.record(s);
self.inputs.put((batch, ev))``, also ``append`` onto a list / deque); another method takes the item off
(``batch, ev = self.inputs.get()``, ``popleft()``) and never names the event again -- no wait, no
synchronisation, not handed on -- while it goes on to use the data. The event was the item's only ordering (the
putter made it for the taker), so the taker's first use of the data races the putter's work: SL201 at that use,
medium (the taker may run on the putter's stream: then no wait was needed, but nothing else would make the event).
Not reported: a name starting with ``_`` (dropped on purpose), a taker joining anything or synchronising the device
before that use, an item the putter builds otherwise (a position that does not match, no record in the putter).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.callers import callers_of
from streamlint.model.streams import derived
from streamlint.model.syntax import call_name, param_named, self_attribute
from streamlint.model.tensoruse import tensor_annotation
from streamlint.model.uses import bind_arguments
from streamlint.model.walk import descendants
from streamlint.model.filefacts import FunctionInfo

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.project import Project

_GETS = frozenset({"get", "get_nowait"})
_PUTS = frozenset({"put", "put_nowait"})
# a call of one of these in the putting method may order the item's producer (or hand an event along with it)
_ORDERING = ("synchronize", "wait", "record", "query")


def queued_unordered(project: Project, file: FileModel, fn: FunctionInfo, param: str) -> bool:
    """Does some project call site of ``fn`` bind ``param`` to an element its caller took off a queue field that a
    method of the caller's class fills with a tensor it was handed, with no ordering of its producer?"""
    memo = derived(project, "queued_unordered")
    key = (id(fn), param)
    if key not in memo:
        memo[key] = False
        method = fn.class_name is not None and fn.params[:1] == ("self",)
        params = (fn.params[1:] if method else fn.params) + fn.kwonly
        for model, site in callers_of(project, file, fn) or []:
            caller = site.function
            expr = bind_arguments(params, site.node, kwonly=fn.kwonly).get(param)
            if caller is None or caller.class_name is None or expr is None:
                continue
            source = _queue_source(caller, expr, None, 0)
            cls = model.classes.get(caller.class_name)
            if source is not None and cls is not None and _unordered_put(cls, *source):
                memo[key] = True
                break
    return memo[key]


def _assigned(caller: FunctionInfo, name: str) -> list[tuple[cst.BaseExpression, int | None]]:
    """Every value ``name`` is bound to in ``caller``: ``name = v`` (None) or ``a, name = v`` (its position)."""
    out = []
    for node in descendants(caller.node.body):
        if not isinstance(node, cst.Assign):
            continue
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Name) and t.value == name:
                out.append((node.value, None))
            elif isinstance(t, (cst.Tuple, cst.List)):
                for i, el in enumerate(t.elements):
                    if isinstance(el.value, cst.Name) and el.value.value == name:
                        out.append((node.value, i))
    return out


def _queue_source(caller: FunctionInfo, expr: cst.BaseExpression, index: int | None,
                  depth: int) -> tuple[str, int | None] | None:
    """(the queue field, the item position or None for the whole item) ``expr`` is taken from: ``self.q.get()``, or
    a local bound once to one (directly or by unpacking). None when it is not, or is bound more than once."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Call) and call_name(expr) in _GETS and isinstance(expr.func, cst.Attribute):
        field = self_attribute(expr.func.value)
        return (field, index) if field is not None else None
    if isinstance(expr, cst.Name) and expr.value not in caller.all_params:
        values = _assigned(caller, expr.value)
        if len(values) != 1:
            return None
        value, position = values[0]
        if position is not None and index is not None:
            return None  # (nested unpacking: not followed)
        return _queue_source(caller, value, position if position is not None else index, depth + 1)
    return None


def _unordered_put(cls, field: str, index: int | None) -> bool:
    """Does a method of ``cls`` put on ``self.<field>`` a tensor parameter of its own (at ``index`` of a tuple item)
    and neither synchronise, record nor wait anywhere in its body?"""
    for method in cls.methods.values():
        for site in method.calls:
            call = site.node
            if call_name(call) not in _PUTS or not isinstance(call.func, cst.Attribute) \
                    or self_attribute(call.func.value) != field or not call.args:
                continue
            item = call.args[0].value
            if index is not None:
                if not isinstance(item, cst.Tuple) or index >= len(item.elements):
                    continue
                item = item.elements[index].value
            if not isinstance(item, cst.Name) or item.value not in method.all_params:
                continue
            param = param_named(method.node, item.value)
            if param is None or param.annotation is None or not tensor_annotation(param.annotation.annotation):
                continue
            if not any(any(part in (call_name(s.node) or "") for part in _ORDERING) for s in method.calls
                       if call_name(s.node) not in _PUTS):
                return True
    return False


_TAKES = frozenset({"get", "get_nowait", "popleft", "pop"})
_HANDS = frozenset({"put", "put_nowait", "append", "appendleft"})
_JOINS = ("wait", "sync", "query")  # a call naming one of these (``wait_event``, ``synchronize``, ``wait_for_copy``)
# calls that only look at a host value (a request id, a count) or file it away: no use of device data
_HOST_CALLS = frozenset({"print", "len", "int", "str", "float", "bool", "isinstance", "format", "repr", "id", "hash",
                         "debug", "info", "warning", "error", "exception", "log", "append", "add", "get", "pop"})


@dataclass(frozen=True)
class DroppedQueueEvent:
    """A taker method dropping the event a putter method queued with the data it covers."""

    taker: FunctionInfo
    take: cst.CSTNode  # ``batch, ev = self.q.get()``
    use: cst.CSTNode  # the first call using the data after the take
    event: str  # the taker's name for the event
    data: str  # the data name that call uses
    field: str  # ``self.q``
    putter: FunctionInfo
    record: cst.CSTNode  # the putter's record of the event


def dropped_queue_events(project: Project, file: FileModel, cls) -> list[DroppedQueueEvent]:
    """Per class: the takers that drop a queued event before using the data queued with it (module docstring)."""
    from streamlint.model.flow.protocols import synchronizes_device
    memo = derived(project, "dropped_queue_events")
    if id(cls) in memo:
        return memo[id(cls)]
    memo[id(cls)] = out = []
    puts = _recorded_puts(file, cls)
    if not puts:
        return out
    for taker in cls.methods.values():
        if taker.params[:1] != ("self",):
            continue
        for take, field, names in _takes(taker):
            for putter, size, index, record in puts.get(field, ()):
                if putter is taker or size != len(names) or names[index] is None or names[index].startswith("_") \
                        or _named(taker, names[index]) != 1:
                    continue
                data = [n for i, n in enumerate(names) if i != index and n is not None and not n.startswith("_")]
                use = _first_use(taker, take, data)
                if use is None or _joins_between(file, taker, take, use[0]) \
                        or synchronizes_device(project, file, taker):
                    continue
                out.append(DroppedQueueEvent(taker, take, use[0], names[index], use[1], f"self.{field}", putter,
                                             record))
                break
    return out


def _recorded_puts(file: FileModel, cls) -> dict[str, list]:
    """``field -> [(putter, item size, event position, record)]``: a method putting on ``self.<field>`` a tuple
    one element of which is a local event it made and recorded before the put (``ev = torch.cuda.Event();
    ev.record(s)``, ``ev = s.record_event()``; ``torch.get_device_module(d).Event()``: a call of ``Event`` whose
    result the method records)."""
    from streamlint.model.flow.droppedevents import fresh_event
    out: dict[str, list] = {}
    for method in cls.methods.values():
        for site in method.calls:
            call = site.node
            if call_name(call) not in _HANDS or not isinstance(call.func, cst.Attribute) or not call.args:
                continue
            field, item = self_attribute(call.func.value), call.args[0].value
            if field is None or not isinstance(item, cst.Tuple):
                continue
            line = file.span(call).start_line
            for index, el in enumerate(item.elements):
                name = el.value.value if isinstance(el.value, cst.Name) else None
                values = method.name_assigns.get(name, ()) if name is not None else ()
                if not values or name in method.all_params or not all(
                        fresh_event(file, method, v) or call_name(v) == "Event" for v in values):
                    continue
                record = next((s.node for s in method.calls if file.span(s.node).start_line <= line and (
                    s.method == "record" and isinstance(s.node.func, cst.Attribute)
                    and isinstance(s.node.func.value, cst.Name) and s.node.func.value.value == name)), None)
                if record is None and any(call_name(v) == "record_event" for v in values):
                    record = next(v for v in values if call_name(v) == "record_event")
                if record is not None:
                    out.setdefault(field, []).append((method, len(item.elements), index, record))
    return out


def _takes(fn: FunctionInfo):
    """(statement, field, names) for each ``a, b = self.<field>.get()`` of ``fn`` (a name per position, None for a
    position that is no plain name)."""
    for node in descendants(fn.node.body):
        if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call)
                and isinstance(node.targets[0].target, (cst.Tuple, cst.List))):
            continue
        call = node.value
        if call_name(call) not in _TAKES or not isinstance(call.func, cst.Attribute):
            continue
        field = self_attribute(call.func.value)
        if field is not None:
            yield node, field, [el.value.value if isinstance(el.value, cst.Name) else None
                                for el in node.targets[0].target.elements]


def _named(fn: FunctionInfo, name: str) -> int:
    """How many times ``name`` occurs in ``fn`` as a name (nested definitions included; a ``global`` /
    ``nonlocal`` of it counts as many uses)."""
    from streamlint.model.flow.droppedevents import _names_in
    counts = _names_in(fn.node)
    return 99 if name in counts.get(" declared", ()) else counts.get(name, 0)


def _first_use(fn: FunctionInfo, take: cst.CSTNode, data: list[str]) -> tuple[cst.Call, str] | None:
    """The first call after ``take`` (statement order, in the blocks holding it and their successors) handed a data
    name, an attribute of one, or a local bound from one (``ids = batch.input_ids``), as an argument or receiver;
    not a call that only looks at a host value or files it away (``len(reqs)``, ``logger.info(rid)``,
    ``self.pending.pop(rid)``)."""
    from streamlint.model.syntax import mentions_name
    names = set(data)
    for stmt in _after(fn, take):
        for node in descendants(stmt):
            if isinstance(node, cst.Call) and call_name(node) not in _HOST_CALLS:
                parts = [a.value for a in node.args]
                if isinstance(node.func, cst.Attribute):
                    parts.append(node.func.value)
                hit = next((n for n in names for p in parts if mentions_name(p, n)), None)
                if hit is not None:
                    return node, hit
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and mentions_name(small.value, *names):
                    names |= {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
    return None


def _after(fn: FunctionInfo, take: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements following ``take``'s statement in its block, then those following each enclosing statement
    in its own block (outward, up to the function's body)."""
    chain: list[tuple[list, int]] = []  # (block statements, index) from the function body inwards

    def find(block) -> bool:
        stmts = list(getattr(block, "body", ()))
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, cst.SimpleStatementLine) and any(small is take for small in stmt.body):
                chain.append((stmts, i))
                return True
            if isinstance(stmt, cst.BaseCompoundStatement) and not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                inner = [stmt.body, getattr(stmt, "orelse", None), getattr(stmt, "finalbody", None),
                         *getattr(stmt, "handlers", ())]
                while inner:
                    b = inner.pop(0)
                    if b is None:
                        continue
                    if isinstance(b, (cst.Else, cst.Finally, cst.ExceptHandler)):
                        b = b.body
                    elif isinstance(b, cst.If):  # an `elif`
                        inner += [b.body, b.orelse]
                        b = None
                    if b is not None and find(b):
                        chain.append((stmts, i))
                        return True
        return False

    find(fn.node.body)
    return [stmt for stmts, i in chain for stmt in stmts[i + 1:]]


def _joins_between(file: FileModel, fn: FunctionInfo, take: cst.CSTNode, use: cst.CSTNode) -> bool:
    """A call named for a join (``wait_event``, ``synchronize``, ``query``, ``wait_ready()``) between the take and
    the use."""
    lo, hi = file.span(take).start_line, file.span(use).start_line
    return any(lo <= file.span(s.node).start_line <= hi and s.method is not None
               and any(j in s.method.lower() for j in _JOINS) for s in fn.calls)


__all__ = ["DroppedQueueEvent", "dropped_queue_events", "queued_unordered"]
