"""Device modules the project only holds (issue 16 §3, "streams the way training frameworks hold them").

A training framework often reaches the device's stream API through a handle it never builds where the
code runs: the sharded-training state a post-backward hook is handed (``state.device_handle`` is
``torch.cuda`` / ``torch.npu``, set by the framework), the accelerator module passed to an offload helper
(``accel.stream(copy_stream)``), a member of ``self`` a base class of another package sets. The project
binds no value to it, so :mod:`~streamlint.model.accelerators` cannot resolve it from where it comes from.

It is recognised by what the code calls on it: a receiver whose value the project does not see -- a
parameter (or an attribute chain rooted at one) not annotated with a project class, or ``self.<attr>``
that no method, property or construction of the class binds -- on which the same scope (the function; the
class for a member of ``self``) calls a method only a device module has (``current_stream()``,
``Stream()``, ``default_stream()``: :data:`~streamlint.model.devobjects.UNAMBIGUOUS`). Its other methods
(``stream(s)``, ``Event()``, ``synchronize()``) are then the device-generic API of the same role. A media
reader's ``reader.stream(i)`` or a pool's ``synchronize()`` with nothing unambiguous on the same receiver
stays unknown."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import devfields, devobjects
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project


def held_handle(project: Project, file: FileModel, fn: FunctionInfo | None, recv: cst.BaseExpression) -> bool:
    """Is ``recv`` a device module the project holds without binding it (see the module docstring)?"""
    if fn is None or not isinstance(recv, (cst.Name, cst.Attribute)):
        return False
    chain: list[str] = []
    head: cst.BaseExpression = recv
    while isinstance(head, cst.Attribute):
        chain.append(head.attr.value)
        head = head.value
    if not isinstance(head, cst.Name):
        return False
    if head.value == "self":
        cls = file.classes.get(fn.class_name or "")
        if cls is None or not chain or devfields.member_values(project, file, cls, chain[-1]) is not None:
            return False
        scope = list(cls.methods.values())
    else:
        owner = devobjects.binder(fn, head.value)
        if owner is None or head.value not in owner.all_params or head.value in owner.name_assigns:
            return False
        annotation = devobjects.param_annotation(owner, head.value)
        if annotation is not None and devobjects.annotation_classes(project, file, owner.parent, annotation):
            return False  # a project class: what it binds decides (accelerators' own resolution)
        scope = [fn]
    text = file.code(recv)
    return any(isinstance(site.node.func, cst.Attribute) and site.node.func.attr.value in devobjects.UNAMBIGUOUS
               and file.code(site.node.func.value) == text for method in scope for site in method.calls)


__all__ = ["held_handle"]
