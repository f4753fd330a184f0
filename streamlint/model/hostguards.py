"""Parameters a function's own guard makes host-resident (issue 16 §3, "Only device data races", "conditions
that follow the call").

A weight store that maps host weights into device memory refuses anything else up front::

    def acquire(self, key, source, *, stream=None):
        if source.device.type != "cpu":
            raise ValueError("source weights must stay on CPU")
        ...
        with torch.cuda.stream(copy_stream):
            typed.copy_(source, non_blocking=True)

Past the guard ``source`` is a host tensor: no stream of the caller produced it, so a side stream reading it
needs no wait on the caller's stream. :func:`host_guarded` recognises, among the top-level statements of the
body before any other statement naming the parameter, an ``if`` whose body raises (no ``else``) on a test
saying the tensor is not on the host -- ``p.device.type != "cpu"``, ``not p.is_cpu``, ``str(p.device) != "cpu"``,
one operand of an ``or`` -- or an ``assert`` of the converse (one operand of an ``and``). ``p.is_cuda`` or
``p.device.type == "cuda"`` prove nothing (an NPU tensor passes them), nor does ``p.is_pinned()`` (a caller may still
be filling the pinned tensor by a non-blocking device-to-host copy). The parameter must not be rebound in the
function. Syntax only.

A branch says the same for the uses it holds (:func:`host_branch`): a tree walk moving what it finds back to the
device (``if isinstance(x, torch.Tensor) and x.device.type == "cpu": ... x.to(dev, non_blocking=True)`` on a copy
stream) reads ``x`` there only when it is a host tensor; a use outside that branch, or in its ``else``, is not
covered, nor is a parameter the function rebinds.

A branch outcome says it of the path that takes it (:func:`host_outcome`, for the interpreter's ``device_test``):
``if kv.device.type != "cpu": side.wait_stream(...)`` skips the fork only for a host tensor, so a later read of
``kv`` on ``side`` races no producer on the path around it (``kv.device != torch.cpu``, a device compared with
the module, is always true: the path around it is never taken). The path's test is about what the name holds
there, so it holds for a name the function binds elsewhere too (a view bound before the test, a page-locked copy
``value = self._pin(value)`` bound under it: host memory as well), unlike the syntactic questions above."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import dotted, string_value
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.syntax import ancestry, descendants, mentions_name


def host_guarded(fn: FunctionInfo, param: str) -> bool:
    """Does ``fn`` raise, before anything else uses ``param``, unless ``param`` is a host tensor?"""
    if param not in fn.all_params or param in fn.name_assigns:
        return False
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else ()
    for stmt in body:
        if _guard(stmt, param):
            return True
        if mentions_name(stmt, param):
            return False
    return False


def host_branch(fn: FunctionInfo, param: str, at: cst.CSTNode | None) -> bool:
    """Is ``at`` (a use of ``param``) inside the body of an ``if`` of ``fn`` whose test holds only when
    ``param`` is a host tensor (:func:`host_test`), with ``param`` never rebound in ``fn``?"""
    if at is None or param not in fn.all_params or param in fn.name_assigns:
        return False
    path = ancestry(fn.node, at) or []
    return any(isinstance(node, cst.If) and below is node.body and _host(node.test, param)
               for node, below in zip(path, path[1:]))


def host_outcome(test: cst.BaseExpression, outcome: bool) -> str | None:
    """The name a branch on ``test`` that took ``outcome`` proves a host tensor: ``x`` of ``x.device.type == "cpu"``
    / ``x.is_cpu`` true, of ``x.device.type != "cpu"`` / ``x.device != torch.cpu`` false; None for anything else."""
    for node in descendants(test):
        name = dotted(node) if isinstance(node, cst.Attribute) else None
        if name is None or not name.endswith((".device", ".device.type", ".is_cpu")):
            continue
        base = name.removesuffix(".type").rsplit(".", 1)[0]
        if "." not in base and (_host(test, base) if outcome else _not_host_or_module(test, base)):
            return base
    return None


def _not_host_or_module(test: cst.BaseExpression, param: str) -> bool:
    """:func:`_not_host`, or ``p.device != torch.cpu`` (a device is never equal to the module: always true)."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, cst.NotEqual) and _names_device(test.left, param) \
            and dotted(test.comparisons[0].comparator) == "torch.cpu":
        return True
    return _not_host(test, param)


def _guard(stmt: cst.BaseStatement, param: str) -> bool:
    if isinstance(stmt, cst.If) and stmt.orelse is None and isinstance(stmt.body, cst.IndentedBlock) \
            and stmt.body.body and _raises(stmt.body.body[-1]):
        return _not_host(stmt.test, param)
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assert):
        return _host(stmt.body[0].test, param)
    return False


def _raises(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, cst.Raise) for s in stmt.body)


def _not_host(test: cst.BaseExpression, param: str) -> bool:
    """Is ``test`` true whenever ``param`` is not a host tensor (so the ``raise`` it guards leaves only host)?"""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _not_host(test.left, param) or _not_host(test.right, param)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _host(test.expression, param)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op = test.comparisons[0].operator
        right = test.comparisons[0].comparator
        return _names_device(test.left, param) and isinstance(op, (cst.NotEqual, cst.IsNot)) and _names_cpu(right)
    return False


def _host(test: cst.BaseExpression, param: str) -> bool:
    """Is ``test`` true only when ``param`` is a host tensor?"""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _host(test.left, param) or _host(test.right, param)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op = test.comparisons[0].operator
        return _names_device(test.left, param) and isinstance(op, (cst.Equal, cst.Is)) \
            and _names_cpu(test.comparisons[0].comparator)
    return dotted(test) == f"{param}.is_cpu"


def host_test(test: cst.BaseExpression, name: str) -> bool:
    """Is ``test`` true only when ``name`` is a host tensor (``x.is_cpu``, ``x.device.type == "cpu"``, one operand
    of an ``and``)?"""
    return _host(test, name)


def _names_device(e: cst.BaseExpression, param: str) -> bool:
    """``p.device.type``, ``p.device``, ``str(p.device)``."""
    if isinstance(e, cst.Call) and dotted(e.func) == "str" and len(e.args) == 1:
        e = e.args[0].value
    return dotted(e) in (f"{param}.device.type", f"{param}.device")


def _names_cpu(e: cst.BaseExpression) -> bool:
    sv = string_value(e)
    if sv is not None:
        return sv == "cpu"
    return isinstance(e, cst.Call) and dotted(e.func) in ("torch.device", "device") and len(e.args) == 1 \
        and string_value(e.args[0].value) == "cpu"


__all__ = ["host_branch", "host_guarded", "host_outcome", "host_test"]
