"""Project helpers that copy what they are handed to a device (issue 16 §3, "Tensors in containers and objects").

Trainers and prefetchers move a batch with a helper of their own: ``to_device(batch, device, non_blocking=True)``
whose code is ``return data.to(device, **kw)`` for a tensor and the same structure rebuilt from copies of its parts
for a list, a dict, a NamedTuple or a dataclass (``type(data)(to_device(e, device) for e in data)``,
``{k: to_device(v, device) for k, v in data.items()}``), and hands everything else back as is. Such a helper orders
and switches nothing, so the interpreter does not run it inline, and its result was an opaque value: a batch copied
under ``with torch.cuda.stream(self._copy):`` and handed on (kept in a field for another method, returned) was
never seen as work of that stream.

:func:`device_copy` reads that from the helper's code: every ``return`` of it is a copy of a parameter to a device
(``p.to(...)`` with something other than a dtype, ``p.cuda()`` / ``p.npu()``), a call of another such helper (or of
itself) on a parameter, a structure built only from such calls (a call, a dict / list / tuple display or
comprehension, a local bound only to one), or a parameter itself (a leaf it leaves alone); and at least one
``return`` copies. Its result at a call is then a device value the call produces on the current stream (like a
helper computing a tensor, :mod:`~streamlint.model.flow.computed`). A ``.to(torch.float16)`` is a cast (a kernel on
whatever device the data is), not a copy; a helper with a host target (``.to("cpu")``, ``.cpu()``) is no device copy.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import ClassInfo, string_value
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes

if TYPE_CHECKING:
    from streamlint.model.file import FileModel, FunctionInfo
    from streamlint.model.project import Project

_COPY_METHODS = frozenset({"to", "cuda", "npu", "xpu"})
_DTYPE = re.compile(r"dtype|float|half|bfloat|\bu?int\d|bool|complex|memory_format")
# calls a structure rebuild may make besides the copies: the container's own type, its parts
_STRUCTURE_CALLS = frozenset({"type", "dict", "list", "tuple", "items", "values", "keys", "_asdict", "getattr",
                              "fields", "zip", "enumerate", "range", "len", "default_factory", "_replace"})


def device_copy(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does every ``return`` of ``fn`` hand back a device copy of a parameter (or the parameter, or a structure of
    such copies), at least one of them a copy? Memoised per function."""
    memo = derived(project, "device_copy")
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = False  # (a guard: a cycle through another helper is no evidence)
    values = [r.value for r in fn.returns]
    kinds = [_kind(project, file, fn, v, 0) for v in values] if values and not fn.yields else []
    memo[id(fn)] = bool(kinds) and None not in kinds and "copy" in kinds
    return memo[id(fn)]


def _params(fn: FunctionInfo) -> set[str]:
    return {p for p in fn.all_params if p not in ("self", "cls")}


def _copy_call(file: FileModel, fn: FunctionInfo, e: cst.Call) -> bool:
    """``p.to(device, ...)`` / ``p.cuda()`` on a parameter ``p`` (also a loop name of the structure being rebuilt:
    a comprehension's target), not a cast nor a host copy."""
    func = e.func
    if not (isinstance(func, cst.Attribute) and func.attr.value in _COPY_METHODS and isinstance(func.value, cst.Name)):
        return False
    if func.attr.value != "to":
        return True
    first = next((a.value for a in e.args if a.keyword is None or a.keyword.value == "device"), None)
    if first is None:
        return False
    code = file.code(first)
    sv = string_value(first)
    if sv is not None:
        return sv.split(":")[0] not in ("cpu", "meta")
    return not _DTYPE.search(code) and "cpu" not in code


def _kind(project: Project, file: FileModel, fn: FunctionInfo, e: cst.BaseExpression | None, depth: int) -> str | None:
    """``"copy"`` (a device copy of what ``fn`` was handed, or a structure holding one), ``"leaf"`` (a parameter
    handed back as is), or None (anything else: a computed value, a field, a host copy)."""
    if e is None or depth > 3:
        return None
    if isinstance(e, cst.Name):
        if e.value in _params(fn):
            return "leaf"
        bound = fn.name_assigns.get(e.value) or []
        kinds = [_kind(project, file, fn, v, depth + 1) for v in bound]
        return "copy" if kinds and all(k == "copy" for k in kinds) else None
    if isinstance(e, cst.Call):
        if _copy_call(file, fn, e):
            return "copy" if e.func.value.value in _params(fn) or _loop_name(e, fn) else None
        if _helper_copy(project, file, fn, e):
            return "copy"
    return "copy" if _structure(project, file, fn, e) else None


def _loop_name(e: cst.Call, fn: FunctionInfo) -> bool:
    """The copied name is a comprehension target of the function (an element of the structure it rebuilds)."""
    name = e.func.value.value
    return name not in fn.name_assigns and any(
        isinstance(n, cst.CompFor) and isinstance(n.target, cst.Name) and n.target.value == name
        for n in local_nodes(fn.node.body))


def _helper_copy(project: Project, file: FileModel, fn: FunctionInfo, e: cst.Call) -> bool:
    """A call of ``fn`` itself or of another device-copy helper of the project."""
    site = file.call_site(e)
    found = project.call_target(file, site) if site is not None else None
    if found is None:
        return False
    sym = project.symbol(site.target, file) if site.target else None
    if sym is not None and isinstance(sym[0], ClassInfo):
        return False  # constructing a project object
    return found[0] is fn or device_copy(project, found[1], found[0])


def _structure(project: Project, file: FileModel, fn: FunctionInfo, e: cst.BaseExpression) -> bool:
    """A container rebuilt from device copies: every call inside ``e`` is a copy, a copy helper or a structure
    call (``type(data)(...)``, ``data.items()``), and at least one is a copy."""
    if not isinstance(e, (cst.Call, cst.Dict, cst.List, cst.Tuple, cst.DictComp, cst.ListComp, cst.GeneratorExp,
                          cst.SetComp)):
        return False
    copies = 0
    for node in local_nodes(e):
        if not isinstance(node, cst.Call):
            continue
        if _copy_call(file, fn, node) or _helper_copy(project, file, fn, node):
            copies += 1
            continue
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) \
            else None
        if isinstance(func, cst.Call) and isinstance(func.func, cst.Name) and func.func.value == "type":
            continue  # `type(data)(...)`: the container's own class
        if name not in _STRUCTURE_CALLS:
            return False
    return copies > 0
