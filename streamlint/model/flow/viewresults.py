"""Which elements of a helper's tuple result are views of one storage (``q, k, v = qkv.split(...);
return q, k, v``): a helper that is not inlined still hands back aliases of one block, and rebinding one of
them while another is held frees nothing. And which helpers hand back only views of the object's own fields
(``return [self.ring[slot][k, :n].view(p.shape) for k in range(3)]``): run inline, so that their result is
that long-lived storage, not a fresh allocation whose death at the caller's return frees memory."""

from __future__ import annotations

from streamlint._lazy import cst

from streamlint.model.file import dotted
from streamlint.model.hostannotations import host_annotation
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.tensorvocab import MULTI_VIEW_METHODS, VIEW_ATTRS, VIEW_METHODS
from streamlint.model.walk import children
from streamlint.model.syntax import target_names


def _view_base(e: cst.BaseExpression, multi: bool) -> cst.BaseExpression | None:
    """The tensor ``e`` is a view of (``x.view(...)``, ``x[..., :8]``, ``x.T``, ``torch.narrow(x, ...)``;
    with ``multi``, the tuple of views ``x.split(...)`` / ``torch.chunk(x, 2)``), else None."""
    methods = MULTI_VIEW_METHODS if multi else VIEW_METHODS
    if not multi and isinstance(e, cst.Subscript):
        return e.value
    if not multi and isinstance(e, cst.Attribute) and e.attr.value in VIEW_ATTRS:
        return e.value
    if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in methods:
        func = dotted(e.func) or ""
        if func.startswith("torch.") and func.count(".") == 1:  # torch.split(x, ...): a view of the first argument
            return e.args[0].value if e.args and e.args[0].keyword is None else None
        return e.func.value
    return None


def _root(e: cst.BaseExpression, roots: dict[str, object]) -> object:
    """The storage ``e`` denotes: a token of the statement that allocated it, or None when unknown (a
    parameter, a field, a name bound in a nested block)."""
    base = _view_base(e, False)
    while base is not None:
        e, base = base, _view_base(base, False)
    if isinstance(e, cst.Name):
        return roots.get(e.value)
    if isinstance(e, cst.Call):
        return ("call", id(e))  # a fresh result of this call
    return None


def field_view_getter(fn: FunctionInfo) -> bool:
    """Does every return of the method ``fn`` hand back a ``self.*`` field or views of one (also a list / tuple
    of them, or a list comprehension of them), at least one return being seen?"""
    if fn.class_name is None or fn.params[:1] != ("self",):
        return False
    ann = fn.node.returns.annotation if fn.node.returns is not None else None
    if ann is not None and _other_class(ann):
        return False  # (`-> "Chunk"`: the field holds an object, not tensor storage)
    values = [r.value for r in fn.returns]
    host = declared_non_tensors(fn) or ()
    return bool(values) and all(v is not None and (_field_view(v) or _field_view_with_host(v, host)) for v in values)


def _field_view_with_host(e: cst.BaseExpression, host: tuple[bool, ...]) -> bool:
    """A tuple display whose elements are field views (at least one) or declared host values by the method's
    annotation (``-> tuple[torch.Tensor, int]`` returning ``self.pools[i], block - start``: a lookup of the
    object's storage with an offset)."""
    if not isinstance(e, cst.Tuple) or len(e.elements) != len(host) or not any(host) or all(host):
        return False
    return all(not isinstance(el, cst.StarredElement) and (h or _field_view(el.value))
               for el, h in zip(e.elements, host))


def _other_class(ann: cst.BaseExpression) -> bool:
    """Is the return annotation one class named by itself (``Chunk``, ``"Chunk"``, ``pkg.Chunk``) that is not a
    tensor?"""
    if isinstance(ann, cst.SimpleString):
        text = ann.evaluated_value if isinstance(ann.evaluated_value, str) else ""
    else:
        text = dotted(ann) or ""
    name = text.strip().rsplit(".", 1)[-1]
    return name.isidentifier() and name not in ("Tensor", "Any", "object")


def _field_view(e: cst.BaseExpression) -> bool:
    if isinstance(e, (cst.ListComp, cst.GeneratorExp)):
        return _field_view(e.elt)
    if isinstance(e, (cst.Tuple, cst.List)):
        return bool(e.elements) and all(not isinstance(el, cst.StarredElement) and _field_view(el.value)
                                        for el in e.elements)
    base = _view_base(e, False)
    while base is not None:
        e, base = base, _view_base(base, False)
    return isinstance(e, cst.Attribute) and (dotted(e) or "").startswith("self.")


def shared_result_groups(fn: FunctionInfo) -> tuple[int | None, ...] | None:
    """For a helper whose every return is a tuple: per element, the index of the first element that is a
    view of the same storage allocated in the helper (None for an element of its own or of unknown storage);
    None when no two elements share one. Read from the helper's straight-line top-level assignments only."""
    memo = fn.__dict__.setdefault("_shared_result_groups", {})
    if "v" in memo:
        return memo["v"]
    memo["v"] = None
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else []
    roots: dict[str, object] = {}
    top: set[int] = set()
    for stmt in body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                continue
            top.add(id(small))
            target = small.targets[0].target
            if isinstance(target, cst.Name):
                roots[target.value] = _root(small.value, roots)
            elif isinstance(target, (cst.Tuple, cst.List)):
                base = _view_base(small.value, True)
                shared = _root(base, roots) if base is not None else None
                for i, el in enumerate(target.elements):
                    if isinstance(el.value, cst.Name):  # views of one base, or the distinct results of a call
                        roots[el.value.value] = shared if base is not None else (
                            ("call", id(small.value), i) if isinstance(small.value, cst.Call) else None)
    if _assigned_elsewhere(fn, roots, top):
        return None
    tuples = returned_tuples(fn)
    if tuples is None:
        return None
    shapes = []
    for elements in tuples:
        found = [_root(el, roots) for el in elements]
        shapes.append(tuple(next((j for j, other in enumerate(found[:i]) if other == r), None)
                            if r is not None else None for i, r in enumerate(found)))
    if not shapes or len(set(shapes)) != 1 or all(g is None for g in shapes[0]):
        return None
    memo["v"] = shapes[0]
    return shapes[0]


def returned_tuples(fn: FunctionInfo) -> list[list[cst.BaseExpression]] | None:
    """The elements of each tuple ``fn`` returns (bare returns and ``return None`` skipped); None when some
    return is not a tuple display without starred elements."""
    out = []
    for ret in fn.returns:
        value = ret.value
        if value is None or (isinstance(value, cst.Name) and value.value == "None"):
            continue
        if not isinstance(value, cst.Tuple) or any(isinstance(el, cst.StarredElement) for el in value.elements):
            return None
        out.append([el.value for el in value.elements])
    return out


def _assigned_elsewhere(fn: FunctionInfo, names: dict[str, object], top: set[int]) -> bool:
    """Is one of ``names`` also bound outside the top-level assignments (in a branch, a loop, a ``with``)?"""
    stack: list[cst.CSTNode] = [fn.node.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not fn.node:
            continue
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.WithItem, cst.NamedExpr)) \
                and id(node) not in top:
            for n in _bound(node):
                if n in names:
                    return True
        stack.extend(children(node))
    return False


def _bound(node: cst.CSTNode) -> list[str]:
    targets: list[cst.CSTNode] = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)):
        targets = [node.target]
    elif isinstance(node, cst.WithItem) and node.asname is not None:
        targets = [node.asname.name]
    return [name for t in targets for name in target_names(t)]


def declared_non_tensors(fn: FunctionInfo) -> tuple[bool, ...] | None:
    """For a helper annotated ``-> Optional[Tuple[torch.Tensor, torch.Tensor, BatchInfo]]``: which elements
    of its tuple result are declared as something other than a tensor (a class, a host scalar, a container of
    them: ``list[dist.Work]``, not ``list[Tensor]``)."""
    ann = fn.node.returns.annotation if fn.node.returns is not None else None
    if isinstance(ann, cst.Subscript) and (dotted(ann.value) or "").rsplit(".", 1)[-1] == "Optional" \
            and len(ann.slice) == 1 and isinstance(ann.slice[0].slice, cst.Index):
        ann = ann.slice[0].slice.value
    if not isinstance(ann, cst.Subscript) or (dotted(ann.value) or "").rsplit(".", 1)[-1] not in ("Tuple", "tuple"):
        return None
    out = []
    for el in ann.slice:
        value = el.slice.value if isinstance(el.slice, cst.Index) else None
        name = dotted(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
        out.append(name is not None and "Tensor" not in name and name.rsplit(".", 1)[-1] not in ("Any", "object")
                   or isinstance(value, cst.Subscript) and host_annotation(value))  # `list[dist.Work]`, `tuple[int, int]`
    return tuple(out)
