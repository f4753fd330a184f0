"""Host buffers kept in a record object (issue 16, [host-tensor-write]).

An offloading optimizer keeps, per parameter, a small record of its host buffers (``@dataclass class Lane:
shadow: Tensor``), built once with a page-locked host tensor (``shadow = torch.empty(p.shape, pin_memory=pin)``;
``lane = Lane(None, shadow, ...)``) and handed to its methods as a parameter (``def _update(self, p, lane: Lane)``).
The host writes ``lane.shadow`` (a host AdamW, ``lane.shadow.copy_(master)``) and a side stream copies it to the
device: no stream produces it, so the host write races with nothing on the device.

:func:`host_record_field` answers it for ``P.F`` read in a function ``fn``: ``P`` is a parameter of ``fn``
annotated with a project class ``C`` (a dataclass whose class body declares ``F``, or a class whose ``__init__``
sets ``self.F`` from its parameter of that name), every construction of ``C`` the project shows (at least one,
in at most ``_MAX_FILES`` files calling it) binds ``F`` to host memory (a host-giving call, a torch factory
without a device or with ``device="cpu"``, or a local of the constructing function every assignment of which is
one), and no file among those (nor ``fn``'s) rebinds ``X.F`` on another object. Anything unseen (an unannotated
parameter, a construction with ``*args``, a field left to its default) leaves the field a device tensor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import ClassInfo, FileModel, FunctionInfo, dotted
from streamlint.model.placement import host_factory, host_source, host_value
from streamlint.model.streams import derived
from streamlint.model.syntax import string_annotation
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.project import Project

_MAX_FILES = 8


def host_record_field(project: Project, file: FileModel, fn: FunctionInfo | None, head: str, attr: str) -> bool:
    """Is ``head.attr`` (``head`` a parameter of ``fn`` typed with a project record class) host memory in every
    object the project builds of that class?"""
    if fn is None or head not in fn.all_params or head in ("self", "cls"):
        return False
    memo = derived(project, "host_record_field")
    key = (id(fn), head, attr)
    if key not in memo:
        memo[key] = False
        found = _annotated_class(project, file, fn, head)
        memo[key] = found is not None and _host_everywhere(project, file, found[0], attr)
    return memo[key]


def _annotated_class(project: Project, file: FileModel, fn: FunctionInfo, name: str) \
        -> tuple[ClassInfo, FileModel] | None:
    params = fn.node.params
    param = next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params)
                  if p.name.value == name), None)
    if param is None or param.annotation is None:
        return None
    annotation = string_annotation(param.annotation.annotation)
    if not isinstance(annotation, (cst.Name, cst.Attribute)):
        return None
    qualname = file.resolve(annotation, fn.parent) or f"{file.module_name}.{dotted(annotation)}"
    sym = project.symbol(qualname, file)
    return (sym[0], sym[1]) if sym is not None and isinstance(sym[0], ClassInfo) else None


def _fields(cls: ClassInfo) -> tuple[str, ...] | None:
    """The constructor's parameters in order, when the field is set from the one of its name: a dataclass's
    declared fields (``shadow: Tensor`` in the class body), or ``__init__``'s parameters."""
    init = cls.methods.get("__init__")
    if init is not None:
        return init.params[1:] + init.kwonly
    if not any((dotted(d.decorator) or dotted(getattr(d.decorator, "func", None)) or "").rsplit(".", 1)[-1]
               == "dataclass" for d in cls.node.decorators):
        return None
    body = cls.node.body.body if isinstance(cls.node.body, cst.IndentedBlock) else []
    out = []
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                        and "ClassVar" not in (dotted(small.annotation.annotation) or ""):
                    out.append(small.target.value)
    return tuple(out)


def _sets_from_param(cls: ClassInfo, attr: str) -> bool:
    """Does the class set ``self.attr`` only from the constructor parameter of that name (a dataclass: never in
    a method at all)?"""
    values = [a.value for m in cls.methods.values() for a in m.assigns if a.target == f"self.{attr}"]
    if "__init__" not in cls.methods:
        return not values
    return bool(values) and all(isinstance(v, cst.Name) and v.value == attr for v in values)


def _host_everywhere(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    fields = _fields(cls)
    if fields is None or attr not in fields or not _sets_from_param(cls, attr):
        return False
    files = project.files_calling(cls.name, limit=_MAX_FILES)
    if not files:
        return False
    init = cls.methods.get("__init__")
    kwonly = init.kwonly if init is not None else ()
    seen = 0
    for model in {id(m): m for m in (*files, file)}.values():
        if any(a.target.endswith(f".{attr}") and not a.target.startswith("self.") for a in model.assigns) \
                or any(a.target.endswith(f".{attr}") and not a.target.startswith("self.")
                       for f in model.iter_functions() for a in f.assigns):
            return False  # (`lane.shadow = x` somewhere: the field is rebound on objects the flow cannot follow)
        for site in model.calls:
            if site.target is None or site.target.rsplit(".", 1)[-1] != cls.name:
                continue
            sym = project.symbol(site.target, model)
            if sym is None or sym[0] is not cls:
                continue
            if site.function is None or any(a.star for a in site.node.args):
                return False
            value = bind_arguments(fields, site.node, kwonly=kwonly).get(attr)
            klass = model.classes.get(site.function.class_name or "") if site.function.class_name else None
            if value is None or not host_source(value, site.function, klass,
                                                value=lambda e, f=site.function, m=model: _host_call(m, f, e)):
                return False
            seen += 1
    return seen > 0


def _host_call(file: FileModel, fn: FunctionInfo, e: cst.BaseExpression) -> bool:
    """A call giving host memory: :func:`~streamlint.model.placement.host_value`, or a torch factory given no
    device (or the host: ``torch.empty(shape, pin_memory=pin)``)."""
    if host_value(e):
        return True
    return isinstance(e, cst.Call) and host_factory(file.resolve(e.func, fn), e)


__all__ = ["host_record_field"]
