"""Project helpers that copy what they are handed to a device (issue 16 §3, "Tensors in containers and objects").

Trainers and prefetchers move a batch with a helper of their own: ``to_device(batch, device, non_blocking=True)``
whose code is ``return data.to(device, **kw)`` for a tensor and the same structure rebuilt from copies of its parts
for a list, a dict, a NamedTuple or a dataclass (``type(data)(to_device(e, device) for e in data)``,
``{k: to_device(v, device) for k, v in data.items()}``), and hands everything else back as is. Such a helper orders
and switches nothing, so the interpreter does not run it inline, and its result was an opaque value: a batch copied
under ``with torch.cuda.stream(self._copy):`` and handed on (kept in a field for another method, returned) was
never seen as work of that stream.

:func:`device_copy` reads that from the helper's code: every ``return`` of it is a copy of a parameter to a device
(``p.to(...)`` with something other than a dtype, ``p.cuda()`` / ``p.npu()``) or of host memory the helper makes
itself (``torch.frombuffer(pinned, ...).view(shape).to(dev, non_blocking=nb)``: a weight streamer reading a mapped
or pinned runtime buffer), a call of another such helper (or of
itself) on a parameter, a structure built only from such calls (a call, a dict / list / tuple display or
comprehension, a local bound only to one), or a parameter itself (a leaf it leaves alone); and at least one
``return`` copies. Its result at a call is then a device value the call produces on the current stream (like a
helper computing a tensor, :mod:`~streamlint.model.flow.computed`). A ``.to(torch.float16)`` is a cast (a kernel on
whatever device the data is), not a copy; a helper with a host target (``.to("cpu")``, ``.cpu()``) is no device copy.
A blocking copy (no ``non_blocking``, or ``non_blocking=False``) is none either: from host memory the host waits for
it, and its source is not resolved (as :func:`~streamlint.model.flow.fieldfamilies.blocking_copy` for a copy
written in place). A ``non_blocking`` the helper takes as a parameter (or through ``**kw``) must be passed at the
call (:func:`device_copy_at`): ``to_accel(batch, dev)`` with its default ``non_blocking=False`` copies nothing
asynchronously.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import string_value
from streamlint.model.flow.computed import called_function
from streamlint.model.flow.fieldfamilies import blocking_copy
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes
from streamlint.model.freeing import bound_arguments
from streamlint.model.placement import host_value

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
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
    derived(project, "device_copy_flags")[id(fn)] = set()
    values = [r.value for r in fn.returns]
    kinds = [_kind(project, file, fn, v, 0) for v in values] if values and not fn.yields else []
    memo[id(fn)] = bool(kinds) and None not in kinds and "copy" in kinds
    return memo[id(fn)]


def device_copy_at(project: Project, file: FileModel, fn: FunctionInfo, call: cst.Call) -> bool:
    """:func:`device_copy`, and ``call`` makes its copies non-blocking: every parameter carrying the helper's
    ``non_blocking`` is bound to something other than ``False`` / ``None`` / ``0``, or defaults to a true value."""
    if not device_copy(project, file, fn):
        return False
    flags = derived(project, "device_copy_flags").get(id(fn), set())
    bound = bound_arguments(fn, call)  # (``self`` skipped for a method)
    defaults = {p.name.value: p.default for p in (*fn.node.params.params, *fn.node.params.kwonly_params)}
    for flag in flags:
        value = _keyword(call, "non_blocking") if flag.startswith("**") else bound.get(flag) or defaults.get(flag)
        if value is None or _false(value):
            return False
    return True


def async_copy_element(e: cst.BaseExpression) -> bool:
    """Is ``e`` (a comprehension's element) a non-blocking device copy, ``t.to(dev, non_blocking=True)`` /
    ``t.cuda(non_blocking=True)``: a collection of such copies is one transfer, made together on one stream
    (``{k: t.to(dev, non_blocking=True) for k, t in host.items()}``), not a set of slots used apart."""
    if not (isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in _COPY_METHODS):
        return False
    flag = _keyword(e, "non_blocking")
    return flag is not None and not _false(flag)


def _keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def _false(e: cst.BaseExpression) -> bool:
    return isinstance(e, cst.Name) and e.value in ("False", "None") or isinstance(e, cst.Integer) and e.value == "0"


def _async(fn: FunctionInfo, call: cst.Call, flags: set[str]) -> bool:
    """The copy ``call`` is non-blocking: ``non_blocking=`` a true literal or expression, or a parameter of ``fn``
    (added to ``flags``: the call site must pass it), or ``**kw`` of ``fn`` passed through."""
    value = _keyword(call, "non_blocking")
    if value is None:
        star = next((a.value for a in call.args if a.star == "**"), None)
        if isinstance(star, cst.Name) and fn.node.params.star_kwarg is not None \
                and fn.node.params.star_kwarg.name.value == star.value:
            flags.add(f"**{star.value}")
            return True
        return False
    if _false(value):
        return False
    if isinstance(value, cst.Name) and value.value in _params(fn):
        flags.add(value.value)
    return True


def _passes_flags(project: Project, fn: FunctionInfo, callee: FunctionInfo, call: cst.Call) -> bool:
    """A nested copy helper's call (or ``fn``'s own, recursive) hands on what its ``non_blocking`` parameters
    need: a true value, or a parameter of ``fn`` (then ``fn``'s call sites must pass it)."""
    flags = derived(project, "device_copy_flags")
    mine = flags.setdefault(id(fn), set())
    bound = bound_arguments(callee, call)
    for flag in set(flags.get(id(callee), ())):
        value = _keyword(call, "non_blocking") if flag.startswith("**") else bound.get(flag)
        if value is None and flag.startswith("**"):
            star = next((a.value for a in call.args if a.star == "**"), None)
            if isinstance(star, cst.Name):
                mine.add(f"**{star.value}")
                continue
        if value is None or _false(value):
            return False
        if isinstance(value, cst.Name) and value.value in _params(fn):
            mine.add(value.value)
    return True


def _params(fn: FunctionInfo) -> set[str]:
    return {p for p in fn.all_params if p not in ("self", "cls")}


def _copy_call(project: Project, file: FileModel, fn: FunctionInfo, e: cst.Call) -> bool:
    """``p.to(device, ...)`` / ``p.cuda()`` on a parameter ``p`` (also a loop name of the structure being rebuilt:
    a comprehension's target), not a cast nor a host copy."""
    func = e.func
    if not (isinstance(func, cst.Attribute) and func.attr.value in _COPY_METHODS and isinstance(func.value, cst.Name)):
        return False
    if not _async(fn, e, derived(project, "device_copy_flags").setdefault(id(fn), set())):
        return False  # a blocking copy: the host waits for it (from host memory)
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
        if _copy_call(project, file, fn, e):
            name = e.func.value.value
            return "copy" if name in _params(fn) or _loop_name(e, fn) or _host_local(fn, name) else None
        if _helper_copy(project, file, fn, e):
            return "copy"
    return "copy" if _structure(project, file, fn, e) else None


def _loop_name(e: cst.Call, fn: FunctionInfo) -> bool:
    """The copied name is a comprehension target of the function (an element of the structure it rebuilds)."""
    name = e.func.value.value
    return name not in fn.name_assigns and any(
        isinstance(n, cst.CompFor) and isinstance(n.target, cst.Name) and n.target.value == name
        for n in local_nodes(fn.node.body))


def _host_local(fn: FunctionInfo, name: str) -> bool:
    """``name`` is a local every binding of which is evidently host memory the helper makes itself
    (``host = torch.frombuffer(pin, dtype=dt).view(shape)``, ``torch.from_numpy(arr)``, ``x.pin_memory()``:
    :func:`~streamlint.model.placement.host_value`): its ``.to(device, non_blocking=True)`` is a new device copy,
    a host-to-device transfer the call queues on its current stream."""
    bound = fn.name_assigns.get(name) or []
    return bool(bound) and name not in fn.all_params and all(host_value(v) for v in bound)


def _helper_copy(project: Project, file: FileModel, fn: FunctionInfo, e: cst.Call) -> bool:
    """A call of ``fn`` itself or of another device-copy helper of the project."""
    found = called_function(project, file, e)  # (None for a project object's construction)
    if found is None:
        return False
    return (found[0] is fn or device_copy(project, found[1], found[0])) and _passes_flags(project, fn, found[0], e)


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
        if _copy_call(project, file, fn, node) or _helper_copy(project, file, fn, node):
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


def blocking_write(project: Project, file: FileModel, node: cst.CSTNode | None) -> bool:
    """Does the write statement ``node`` copy to the device blocking, written in place
    (:func:`~streamlint.model.flow.fieldfamilies.blocking_copy`) or through a project helper: a copy helper whose
    ``non_blocking`` the call leaves false (``to_accel(batch, dev)``), or a helper that copies (``.to(`` /
    ``.cuda(``) and never passes ``non_blocking`` (``return obj.to(target)``)? From host memory the host waits for
    such a copy: nothing is left in flight (its source is not resolved, as for the in-place test)."""
    if node is None:
        return False
    if blocking_copy(node):
        return True
    for call in local_nodes(node):
        if not isinstance(call, cst.Call) or _keyword(call, "non_blocking") is not None:
            continue
        site = file.call_site(call)
        found = project.call_target(file, site) if site is not None else None
        if found is None:
            continue
        fn, hfile = found
        text = hfile.code(fn.node)
        if device_copy(project, hfile, fn) and not device_copy_at(project, hfile, fn, call) \
                or re.search(r"\.(?:to|cuda|npu)\(", text) and "non_blocking" not in text:
            return True
    return False
