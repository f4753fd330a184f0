"""Call sites of a project function (for the caller protocols: forks, current-stream parameters,
recorders): every ``f(...)`` / ``obj.f(...)`` that may run it, and for a constructor the ``Class(...)``
expressions that build its class."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, FunctionInfo
from streamlint.model.options import MAX_CALLER_FILES

if TYPE_CHECKING:
    from streamlint.model.project import Project


def callers_of(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FileModel, object]] | None:
    """Every call site of ``fn`` in the project (``obj.method(...)`` on a receiver the project cannot
    type counts when the method name matches), or None when it has none or may be called in ways that
    cannot be seen (a dunder, a callback)."""
    name = fn.node.name.value
    ctor = name == "__init__" and fn.class_name is not None and "." not in fn.qualname.removesuffix(".__init__")
    if ctor:  # a constructor: its call sites build the class (`Awaitable(bufs, stream)`)
        name = fn.class_name
    elif name.startswith("__") or fn.parent is not None:
        return None
    marker = (f"{name}(".encode(),)
    paths = [path for path in project.all_files() if project.may_contain(path, marker)]
    if len(paths) > MAX_CALLER_FILES:  # a common name (`forward`): too many files to parse; not followed
        return None
    sites = []
    for path in paths:
        # files that only define or mention the name are ruled out by their summary, not parsed
        model = project.file(path) if project.may_call(path, name) else None
        if model is None:
            continue
        for site in model.calls:
            func = site.node.func
            called = func.attr.value if isinstance(func, cst.Attribute) else (
                func.value if isinstance(func, cst.Name) else None)
            if called != name:
                continue
            if ctor:
                sym = project.symbol(site.target, model) if site.target is not None else None
                if sym is not None and getattr(sym[0], "methods", {}).get("__init__") is fn:
                    sites.append((model, site))
                continue
            target = project.call_target(model, site)
            if target is not None:
                if target[0] is fn or (target[0].qualname == fn.qualname
                                       and target[1].module_name == file.module_name):
                    sites.append((model, site))
            elif fn.class_name is not None and isinstance(func, cst.Attribute):
                sites.append((model, site))  # a method called on an object the project cannot type
    return sites or None


__all__ = ["callers_of"]
