"""Races that rest wholly on a stream an unseen caller chooses (issue 16 §3, caller protocols).

A function handed its side stream by its caller (a stream parameter, a handle it wraps, a factory it calls,
an attribute of a parameter)::

    def stage(inputs, stream_factory):          # a callback: handed by reference, never called here
        with torch.cuda.stream(stream_factory()):
            torch.mm(inputs[0], w, out=buf)

races with its current stream only if the caller passes a stream other than its current one, and does not
order it after its own earlier work first. Both halves of that live in the caller. When the project shows no
call of the function at all (a public API, a callback handed on by reference, a
nested function its parent only hands on), nothing can tell whether they hold: the race is reported ``low``
(not for a ``forward`` or dunder, run by syntax the call graph cannot follow, nor a name too common to follow,
nor a closure whose enclosing function has a seen call: callers unknown are not callers unseen),
the hint saying what it assumes. A function with a call in the project keeps its confidence: the callers seen
are evidence (the caller protocols of :mod:`~streamlint.model.flow.forks` and ``current_stream_params`` already
settle those that pass their current stream or fork it first).

:func:`chosen_stream` names the parameter a race's other stream comes from (:func:`chosen_by_caller`: the one a
stream key comes from, for work left unjoined on such a stream); :func:`callers_unseen` says whether
the project shows no call of the function."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.flow.callers import bound_by_partial, callers_of
from streamlint.model.flow.handlestreams import rebound
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.streams import MAIN
from streamlint.model.syntax import descendants

if TYPE_CHECKING:
    from streamlint.model.flow.results import Race
    from streamlint.model.project import Project

_ROOT = re.compile(r"[A-Za-z_]\w*")


def chosen_stream(fn: FunctionInfo, race: Race) -> str | None:
    """The parameter the caller chooses the race's other stream with, when its one side is the current stream at
    entry: a stream parameter or a handle wrapped as one (``race.caller_stream``), or a stream reached from a
    parameter (:func:`chosen_by_caller`). None otherwise (a stream the function makes or takes from ``self``)."""
    if race.caller_stream is not None:  # (a handle's wrap is a local: judged by handlestreams already)
        return None if race.caller_stream in fn.all_params and race.caller_stream in rebound(fn) \
            else race.caller_stream
    if MAIN not in (race.src, race.dst) or race.src == race.dst:
        return None
    return chosen_by_caller(fn, race.dst if race.src == MAIN else race.src)


def chosen_by_caller(fn: FunctionInfo, stream: str) -> str | None:
    """The parameter of ``fn`` the stream key ``stream`` is reached from (``stream``, ``stream_factory()``,
    ``args.stream``, ``streams[i]``; for a closure also a parameter of a function enclosing it, which the closure
    does not bind: ``copy_stream`` of ``offload(x, copy_stream)`` in ``def _to_host(t):`` handed to ``tree_map``),
    else None (``self.*``, a local, the current stream, a parameter the function
    rebinds anywhere: ``stream = stream or torch.cuda.Stream()`` may be its own)."""
    root = _ROOT.match(stream)
    name = root.group(0) if root is not None else None
    if name is None or name in ("self", "cls"):
        return None
    scope: FunctionInfo | None = fn
    while scope is not None:  # (a closure's free name: a parameter of the function enclosing it)
        if name in scope.all_params:
            return None if name in rebound(scope) else name  # (rebound anywhere: may name the function's own)
        if name in rebound(scope) or name in scope.locals:
            return None
        scope = scope.parent
    return None


def callers_unseen(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does the project show no call of ``fn``? A nested function counts as called when its parent calls it by
    name (``work(x, s)``), not when it only hands it on (``run(work)``), a method of a class made in a function
    when that function calls it on some object (``mode.offload(...)``); any other function when
    :func:`~streamlint.model.flow.callers.callers_of` finds a call site. Callers unknown are not unseen: a dunder or
    a ``forward`` (run by ``module(x)``, ``with``, operators), a name in more than ``MAX_CALLER_FILES`` files, a
    function bound by ``functools.partial`` count as called."""
    memo = project.derived("callers_unseen")
    found = memo.get(id(fn))
    if found is None:
        found = memo[id(fn)] = _unseen(project, file, fn)
    return found


def rests_on_unseen_caller(project: Project, file: FileModel, fn: FunctionInfo, chosen: str) -> bool:
    """Does the choice of the parameter ``chosen`` rest wholly on unseen callers: no call of ``fn`` is seen, nor
    of the function whose parameter ``chosen`` is (a closure's enclosing function: ``offload(acts,
    torch.cuda.Stream())`` seen in the project shows the stream its ``tree_map`` closure uses)? With the execution
    path, :func:`~streamlint.model.flow.callerstreams.chosen_upstream` asks the seen callers too."""
    if not callers_unseen(project, file, fn):
        return False
    scope = param_owner(fn, chosen)
    return scope is None or scope is fn or callers_unseen(project, file, scope)


_JOINS = frozenset({"wait_stream", "wait_event", "record_event", "synchronize"})


def orders_chosen(fn: FunctionInfo, chosen: str) -> bool:
    """Does ``fn`` itself order the stream parameter ``chosen`` against another stream (``side.wait_stream(
    current_stream())``, ``current_stream().wait_stream(side)``, ``side.wait_event(ev)``)? Then it treats that
    stream as a side stream of its own work, whatever the caller passes: a lifetime across the two is not a
    question of the caller's choice."""
    for site in fn.calls:
        if site.method not in _JOINS:
            continue
        nodes = [site.node.func, *(a.value for a in site.node.args)]
        if any(isinstance(n, cst.Name) and n.value == chosen for x in nodes for n in (x, *descendants(x))):
            return True
    return False


def param_owner(fn: FunctionInfo, stream: str) -> FunctionInfo | None:
    """The function whose parameter the stream expression ``stream`` is rooted at (``copy_stream``,
    ``streams[i]``): ``fn`` itself, or a function enclosing the closure ``fn``; None when no enclosing function
    has such a parameter."""
    root = _ROOT.match(stream)
    scope: FunctionInfo | None = fn if root is not None else None
    while scope is not None and root.group(0) not in scope.all_params:
        scope = scope.parent
    return scope


def _unseen(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    name = fn.node.name.value
    if fn.parent is not None:  # (a nested function, or a method of a class made in a function: called there by
        # name or on an instance; the parent's class name is the nested function's too, so either counts)
        return not any(isinstance(n, cst.Call) and (
            isinstance(n.func, cst.Name) and n.func.value == name
            or isinstance(n.func, cst.Attribute) and n.func.attr.value == name)
            for n in descendants(fn.parent.node))
    if name.startswith("__") or name == "forward":
        return False  # (called by syntax callers_of cannot follow: `module(x)`, `with`, operators: not unseen)
    if len(project.paths_containing((f"{name}(".encode(),))) > MAX_CALLER_FILES:
        return False  # (a name too common to follow: its callers are unknown, not unseen)
    if bound_by_partial(project, fn):
        return False  # (bound by `functools.partial(stage, stream=...)`: called through the partial)
    return callers_of(project, file, fn) is None


def handed_wait(fn: FunctionInfo, st, src: str, dst: str, at: int, argument: bool, escape: bool) -> str | None:
    """The stream the caller hands in (a parameter, or one of a function enclosing a closure: ``offload(x,
    current_stream, copy_stream)`` whose ``tree_map`` closure orders ``copy_stream`` after ``current_stream``) that
    orders a race's two sides in the function's own terms, when that stream may be the caller's current one:

    - ``argument``: a tensor the caller produced before the call (on its current stream, ``src`` is the entry stream)
      is used on ``dst``, which waited on the handed stream: the producer the wait means, maybe the current stream;
    - ``escape``: work on ``src`` is handed back to the caller (``dst`` is the entry stream) after the handed stream
      waited on it (``current_stream.wait_stream(copy_stream)`` after the copy, at or after time ``at``): the join
      the function makes, onto the stream its caller says is current.

    None otherwise: then the race does not rest on which stream the caller hands in."""
    params = set(fn.all_params) - {"self"}
    if argument and src == MAIN:
        return next((k for k in st.know(dst) if k not in (dst, MAIN) and (
            k.split(".")[0] in params or chosen_by_caller(fn, k) is not None)), None)
    if escape and dst == MAIN and src != MAIN:
        return next((k for k in sorted(st.vc) if k not in (src, MAIN) and st.know(k).get(src, -1) >= at
                     and chosen_by_caller(fn, k) is not None), None)
    return None


__all__ = ["callers_unseen", "chosen_by_caller", "chosen_stream", "handed_wait", "orders_chosen", "param_owner",
           "rests_on_unseen_caller"]
