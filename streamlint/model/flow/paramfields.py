"""Tensor fields of a caller-given object: ``batch.ids`` where ``batch: Batch`` declares ``ids: torch.Tensor``.

A parameter annotated as a tensor is the caller's data, produced on the caller's current stream (the
convention of eager code): a side stream reading it with no fork is SL201. A parameter annotated with a
project class (a dataclass / record / plain class) whose body declares the field a tensor hands the caller's
tensor just as well, one attribute further: ``def stage(self, batch: DecodeBatch)`` copying ``batch.ids`` on a
copy stream reads what the caller's step put there. The field's storage is then step data (produced on the
current stream before the call, :data:`PARAM_FIELD` its step source; its lifetime is the caller's object's,
so a hand-back of it is the caller's protocol, as for a ``self.*`` field); the race is low:
a declared ``torch.Tensor`` field may hold host memory (sequence lengths kept on the CPU), which nothing here
rules out.

Only a parameter of the analysed function (not a closure cell), read without being rebound, whose annotation
names project classes only, each declaring the field (in its body or a project base's, three levels) with a
tensor annotation (``torch.Tensor``, ``Optional[Tensor]``), and not a field every construction binds to host
memory (:func:`~streamlint.model.flow.hostwrites.host_record_field`); a field of a field (``batch.meta.ids``) is
not followed. The module answers the question; :mod:`~streamlint.model.flow.storage` makes the storage.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.devobjects import object_classes
from streamlint.model.filefacts import ClassInfo
from streamlint.model.flow.hostwrites import host_container_of, host_record_field
from streamlint.model.streams import derived
from streamlint.model.tensoruse import tensor_annotation

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

_KEY = re.compile(r"(\w+)\.(\w+)$")
PARAM_FIELD = "field:"  # prefix of the step source of such a field (the storage's producer is the caller's step)


def param_tensor_field(project: Project, file: FileModel, fn: FunctionInfo, key: str) -> bool:
    """Is ``key`` (``batch.ids``) a field declared a tensor by every project class ``fn``'s parameter ``batch``
    is annotated with (see the module docstring)?"""
    m = _KEY.match(key)
    if m is None or m.group(1) in ("self", "cls") or m.group(1) not in fn.all_params \
            or m.group(1) in fn.name_assigns:
        return False
    memo = derived(project, "param_tensor_fields")
    mkey = (id(fn), key)
    if mkey not in memo:
        classes = object_classes(project, file, fn, cst.Name(m.group(1)))
        memo[mkey] = bool(classes) and all(
            _declared_tensor(project, c, f, m.group(2)) and not host_record_field(project, f, c, m.group(2))
            and not host_container_of(project, f, c, m.group(2)) for c, f in classes)  # (not a pinned host field)
    return memo[mkey]


def _declared_tensor(project: Project, cls: ClassInfo, file: FileModel, field: str, depth: int = 0) -> bool:
    if field in cls.methods:
        return False  # a property or method: what it returns is not a stored field
    for stmt in cls.node.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == field:
                return tensor_annotation(small.annotation.annotation)
    if depth >= 3:
        return False
    for b in cls.bases:
        sym = project.symbol(b, file)
        if sym is not None and isinstance(sym[0], ClassInfo) and _declared_tensor(project, sym[0], sym[1], field,
                                                                                  depth + 1):
            return True
    return False


__all__ = ["PARAM_FIELD", "param_tensor_field"]
