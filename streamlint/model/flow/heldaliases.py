"""A method called through a local name of an object the class holds: ``pipeline = self._pipeline`` ...
``pipeline.on_pending_commit(step)``.

:meth:`Project.call_target` finds the method ``self._pipeline.on_pending_commit(step)`` runs when the class
constructs the field's object (``self._pipeline = PipelineState()``: ``ClassInfo.attr_types``); the same call
made through a local bound once to that field is the same method. The flow asks it of a call it does not
inline, to know what the callee does with its arguments: a method that only keeps an argument (appends it to a
queue, stores it in a field) hands it over and reads no device memory (``calls.kept_arguments``), so a holder of
tensors given to it is no device use on the current stream and its name dying is no free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import ClassInfo, FileModel, FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import is_none
from streamlint.model.tensors import VIEW_METHODS

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project


def aliased_field(fn: FunctionInfo, recv: cst.BaseExpression) -> str | None:
    """The field ``attr`` of ``self`` that the local ``recv`` is bound to, once and only to it; else None."""
    if not isinstance(recv, cst.Name) or recv.value in fn.all_params or recv.value == "self":
        return None
    values = fn.name_assigns.get(recv.value, [])
    if len(values) != 1:
        return None
    value = values[0]
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "self":
        return value.attr.value
    return None


def aliased_method(project: Project, file: FileModel, site) -> tuple[FunctionInfo, FileModel] | None:
    """The project method ``name.m(...)`` runs, ``name`` a local alias of ``self.<attr>`` and the class
    constructing one project class for that field (no alternatives): the method of that class (or of a project
    base class)."""
    fn, func = site.function, site.node.func
    if fn is None or not fn.class_name or not isinstance(func, cst.Attribute):
        return None
    attr = aliased_field(fn, func.value)
    cls = file.classes.get(fn.class_name) if attr is not None else None
    if cls is None or attr in cls.methods or cls.attr_alternatives.get(attr):
        return None
    ctor = cls.attr_types.get(attr)
    sym = project.symbol(ctor, file) if ctor else None
    seen: set[int] = set()
    while sym is not None and isinstance(sym[0], ClassInfo) and id(sym[0]) not in seen:
        seen.add(id(sym[0]))
        method = sym[0].methods.get(func.attr.value)
        if method is not None:
            return (method, sym[1]) if method.params[:1] == ("self",) else None
        bases = [project.symbol(b, sym[1]) for b in sym[0].bases]
        bases = [b for b in bases if b is not None and isinstance(b[0], ClassInfo)]
        sym = bases[0] if len(bases) == 1 else None
    return None


# ---- results a held object hands back from its own storage

def _host_literal(e: cst.BaseExpression) -> bool:  # (a function: LibCST is imported lazily)
    return isinstance(e, (cst.Integer, cst.Float, cst.SimpleString, cst.Comparison, cst.BooleanOperation))


def _root(e: cst.BaseExpression) -> cst.BaseExpression:
    """The name an expression's memory is reached from, through attributes, subscripts and views (``.items()``
    of a mapping too): ``self.ids[:n].unsqueeze(0)`` -> ``self``."""
    while True:
        if isinstance(e, (cst.Attribute, cst.Subscript)):
            e = e.value
        elif isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) \
                and e.func.attr.value in VIEW_METHODS | {"items", "values", "popitem"}:
            e = e.func.value
        else:
            return e


def _loop_names(fn: FunctionInfo) -> set[str]:
    """Loop names of ``fn`` bound to the elements of something ``self`` holds (``for k, t in self.d.items()``)."""
    out: set[str] = set()
    stack = list(fn.node.body.children)
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(n, cst.For) and isinstance(_root(n.iter), cst.Name) and _root(n.iter).value == "self":
            targets = [n.target] if isinstance(n.target, cst.Name) else [
                el.value for el in getattr(n.target, "elements", ())]
            out |= {t.value for t in targets if isinstance(t, cst.Name)}
        stack.extend(n.children)
    return out


def _own(e: cst.BaseExpression | None, roots: set[str], locals_: dict | None = None) -> bool:
    """``e`` is storage the object holds (``self.ids[:n]``, a loop name over its fields) or a host value."""
    if e is None or _host_literal(e) or isinstance(e, (cst.Dict, cst.List, cst.Tuple)) \
            and not getattr(e, "elements", ()):
        return True
    if isinstance(e, cst.Name):
        return e.value in ("None", "True", "False") or e.value in roots or locals_ is not None and e.value in locals_ and all(
            not isinstance(v, cst.Name) and _own(v, roots) for v in locals_[e.value])  # `n = self.num_tokens`
    if isinstance(e, cst.IfExp):
        return _own(e.body, roots, locals_) and _own(e.orelse, roots, locals_)
    root = _root(e)
    return root is not e and isinstance(root, cst.Name) and root.value in roots


def _own_container(fn: FunctionInfo, name: str) -> bool:
    """The local ``name`` is bound once to a container (a dict, a list, a record class called with keywords)
    filled only with the object's own storage and host values, also by ``name[k] = v`` / ``name[k].append(v)``."""
    values = fn.name_assigns.get(name, [])
    if len(values) != 1 or not isinstance(values[0], (cst.Call, cst.Dict)) or name in fn.all_params:
        return False
    roots = {"self", name} | _loop_names(fn)
    built = values[0]
    items = [el.value for el in built.elements] if isinstance(built, cst.Dict) else [a.value for a in built.args]
    if isinstance(built, cst.Call) and not all(a.keyword is not None for a in built.args):
        return False
    stack, stored = list(fn.node.body.children), list(items)
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(n, cst.Assign) and any(isinstance(t.target, cst.Subscript) and isinstance(_root(t.target), cst.Name)
                                             and _root(t.target).value == name for t in n.targets):
            stored.append(n.value)
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("append", "update") \
                and isinstance(_root(n.func.value), cst.Name) and _root(n.func.value).value == name:
            stored += [a.value for a in n.args]
        stack.extend(n.children)
    return all(_own(v, roots, fn.name_assigns) for v in stored)


def _hands_back_own(fn: FunctionInfo, siblings: list[FunctionInfo]) -> bool:
    """Every ``return`` of the method hands back storage its object holds: ``self.buf[:n]``, a container built of
    such views (``kwargs = Args(input_ids=self.ids[:q].unsqueeze(0), ...); return kwargs``), or the same method of
    another object it holds (``return self.pairs[i].device.get_args(...)``) when its sibling definitions (the other
    classes the receiver may be) all hand back their own storage."""
    returns = [r.value for r in fn.returns if r.value is not None and not is_none(r.value)]
    if not returns:
        return False
    for value in returns:
        if isinstance(value, cst.Name) and _own_container(fn, value.value):
            continue
        if not isinstance(value, cst.Name) and _own(value, {"self"}):
            continue
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value == fn.node.name.value and _delegate(fn, value.func.value):
            others = [m for m in siblings if m is not fn]
            if others and all(_hands_back_own(m, []) for m in others):
                continue
        return False
    return True


def _declared_classes(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> list | None:
    """The project classes of ``attr: A | B`` (``Union[A, B]``, ``Optional[A]``) declared in the class body."""
    for stmt in cls.node.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == attr:
                names, stack = [], [small.annotation.annotation]
                while stack:
                    a = stack.pop()
                    if isinstance(a, cst.BinaryOperation) and isinstance(a.operator, cst.BitOr):
                        stack += [a.left, a.right]
                    elif isinstance(a, cst.Subscript) and (getattr(a.value, "value", None) in ("Union", "Optional")
                                                           or getattr(getattr(a.value, "attr", None), "value", None)
                                                           in ("Union", "Optional")):
                        stack += [el.slice.value for el in a.slice if isinstance(el.slice, cst.Index)]
                    elif not is_none(a):
                        names.append(a)
                out = []
                for a in names:
                    qual = file.resolve(a, None) if isinstance(a, (cst.Name, cst.Attribute)) else None
                    sym = project.symbol(qual, file) if qual else None
                    if sym is None or not isinstance(sym[0], ClassInfo):
                        return None
                    out.append(sym)
                return out or None
    return None


def _method_in(project: Project, sym, name: str) -> tuple[FunctionInfo, FileModel] | None:
    seen: set[int] = set()
    while sym is not None and isinstance(sym[0], ClassInfo) and id(sym[0]) not in seen:
        seen.add(id(sym[0]))
        method = sym[0].methods.get(name)
        if method is not None:
            return (method, sym[1]) if method.params[:1] == ("self",) else None
        bases = [project.symbol(b, sym[1]) for b in sym[0].bases]
        bases = [b for b in bases if b is not None and isinstance(b[0], ClassInfo)]
        sym = bases[0] if len(bases) == 1 else None
    return None


def held_call_result(project: Project, file: FileModel, fn: FunctionInfo, call: cst.Call) -> bool:
    """``self.io.get_args(...)`` (or through a local alias of ``self.io``) where every class the field may hold
    (declared ``io: A | B``, or constructed) defines the method and each hands back its own storage: the result
    is the held object's, so the caller's name for it dying frees nothing."""
    func = call.func
    if fn is None or not fn.class_name or not isinstance(func, cst.Attribute):
        return False
    recv = func.value
    if func.attr.value == fn.node.name.value and _delegate(fn, recv) and any(call is r.value for r in fn.returns):
        # `return self.pairs[i].device.get_args(...)` in `get_args`: the same method of an object it holds
        others = [m for m in _definitions(project, func.attr.value) if m is not fn]
        return bool(others) and all(_hands_back_own(m, []) for m in others)
    attr = recv.attr.value if isinstance(recv, cst.Attribute) and isinstance(recv.value, cst.Name) \
        and recv.value.value == "self" else aliased_field(fn, recv)
    cls = file.classes.get(fn.class_name) if attr is not None else None
    if cls is None or attr in cls.methods:
        return False
    classes = _declared_classes(project, file, cls, attr)
    if classes is None:
        ctors = [c for c in (cls.attr_types.get(attr), *cls.attr_alternatives.get(attr, ())) if c]
        classes = [project.symbol(c, file) for c in dict.fromkeys(ctors)]
    found = [_method_in(project, c, func.attr.value) for c in classes]
    if not found or any(f is None for f in found):
        return False
    methods = [f[0] for f in found]
    return all(_hands_back_own(m, methods) for m in methods)


def _definitions(project: Project, name: str) -> list[FunctionInfo]:
    """The project's methods named ``name`` (at most a few files hold one; else none: no guess)."""
    memo = derived(project, "held_definitions")
    if name not in memo:
        paths = project.paths_containing((f"def {name}(".encode(),))
        out: list[FunctionInfo] = []
        for path in paths if paths and len(paths) <= 3 else ():
            model = project.file(path)
            out += [f for f in model.functions.values() if f.node.name.value == name and f.class_name
                    and f.params[:1] == ("self",)] if model is not None else []
        memo[name] = out
    return memo[name]


def _delegate(fn: FunctionInfo, recv: cst.BaseExpression) -> bool:
    root = _root(recv)
    if isinstance(root, cst.Name) and root.value not in ("self",) and root.value not in fn.all_params:
        values = fn.name_assigns.get(root.value, [])
        root = _root(values[0]) if len(values) == 1 else root
    return isinstance(root, cst.Name) and root.value == "self"


__all__ = ["aliased_field", "aliased_method", "held_call_result"]
