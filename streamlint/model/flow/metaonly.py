"""Project helpers whose call reads no device memory of its tensor arguments: they read only what
describes them (``.shape``, ``len``) or rebind storage on the host (``p.data = q``)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.syntax import local_nodes
from streamlint.model.tensors import META_METHODS
from streamlint.model.tensorvocab import META_ATTRS, VIEW_ATTRS, VIEW_METHODS


def metadata_only(fn: FunctionInfo, count: int, file: FileModel | None = None, _depth: int = 0) -> bool:
    """Does a small project helper read nothing but the metadata of its first ``count`` arguments
    (``return t.element_size() * t.nelement()``: ``.shape``, ``.numel()``, ``len``)? Its call touches no
    device memory. Each use of such a parameter is a metadata attribute or method, ``len(p)`` /
    ``isinstance(p, T)``, or a host-side rebinding of storage: ``p.data = q`` / ``p._local_tensor = q``
    (``p`` the object set, ``q`` the value bound: a Python attribute set, no kernel); with ``file``, also
    the argument of a helper of that module that is itself metadata-only (``is_dtensor(p)``)."""
    params = fn.params[1:] if fn.class_name and fn.params[:1] in (("self",), ("cls",)) \
        and "staticmethod" not in (d.rsplit(".", 1)[-1] for d in fn.decorators) else fn.params
    if not 0 < count <= len(params) or fn.statement_count > 6 or fn.calls and len(fn.calls) > 6:
        return False
    wanted = set(params[:count])
    allowed: set[int] = set()
    for n in local_nodes(fn.node.body):
        if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value in wanted \
                and n.attr.value in META_ATTRS | META_METHODS:
            allowed.add(id(n.value))
        elif isinstance(n, cst.Call) and dotted(n.func) in ("len", "isinstance") and n.args \
                and isinstance(n.args[0].value, cst.Name):
            allowed.add(id(n.args[0].value))
        elif isinstance(n, cst.Assign) and all(isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
                                               and t.target.value.value in wanted for t in n.targets):
            allowed |= {id(t.target.value) for t in n.targets}  # `target.data = value`: storage rebound on the host
            if isinstance(n.value, cst.Name):
                allowed.add(id(n.value))
        elif isinstance(n, cst.Call) and file is not None and _depth < 2 and isinstance(n.func, cst.Name) \
                and len(n.args) == 1 and isinstance(n.args[0].value, cst.Name) and n.args[0].keyword is None:
            helper = file.functions.get(n.func.value)
            if helper is not None and helper is not fn and metadata_only(helper, 1, file, _depth + 1):
                allowed.add(id(n.args[0].value))
    uses = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.Name) and n.value in wanted]
    return bool(uses) and all(id(n) in allowed for n in uses)


def view_only(fn: FunctionInfo, param: str) -> bool:
    """Does a helper touch parameter ``param`` only to describe it (``.dtype``, ``.numel()``) and to hand back a
    view of it (``return buf.view(torch.uint8)[:n].view(dtype)``)? Taking a view queues no kernel: the call
    reads no device memory of that argument, its result is the argument's own storage."""
    memo = fn.__dict__.setdefault("_view_only", {})  # (asked at every call of the helper; lives with ``fn``)
    found = memo.get(param)
    if found is None:
        found = memo[param] = _view_only(fn, param)
    return found


def _view_only(fn: FunctionInfo, param: str) -> bool:
    allowed: set[int] = set()
    for ret in fn.returns:
        e = ret.value
        while e is not None:  # the view chain down to its root name
            if isinstance(e, cst.Name):
                allowed.add(id(e))
                break
            if isinstance(e, cst.Subscript) and all(basic_index(el.slice) for el in e.slice):
                e = e.value  # basic indexing is a view; an index tensor (``x[idx]``) is a gather kernel
            elif isinstance(e, cst.Attribute) and e.attr.value in VIEW_ATTRS:
                e = e.value
            elif isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in VIEW_METHODS:
                e = e.func.value
            else:
                break
    for n in local_nodes(fn.node.body):
        if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == param \
                and n.attr.value in META_ATTRS | META_METHODS:
            allowed.add(id(n.value))
    uses = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.Name) and n.value == param]
    return bool(uses) and all(id(n) in allowed for n in uses)


def basic_index(sl: cst.BaseSlice) -> bool:
    """A slice or a literal index (``x[:n]``, ``x[0]``, ``x[-1]``, ``x[None]``, ``x[...]``): a view, no kernel."""
    if isinstance(sl, cst.Slice):
        return True
    v = sl.value if isinstance(sl, cst.Index) else None
    if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus):
        v = v.expression
    return isinstance(v, (cst.Integer, cst.Ellipsis)) or (isinstance(v, cst.Name) and v.value == "None")


__all__ = ["basic_index", "metadata_only", "view_only"]
