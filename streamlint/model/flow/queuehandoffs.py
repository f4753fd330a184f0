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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.callers import callers_of
from streamlint.model.streams import derived
from streamlint.model.syntax import call_name, param_named, self_attribute
from streamlint.model.tensoruse import tensor_annotation
from streamlint.model.uses import bind_arguments
from streamlint.model.walk import descendants

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
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


__all__ = ["queued_unordered"]
