"""Bound methods handed as callbacks: a reference to a method is a function, not a tensor.

``stream.launch_host_func(self.storage_manager.finish_read, keys)``, ``fut.add_done_callback(self._release)``:
a call of code the analysis does not read handed ``self.<field>.<method>`` (the field built from a project class, or
declared as one, that defines the method) or ``self.<method>`` (a method of the function's own class) hands over
a function to run later, not device data. Such an argument is no tensor read: it queues no work on the current
stream (an event recorded before that call does not leave work uncovered, a race is not read into it). A
property is a value, not a callback: it does not count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.filefacts import ClassInfo
from streamlint.model.flow.objeffects import typed_receiver

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project


def _plain_method(cls: ClassInfo, name: str) -> bool:
    """Does ``cls`` define ``name`` as a method (not a property)?"""
    method = cls.methods.get(name)
    return method is not None and not any((dotted(d.decorator) or "").endswith(("property", "setter"))
                                          for d in method.node.decorators)


def method_reference(project: Project, file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression) -> bool:
    """Is ``expr`` a bound method of a project class: ``self.<method>`` or ``self.<field>.<method>``?"""
    if not isinstance(expr, cst.Attribute) or fn.class_name is None:
        return False
    own = file.classes.get(fn.class_name)
    if own is None:
        return False
    holder = expr.value
    if isinstance(holder, cst.Name) and holder.value == "self":
        return _plain_method(own, expr.attr.value)
    if not (isinstance(holder, cst.Attribute) and isinstance(holder.value, cst.Name) and holder.value.value == "self"):
        return False
    found = typed_receiver(project, file, fn, holder)
    if found is None and (ctor := _field_constructor(project, file, own, holder.attr.value)) is not None:
        sym = project.symbol(ctor[0], ctor[1])
        found = (sym[0], sym[1]) if sym is not None and isinstance(sym[0], ClassInfo) else None
    return found is not None and _plain_method(found[0], expr.attr.value)


def _field_constructor(project: Project, file: FileModel, cls: ClassInfo, field: str,
                       depth: int = 0) -> tuple[str, FileModel] | None:
    """The class ``self.<field>`` is constructed from (``self.manager = StorageManager(cfg)``) in ``cls`` or in a
    project base class of it (a subclass using its base's field), with the module it is named in."""
    if field in cls.attr_types:
        return cls.attr_types[field], file
    if depth >= 3:
        return None
    for base in cls.bases:
        sym = project.symbol(base, file) if base else None
        if sym is not None and isinstance(sym[0], ClassInfo):
            found = _field_constructor(project, sym[1], sym[0], field, depth + 1)
            if found is not None:
                return found
    return None
