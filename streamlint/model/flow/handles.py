"""Completion handles: the work handle of an asynchronous collective and the futures made from it (issue 16 §1,
FP class host-object-not-tensor).

``work = dist.all_reduce(t, async_op=True)``, what a wrapped collective hands back (``work = original(*args,
**kwargs)``), ``fut = work.get_future()``, ``fut.then(cb)``, ``torch.futures.Future()``: a host object standing
for work queued on a stream, not device data. It needs no wait and no ``record_stream`` of its own; its
``wait()`` orders the current stream after the collective (the interpreter's reading of ``x.wait()`` on a value
it does not track as a tensor), and handing it back hands the caller its join.

A call outside the project gives a handle when its producer proves it (:func:`_produces_handle`): asked for
``async_op=True`` in the call or in a ``**kw`` dict the function put ``async_op=True`` into, or exactly
``torch.futures.Future()`` / ``torch.futures.collect_all(...)`` (``wait_all`` gives the values), or a point-to-point
``dist.isend`` / ``dist.irecv`` / ``dist.batch_isend_irecv`` (a Work or a list of Works, asynchronous by definition). Otherwise the
flow cannot always tell a handle from a tensor by its producer (an opaque call computed from tensor arguments
gives a tensor), so the function's own code decides, and one name checked across the body decides every binding
of it: a local bound only to call results, that the function calls a completion method on (``.wait()``,
``.get_future()``, ``.is_completed()``, ``.then()``, ``.add_done_callback()``), uses otherwise only as a handle
(those methods, returned or yielded, tested against None or for truth, appended to a list), and hands on
(returned, yielded, appended) only after a statement calling a completion method on it in the same or an
enclosing block (the completion call dominates the use: a tensor has no ``wait()``), is a handle
(:func:`handle_names`; the interpreter binds it as an opaque :class:`~streamlint.model.flow.values.HVal`). A
backend that hands back a work in one mode and the reduced tensor in the other, waited in one branch and
returned after it, keeps its tensor reading. Occurrences inside a nested def / lambda / class that binds the
name for itself (not ``nonlocal``) are that scope's own.

Not a plain handle, whatever its producer: one whose future gets a done-callback queuing stream work
(``fut.add_done_callback(cb)``, ``work.get_future().then(cb)``, ``cb`` a nested function or lambda calling
anything not clearly host-only: a tensor method, a torch op, a stream scope; or a callback the function does not
define): the waiter of such a handle reads what that callback writes, on the callback's stream, which the
handle's ``wait()`` does not join. It keeps the flow's reading (device data made where the collective was
issued), so a caller waiting it on its own stream is still told it reads the callback's results unordered."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes
from streamlint.model.walk import children

# methods of a c10d Work / a torch.futures.Future (``wait`` is also an event's, but an event is no call result
# the flow takes for a tensor: the interpreter converts only values it would track as tensors)
COMPLETION_METHODS = frozenset({"wait", "get_future", "is_completed", "then", "add_done_callback"})
HANDLE_METHODS = COMPLETION_METHODS | frozenset({"done", "value", "exception", "is_success", "source_rank",
                                                 "set_exception", "synchronize", "result"})
_CALLBACK_METHODS = ("add_done_callback", "then")
_STREAM_ORDERING = frozenset({"wait_stream", "wait_event", "record_stream", "record", "record_event"})


def handle_names(project, fn: FunctionInfo, path: str = "") -> frozenset[str]:
    """The locals of ``fn`` that hold completion handles on every path that uses them (see the module docstring)."""
    memo = derived(project, "handle_names")
    key = (path, fn.qualname, fn.node.name.value)
    if key not in memo:
        memo[key] = _scan(fn)
    return memo[key][0]


def _queued_names(project, fn: FunctionInfo, path: str) -> frozenset[str]:
    """The locals of ``fn`` whose future gets a done-callback queuing stream work (never plain handles)."""
    handle_names(project, fn, path)
    return derived(project, "handle_names")[(path, fn.qualname, fn.node.name.value)][1]


def handle_binding(project, file, fn: FunctionInfo, name: str, value: cst.BaseExpression | None) -> bool:
    """``name = value`` binds a completion handle: ``value`` calls no project function (a project callee's own code
    says what it hands back: the work a callee returns may carry its done-callback's stream work, as above) and
    either the call proves it (:func:`_produces_handle`) or ``name`` is one of :func:`handle_names` (whatever the
    call, a name handed to a project holder that waits it is one too: ``flow/heldhandles.py``, asked by the
    interpreter)."""
    if not isinstance(value, cst.Call):
        return False
    site = file.call_site(value)
    if site is not None and project.call_targets(file, site):
        return False
    path = str(getattr(file, "path", ""))
    if name in _queued_names(project, fn, path):
        return False
    return _produces_handle(fn, site, value) or name in handle_names(project, fn, path)


def _is_true_async_op(key: cst.BaseExpression | None, v: cst.BaseExpression) -> bool:
    return isinstance(key, cst.SimpleString) and key.value[1:-1] == "async_op" and dotted(v) == "True"


def _kwargs_async(fn: FunctionInfo, kw: str) -> bool:
    """``fn`` puts ``async_op=True`` in the dict ``kw`` (``kw["async_op"] = True``, ``kw.update(async_op=True)``,
    ``kw = {"async_op": True, ...}`` / ``dict(..., async_op=True)``)."""
    for node in local_nodes(fn.node):  # (not nested defs / lambdas / classes: their own calls)
        if isinstance(node, cst.Assign):
            for t in node.targets:
                tt = t.target
                if isinstance(tt, cst.Subscript) and isinstance(tt.value, cst.Name) and tt.value.value == kw \
                        and len(tt.slice) == 1 and isinstance(tt.slice[0].slice, cst.Index) \
                        and _is_true_async_op(tt.slice[0].slice.value, node.value):
                    return True
                if isinstance(tt, cst.Name) and tt.value == kw and _dict_async(node.value):
                    return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "update" \
                and isinstance(node.func.value, cst.Name) and node.func.value.value == kw and _dict_async(node):
            return True
    return False


def _dict_async(e: cst.BaseExpression) -> bool:
    if isinstance(e, cst.Dict):
        return any(isinstance(el, cst.DictElement) and _is_true_async_op(el.key, el.value) for el in e.elements)
    if isinstance(e, cst.Call):
        return any(a.keyword is not None and a.keyword.value == "async_op" and dotted(a.value) == "True"
                   for a in e.args)
    return False


_FUTURE_CALLS = ("torch.futures.Future", "torch.futures.collect_all",
                 # point-to-point calls that are asynchronous by definition: a Work, or a list of them
                 "torch.distributed.isend", "torch.distributed.irecv", "torch.distributed.batch_isend_irecv")


def _produces_handle(fn: FunctionInfo, site, value: cst.Call) -> bool:
    """A call outside the project that certainly hands back a handle: one asked for ``async_op=True`` (``pg.
    allreduce(..., async_op=True)``, or handed ``**kw`` after the function put ``async_op=True`` into ``kw``: a
    wrapped collective), ``torch.futures.Future()`` or ``torch.futures.collect_all(...)`` (exactly these two: not
    ``wait_all``, it hands back the futures' values), ``dist.isend`` / ``dist.irecv`` / ``dist.batch_isend_irecv``
    (asynchronous whatever their arguments: a Work, a list of Works)."""
    for a in value.args:
        if a.keyword is not None and a.keyword.value == "async_op" and dotted(a.value) == "True":
            return True
        if a.star == "**" and isinstance(a.value, cst.Name) and _kwargs_async(fn, a.value.value):
            return True
    return site is not None and site.target in _FUTURE_CALLS


_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def _scope_locals(node: cst.CSTNode) -> set[str]:
    """The names a nested def / lambda / class binds for itself (parameters, assignment / loop / with targets),
    minus those it declares ``nonlocal`` / ``global``: their occurrences there are not the enclosing local."""
    bound: set[str] = set()
    declared: set[str] = set()
    if isinstance(node, (cst.FunctionDef, cst.Lambda)):
        bound |= {p.name.value for p in _params(node.params)}
    stack = [node.body]
    while stack:
        cur = stack.pop()
        if isinstance(cur, (cst.Nonlocal, cst.Global)):
            declared |= {n.name.value for n in cur.names}
        elif isinstance(cur, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)) and isinstance(cur.target, cst.Name):
            bound.add(cur.target.value)
        elif isinstance(cur, (cst.For, cst.CompFor)) and isinstance(cur.target, cst.Name):
            bound.add(cur.target.value)
        elif isinstance(cur, cst.AsName) and isinstance(cur.name, cst.Name):
            bound.add(cur.name.value)
        elif isinstance(cur, (cst.FunctionDef, cst.ClassDef)):
            bound.add(cur.name.value)
        if isinstance(cur, _SCOPES):
            continue  # its own names are its own
        stack.extend(children(cur))
    return bound - declared


def _params(params: cst.Parameters) -> list[cst.Param]:
    out = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    for p in (params.star_arg, params.star_kwarg):
        if isinstance(p, cst.Param):
            out.append(p)
    return out


def _children(node: cst.CSTNode) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    out, stack = [], [node]
    while stack:
        current = stack.pop()
        for child in children(current):
            out.append((child, current))
            stack.append(child)
    return out


def _scoped(fn: FunctionInfo) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    """(node, parent) in source order under ``fn``; inside a nested def / lambda / class, a name it binds for
    itself (not ``nonlocal``) is left out: ``out = dist.all_reduce(g, async_op=True)`` in a hook is not the
    enclosing function's ``out``."""
    out: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    stack = [(c, fn.node, frozenset()) for c in reversed(children(fn.node))]
    while stack:
        cur, up, shadow = stack.pop()
        if isinstance(cur, cst.Name) and cur.value in shadow:
            continue
        out.append((cur, up))
        inner = shadow | _scope_locals(cur) if isinstance(cur, _SCOPES) else shadow
        stack.extend((c, cur, inner) for c in reversed(children(cur)))
    return out


def _scan(fn: FunctionInfo) -> tuple[frozenset[str], frozenset[str]]:
    pairs = _scoped(fn)
    parent = {id(c): p for c, p in pairs}
    order = {id(c): i for i, (c, _) in enumerate(pairs)}
    names: dict[str, list[cst.Name]] = {}
    for child, _ in pairs:
        if isinstance(child, cst.Name):
            names.setdefault(child.value, []).append(child)
    found: set[str] = set()
    for name, occurrences in names.items():
        if name in fn.all_params or name == "self":
            continue
        if _judge(fn, name, occurrences, parent) and _dominated(occurrences, parent, order):
            found.add(name)
    queued = _callback_handles(fn, pairs, parent, set(names))
    return frozenset(found - queued), frozenset(queued)


def _statement(node: cst.CSTNode, parent: dict) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """The statement holding ``node`` and the suite (block) that lists it."""
    cur = node
    while True:
        up = parent.get(id(cur))
        if up is None:
            return None
        if isinstance(cur, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) \
                and isinstance(up, (cst.IndentedBlock, cst.Module)):
            return cur, up
        cur = up


def _suites(node: cst.CSTNode, parent: dict) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    """Every (statement, suite) enclosing ``node``, innermost first."""
    out = []
    cur = node
    while (hit := _statement(cur, parent)) is not None:
        out.append(hit)
        cur = hit[1]
    return out


def _tested(occ: cst.Name, up: cst.CSTNode | None) -> bool:
    return isinstance(up, cst.Comparison) and len(up.comparisons) == 1 \
        and isinstance(up.comparisons[0].operator, (cst.Is, cst.IsNot)) \
        and dotted(up.comparisons[0].comparator) == "None" \
        or isinstance(up, (cst.If, cst.While)) and up.test is occ \
        or isinstance(up, cst.UnaryOperation) and isinstance(up.operator, cst.Not)


def _dominated(occurrences: list[cst.Name], parent: dict, order: dict) -> bool:
    """Every use of the local that hands it on as a value (returned, yielded, appended, passed, tested) comes after
    a statement calling a completion method on it, in the same block or one enclosing the use, with no binding of
    the local in between: on every path reaching the use, the object was a handle (a tensor has no ``wait()``).
    Otherwise a path may bind a tensor to the name (``out = shim(..., overlap=flag)``: a work when ``flag``, the
    reduced tensor when not) and the flow keeps its tensor reading."""
    completions: list[tuple[int, cst.CSTNode, cst.CSTNode]] = []
    bindings: list[int] = []
    uses: list[cst.Name] = []
    for occ in occurrences:
        up = parent.get(id(occ))
        if isinstance(up, cst.AssignTarget):
            bindings.append(order[id(occ)])
        elif isinstance(up, cst.Attribute) and up.value is occ:
            if up.attr.value in COMPLETION_METHODS and (hit := _statement(occ, parent)) is not None:
                completions.append((order[id(hit[0])], hit[0], hit[1]))
        elif isinstance(up, cst.Attribute) or isinstance(up, (cst.Param, cst.FunctionDef, cst.ImportAlias,
                                                               cst.Global, cst.Nonlocal)):
            continue
        elif _tested(occ, up):
            continue  # `if work is not None:`: hands nothing on
        else:
            uses.append(occ)
    for use in uses:
        at = order[id(use)]
        enclosing = _suites(use, parent)
        if not any(pos < at and not any(pos < b < at for b in bindings)
                   and any(suite is s and order[id(stmt)] > pos for stmt, s in enclosing)
                   for pos, _, suite in completions):
            return False
    return True


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
            out.update(f for f, h in futures.items() if h == owner)  # its futures too
    return out


def _future_owner(e: cst.BaseExpression, futures: dict[str, str]) -> str | None:
    while isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in ("get_future", "then"):
        e = e.func.value  # `work.get_future().then(cb)`
    return futures.get(e.value) if isinstance(e, cst.Name) else None


# calls a done-callback may make without queuing device work: logging, counters, flags, the future's own value
_HOST_FUNCS = frozenset({"print", "len", "str", "int", "float", "bool", "repr", "isinstance", "id", "type", "range",
                         "enumerate", "zip", "sorted", "format"})
_HOST_METHODS = frozenset({"append", "add", "discard", "remove", "pop", "clear", "set", "is_set", "set_result",
                           "set_exception", "value", "done", "exception", "is_completed", "format", "release",
                           "acquire", "notify", "notify_all", "put", "put_nowait", "get", "keys", "items"})
_HOST_MODULES = ("logging", "time", "warnings", "threading")


def _host_call(call: cst.Call) -> bool:
    name = dotted(call.func) or ""
    if isinstance(call.func, cst.Name):
        return name in _HOST_FUNCS
    if not isinstance(call.func, cst.Attribute):
        return False
    receiver = (dotted(call.func.value) or "").rsplit(".", 1)[-1].lower()
    if "log" in receiver or name.split(".", 1)[0] in _HOST_MODULES:
        return True  # `log.debug(...)`, `self.logger.info(...)`, `time.perf_counter()`
    return call.func.attr.value in _HOST_METHODS


def _stream_callback(cb: cst.BaseExpression, defs: dict[str, cst.FunctionDef]) -> bool:
    """May the callback queue stream work: a nested function or lambda calling anything not clearly host-only
    (a tensor method, a torch op, a stream scope or ordering: ``lambda done: full.copy_(staging.to(full.dtype))``
    copies on whatever stream is current when the future completes), or a function the enclosing one does not
    define (unknown: it may). Host-only: logging, counters and flags, ``print`` / ``len``, the future's value."""
    body = cb.body if isinstance(cb, cst.Lambda) else defs.get(cb.value) if isinstance(cb, cst.Name) else None
    if body is None:
        return True
    for node in [body] + [c for c, _ in _children(body)]:
        if isinstance(node, cst.WithItem):
            return True  # a stream scope, or a context manager we cannot read
        if isinstance(node, cst.Call) and not _host_call(node):
            return True
    return False


__all__ = ["COMPLETION_METHODS", "HANDLE_METHODS", "handle_binding", "handle_names"]
