"""Host values a function's own code shows: literals, builtins of them, and helpers handing back only such values.

``_host_value`` answers for one expression (a literal, arithmetic of host values, ``len(...)`` / ``int(...)``, a
host-annotated parameter); :func:`returns_host_values` for a helper without a return annotation, from what its
``return`` statements build (a layout policy of ints cached on a config dict is no tensor, so a caller's name bound
to it is never produced on a stream). Shared by the tensor typing (``hostattrs.host_attr``) and the dataflow's
project-call results (``flow/calls.py``)."""

from __future__ import annotations

from typing import Callable

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted, string_value
from streamlint.model.hostannotations import host_param
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.placement import HOST_RESULT_METHODS, META_METHODS, host_library
from streamlint.model.syntax import local_nodes, param_named


def _host_value(fn: FunctionInfo, v: cst.BaseExpression, depth: int = 0, file: FileModel | None = None) -> bool:
    """Is ``v`` evidently a host value: a literal, host arithmetic, a builtin of host values, a host-annotated
    parameter, host data a tensor hands out (``x.numpy()``, ``x.tolist()``, ``x.item()``), a function of a host
    array library (``np.nonzero(mask)``, resolved in ``file`` when given), a tuple / list of such?"""
    if isinstance(v, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in HOST_RESULT_METHODS \
            and not v.args:
        return True  # a numpy array / Python values: host memory, never a tensor of a stream
    if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in HOST_SCALAR_METHODS:
        return True  # `x.size(0)`, `group.rank()`: a Python int / torch.Size / bool whatever `x` is
    if isinstance(v, cst.Call) and (dotted(v.func) or "").rsplit(".", 1)[-1] in ("get_rank", "get_world_size"):
        return True  # `dist.get_rank(group)`: the process's rank, a Python int
    if file is not None and isinstance(v, cst.Call) and host_library(file.resolve(v.func, fn)):
        return True
    if depth < 4 and isinstance(v, (cst.Tuple, cst.List)) and v.elements:  # `[4, 8]`, `(n, feat)`
        return all(not isinstance(el, cst.StarredElement) and _host_value(fn, el.value, depth + 1, file)
                   for el in v.elements)
    if depth < 4 and isinstance(v, (cst.BinaryOperation, cst.UnaryOperation)):  # `cpu_size // gpu_size`
        return all(_host_value(fn, x, depth + 1, file) for x in ((v.left, v.right) if isinstance(
            v, cst.BinaryOperation) else (v.expression,)))
    if depth < 4 and isinstance(v, cst.IfExp):  # `start_layer if start_layer is not None else 0`
        return _host_value(fn, v.body, depth + 1, file) and _host_value(fn, v.orelse, depth + 1, file)
    if depth < 4 and isinstance(v, cst.BooleanOperation):  # `start_layer or 0`
        return _host_value(fn, v.left, depth + 1, file) and _host_value(fn, v.right, depth + 1, file)
    if isinstance(v, cst.Call) and (dotted(v.func) or "").rsplit(".", 1)[-1] in (
            "len", "int", "str", "bool", "dict", "list", "set", "OrderedDict", "defaultdict"):
        return True  # a builtin giving a host scalar, or a container (its slots are tracked by their own keys)
    if isinstance(v, (cst.Dict, cst.List, cst.Set)) and not v.elements:
        return True
    if not isinstance(v, cst.Name):
        return False
    param = param_named(fn.node, v.value)
    return v.value in ("True", "False") or (param is not None and host_param(param))


# Methods whose result is a host scalar / tuple whatever their receiver: a tensor's metadata (``x.size(0)``,
# ``x.numel()``, ``x.data_ptr()``: no device read) and a process group's ``rank()`` / ``size()``.
HOST_SCALAR_METHODS = (META_METHODS - {"type", "untyped_storage", "storage"}) \
    | frozenset({"ndimension", "rank", "get_rank", "get_world_size"})  # (a storage is device memory: not one)

# Builtins whose result is a host value whatever their arguments (a tensor argument gives a Python bool / int /
# str): ``any(g for g in plan)``, ``isinstance(x, int)``, ``len(xs)``. Not ``min`` / ``max`` / ``sum`` / ``abs``
# (of tensors: a tensor), nor ``tuple`` / ``list`` / ``sorted`` (host exactly when their argument is).
_HOST_RESULT_BUILTINS = frozenset({"int", "float", "bool", "str", "len", "any", "all", "isinstance", "issubclass",
                                   "hasattr", "callable", "repr", "hash", "id", "ord", "chr", "round"})
_HOST_SEQUENCE_BUILTINS = frozenset({"tuple", "list", "sorted", "set", "frozenset"})
_HOST_FILL_METHODS = frozenset({"append", "extend", "insert", "add"})


def returns_host_values(fn: FunctionInfo, fields: Callable[[str], bool] | None = None) -> bool:
    """Does a helper with no return annotation hand back only host values on every ``return``? Ints, strings and
    bools, builtins of them (``int(...)``, ``any(...)``), tuples / lists of such, ``None`` (at least one return is
    something else), and locals bound to nothing else (a list filled by ``.append`` of host tuples, then
    ``tuple(plan)``), also the memo idiom ``plan = spec.get(key)`` ... ``plan = spec[key] = (...)``: a read of the
    very slot the helper itself fills with host values (a layout policy cached on a config dict). A layout or a
    shape policy computed once is no tensor, so a caller's name bound to it is never produced on a stream.
    ``fields`` (asked by the data flow, which knows the class): does ``self.<attr>`` hold a host value
    (``hostattrs.host_attr``)? Device addresses are host ints too: ``x.data_ptr()`` and offsets added to it (a
    copy-engine descriptor ``(dst_ptr + slot * nbytes, src_ptr, nbytes)``)."""
    memo = "_returns_host" if fields is None else "_returns_host_fields"
    cached = fn.__dict__.get(memo)
    if cached is None:
        cached = fn.__dict__[memo] = _returns_host_values(fn, fields)
    return cached


def _returns_host_values(fn: FunctionInfo, fields: Callable[[str], bool] | None = None) -> bool:
    if not fn.returns or fn.yields or fn.node.asynchronous is not None:
        return False
    bindings: dict[str, list[cst.BaseExpression | None]] = {}  # every binding of each local (None: opaque)
    fills: dict[str, list[cst.BaseExpression]] = {}  # `plan.append(x)` / `plan[k] = x`: what the local holds
    slots: dict[tuple[str, str], list[cst.BaseExpression]] = {}  # `spec[key] = value` in the helper

    def bind(target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name):
            bindings.setdefault(target.value, []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            pairs = isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements) \
                and not any(isinstance(el, cst.StarredElement) for el in (*target.elements, *value.elements))
            for i, el in enumerate(target.elements):  # `n_kv, page = self.n_kv, self.page`: element by element
                bind(el.value, value.elements[i].value if pairs else None)  # type: ignore[union-attr]
        elif isinstance(target, cst.StarredElement):
            bind(target.value, None)
        elif isinstance(target, cst.Subscript) and len(target.slice) == 1 \
                and isinstance(target.slice[0].slice, cst.Index) and value is not None:
            base, key = dotted(target.value), _code(target.slice[0].slice.value)
            if base is not None and key is not None:
                (fills.setdefault(base, []) if "." not in base else []).append(value)
                slots.setdefault((base, key), []).append(value)

    for node in local_nodes(fn.node.body):
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            return False
        if isinstance(node, cst.Assign):
            for t in node.targets:
                bind(t.target, node.value)
        elif isinstance(node, cst.AnnAssign):
            bind(node.target, node.value)
        elif isinstance(node, cst.AugAssign):  # `run += 1`: host when its other bindings and the operand are
            bind(node.target, node.value if isinstance(node.target, cst.Name) else None)
        elif isinstance(node, (cst.For, cst.CompFor)):
            bind(node.target, None)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            bind(node.asname.name, None)
        elif isinstance(node, cst.NamedExpr):
            bind(node.target, None)
        elif isinstance(node, (cst.ExceptHandler,)) and node.name is not None:
            bind(node.name.name, None)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) \
                and node.func.attr.value in _HOST_FILL_METHODS:
            fills.setdefault(node.func.value.value, []).extend(a.value for a in node.args)
    params = set(fn.all_params)

    def host(v: cst.BaseExpression | None, depth: int, seen: frozenset) -> bool:
        if v is None or depth > 12:
            return False
        if _host_value(fn, v) and not (isinstance(v, cst.Call) and (dotted(v.func) or "").rsplit(".", 1)[-1] in (
                "list", "dict", "set", "OrderedDict", "defaultdict") and v.args):
            return True  # (a container built from an argument is host when its argument is: below)
        if isinstance(v, cst.Name):
            if v.value == "None":
                return True
            return _host_local(v.value, depth, seen)
        if isinstance(v, (cst.Tuple, cst.List, cst.Set)):
            return all(not isinstance(el, cst.StarredElement) and host(el.value, depth + 1, seen) for el in v.elements)
        if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Not):
            return True
        if isinstance(v, cst.Comparison) and all(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn))
                                                 for c in v.comparisons):
            return True
        if isinstance(v, cst.Comparison) and all(host(x, depth + 1, seen) for x in (
                v.left, *(c.comparator for c in v.comparisons))):
            return True  # `len(plan) > 0`: a Python bool
        if isinstance(v, cst.Attribute) and fields is not None and isinstance(v.value, cst.Name) \
                and v.value.value == "self":
            return fields(v.attr.value)  # `self.page_bytes` set from an `int` argument
        if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, (cst.Add, cst.Subtract)) \
                and (address(v.left, depth + 1, seen) or address(v.right, depth + 1, seen)):
            return True  # a device address plus an offset: a host int (no one adds a tensor to an address)
        if isinstance(v, (cst.BinaryOperation, cst.BooleanOperation)):
            return host(v.left, depth + 1, seen) and host(v.right, depth + 1, seen)
        if isinstance(v, cst.IfExp):
            return host(v.body, depth + 1, seen) and host(v.orelse, depth + 1, seen)
        if isinstance(v, cst.Call) and isinstance(v.func, cst.Name):
            name = v.func.value
            if name in _HOST_RESULT_BUILTINS and name not in bindings and name not in params:
                return True
            if name in _HOST_SEQUENCE_BUILTINS and name not in bindings and name not in params:
                return len(v.args) <= 1 and all(not a.star and host(a.value, depth + 1, seen) for a in v.args)
            return False
        if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "get" \
                and 1 <= len(v.args) <= 2 and not any(a.star or a.keyword for a in v.args):
            # `spec.get(key)` (or with a host default) where the helper itself fills `spec[key]` with host values
            return _cached_slot(dotted(v.func.value), _code(v.args[0].value), depth, seen) and (
                len(v.args) == 1 or host(v.args[1].value, depth + 1, seen))
        if isinstance(v, cst.Subscript) and len(v.slice) == 1 and isinstance(v.slice[0].slice, cst.Index):
            return _cached_slot(dotted(v.value), _code(v.slice[0].slice.value), depth, seen)
        return False

    def address(v: cst.BaseExpression, depth: int, seen: frozenset) -> bool:
        """``x.data_ptr()``, an address plus an offset, a local bound only to addresses: a device address."""
        if depth > 12:
            return False
        if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "data_ptr" \
                and not v.args:
            return True
        if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, (cst.Add, cst.Subtract)):
            return address(v.left, depth + 1, seen) or address(v.right, depth + 1, seen)
        if isinstance(v, cst.IfExp):  # `base.data_ptr() if has_k else None`
            return address(v.body, depth + 1, seen) and host(v.orelse, depth + 1, seen)
        if isinstance(v, cst.Name) and v.value not in params and v.value not in seen and bindings.get(v.value):
            return all(x is not None and address(x, depth + 1, seen | {v.value}) for x in bindings[v.value])
        return False

    def _cached_slot(base: str | None, key: str | None, depth: int, seen: frozenset) -> bool:
        values = slots.get((base, key)) if base is not None and key is not None else None
        return bool(values) and all(host(x, depth + 1, seen) for x in values)

    def _host_local(name: str, depth: int, seen: frozenset) -> bool:
        if name in seen:
            return True  # (a cycle: judged by the other bindings)
        if name in params or name not in bindings:
            return False
        seen = seen | {name}
        return all(host(x, depth + 1, seen) for x in bindings[name]) \
            and all(host(x, depth + 1, seen) for x in fills.get(name, ()))

    values = [r.value for r in fn.returns]
    if all(r is None or (isinstance(r, cst.Name) and r.value == "None") for r in values):
        return False  # (a procedure: its result is no question here)
    return all(r is None or host(r, 0, frozenset()) for r in values)


def _code(expr: cst.BaseExpression) -> str | None:
    """A cache key's text: a string / int literal or a dotted name (``"stream_layout"``, ``key``)."""
    sv = string_value(expr)
    if sv is not None:
        return repr(sv)
    if isinstance(expr, cst.Integer):
        return expr.value
    return dotted(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
