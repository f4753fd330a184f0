"""A caller's tensor dying while the function it handed it to still reads it on a side stream: one finding, the
function's.

A function that reads a tensor parameter (or a view of it: ``src = kv.detach()``) in work it queues on a side
stream it enters itself, and returns with that work pending (no ``record_stream`` on that stream, no join, no
host synchronisation: :class:`~streamlint.model.flow.argdrops.PendingArgs`), leaves the memory to its callers.
A caller whose own analysis inlines the call sees its tensor die right after (a temporary argument, a local at
its return: the function-local SL301) and, until now, reported it at its call. The missing ``record_stream``
belongs to the function, though: it switched streams, it read the argument there, it did not protect it (a
copier that records its source is fine whoever calls it). So such a death is reported once, in the function, at
its first pending use, with the caller's call as related location, at the confidence the caller's finding had
(high when the caller's analysis saw the death and no join on every path: the facts are the same), and the
caller's own finding at that call yields to it.

Two questions, asked from both sides with the same facts:

- :func:`caller_reported_free` (the function's side): the first call site in the project whose caller's analysis
  reports a lifetime at that call for the argument bound to the pending parameter (the name handed, or an
  unnamed temporary); None when no caller's does;
- :func:`taken_over` (the caller's side): is a lifetime the caller reports at a call of a project function one that
  function reports itself (its :func:`caller_reported_free` names this very call)?
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.effects import local_method
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.flow.results import Lifetime
    from streamlint.model.project import Project

# the frees a caller's own analysis reports at a call whose argument it drops (storage.free's kinds)
_DROPS = frozenset({"function end", "call end", "del", "rebinding"})
_FLOW: list = []  # dataflow.function_flow (registered by dataflow.py: no import cycle)


def register_flow(function_flow) -> None:
    _FLOW[:] = [function_flow]


def caller_reported_free(project: Project, file: FileModel, fn: FunctionInfo, param: str) -> tuple | None:
    """(the caller's file, its call, "caller <free>", the call, the caller, the caller's own lifetime, every such
    site) for the first call site of ``fn`` whose caller's own analysis reports the death of what it binds to
    ``param`` at that call; the last item lists every call site so reported, as (the caller's file, its call, the
    caller, its lifetime). None when no caller's does. The function's finding takes the confidence that lifetime
    had at the caller. Memoised per project."""
    memo = project.derived("caller_reported_free")
    key = (id(fn), param)
    if key not in memo:
        memo[key] = None  # (a cycle adds nothing)
        found = _reported(project, file, fn, param)
        memo[key] = (*found[0][:2], f"caller {found[0][3].free}", found[0][1], found[0][2], found[0][3],
                     tuple(found)) if found else None
    return memo[key]


def _method_params(fn: FunctionInfo) -> tuple[str, ...]:
    method = fn.class_name is not None and fn.params[:1] in (("self",), ("cls",))
    return (fn.params[1:] if method else fn.params) + fn.kwonly


def _reported(project: Project, file: FileModel, fn: FunctionInfo, param: str) -> list[tuple]:
    """(the caller's file, its call, the caller, its lifetime) for each call site of ``fn`` whose caller's analysis
    reports the death, at that call, of the value bound to ``param`` there (by position or keyword)."""
    if not _FLOW:
        return []
    function_flow = _FLOW[0]
    params = _method_params(fn)
    if param not in params:
        return []
    out: list[tuple] = []
    for model, site in callers_of(project, file, fn) or ():
        caller = site.function
        if caller is None or caller is fn:
            continue
        target = project.call_target(model, site) or local_method(project, model, caller, site.node.func)
        if target is None or target[0] is not fn:
            continue
        x = _death_at(function_flow(project, model, caller).lifetimes, model, site.node, params, param, fn.kwonly)
        if x is not None:
            out.append((model, site.node, caller, x))
    return out


def _death_at(lifetimes, model: FileModel, call: cst.Call, params: tuple[str, ...], param: str,
              kwonly: tuple[str, ...]) -> Lifetime | None:
    """The caller's lifetime at ``call`` for the value it binds to ``param``: the inlined call labels that storage with
    the parameter's name (a temporary, or a local whose first side-stream use is the call); a local used on the
    side stream before keeps the caller's own name."""
    expr = bind_arguments(params, call, kwonly=kwonly).get(param)
    if expr is None:
        return None
    name = expr.value if isinstance(expr, cst.Name) else None
    line = model.span(call).start_line
    for x in lifetimes:
        if x.kind != "free" or x.mode == "ge" or x.free not in _DROPS or x.escaped:
            continue
        if not (x.name == param or name is not None and x.name == name):
            continue
        if name is None and x.free != "call end":
            continue  # (a temporary dies when the call returns)
        span = model.span(x.node)
        if span.start_line <= line <= span.end_line:
            return x
    return None


def taken_over(project: Project, file: FileModel, fn: FunctionInfo, issue: Lifetime) -> bool:
    """Does the project function called at ``issue`` (a lifetime the analysis of ``fn`` reports at that call)
    report that death itself, at its own pending use of the argument (:func:`caller_reported_free`, which lists
    every call site so reported), or at its record of that argument on the stream its memory belongs to (a no-op
    record: the wrong stream is the one cause)?"""
    if issue.kind != "free" or issue.free not in _DROPS or not _FLOW:
        return False
    span = file.span(issue.node)
    for site in fn.calls:
        if not span.start_line <= file.span(site.node).start_line <= span.end_line:
            continue
        target = project.call_target(file, site) or local_method(project, file, fn, site.node.func)
        if target is None or target[0] is fn:
            continue
        callee, cfile = target
        for y in _FLOW[0](project, cfile, callee).lifetimes:
            if y.kind == "caller-free" and y.free.startswith("caller ") and y.entry is not None \
                    and any(c is site.node for _m, c, _f, _x in y.entry[5]):
                return True
            if y.kind == "noop-record" and y.name in _method_params(callee) \
                    and _death_at((issue,), file, site.node, _method_params(callee), y.name, callee.kwonly):
                return True
    return False


def noop_taken(project: Project, file: FileModel, fn: FunctionInfo, issue: Lifetime) -> tuple | None:
    """For a no-op record of a parameter (``issue``, kind "noop-record"): the callers' deaths it takes over
    (:func:`caller_reported_free`), whose confidence it takes; None when no caller's analysis reports one."""
    if issue.kind != "noop-record" or issue.name not in _method_params(fn):
        return None
    return caller_reported_free(project, file, fn, issue.name)


__all__ = ["caller_reported_free", "noop_taken", "register_flow", "taken_over"]
