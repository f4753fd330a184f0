"""Parameter kinds through project callees: an unannotated parameter whose own function says nothing of it
(``def save_kv(self, name, kv_layer, meta)``) but hands it as is to a project function that takes that
parameter for a tensor by its own code or annotation (``gather_rows(kv_layer, rows)`` with
``def gather_rows(cache, rows): return cache.index_select(0, rows)``) is a tensor too: it is the caller's device data,
read where the callee reads it (on a side stream when the call is made under one).

One level only (the callee's own evidence, :func:`~streamlint.model.tensors.own_param_kinds`, when it is an
annotation, tensor metadata or a tensor-only method, none a numpy array has too: a positional argument of
``torch.as_tensor(state)`` may be a host list, ``arr.shape`` a host array), and only for a
name the function never rebinds and hands positionally or by keyword (not through ``*args`` / ``**kw``); a
callee's ``self`` is the receiver, not an argument. The evidence is the callee's, so a host parameter of the
caller (an int, a list, a config) stays what its own code says it is: only parameters with no kind at all are
filled in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from streamlint._lazy import cst

from streamlint.model.syntax import local_nodes
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project


def callee_tensor_params(project: Project, file: FileModel, fn: FunctionInfo, kinds: dict[str, str],
                         own_kinds: Callable[[Project, FileModel, FunctionInfo], dict[str, str]],
                         attrs: frozenset[str], methods: frozenset[str]) -> dict[str, str]:
    """The parameters of ``fn`` with no kind in ``kinds`` that ``fn`` hands to a project function taking that
    parameter for a tensor (``own_kinds`` of the callee): name -> "tensor"."""
    unknown = {p for p in fn.all_params if p != "self" and p not in kinds and p not in fn.name_assigns}
    if not unknown:
        return {}
    found: dict[str, str] = {}
    for site in fn.calls:
        call = site.node
        handed = [a for a in call.args if isinstance(a.value, cst.Name) and a.value.value in unknown
                  and a.value.value not in found and not a.star]
        if not handed:
            continue
        target = project.call_target(file, site)
        if target is None or target[0] is fn:
            continue
        callee, cfile = target
        bound_method = callee.class_name is not None and callee.params[:1] in (("self",), ("cls",)) \
            and isinstance(call.func, cst.Attribute)
        params = callee.params[1:] if bound_method else callee.params
        theirs = own_kinds(project, cfile, callee)
        for name, expr in bind_arguments(params + callee.kwonly, call, kwonly=callee.kwonly).items():
            if isinstance(expr, cst.Name) and expr.value in unknown and theirs.get(name) == "tensor" \
                    and _strong(callee, name, attrs, methods):
                found[expr.value] = "tensor"
    return found


def _strong(callee: FunctionInfo, param: str, attrs: frozenset[str], methods: frozenset[str]) -> bool:
    """Is the callee's evidence more than a positional argument of a torch call (``torch.as_tensor(state)``
    takes host lists and arrays too): an annotation, tensor metadata a numpy array lacks (``p.is_cuda``,
    ``p.requires_grad``; not ``p.shape``), a tensor-only method reading it (``p.masked_fill(m, 0)``; not
    ``p.reshape(n, -1)``, which a numpy array has, nor ``p.copy_(src)``)?"""
    p = next((p for p in (*callee.node.params.posonly_params, *callee.node.params.params,
                          *callee.node.params.kwonly_params) if p.name.value == param), None)
    if p is None or param in callee.name_assigns:
        return False
    if p.annotation is not None:
        return True
    for node in local_nodes(callee.node.body):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == param \
                and node.attr.value in attrs and node.attr.value not in HOST_SHARED:
            return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and isinstance(node.func.value, cst.Name) and node.func.value.value == param \
                and _tensor_only(node.func.attr.value, methods):
            return True
    return False


def _tensor_only(name: str, methods: frozenset[str]) -> bool:
    """A tensor-only method that reads its receiver: not an in-place one (``dst.copy_(src)``: the destination
    of a copy may well be a pinned host buffer, written, not read, by the callee)."""
    return name in methods and not name.endswith("_") and name not in HOST_SHARED


# Names a numpy array (or a list) has too: ``arr.shape[0]``, ``arr.reshape(n, -1)``, ``values.sort()`` in the callee
# say nothing of a torch tensor (a host batch, token ids in an array); the callee's own kinds may take them so, a
# caller is not typed by them.
HOST_SHARED = frozenset({
    "T", "mT", "all", "any", "argmax", "argmin", "argsort", "astype", "base", "clip", "copy", "cumprod", "cumsum",
    "data", "device", "diagonal", "dot", "dtype", "fill", "flags", "flat", "flatten", "imag", "item", "itemsize",
    "max", "mean", "min", "nbytes", "ndim", "nonzero", "prod", "real", "repeat", "reshape", "round", "shape",
    "size", "sort", "squeeze", "std", "strides", "sum", "swapaxes", "take", "tolist", "trace", "transpose", "var",
    "view", "count", "index", "pop", "reverse",
})
