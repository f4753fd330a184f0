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
from streamlint.model.file import dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.hostobjects import foreign_method
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes
from streamlint.model.tensors import tensor_method, torch_returns_tensor
from streamlint.model.tensorvocab import META_ATTRS

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


# methods of the containers that hold tensors (dicts, lists, TensorDict-like batches): no evidence either way
_CONTAINER_METHODS = frozenset({
    "items", "keys", "values", "get", "pop", "popitem", "update", "setdefault", "append", "extend", "insert",
    "remove", "clear", "copy", "index", "count", "apply", "named_apply", "select", "exclude", "to_dict",
    "as_dict", "asdict", "replace", "unflatten_keys", "flatten_keys", "to_tensordict",
})


def host_method_names(project, fn: FunctionInfo) -> frozenset[str]:
    """Locals bound once in the function and used only as the receiver of methods (``symm_mem.get_buffer(...)``,
    ``symm_mem.put_signal(...)``), one of which no ``torch.Tensor`` has (the full list of tensor names is
    ``tensornames.py``): never handed to a call, never an operand, a subscript or a return value. Container
    methods (``items``, ``get``, ``append``), private and ``npu`` names are no evidence."""
    cached = fn.__dict__.get("_host_method_names")
    if cached is None:
        cached = fn.__dict__["_host_method_names"] = _scan_methods(fn)
    return cached


def host_object(project, file, fn: FunctionInfo, name: str, value: cst.BaseExpression | None) -> bool:
    """Does ``name = value`` bind a host object the flow would otherwise take for a tensor: a name the
    function shows to hold host objects (:func:`host_object_names`) or a count (:func:`host_count`)?"""
    return name in host_object_names(project, fn) or (value is not None and host_count(project, file, fn, name, value))


def host_handle(project, file, fn: FunctionInfo, name: str, value: cst.BaseExpression | None) -> bool:
    """An opaque call's result whose methods no tensor has (:func:`host_method_names`), or the result of any call of
    code not seen that holds a stream (:func:`stream_holder_names`): a host handle (asked after the completion handles
    of ``flow/handles.py``, which have their own kind)."""
    if value is None:
        return False
    if name in host_method_names(project, fn) and opaque_result(project, file, value):
        return True
    return name in stream_holder_names(fn) and unseen_result(project, file, value)


# methods of a stream (a field used as their receiver is one), and calls taking a stream as their first argument
_STREAM_METHODS = frozenset({"wait_event", "wait_stream", "synchronize", "record_event", "query"})
_STREAM_TAKERS = frozenset({"stream", "wait_stream", "record_stream", "set_stream", "StreamContext"})


def stream_holder_names(fn: FunctionInfo) -> frozenset[str]:
    """Locals bound once and used only as the receiver of methods no tensor has (:func:`host_method_names`' uses)
    and as the owner of a field the function uses as a stream (``comm.cuda_stream.wait_event(ev)``,
    ``torch.cuda.stream(comm.cuda_stream)``, ``x.record_stream(engine.stream)``), the latter at least once: a
    communicator, a copy engine, a transfer agent. No tensor holds a stream: such an object is no device data,
    whatever package made it (a tensor-like object of another package, a ``KeyedJaggedTensor``, shows tensor methods
    or attributes and no stream)."""
    cached = fn.__dict__.get("_stream_holders")
    if cached is None:
        cached = fn.__dict__["_stream_holders"] = _scan_holders(fn)
    return cached


def unseen_result(project, file, value: cst.BaseExpression) -> bool:
    """Is ``value`` a call of code the analysis does not see (no project function, no torch function returning a
    tensor, no tensor method): ``group.get_communicator()``, ``make_engine(dev)``?"""
    if not isinstance(value, cst.Call):
        return False
    if isinstance(value.func, cst.Attribute) and tensor_method(value.func.attr.value):
        return False
    site = file.call_site(value)
    if site is None or torch_returns_tensor(site.target or "") or project.call_targets(file, site):
        return False
    return True


def _scan_holders(fn: FunctionInfo) -> frozenset[str]:
    nodes = list(local_nodes(fn.node))
    calls = {id(n.func): n for n in nodes if isinstance(n, cst.Call)}
    streams: set[int] = set()  # ids of `x.attr` nodes used as a stream
    for call in calls.values():
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _STREAM_METHODS and isinstance(func.value, cst.Attribute):
            streams.add(id(func.value))
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        for i, a in enumerate(call.args):
            if isinstance(a.value, cst.Attribute) and (
                    (i == 0 and a.keyword is None and last in _STREAM_TAKERS)
                    or (a.keyword is not None and a.keyword.value == "stream")):
                streams.add(id(a.value))
    holders: dict[str, bool] = {}  # name -> holds a stream field; every other use of it is in `other`
    used: set[int] = set()
    for node in nodes:
        if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)):
            continue
        name, attr = node.value.value, node.attr.value
        if id(node) in calls and foreign_method(attr) and attr not in _CONTAINER_METHODS:
            used.add(id(node.value))
            holders.setdefault(name, False)
        elif id(node) in streams and attr not in _TENSOR_ATTRS:
            used.add(id(node.value))
            holders[name] = True
    bindings: dict[str, int] = {}
    for node in nodes:
        if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
            bindings[node.target.value] = bindings.get(node.target.value, 0) + 1
            used.add(id(node.target))
    other = {n.value for n in nodes if isinstance(n, cst.Name) and n.value in holders and id(n) not in used}
    return frozenset(n for n, held in holders.items()
                     if held and n != "self" and n not in other and bindings.get(n, 0) == 1)


def opaque_result(project, file, value: cst.BaseExpression) -> bool:
    """Is ``value`` a call of a torch / torch_npu function that returns no tensor (``torch.distributed``'s
    ``get_symm_mem_workspace``, a runtime or compiler helper), which the flow takes for a tensor only because an
    argument is one? A function of another package may well return a tensor-like object of its own
    (``KeyedJaggedTensor``, a quantized weight): those stay as they are."""
    if not isinstance(value, cst.Call):
        return False
    site = file.call_site(value)
    target = site.target if site is not None else None
    return bool(target) and target.startswith(("torch.", "torch_npu.")) and not torch_returns_tensor(target)


def _scan_methods(fn: FunctionInfo) -> frozenset[str]:
    receivers: dict[str, bool] = {}  # name -> some method no tensor has; any other use of it is in `other`
    nodes = list(local_nodes(fn.node))
    calls = {id(n.func) for n in nodes if isinstance(n, cst.Call)}
    received = set()
    for node in nodes:
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and id(node) in calls:
            received.add(id(node.value))
            attr = node.attr.value
            foreign = foreign_method(attr) and attr not in _CONTAINER_METHODS
            receivers[node.value.value] = receivers.get(node.value.value, False) or foreign
    bindings: dict[str, int] = {}
    for node in nodes:
        if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
            bindings[node.target.value] = bindings.get(node.target.value, 0) + 1
            received.add(id(node.target))  # `x = ...`: the one binding, not a use
    other = {n.value for n in nodes if isinstance(n, cst.Name) and n.value in receivers and id(n) not in received}
    return frozenset(n for n, foreign in receivers.items()
                     if foreign and n != "self" and n not in other and bindings.get(n, 0) <= 1)


# functions of Python ints only (a launch grid's sizes): ``triton.cdiv(n, BLOCK)``, ``triton.next_power_of_2(n)``
HOST_INT_FUNCTIONS = frozenset({"triton.cdiv", "triton.next_power_of_2", "math.ceil", "math.floor", "math.log2",
                                "math.prod", "math.gcd", "math.lcm", "math.isqrt"})


def host_scalar_names(project, fn: FunctionInfo) -> frozenset[str]:
    """Locals the function uses as Python ints: a bound of a slice (``slots[n:]``, ``xs[: n - pad]``) or an
    argument of ``range(...)`` or of a function of ints (:data:`HOST_INT_FUNCTIONS`), and never as a tensor (no tensor method or attribute of them). A 0-d tensor
    would work there too, but only through a blocking host read; what an unresolved callee hands back and the
    function indexes with is a count (a token count from a connector of another package), not device data."""
    memo = derived(project, "host_scalar_names")
    key = (id(fn.node), fn.qualname)
    if key not in memo:
        memo[key] = _scan_scalars(fn)
    return memo[key]


def string_compared_names(fn: FunctionInfo) -> frozenset[str]:
    """Locals the function compares with a string literal (``kind == "ERROR"``, ``state in ("done", "failed")``):
    Python strings, whatever their names say (``event_type``, ``stream_mode``); no tensor, stream nor event
    compares equal to a string."""
    cached = fn.__dict__.get("_string_compared")
    if cached is None:
        found: set[str] = set()
        for node in local_nodes(fn.node.body):
            if not isinstance(node, cst.Comparison):
                continue
            operands = [node.left, *(c.comparator for c in node.comparisons)]
            ops = [c.operator for c in node.comparisons]
            for i, op in enumerate(ops):
                if not isinstance(op, (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)):
                    continue
                a, b = operands[i], operands[i + 1]
                for x, y in ((a, b), (b, a)):
                    if isinstance(x, cst.Name) and _string_literals(y):
                        found.add(x.value)
        cached = fn.__dict__["_string_compared"] = frozenset(found)
    return cached


def _string_literals(e: cst.BaseExpression) -> bool:
    if isinstance(e, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    return isinstance(e, (cst.Tuple, cst.List, cst.Set)) and bool(e.elements) \
        and all(isinstance(el.value, (cst.SimpleString, cst.ConcatenatedString)) for el in e.elements)


def host_count(project, file, fn: FunctionInfo, name: str, value: cst.BaseExpression) -> bool:
    """``name = value`` binds a count: ``value`` calls nothing the analysis knows (no torch API, no tensor method,
    no project function: a method of an object of another package, ``self.connector.start_load(...)``) or is
    integer arithmetic of names never used as tensors (``real_tokens * k``), and the function uses ``name`` as a
    Python int (:func:`host_scalar_names`)."""
    if name not in host_scalar_names(project, fn):
        return False
    if isinstance(value, cst.BinaryOperation):  # `n_slots = real_tokens * k`, `x.size(0) * cfg["top_k"]`
        return _int_arithmetic(value, _tensor_names(fn))
    if not isinstance(value, cst.Call):
        return False
    site = file.call_site(value)
    if site is None or (site.target or "").startswith(("torch.", "torch_npu.")):
        return False
    if isinstance(value.func, cst.Attribute) and tensor_method(value.func.attr.value):
        return False
    return not project.call_targets(file, site)


def _arith_names(e: cst.BaseExpression, depth: int = 0) -> set[str]:
    """The names an index expression is integer arithmetic of (``n``, ``n - pad``, ``(start + n) // 2``)."""
    if isinstance(e, cst.Name):
        return {e.value}
    if depth < 4 and isinstance(e, cst.BinaryOperation) and isinstance(
            e.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)):
        return _arith_names(e.left, depth + 1) | _arith_names(e.right, depth + 1)
    if depth < 4 and isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus):
        return _arith_names(e.expression, depth + 1)
    return set()


_SIZE_METHODS = frozenset({"size", "numel", "dim", "nelement", "element_size"})


def _int_arithmetic(e: cst.BaseExpression, tensors: set[str], depth: int = 0) -> bool:
    """Is ``e`` integer arithmetic whose every leaf is a number, a size (``x.size(0)``, ``x.shape[1]``,
    ``len(xs)``), or a name / an entry of a name (``cfg["top_k"]``) the function never uses as a tensor?"""
    if isinstance(e, cst.Integer):
        return True
    if isinstance(e, cst.Name):
        return e.value not in tensors
    if isinstance(e, cst.Subscript):
        owner = _owner(e)
        if isinstance(e.value, cst.Attribute) and e.value.attr.value == "shape":
            return True
        return owner is not None and owner not in tensors and owner != "self"
    if isinstance(e, cst.Call):
        func = e.func
        return (isinstance(func, cst.Attribute) and func.attr.value in _SIZE_METHODS) or (
            isinstance(func, cst.Name) and func.value == "len")
    if depth < 4 and isinstance(e, cst.BinaryOperation) and isinstance(
            e.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)):
        return _int_arithmetic(e.left, tensors, depth + 1) and _int_arithmetic(e.right, tensors, depth + 1)
    return False


def _scan_scalars(fn: FunctionInfo) -> frozenset[str]:
    ints: set[str] = set()
    for node in local_nodes(fn.node):
        if isinstance(node, cst.Slice):
            for bound in (node.lower, node.upper, node.step):
                if bound is not None:
                    ints |= _arith_names(bound)
        elif isinstance(node, cst.Call) and (isinstance(node.func, cst.Name) and node.func.value == "range"
                                             or (dotted(node.func) or "") in HOST_INT_FUNCTIONS):
            for a in node.args:
                ints |= _arith_names(a.value)
    return frozenset(ints - _tensor_names(fn)) if ints else frozenset()


def _tensor_names(fn: FunctionInfo) -> set[str]:
    nodes = list(local_nodes(fn.node))
    calls = {id(n.func) for n in nodes if isinstance(n, cst.Call)}
    return {n.value.value for n in nodes if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name)
            and _tensor_evidence(n, calls)}


def _tensor_evidence(node: cst.Attribute, calls: set[int]) -> bool:
    """Does ``x.attr`` / ``x.m(...)`` show ``x`` is a tensor (a tensor method called, a tensor attribute read)?"""
    attr = node.attr.value
    return tensor_method(attr) if id(node) in calls else attr in _TENSOR_ATTRS or attr.startswith("_")


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
        if _tensor_evidence(node, calls):
            tensor.add(name)
        elif id(node) in calls:
            continue
        elif id(node) in stores or isinstance(node.value, cst.Subscript):
            # `opts.n = 1`, `results[0].outputs`; a bare read (`out.logits`) may be a model output's tensor
            host.add(name)
    return frozenset(host - tensor)


__all__ = ["host_count", "host_handle", "host_method_names", "host_object", "host_object_names", "host_scalar_names",
           "opaque_result", "stream_holder_names", "unseen_result"]
