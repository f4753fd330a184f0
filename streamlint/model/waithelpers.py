"""Wait helpers: project functions that make a stream they are handed wait.

Code kept out of a compiled graph often orders its streams through a small eager-only helper of its own::

    @torch.compiler.disable
    def order_after(waiter: torch.cuda.Stream, producer: torch.cuda.Stream):
        waiter.wait_stream(producer)

``order_after(side, torch.cuda.current_stream())`` (or ``order_after(waiter=side, producer=...)``) is then
``side.wait_stream(torch.cuda.current_stream())`` written once for the package. The dataflow sees such a wait by
inlining the helper; the per-file facts that look for waits by their syntax (the entry discipline of
:mod:`~streamlint.model.entries`: "every entry onto ``s`` begins with a wait") ask :func:`waited_arguments` for
the argument expressions a call makes wait. A parameter counts when the helper waits on it
(``p.wait_stream(x)`` / ``p.wait_event(e)``) on every path: not under an ``if``, not in a loop, and the
parameter is not rebound first; the argument binds it by position or by keyword (a method called on a receiver:
the receiver binds ``self``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.streams import derived
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import CallSite, FunctionInfo
    from streamlint.model.project import Project

_WAITS = frozenset({"wait_stream", "wait_event"})


def waiting_params(project: Project, fn: FunctionInfo) -> frozenset[str]:
    """The parameters ``fn`` makes wait (``p.wait_stream(...)`` / ``p.wait_event(...)``) on every path."""
    memo = derived(project, "waiting_params")
    if id(fn) not in memo:
        params = set(fn.all_params) - {"self", "cls"}
        out = set()
        for call in fn.calls:
            if call.function is not fn or call.method not in _WAITS or call.guards or call.in_loop:
                continue
            recv = call.receiver
            if isinstance(recv, cst.Name) and recv.value in params and recv.value not in fn.name_assigns:
                out.add(recv.value)
        memo[id(fn)] = frozenset(out)
    return memo[id(fn)]


def waited_arguments(project: Project | None, file: FileModel, site: CallSite) -> list[cst.BaseExpression]:
    """The argument expressions of ``site`` that the project function it calls makes wait on every path
    (:func:`waiting_params` of the parameters they bind); empty for any other call."""
    if project is None or site.method in _WAITS or any(a.star for a in site.node.args):
        return []
    found = project.call_target(file, site)
    if found is None:
        return []
    callee, _ = found
    waiting = waiting_params(project, callee)
    if not waiting:
        return []
    params = callee.params
    if params[:1] in (("self",), ("cls",)) and isinstance(site.node.func, cst.Attribute):
        params = params[1:]
    bound = bind_arguments(params + callee.kwonly, site.node, kwonly=callee.kwonly)
    return [expr for name, expr in bound.items() if name in waiting and expr is not None]


__all__ = ["waited_arguments", "waiting_params"]
