"""Project context managers that capture a graph: a class whose ``__enter__`` starts a graph capture.

``torch.cuda.graph`` / ``torch.npu.graph`` are in the API table (Role.GRAPH_CAPTURE) and ``@contextmanager``
helpers around them are wrappers (:mod:`streamlint.model.wrappers`). A capture object with its own
``__enter__`` (a breakable or segmented capture, a capture with warm-up) is neither: ``with cap:`` has no
call to classify. Its ``__enter__`` is read instead (through the ``self`` methods it calls, a few levels
down):

* it enters ``torch.cuda.graph(...)`` (or calls a wrapper of it): the capture synchronises the device at
  entry, exactly as the API does -> ``"sync"``;
* it calls ``<graph>.capture_begin(...)`` itself: capture starts without any synchronisation -> ``"deferred"``.

In both cases the work queued inside the ``with`` is captured: it does not run there, it runs when the
graph is replayed (on the replaying stream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model.apis import Role
from streamlint.model.file import ClassInfo, FileModel, FunctionInfo, ScopeSite
from streamlint.model.streams import derived

if TYPE_CHECKING:
    from streamlint.model.project import Project

_CAPTURE_BEGIN = "capture_begin"  # torch.cuda.CUDAGraph.capture_begin / torch.npu.NPUGraph.capture_begin
_MAX_DEPTH = 3


def capture_kind(project: Project, file: FileModel, site: ScopeSite | None) -> str | None:
    """"sync" / "deferred" when the with-item enters a project capture object (see the module doc)."""
    if site is None:
        return None
    call = _constructor(site)
    cs = file.call_site(call) if call is not None else None
    if cs is None or cs.target is None:
        return None
    found = project.symbol(cs.target, file)
    if found is None or not isinstance(found[0], ClassInfo):
        return None
    cls, mod = found
    memo = derived(project, "capture_kind")
    key = (mod.path, cls.name)
    if key not in memo:
        memo[key] = None  # (recursion guard)
        enter = cls.methods.get("__enter__")
        memo[key] = _enters_capture(project, mod, enter, 0) if enter is not None else None
    return memo[key]


def _constructor(site: ScopeSite) -> cst.Call | None:
    """The call that built the with-item's object: ``with Cap(...):`` or ``cap = Cap(...)`` ... ``with cap:``
    (a local bound once in the function)."""
    item = site.item.item
    if isinstance(item, cst.Call):
        return item
    fn = site.function
    if isinstance(item, cst.Name) and fn is not None:
        values = fn.name_assigns.get(item.value, [])
        if len(values) == 1 and isinstance(values[0], cst.Call):
            return values[0]
    return None


def _enters_capture(project: Project, file: FileModel, fn: FunctionInfo, depth: int) -> str | None:
    found: str | None = None
    for site in fn.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == _CAPTURE_BEGIN:
            found = found or "deferred"
            continue
        if any(u.role is Role.GRAPH_CAPTURE for u in project.api_uses(file, site)):
            return "sync"
        if depth < _MAX_DEPTH and fn.class_name is not None and site.target is not None \
                and site.target.startswith(f"{file.module_name}.{fn.class_name}."):
            target = project.call_target(file, site)
            if target is not None and target[0] is not fn:
                inner = _enters_capture(project, target[1], target[0], depth + 1)
                if inner == "sync":
                    return inner
                found = found or inner
    return found
