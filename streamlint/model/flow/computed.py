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
factory (``return torch.tensor([total], device=device)``, a local bound only to one) whose device is known at the
call not to be the host (the call's argument bound to the ``device`` parameter, else its default: ``"cuda"``,
``torch.device("npu", rank)``, ``torch.cuda.current_device()``, the device of a model's parameters
``next(model.parameters()).device``, a local bound only to one) hands back a fresh device
tensor, as the factory written in the caller would: its result is the caller's allocation (``torch.empty``) or write
(a filled factory) on the current stream, not an opaque value. So a blocking ``.item()`` of it later orders the host
after everything queued on that stream (issue 16, [item-sync]). A device the call leaves unknown (a parameter passed
through, another tensor's ``.device``, ``None``) or the host (``token_count(b, "cpu")``) keeps the result opaque.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import string_value
from streamlint.model.filefacts import ClassInfo
from streamlint.model.placement import host_factory
from streamlint.model.streams import derived
from streamlint.model.syntax import param_named
from streamlint.model.tensors import torch_returns_tensor
from streamlint.model.tensorvocab import EMPTY_FACTORIES, LIKE_FACTORIES

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
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
        r.value is not None and (_computed(project, file, fn, r.value, 0) or _computed_last(project, file, fn, r))
        for r in fn.returns)
    return memo[key]


def _computed_last(project: Project, file: FileModel, fn: FunctionInfo, ret: cst.Return) -> bool:
    """``flat = []; ...; flat = _flatten(flat); return flat``: a returned local whose binding just before the
    ``return``, a plain assignment of the same block, is a computing call (its earlier bindings never reach it)."""
    if not isinstance(ret.value, cst.Name) or ret.value.value in fn.all_params:
        return False
    prev = _previous_statement(fn.node.body, ret)
    if not (isinstance(prev, cst.SimpleStatementLine) and len(prev.body) == 1 and isinstance(prev.body[0], cst.Assign)):
        return False
    assign = prev.body[0]
    return len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name) \
        and assign.targets[0].target.value == ret.value.value and _computed(project, file, fn, assign.value, 1)


def _previous_statement(block: cst.BaseSuite, ret: cst.Return) -> cst.CSTNode | None:
    """The statement right before the line holding ``ret`` in the block (nested blocks searched), else None."""
    body = list(getattr(block, "body", ()))
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and any(small is ret for small in stmt.body):
            return body[i - 1] if i and stmt.body[0] is ret else None
        for child in (getattr(stmt, "body", None), getattr(stmt, "orelse", None)):
            while child is not None and not isinstance(child, cst.BaseSuite):
                child = getattr(child, "body", None)
            if isinstance(child, cst.BaseSuite):
                found = _previous_statement(child, ret)
                if found is not None:
                    return found
    return None


def device_factory(file: FileModel, fn: FunctionInfo, call: cst.Call, cfile: FileModel,
                   caller: FunctionInfo) -> str | None:
    """``"empty"`` / ``"filled"`` when every ``return`` of ``fn`` (called by ``call`` in ``caller``) builds a tensor
    with a torch factory whose ``device=`` is known not to be the host, the call's arguments bound to ``fn``'s
    parameters (``token_count(batches, "cuda")``); else None (a device the call leaves unknown, or the host)."""
    kinds = set()
    values = [r.value for r in fn.returns]
    if not values or fn.yields or any(a.star for a in call.args):
        return None
    for v in values:
        if isinstance(v, cst.Name) and v.value not in fn.all_params:
            bound = fn.name_assigns.get(v.value) or []
            v = bound[0] if len(bound) == 1 else None
        kind = _factory_kind(file, fn, v)
        if kind is None or not _known_device(*_bound_device(file, fn, v, call, cfile, caller), 0):
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
    if last not in _FACTORY_NAMES and last not in EMPTY_FACTORIES or last in _MAY_ALIAS:
        return None
    if host_factory(target, v) or any(a.keyword is not None and a.keyword.value == "pin_memory" for a in v.args):
        return None
    return "empty" if last in EMPTY_FACTORIES else "filled"


def _bound_device(file: FileModel, fn: FunctionInfo, factory: cst.Call, call: cst.Call, cfile: FileModel,
                  caller: FunctionInfo) -> tuple:
    """The expression the factory's ``device=`` has at this call, with the file and function it is read in: a
    parameter of ``fn`` is bound to the call's argument (by keyword, else by position), else to its default."""
    device = next((a.value for a in factory.args if a.keyword is not None and a.keyword.value == "device"), None)
    if not isinstance(device, cst.Name) or device.value not in fn.all_params:
        return device, file, fn
    name = device.value
    arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
    if arg is not None:
        return arg, cfile, caller
    params = fn.node.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    if positional and positional[0] in ("self", "cls") and isinstance(call.func, cst.Attribute):
        positional = positional[1:]
    given = [a.value for a in call.args if a.keyword is None]
    if name in positional and positional.index(name) < len(given):
        return given[positional.index(name)], cfile, caller
    param = param_named(fn.node, name)
    return (param.default if param is not None else None), file, fn


# Factories that may hand back existing memory rather than a fresh tensor: ``torch.as_tensor(owner, device="cuda")``
# of an object exposing ``__cuda_array_interface__`` (or of a tensor already there) is a zero-copy view.
_MAY_ALIAS = frozenset({"as_tensor", "asarray", "from_numpy", "frombuffer"})
_DEVICE_GETTERS = frozenset({"torch.cuda.current_device", "torch.npu.current_device", "torch_npu.npu.current_device"})


def _known_device(e: cst.BaseExpression | None, file: FileModel, fn: FunctionInfo, depth: int) -> bool:
    """Is ``e`` (read in ``fn``) known to name an accelerator, not the host: ``"cuda"``, ``"npu:0"``,
    ``torch.device("cuda", rank)``, ``torch.cuda.current_device()``, a local bound only to one of those?"""
    sv = string_value(e) if e is not None else None
    if sv is not None:
        return sv.split(":")[0] in ("cuda", "npu")
    if isinstance(e, cst.Call):
        target = file.resolve(e.func, fn)
        if target in _DEVICE_GETTERS:
            return True
        return target == "torch.device" and bool(e.args) and e.args[0].keyword is None \
            and _known_device(e.args[0].value, file, fn, depth + 1)
    if isinstance(e, cst.Name) and e.value not in fn.all_params and depth < 3:
        bound = fn.name_assigns.get(e.value) or []
        return len(bound) == 1 and _known_device(bound[0], file, fn, depth + 1)
    return _module_device(e)


def _module_device(e: cst.BaseExpression | None) -> bool:
    """``next(model.parameters()).device`` / ``next(iter(model.buffers())).device``: the device the model computes
    on. The interpreter takes the model's outputs for device tensors of the current stream (an unseen call's
    result); a tensor the step makes beside them on that device is as much device memory, as a factory written
    in the caller with that ``device=`` already is (``host_factory``): a helper building it is read the same way.
    Not any tensor's ``.device`` (a pinned staging buffer's is the host)."""
    if not (isinstance(e, cst.Attribute) and e.attr.value == "device" and isinstance(e.value, cst.Call)
            and isinstance(e.value.func, cst.Name) and e.value.func.value == "next" and len(e.value.args) == 1):
        return False
    inner = e.value.args[0].value
    if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "iter" \
            and len(inner.args) == 1:
        inner = inner.args[0].value
    return isinstance(inner, cst.Call) and not inner.args and isinstance(inner.func, cst.Attribute) \
        and inner.func.attr.value in ("parameters", "buffers")


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
    found = called_function(project, file, e)
    return found is not None and computes_tensor(project, found[1], found[0])


def called_function(project: Project, file: FileModel, e: cst.Call) -> tuple | None:
    """The project function a call runs (``(module, function)``, as ``Project.call_target``), or None for an
    unresolved call and for a project class's construction."""
    site = file.call_site(e)
    found = project.call_target(file, site) if site is not None else None
    if found is None:
        return None
    sym = project.symbol(site.target, file) if site.target else None
    return None if sym is not None and isinstance(sym[0], ClassInfo) else found


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
