"""Host tensors handed in: a parameter every project caller binds to a tensor in host memory.

``_install_staging(staging, slot, stream)`` copies a pinned staging buffer into a device cache on a side
stream. Read inside the callee alone, ``staging`` is an argument the caller may have just produced on its
current stream; but every call site passes a host tensor (``staging = self._staging[i]``, a field holding
``torch.empty(n, pin_memory=True)`` buffers): no stream produced it, so a side stream reading it needs no
wait on the caller's stream. Resolved from the callers' syntax only: the argument expression, the local it
names (every assignment in the caller), a ``self.<field>`` element (every assignment to the field in the
caller's class, a list of such tensors included). Precision first: one call site that cannot be shown to
pass a host tensor keeps the parameter a device tensor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.bytescan import may_hand_bytes
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.hostguards import host_branch, host_guarded
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.streams import derived
from streamlint.model.tensors import host_factory, host_target
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.project import Project


def host_by_callers(project: Project, file: FileModel, fn: FunctionInfo, param: str,
                    at: cst.CSTNode | None = None) -> bool:
    """Does every project call site of ``fn`` bind ``param`` to a host tensor (and is there one), or does ``fn``
    itself raise unless it is one (``if source.device.type != "cpu": raise ...``: :mod:`~streamlint.model.hostguards`),
    or is the use ``at`` inside a branch taken only for a host tensor (``if x.device.type == "cpu":``)?"""
    if host_guarded(fn, param) or host_branch(fn, param, at):
        return True
    memo = derived(project, "host_by_callers")
    key = (id(fn), param)
    if key not in memo:
        memo[key] = False
        method = fn.class_name is not None and fn.params[:1] == ("self",)
        params = (fn.params[1:] if method else fn.params) + fn.kwonly
        sites = callers_of(project, file, fn) or []
        found = []
        for model, site in sites:
            expr = bind_arguments(params, site.node, kwonly=fn.kwonly).get(param)
            found.append(expr is not None and site.function is not None
                         and _host_expr(project, model, site.function, expr, 0))
        memo[key] = bool(found) and all(found)
    return memo[key]


def _host_expr(project: Project, model: FileModel, caller: FunctionInfo, expr: cst.BaseExpression,
               depth: int) -> bool:
    if depth > 6:
        return False
    if isinstance(expr, cst.Call):
        site = model.call_site(expr)
        target = site.target if site is not None else None
        if isinstance(expr.func, cst.Attribute) and host_target(expr, expr.func.attr.value):
            return True  # `x.cpu()`, `x.pin_memory()`, `x.to("cpu")`
        return host_factory(target, expr) and not (target or "").endswith((".tensor", ".as_tensor"))
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(_host_expr(project, model, caller, el.value, depth + 1)
                                           for el in expr.elements if not isinstance(el, cst.StarredElement))
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return _host_expr(project, model, caller, expr.elt, depth + 1)
    if isinstance(expr, cst.Subscript):  # an element (or slice) of a host collection / tensor
        return _host_expr(project, model, caller, expr.value, depth + 1)
    if isinstance(expr, cst.Name):
        values = caller.name_assigns.get(expr.value, ())
        return bool(values) and expr.value not in caller.all_params \
            and all(_host_expr(project, model, caller, v, depth + 1) for v in values)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self" \
            and caller.class_name is not None:
        cls = model.classes.get(caller.class_name)
        if cls is None:
            return False
        values = [(m, a.value) for m in cls.methods.values() for a in m.assigns
                  if a.target == f"self.{expr.attr.value}"]
        values = [(m, v) for m, v in values if not (isinstance(v, (cst.List, cst.Tuple)) and not v.elements)
                  and not (isinstance(v, cst.Name) and v.value == "None")]
        return bool(values) and all(_host_expr(project, model, m, v, depth + 1) for m, v in values)
    return False


def worker_thread_only(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> bool:
    """Does ``fn`` run only on worker threads? Every call site of it is in such a function, or it has none
    and is handed as a callable to a thread (``executor.submit(fn, ...)``, ``Thread(target=fn)``), directly
    or through a project helper's parameter (``pushes.submit_batches(self._io_executor, self._push_batch)``
    whose body submits it). There the caller's current stream is the worker thread's, which produced
    nothing it hands in: what it passes was produced by other threads, an ordering (host events, queues)
    the per-function stream analysis does not follow; an argument race on the caller's stream is moot."""
    memo = derived(project, "worker_thread_only")
    key = id(fn)
    if key in memo:
        return memo[key]
    memo[key] = False
    if _depth > 3:
        return False
    sites = callers_of(project, file, fn)
    if sites:
        found = bool(sites) and all(site.function is not None and site.function is not fn
                                    and worker_thread_only(project, model, site.function, _depth + 1)
                                    for model, site in sites)
    else:
        found = _handed_to_thread(project, fn)
    memo[key] = found
    return found


def _handed_to_thread(project: Project, fn: FunctionInfo) -> bool:
    name = fn.node.name.value
    if fn.parent is not None or name.startswith("__"):
        return False
    refs = 0
    paths = project.paths_containing((name.encode(),))
    if len(paths) > MAX_CALLER_FILES:  # a common name: not followed (precision first: no suppression)
        return False
    for path in paths:
        if not may_hand_bytes(project.file_bytes(path) or b"", name.encode()):
            continue  # (the name only called, defined or named in prose there: no call hands it; not parsed)
        model = project.file(path)
        for site in (model.calls if model is not None else ()):
            for i, arg in enumerate(site.node.args):
                if not _names_function(arg.value, name):
                    continue
                refs += 1
                if not (thread_slot(site.node, i) or _helper_threads(project, model, site, i)
                        or _partial_to_thread(site, i)):
                    return False
    return refs > 0


def _partial_to_thread(site, i: int) -> bool:
    """``worker = partial(fn, ...)`` (``functools.partial``, the callable its first argument) in a function that
    hands ``worker`` to threads only (``Thread(target=worker)``, ``pool.submit(worker, ...)``): the bound callable
    runs ``fn`` on those threads. Any other use of ``worker`` in the function (called directly, returned, stored)
    keeps it unseen (no)."""
    func, caller = site.node.func, site.function
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if name != "partial" or i != 0 or site.node.args[0].keyword is not None or caller is None:
        return False
    bound = [n for n, values in caller.name_assigns.items() if any(v is site.node for v in values)]
    if len(bound) != 1 or len(caller.name_assigns[bound[0]]) != 1:
        return False
    worker, handed, other = bound[0], 0, False
    for inner in caller.calls:
        for j, arg in enumerate(inner.node.args):
            if isinstance(arg.value, cst.Name) and arg.value.value == worker:
                if thread_slot(inner.node, j):
                    handed += 1
                else:
                    other = True
        if isinstance(inner.node.func, cst.Name) and inner.node.func.value == worker:
            other = True
    return handed > 0 and not other


def _names_function(e: cst.BaseExpression, name: str) -> bool:
    return isinstance(e, cst.Name) and e.value == name or isinstance(e, cst.Attribute) and e.attr.value == name


def thread_slot(call: cst.Call, i: int) -> bool:
    """Does argument ``i`` of ``call`` hand a callable to a thread: ``executor.submit(fn, ...)`` (first argument),
    ``Thread(target=fn)``?"""
    func, arg = call.func, call.args[i]
    method = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if method == "submit":
        return i == 0 and arg.keyword is None
    return method == "Thread" and arg.keyword is not None and arg.keyword.value == "target"


def _helper_threads(project: Project, model: FileModel, site, i: int) -> bool:
    """The callable is bound to a parameter of a project helper that hands it to a thread."""
    found = project.call_target(model, site)
    if found is None:
        return False
    helper, _ = found
    method = helper.class_name is not None and helper.params[:1] == ("self",)
    params = (helper.params[1:] if method else helper.params) + helper.kwonly
    bound = bind_arguments(params, site.node, kwonly=helper.kwonly)
    param = next((p for p, e in bound.items() if e is site.node.args[i].value), None)
    return param is not None and any(
        thread_slot(inner.node, j) for inner in helper.calls for j, a in enumerate(inner.node.args)
        if isinstance(a.value, cst.Name) and a.value.value == param)
