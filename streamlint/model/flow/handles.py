"""Completion handles: the work handle of an asynchronous collective and the futures made from it (issue 16 §1,
FP class host-object-not-tensor).

``work = dist.all_reduce(t, async_op=True)``, what a wrapped collective hands back (``work = original(*args,
**kwargs)``), ``fut = work.get_future()``, ``fut.then(cb)``, ``torch.futures.Future()``: a host object standing
for work queued on a stream, not device data. It needs no wait and no ``record_stream`` of its own; its
``wait()`` orders the current stream after the collective (the interpreter's reading of ``x.wait()`` on a value
it does not track as a tensor), and handing it back hands the caller its join.

A call outside the project asked for ``async_op=True``, ``torch.futures.Future()`` or ``collect_all`` gives a handle
(``wait_all`` gives the values). Otherwise the
flow cannot always tell a handle from a tensor by its producer (an opaque call computed from tensor arguments
gives a tensor), so the function's own code decides: a local bound only to call results, that the
function calls a completion method on (``.wait()``, ``.get_future()``, ``.is_completed()``, ``.then()``,
``.add_done_callback()``) and uses otherwise only as a handle (those methods, returned or yielded, tested against
None or for truth, appended to a list), is a handle (:func:`handle_names`; the interpreter binds it as an opaque
:class:`~streamlint.model.flow.values.HVal`).

Not a plain handle: one whose future gets a done-callback queuing stream work (``fut.add_done_callback(cb)``,
``work.get_future().then(cb)``, ``cb`` a nested function entering a stream scope or ordering streams, or a
callback the function does not define): the waiter of such a handle reads what that callback writes, on the
callback's stream, which the handle's ``wait()`` does not join. It keeps the flow's reading (device data made
where the collective was issued), so a caller waiting it on its own stream is still told it reads the callback's
results unordered."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import FunctionInfo, dotted
from streamlint.model.streams import derived

# methods of a c10d Work / a torch.futures.Future (``wait`` is also an event's, but an event is no call result
# the flow takes for a tensor: the interpreter converts only values it would track as tensors)
COMPLETION_METHODS = frozenset({"wait", "get_future", "is_completed", "then", "add_done_callback"})
HANDLE_METHODS = COMPLETION_METHODS | frozenset({"done", "value", "exception", "is_success", "source_rank",
                                                 "set_exception", "synchronize", "result"})
_CALLBACK_METHODS = ("add_done_callback", "then")
_STREAM_ORDERING = frozenset({"wait_stream", "wait_event", "record_stream", "record", "record_event"})


def handle_names(project, fn: FunctionInfo) -> frozenset[str]:
    """The locals of ``fn`` that hold completion handles (see the module docstring)."""
    memo = derived(project, "handle_names")
    key = (id(fn.node), fn.qualname)
    if key not in memo:
        memo[key] = _scan(fn)
    return memo[key]


def handle_binding(project, file, fn: FunctionInfo, name: str, value: cst.BaseExpression | None) -> bool:
    """``name = value`` binds a completion handle: ``name`` is one of :func:`handle_names` and ``value`` calls no
    project function (a project callee's own code says what it hands back: the work a callee returns may carry its
    done-callback's stream work, as above)."""
    if not isinstance(value, cst.Call):
        return False
    site = file.call_site(value)
    if site is not None and project.call_targets(file, site):
        return False
    return name in handle_names(project, fn) or _produces_handle(site, value)


def _produces_handle(site, value: cst.Call) -> bool:
    """A call outside the project that certainly hands back a handle: one asked for ``async_op=True`` (``pg.
    allreduce(..., async_op=True)``, a wrapped collective), ``torch.futures.collect_all(...)`` / ``Future()`` (not
    ``wait_all``: it hands back the futures' values)."""
    if any(a.keyword is not None and a.keyword.value == "async_op" and dotted(a.value) == "True" for a in value.args):
        return True
    return site is not None and site.target in ("torch.futures.Future", "torch.futures.collect_all")


def _children(node: cst.CSTNode) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    out, stack = [], [node]
    while stack:
        current = stack.pop()
        for child in current.children:
            out.append((child, current))
            stack.append(child)
    return out


def _scan(fn: FunctionInfo) -> frozenset[str]:
    pairs = _children(fn.node)
    parent = {id(c): p for c, p in pairs}
    names: dict[str, list[cst.Name]] = {}
    for child, _ in pairs:
        if isinstance(child, cst.Name):
            names.setdefault(child.value, []).append(child)
    found: set[str] = set()
    for name, occurrences in names.items():
        if name in fn.all_params or name == "self":
            continue
        verdict = _judge(fn, name, occurrences, parent)
        if verdict:
            found.add(name)
    return frozenset(found - _callback_handles(fn, pairs, parent, found))


def _judge(fn: FunctionInfo, name: str, occurrences: list[cst.Name], parent: dict) -> bool:
    bound = completed = False
    for occ in occurrences:
        up = parent.get(id(occ))
        if isinstance(up, cst.AssignTarget) and up.target is occ:
            assign = parent.get(id(up))
            if not isinstance(assign, cst.Assign) or not isinstance(assign.value, cst.Call):
                return False
            bound = True
            continue
        if isinstance(up, cst.Attribute) and up.value is occ:
            if up.attr is occ:
                continue
            call = parent.get(id(up))
            if not (isinstance(call, cst.Call) and call.func is up and up.attr.value in HANDLE_METHODS):
                return False
            completed |= up.attr.value in COMPLETION_METHODS
            continue
        if isinstance(up, cst.Attribute) and up.attr is occ:
            continue  # `x.work`: another object's field of that name
        if isinstance(up, (cst.Return, cst.Yield)) and up.value is occ:
            continue
        if isinstance(up, cst.Comparison) and len(up.comparisons) == 1 \
                and isinstance(up.comparisons[0].operator, (cst.Is, cst.IsNot)) \
                and dotted(up.comparisons[0].comparator) == "None":
            continue
        if isinstance(up, (cst.If, cst.While)) and up.test is occ \
                or isinstance(up, cst.UnaryOperation) and isinstance(up.operator, cst.Not):
            continue
        if isinstance(up, cst.Arg) and up.value is occ and up.keyword is None and not up.star:
            call = parent.get(id(up))
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                    and call.func.attr.value == "append" and len(call.args) == 1:
                continue
        if isinstance(up, (cst.Param, cst.FunctionDef, cst.ImportAlias, cst.Global, cst.Nonlocal)):
            continue  # a nested function's parameter or name of the same spelling: not this local
        return False
    return bound and completed


def _callback_handles(fn: FunctionInfo, pairs, parent: dict, handles: set[str]) -> set[str]:
    """The handles among ``handles`` whose future gets a done-callback that queues stream work."""
    futures = {h: h for h in handles}  # future name -> the handle it completes with
    for child, _ in pairs:  # `fut = work.get_future()` / `fut = work.then(cb)`
        if isinstance(child, cst.Assign) and len(child.targets) == 1 and isinstance(child.targets[0].target, cst.Name) \
                and isinstance(child.value, cst.Call) and isinstance(child.value.func, cst.Attribute) \
                and child.value.func.attr.value in ("get_future", "then") \
                and isinstance(child.value.func.value, cst.Name) and child.value.func.value.value in futures:
            futures[child.targets[0].target.value] = futures[child.value.func.value.value]
    defs = {c.name.value: c for c, _ in pairs if isinstance(c, cst.FunctionDef)}
    out: set[str] = set()
    for child, _ in pairs:
        if not (isinstance(child, cst.Call) and isinstance(child.func, cst.Attribute)
                and child.func.attr.value in _CALLBACK_METHODS and child.args):
            continue
        owner = _future_owner(child.func.value, futures)
        if owner is not None and _stream_callback(child.args[0].value, defs):
            out.add(owner)
    return out


def _future_owner(e: cst.BaseExpression, futures: dict[str, str]) -> str | None:
    while isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in ("get_future", "then"):
        e = e.func.value  # `work.get_future().then(cb)`
    return futures.get(e.value) if isinstance(e, cst.Name) else None


def _stream_callback(cb: cst.BaseExpression, defs: dict[str, cst.FunctionDef]) -> bool:
    """May the callback queue stream work: a nested function entering a stream scope or ordering streams, a lambda
    doing so, or a function the enclosing one does not define (unknown: it may)."""
    body = cb.body if isinstance(cb, cst.Lambda) else defs.get(cb.value) if isinstance(cb, cst.Name) else None
    if body is None:
        return True
    for node, _ in _children(body):
        if isinstance(node, cst.WithItem) and isinstance(node.item, cst.Call) \
                and "stream" in (dotted(node.item.func) or "").lower():
            return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _STREAM_ORDERING:
            return True
    return False


__all__ = ["COMPLETION_METHODS", "HANDLE_METHODS", "handle_binding", "handle_names"]
