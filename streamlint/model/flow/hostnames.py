"""Locals the function itself shows to be host objects (issue 16 §1, FP class host-object-not-tensor).

A name the function reads an attribute of an element of that no ``torch.Tensor`` has (``results[0].outputs``,
``conv[-1].role``: a collection of host objects), or stores a host literal in such an attribute of (``opts.n
= 1``; ``param.main_grad = buf`` may be a tensor's field), holds a host object or a collection of them (a bare
read, ``out.logits``, is no evidence: a model output holds tensors). When nothing in the function uses the
same name as a tensor (a tensor attribute, a tensor method), a value the flow would otherwise take for a
tensor (an opaque call's result computed from its arguments) is not bound to it as one: host objects are
neither produced nor read by a stream."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes
from streamlint.model.tensors import META_ATTRS, tensor_method

# attributes of a torch.Tensor read without a call (besides the metadata ones)
_TENSOR_ATTRS = META_ATTRS | frozenset({
    "grad", "data", "T", "mT", "H", "mH", "real", "imag", "is_leaf", "retains_grad", "is_nested", "is_mps",
    "is_xpu", "is_cpu", "is_mkldnn", "is_vulkan", "is_ipu", "is_sparse_csr", "is_pinned", "base",
})


def host_object_names(project, fn: FunctionInfo) -> frozenset[str]:
    memo = derived(project, "host_object_names")
    key = (id(fn.node), fn.qualname)
    if key not in memo:
        memo[key] = _scan(fn)
    return memo[key]


def _owner(e: cst.BaseExpression) -> str | None:
    """``x`` for ``x`` / ``x[i]`` / ``x[i][j]``."""
    while isinstance(e, cst.Subscript):
        e = e.value
    return e.value if isinstance(e, cst.Name) else None


def _literal(v: cst.BaseExpression) -> bool:
    if isinstance(v, cst.UnaryOperation):
        v = v.expression
    return isinstance(v, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)) or (
        isinstance(v, cst.Name) and v.value in ("True", "False", "None"))


def _scan(fn: FunctionInfo) -> frozenset[str]:
    host: set[str] = set()
    tensor: set[str] = set()
    nodes = list(local_nodes(fn.node))
    calls = {id(n.func) for n in nodes if isinstance(n, cst.Call)}
    # `opts.n = 1`: a host literal stored in a new field (`param.main_grad = buf` may well be a tensor's)
    stores = {id(t.target) for n in nodes if isinstance(n, cst.Assign) and _literal(n.value) for t in n.targets}
    for node in nodes:
        if not isinstance(node, cst.Attribute):
            continue
        name = _owner(node.value)
        if name is None or name == "self":
            continue
        attr = node.attr.value
        if id(node) in calls:
            if tensor_method(attr):
                tensor.add(name)
            continue
        if attr in _TENSOR_ATTRS or attr.startswith("_"):
            tensor.add(name)
        elif id(node) in stores or isinstance(node.value, cst.Subscript):
            # `opts.n = 1`, `results[0].outputs`; a bare read (`out.logits`) may be a model output's tensor
            host.add(name)
    return frozenset(host - tensor)


__all__ = ["host_object_names"]
