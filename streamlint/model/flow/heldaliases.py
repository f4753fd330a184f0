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


__all__ = ["aliased_field", "aliased_method"]
