"""Arguments a function forwards to a callable it is handed (issue 16, [unknown-type]: a warm-up / capture helper).

``def warm_then_capture(fn, *args): ... with torch.cuda.stream(side): fn(*args)`` runs a callable handed in on a
side stream over positional arguments handed in with it. Alone it says nothing of what ``args`` holds: a generic
dispatcher forwards anything (:meth:`~streamlint.model.flow.interp.Interp.bind_star_args` leaves such a ``*args``
untyped). Its callers say it: a call site handing, at the star positions, a device tensor the caller evidently
holds -- a name it binds to a torch op's result (``torch.empty(...)``, ``torch.stack(...)``), uses as the
receiver of a tensor-only method (``coef.copy_(...)``, ``buf.mul_(...)``), or a parameter annotated as a tensor
or a sequence of tensors -- hands the caller's tensors made on its current stream, and the side stream reading
them with no wait on it is the usual argument race, resting on that caller (SL201 medium). With no call site
seen at all (a public dispatcher) nothing says the arguments are tensors: precision first, no finding (it would
rest on callers not seen: low at most, and a dispatcher forwards flags and configs as often). Seen callers handing
nothing shown to be a tensor (a flag, a host value, an object) keep ``*args`` untyped too; so does a runner entering a stream
it is handed (``run_on_side(stream, fn, *args)``: the caller chose the stream and orders it, its own analysis).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.callers import bound_by_partial, callers_of
from streamlint.model.streams import derived
from streamlint.model.syntax import call_name, param_named
from streamlint.model.tensors import torch_returns_tensor
from streamlint.model.tensoruse import element_tensor_annotation, tensor_annotation, tensor_only_method

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

MEDIUM = "medium"


def dispatched_level(project: Project, file: FileModel, fn: FunctionInfo) -> str | None:
    """How sure ``fn``'s forwarded ``*args`` are the callers' device tensors: MEDIUM (a seen call site hands one at
    a star position), None (no call site seen, or the seen ones hand none)."""
    memo = derived(project, "dispatched_level")
    if id(fn) not in memo:
        sites = callers_of(project, file, fn)
        if _stream_param(fn):
            memo[id(fn)] = None  # a runner on the stream its caller hands in: the caller's to order (its analysis)
        elif sites is None or bound_by_partial(project, fn):
            memo[id(fn)] = None  # no call site seen (or one not shown, through a partial): a generic dispatcher
        else:
            method = fn.class_name is not None and fn.params[:1] == ("self",)
            named = len(fn.params) - (1 if method else 0)
            found = any(site.function is not None and any(
                _device_tensor(project, model, site.function, e) for e in _star_values(site.node, named))
                for model, site in sites)
            memo[id(fn)] = MEDIUM if found else None
    return memo[id(fn)]


def _stream_param(fn: FunctionInfo) -> bool:
    """Does ``fn`` enter a stream it is handed (``with torch.cuda.stream(stream):`` on a parameter)?"""
    return any(call_name(s.node) == "stream" and s.node.args and isinstance(s.node.args[0].value, cst.Name)
               and s.node.args[0].value.value in fn.all_params for s in fn.calls)


def _star_values(call: cst.Call, named: int) -> list[cst.BaseExpression]:
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional[:named + 1]):
        return []  # (a starred argument before the star positions: which lands where is not known)
    return [a.value for a in positional[named:] if not a.star]


def _device_tensor(project: Project, model: FileModel, caller: FunctionInfo, expr: cst.BaseExpression) -> bool:
    """Does ``caller`` evidently hold ``expr`` (a name) as a tensor (see the module docstring)?"""
    if not isinstance(expr, cst.Name):
        return False
    name = expr.value
    if name in caller.all_params:
        if name in caller.name_assigns:
            return False
        param = param_named(caller.node, name)
        ann = param.annotation.annotation if param is not None and param.annotation is not None else None
        if ann is not None and (tensor_annotation(ann) or element_tensor_annotation(ann)):
            return True
    for value in caller.name_assigns.get(name, ()):
        site = model.call_site(value) if isinstance(value, cst.Call) else None
        if site is not None and torch_returns_tensor(site.target):
            return True
    return any(isinstance(s.node.func, cst.Attribute) and isinstance(s.node.func.value, cst.Name)
               and s.node.func.value.value == name and tensor_only_method(s.node.func.attr.value)
               for s in caller.calls)


__all__ = ["MEDIUM", "dispatched_level"]
