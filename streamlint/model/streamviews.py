"""Stream views: project functions that turn the stream their caller passes into a torch stream (issue 16,
"Streams the way training frameworks hold them"; the caller-stream-parameter class of held-out 39).

Kernel libraries take "the launch stream" from their caller in whatever form it has (a ``torch.cuda.Stream``, a
driver ``CUstream``, an int handle, None for the current stream) and convert it once, in one helper::

    def as_torch_stream(stream, device=None):
        if isinstance(stream, torch.cuda.Stream):
            return stream
        handle = int(stream)
        if handle in (0, 1):
            return torch.cuda.default_stream(device)
        return torch.cuda.ExternalStream(handle, device=device)

Such a helper's result is the stream its caller chose, under another form: ``with torch.cuda.stream(
as_torch_stream(stream)):`` in an API taking ``stream`` is a scope on that parameter, judged as one (a race with the
entry stream assumes the caller passes a stream other than its current one: low), not a scope on a stream the
function made. :func:`view_param` recognises the helper from its body alone: every value it returns is the
parameter itself, an ``ExternalStream`` built from it, torch's current or default stream, or another view of it (a
local bound only to such values counts as one); no return builds a new stream (``Stream(...)``) or hands back
anything else; at least one return depends on the parameter. :func:`viewed_argument` maps a call of a view to the
argument it converts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.syntax import call_name, descendants

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project

_CURRENT = frozenset({"current_stream", "default_stream"})
_WRAP = "ExternalStream"
_MAX_STATEMENTS = 30
_DEPTH = 3


def _names(expr: cst.CSTNode) -> set[str]:
    return {n.value for n in descendants(expr) if isinstance(n, cst.Name)} | (
        {expr.value} if isinstance(expr, cst.Name) else set())


def _builds_stream(expr: cst.CSTNode) -> bool:
    """A ``Stream(...)`` / ``torch.cuda.Stream(...)`` construction anywhere in ``expr`` (a new stream)."""
    nodes = [expr, *descendants(expr)]
    return any(isinstance(n, cst.Call) and (call_name(n) or "").rsplit(".", 1)[-1] == "Stream" for n in nodes)


class _Judge:
    def __init__(self, project: Project, file: FileModel, fn: FunctionInfo, param: str, depth: int) -> None:
        self.project, self.file, self.fn, self.param, self.depth = project, file, fn, param, depth
        self.seen: set[str] = set()

    def derived(self, expr: cst.BaseExpression) -> bool:
        """Does ``expr`` depend on the parameter (directly or through locals bound from it)?"""
        names = _names(expr)
        if self.param in names:
            return True
        return any(n in self.fn.name_assigns and n not in self.seen and n not in self.fn.all_params
                   and self._local_derived(n) for n in names)

    def _local_derived(self, name: str) -> bool:
        self.seen.add(name)
        return any(self.derived(v) for v in self.fn.name_assigns.get(name, ()))

    def value(self, expr: cst.BaseExpression, hops: int = 0) -> bool:
        """Is ``expr`` (a returned value) a stream view of the parameter or the caller's current stream?"""
        if _builds_stream(expr):
            return False
        if isinstance(expr, cst.Name):
            if expr.value == self.param:
                return all(self.value(v, hops + 1) for v in self.fn.name_assigns.get(expr.value, ())) \
                    if hops < 4 else False
            if expr.value in self.fn.name_assigns and expr.value not in self.fn.all_params and hops < 4:
                values = self.fn.name_assigns[expr.value]
                return bool(values) and all(self.value(v, hops + 1) for v in values)
            return False
        if isinstance(expr, cst.IfExp):
            return self.value(expr.body, hops) and self.value(expr.orelse, hops)
        if isinstance(expr, cst.Call):
            last = (call_name(expr) or "").rsplit(".", 1)[-1]
            if last in _CURRENT:
                return True
            if last == _WRAP:
                return any(self.derived(a.value) for a in expr.args)
            inner = viewed_argument(self.project, self.file, self.fn, expr, self.depth + 1)
            return inner is not None and self.derived(inner)
        return False


def view_param(project: Project, file: FileModel, fn: FunctionInfo, depth: int = 0) -> str | None:
    """The parameter ``fn`` converts to a torch stream when it is a stream view (module docstring), else None."""
    if depth > _DEPTH or fn.has_loop or fn.statement_count > _MAX_STATEMENTS or fn.yields or not fn.returns:
        return None
    returned = [r.value for r in fn.returns]
    if any(v is None for v in returned):
        return None
    for param in fn.all_params:
        if param in ("self", "cls"):
            continue
        judge = _Judge(project, file, fn, param, depth)
        if all(judge.value(v) for v in returned) and any(judge.derived(v) for v in returned):
            return param
    return None


def viewed_argument(project: Project, file: FileModel, fn: FunctionInfo | None, call: cst.Call,
                    depth: int = 0) -> cst.BaseExpression | None:
    """The argument a call of a project stream view converts (``as_torch_stream(stream, dev)`` -> ``stream``),
    else None."""
    if depth > _DEPTH or not isinstance(call.func, (cst.Name, cst.Attribute)):
        return None
    target = file.resolve(call.func, fn)
    found = project.function(target, file) if target else None
    if found is None:
        return None
    callee, cfile = found
    memo = project.derived("stream_views")  # (dropped with the project's path index on any change)
    key = (cfile.path, callee.qualname)
    if key not in memo:
        memo[key] = None  # (a recursive view of itself is not one)
        memo[key] = view_param(project, cfile, callee, depth)
    param = memo[key]
    if param is None:
        return None
    positional = [p.name.value for p in (*callee.node.params.posonly_params, *callee.node.params.params)]
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None and arg.keyword.value == param:
            return arg.value
        if arg.keyword is None and i < len(positional) and positional[i] == param:
            return arg.value
    return None


__all__ = ["view_param", "viewed_argument"]
