"""Project functions whose result is a tensor they compute (issue 16 §3, "tensors in containers and objects").

``router_out[i] = self._grouped_mlp(dispatched[i], counts[i])`` where the helper is ``return apply_mlp(x,
self.w13, self.w2, counts)`` and ``apply_mlp`` ends in ``torch_npu.npu_grouped_matmul(...)``: the call queues
kernels on the current stream and hands back their output. When its arguments are of unknown type (elements of
lists built in the function, results of other objects' methods) nothing in the call itself says "tensor", so
without this the result is an opaque value and a side stream reading it later is never checked against its
producer.

:func:`computes_tensor` reads that from the callee's code: every ``return`` gives the output of a torch /
torch_npu op (not a factory: an empty or host buffer has no producer), of another such project function, a
local bound only to those, an output of one (``op(...)[0]``), or arithmetic on one of them. A getter returning a field (``return self.buf``), a
parameter or a view of one, a host copy (``x.cpu()``) or a container is not one: its result was produced
elsewhere (precision first). The answer is memoised per function in the project.

:func:`device_factory` answers the factory case apart: a helper whose every ``return`` builds a tensor with a torch
factory naming a device that is not the host (``return torch.tensor([total], device=device)``, a local bound only to
one) hands back a fresh device tensor, as the factory written in the caller would: its result is the caller's
allocation (``torch.empty``) or write (a filled factory) on the current stream, not an opaque value. So a blocking
``.item()`` of it later orders the host after everything queued on that stream (issue 16, [item-sync]).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import ClassInfo
from streamlint.model.placement import host_factory
from streamlint.model.streams import derived
from streamlint.model.tensors import EMPTY_FACTORIES, LIKE_FACTORIES, torch_returns_tensor

if TYPE_CHECKING:
    from streamlint.model.file import FileModel, FunctionInfo
    from streamlint.model.project import Project

_FACTORY_NAMES = frozenset({"empty", "zeros", "ones", "full", "rand", "randn", "randint", "arange", "tensor",
                            "as_tensor", "from_numpy", "frombuffer", "linspace", "eye", "empty_strided"})


def computes_tensor(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does every ``return`` of ``fn`` hand back a tensor its own kernels (or its callees') compute?"""
    memo = derived(project, "computed_returns")
    key = id(fn)
    if key in memo:
        return memo[key]
    memo[key] = False  # (a recursive helper: not known)
    values = [r.value for r in fn.returns]
    memo[key] = bool(values) and not fn.yields and all(
        v is not None and _computed(project, file, fn, v, 0) for v in values)
    return memo[key]


def device_factory(file: FileModel, fn: FunctionInfo) -> str | None:
    """``"empty"`` / ``"filled"`` when every ``return`` of ``fn`` builds a tensor with a torch factory given a
    ``device=`` that is not the host (directly or through a local bound only to such a call); else None."""
    kinds = set()
    values = [r.value for r in fn.returns]
    if not values or fn.yields:
        return None
    for v in values:
        if isinstance(v, cst.Name) and v.value not in fn.all_params:
            bound = fn.name_assigns.get(v.value) or []
            v = bound[0] if len(bound) == 1 else None
        kind = _factory_kind(file, fn, v)
        if kind is None:
            return None
        kinds.add(kind)
    return "filled" if "filled" in kinds else "empty"


def _factory_kind(file: FileModel, fn: FunctionInfo, v: cst.BaseExpression | None) -> str | None:
    if not isinstance(v, cst.Call):
        return None
    target = file.resolve(v.func, fn)
    target = apis.canonical(target) if target is not None else None
    if not target or not target.startswith("torch.") or target.count(".") != 1:
        return None
    last = target.rsplit(".", 1)[-1]
    if last not in _FACTORY_NAMES and last not in EMPTY_FACTORIES or last in ("from_numpy", "frombuffer"):
        return None
    device = next((a.value for a in v.args if a.keyword is not None and a.keyword.value == "device"), None)
    if device is None or host_factory(target, v) or any(a.keyword is not None and a.keyword.value == "pin_memory"
                                                        for a in v.args) or _none_default(fn, device):
        return None
    return "empty" if last in EMPTY_FACTORIES else "filled"


def _none_default(fn: FunctionInfo, device: cst.BaseExpression) -> bool:
    """``device=device`` naming a parameter that defaults to ``None`` (the host, when the caller leaves it)."""
    if not isinstance(device, cst.Name) or device.value not in fn.all_params:
        return False
    params = fn.node.params
    param = next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params)
                  if p.name.value == device.value), None)
    return param is None or param.default is not None and isinstance(param.default, cst.Name) \
        and param.default.value == "None"


def _computed(project: Project, file: FileModel, fn: FunctionInfo, e: cst.BaseExpression, depth: int) -> bool:
    if depth > 4:
        return False
    if isinstance(e, cst.Name):
        if e.value in fn.all_params and not _rebound(fn, e.value):
            return False  # the argument itself on some path
        bound = fn.name_assigns.get(e.value)
        return bool(bound) and all(_computed(project, file, fn, v, depth + 1) for v in bound)
    if isinstance(e, cst.BinaryOperation):
        return _computed(project, file, fn, e.left, depth + 1) or _computed(project, file, fn, e.right, depth + 1)
    if isinstance(e, cst.Subscript):  # `npu_grouped_matmul([x], [w], ...)[0]`: an output of a computing call
        return isinstance(e.value, cst.Call) and _computed(project, file, fn, e.value, depth + 1)
    if not isinstance(e, cst.Call):
        return False
    target = file.resolve(e.func, fn)
    if target is not None:
        target = apis.canonical(target)
        if target.startswith(("torch.", "torch_npu.")):
            last = target.rsplit(".", 1)[-1]
            return torch_returns_tensor(target) and not host_factory(target, e) \
                and last not in _FACTORY_NAMES and last not in EMPTY_FACTORIES and last not in LIKE_FACTORIES
    site = file.call_site(e)
    found = project.call_target(file, site) if site is not None else None
    if found is None:
        return False
    sym = project.symbol(site.target, file) if site.target else None
    if sym is not None and isinstance(sym[0], ClassInfo):
        return False  # constructing an object
    return computes_tensor(project, found[1], found[0])


def _rebound(fn: FunctionInfo, name: str) -> bool:
    """Is the parameter ``name`` rebound by a statement of the function's own block (on every path)?"""
    for stmt in fn.node.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)):
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                        return True
    return False
