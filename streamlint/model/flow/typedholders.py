"""Which project class a name of a function holds, by the annotations the code states (typed receivers).

A function handed a project object names its class in an annotation more often than it constructs it: a
parameter (``sched: LayerScheduler``, ``Optional[...]`` / ``X | None``, a string or a quoted dotted forward
reference, a class imported under ``TYPE_CHECKING`` or from another module), the ``self``-like parameter of
an ``autograd.Function`` staticmethod (``def forward(ctx, self: 'LayerScheduler', x)``: the receiver the
class's own methods would call ``self``), or an annotated local (``sched: LayerScheduler = ctx.sched``).
:func:`declared_class` answers for one name; :func:`typed_holders` lists the names of a function so typed
to a class other than its own (the ``self`` of an ordinary method is its own class, not a holder).

An annotation is a claim the code makes, not a binding the analysis sees: what rests on it (the class's
methods followed at a call, the class's protocol on its fields: :func:`~.protocols.protocol_inputs`) is
never reported above medium. Every annotated binding of a local must name the same one class; a name also
bound without an annotation keeps it only when every such binding is a plain name or attribute (``ctx.sched``,
an object handed around, not a construction of something else)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.devobjects import annotation_alternatives, annotation_classes
from streamlint.model.file import dotted
from streamlint.model.filefacts import ClassInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, string_annotation

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

MAX_HOLDERS = 4  # names of one function typed to another class (past that: none, the function is a dispatcher)


def declared_class(project: Project, file: FileModel, fn: FunctionInfo, name: str) \
        -> tuple[ClassInfo, FileModel] | None:
    """The one project class ``name`` holds in ``fn`` by its annotation (a parameter's, else every annotated
    binding of a local's); None when none is stated, or it names no project class, or more than one."""
    memo = derived(project, "declared_classes")
    key = (id(fn), name)
    held = memo.get(key)
    if held is not None and held[0] is fn:
        return held[1]
    found = _declared(project, file, fn, name)
    memo[key] = (fn, found)
    return found


def own_self(fn: FunctionInfo) -> bool:
    """Is ``self`` of ``fn`` the instance of its own class (the first parameter of an ordinary method)?"""
    return fn.class_name is not None and fn.params[:1] == ("self",) \
        and not {d.rsplit(".", 1)[-1] for d in fn.decorators} & {"staticmethod", "classmethod"}


def typed_holders(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[str, ClassInfo, FileModel]]:
    """The names of ``fn`` an annotation types to a project class other than ``fn``'s own (parameters first),
    then the ``self.<attr>`` fields of its own class it mentions that an annotation types so (:func:`field_class`)."""
    names = [n for n in (*fn.all_params, *sorted(_annotated_locals(fn))) if not (n == "self" and own_self(fn))]
    out: list[tuple[str, ClassInfo, FileModel]] = []
    for name in dict.fromkeys(names):
        found = declared_class(project, file, fn, name)
        if found is not None and not (fn.class_name is not None and found[0].name == fn.class_name
                                      and found[1] is file):
            out.append((name, *found))
    cls = file.classes.get(fn.class_name or "") if own_self(fn) else None
    if cls is not None:
        attrs = {n.value.attr.value for n in local_nodes(fn.node.body) if isinstance(n, cst.Attribute)
                 and isinstance(n.value, cst.Attribute) and isinstance(n.value.value, cst.Name)
                 and n.value.value.value == "self"}  # (`self.pager.slots`: a member of a held object)
        for attr in sorted(attrs):
            found = field_class(project, file, cls, attr)
            if found is not None and found[0] is not cls:
                out.append((f"self.{attr}", *found))
    return out if len(out) <= MAX_HOLDERS else []


def field_class(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> tuple[ClassInfo, FileModel] | None:
    """The one project class the field ``attr`` of ``cls`` holds by its annotations (a class-body ``attr: T``, a
    ``self.attr: T = ...`` in a method), when every other assignment of it in the class is a plain name or
    attribute (a constructor argument kept, not an object of something else built there)."""
    annotations = field_annotations(cls, attr)
    for m in cls.methods.values():
        if any(a.target == f"self.{attr}" and not isinstance(a.value, (cst.Name, cst.Attribute)) and not (
                isinstance(a.node, cst.AnnAssign)) for a in m.assigns):
            return None
    classes = [annotation_class(project, file, None, a) for a in annotations]
    if not classes or any(c is None for c in classes) or len({(id(c[0]), c[1].path) for c in classes}) != 1:
        return None
    return classes[0]


def field_annotations(cls: ClassInfo, attr: str) -> list[cst.BaseExpression]:
    """Every annotation the class states for its field ``attr``: the class body's ``attr: T`` and each
    ``self.attr: T = ...`` of its methods, in that order."""
    from streamlint.model.syntax import class_field_annotation

    found = [a for a in (class_field_annotation(cls.node, attr),) if a is not None]
    for m in cls.methods.values():
        found += [n.annotation.annotation for n in local_nodes(m.node.body) if isinstance(n, cst.AnnAssign)
                  and isinstance(n.target, cst.Attribute) and isinstance(n.target.value, cst.Name)
                  and n.target.value.value == "self" and n.target.attr.value == attr]
    return found


def declared_method(project: Project, file: FileModel, fn: FunctionInfo,
                    func: cst.BaseExpression) -> tuple[FunctionInfo, FileModel] | None:
    """``store.flat_grads()`` where ``store: GradStore`` is a parameter of ``fn`` annotated with a project class:
    the method of that class (exact, no guess by name), else None."""
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    found = declared_class(project, file, fn, func.value.value)
    return _class_method(project, found[0], found[1], func.attr.value) if found is not None else None


def _class_method(project: Project, cls: ClassInfo, mod: FileModel, name: str) -> tuple[FunctionInfo, FileModel] | None:
    """``name`` of ``cls``, or of its nearest project base class that defines it (up to four levels)."""
    for _ in range(4):
        if name in cls.methods:
            return cls.methods[name], mod
        sym = project.symbol(cls.bases[0], mod) if len(cls.bases) == 1 else None
        if sym is None or not isinstance(sym[0], ClassInfo):
            return None
        cls, mod = sym
    return None


def checking_import(file: FileModel, name: str) -> str | None:
    """``X`` imported under a module-level ``if TYPE_CHECKING:`` (``from .worker import Worker``) whose
    run-time binding in the ``else`` arm is a placeholder (a string alias): the annotation's class."""
    for stmt in file.module.body:
        if not (isinstance(stmt, cst.If) and (dotted(stmt.test) or "").rsplit(".", 1)[-1] == "TYPE_CHECKING"):
            continue
        for line in stmt.body.body:
            for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
                if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
                    continue
                module = dotted(small.module) if small.module is not None else ""
                level = len(small.relative)
                if level:
                    parts = file.module_name.split(".")
                    keep = len(parts) - level + (1 if file.is_package else 0)
                    base = ".".join(parts[:max(keep, 0)])
                    module = f"{base}.{module}" if module and base else (module or base)
                for alias in small.names:
                    local = alias.asname.name.value if alias.asname is not None \
                        and isinstance(alias.asname.name, cst.Name) else dotted(alias.name)
                    if local == name and module:
                        return f"{module}.{dotted(alias.name)}"
    return None


def _declared(project: Project, file: FileModel, fn: FunctionInfo, name: str) -> tuple[ClassInfo, FileModel] | None:
    if name in fn.all_params:
        if name == "self" and own_self(fn) or name == "cls" and fn.class_name is not None:
            return None
        param = next((p for p in (*fn.node.params.posonly_params, *fn.node.params.params,
                                  *fn.node.params.kwonly_params) if p.name.value == name), None)
        if param is None or param.annotation is None:
            return None
        if any(not isinstance(v, (cst.Name, cst.Attribute)) for v in fn.name_assigns.get(name, ())):
            return None  # rebound to something else in the body
        return annotation_class(project, file, fn, param.annotation.annotation)
    annotations = _annotated_locals(fn).get(name)
    if not annotations:
        return None
    unannotated = len(fn.name_assigns.get(name, ())) - sum(1 for a in annotations if a.value is not None)
    if unannotated and any(not isinstance(v, (cst.Name, cst.Attribute)) for v in fn.name_assigns.get(name, ())):
        return None
    classes = [annotation_class(project, file, fn, a.annotation.annotation) for a in annotations]
    if any(c is None for c in classes) or len({(id(c[0]), c[1].path) for c in classes}) != 1:
        return None  # (an annotation naming no project class, or two classes)
    return classes[0]


def annotation_class(project: Project, file: FileModel, fn: FunctionInfo | None,
                     annotation: cst.BaseExpression) -> tuple[ClassInfo, FileModel] | None:
    """The one project class an annotation names (``Optional[...]``, ``X | None``, a string form of either, a
    forward reference to a class defined later in the module, a ``TYPE_CHECKING`` import); else None."""
    found = annotation_classes(project, file, fn, annotation)
    if found is not None:
        return found[0] if len({(id(c), m.path) for c, m in found}) == 1 else None
    inner = _optional_inner(annotation)
    if inner is None:
        return None
    inner = string_annotation(inner)
    text = dotted(inner) if isinstance(inner, (cst.Name, cst.Attribute)) else None
    if text is None:
        return None
    for qualname in (checking_import(file, text), f"{file.module_name}.{text}"):
        sym = project.symbol(qualname, file) if qualname else None
        if sym is not None and isinstance(sym[0], ClassInfo):
            return sym
    return None


def _optional_inner(annotation: cst.BaseExpression) -> cst.BaseExpression | None:
    """The one non-``None`` alternative of an annotation (itself when it is no union):
    :func:`~streamlint.model.devobjects.annotation_alternatives`."""
    parts = annotation_alternatives(annotation)
    return parts[0] if parts is not None and len(parts) == 1 else None


def _annotated_locals(fn: FunctionInfo) -> dict[str, list[cst.AnnAssign]]:
    out: dict[str, list[cst.AnnAssign]] = {}
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name):
            out.setdefault(node.target.value, []).append(node)
    return out





def declared_calls(project: Project, file: FileModel, fn: FunctionInfo) -> tuple[str, str, str] | None:
    """(receiver, method, class) of the first call of ``fn`` whose project method only an annotation names (no
    call target, no construction of the receiver in ``fn``): findings resting on it take the annotation's word
    for the object's class (medium at most)."""
    for site in fn.calls:
        func = site.node.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)) \
                or any(isinstance(v, cst.Call) for v in fn.name_assigns.get(func.value.value, ())) \
                or project.call_target(file, site) is not None:
            continue
        found = declared_method(project, file, fn, func)
        if found is not None and found[0].class_name is not None and not _named_plainly(project, file, fn, func):
            return func.value.value, func.attr.value, found[0].class_name
    return None


def _named_plainly(project: Project, file: FileModel, fn: FunctionInfo, func: cst.Attribute) -> bool:
    """Is ``recv.method`` a method the class a parameter's plain annotation names defines itself (``store:
    GradStore``, ``store: "GradStore"``): the form the analysis has long taken at its word (a call target)?"""
    name = func.value.value
    param = next((p for p in (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params)
                  if p.name.value == name), None)
    if param is None or param.annotation is None or name == "self" \
            or not isinstance(string_annotation(param.annotation.annotation), (cst.Name, cst.Attribute)):
        return False
    found = declared_class(project, file, fn, name)
    return found is not None and func.attr.value in found[0].methods


__all__ = ["annotation_class", "checking_import", "declared_calls", "declared_class", "declared_method",
           "field_annotations", "field_class", "own_self", "typed_holders"]
