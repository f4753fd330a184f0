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
