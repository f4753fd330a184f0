"""Call sites of a project function (for the caller protocols: forks, current-stream parameters,
recorders): every ``f(...)`` / ``obj.f(...)`` that may run it, and for a constructor the ``Class(...)``
expressions that build its class."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, FunctionInfo, dotted
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project


def callers_of(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FileModel, object]] | None:
    """Every call site of ``fn`` in the project (``obj.method(...)`` on a receiver the project cannot
    type counts when the method name matches), or None when it has none or may be called in ways that
    cannot be seen (a dunder, a callback). Memoised per project: the caller protocols ask it for the same
    function per argument, per race and per stream."""
    memo = project.derived("callers_of")
    found = memo.get(id(fn), memo)
    if found is memo:
        found = memo[id(fn)] = _callers_of(project, file, fn)
    return found


def _callers_of(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FileModel, object]] | None:
    name = fn.node.name.value
    ctor = name == "__init__" and fn.class_name is not None and "." not in fn.qualname.removesuffix(".__init__")
    if ctor:  # a constructor: its call sites build the class (`Awaitable(bufs, stream)`)
        name = fn.class_name
    elif name.startswith("__") or fn.parent is not None:
        return None
    marker = (f"{name}(".encode(),)
    paths = project.paths_containing(marker)
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


def calls_after(site) -> Iterator[tuple[cst.Call, str]]:
    """The calls its caller makes after the call ``site`` (in source order, not into the call's own
    arguments), each with the last name of what it calls (``wait_stream``, ``synchronize``)."""
    caller = site.function
    if caller is None:
        return
    seen, stack = False, [caller.node.body]
    while stack:
        node = stack.pop()
        if node is site.node:
            seen = True
            continue
        if seen and isinstance(node, cst.Call):
            # `torch.cuda.current_stream().wait_stream(s)`: a call chain has no dotted name, its last part counts
            name = node.func.attr.value if isinstance(node.func, cst.Attribute) else (dotted(node.func) or "")
            yield node, name.rsplit(".", 1)[-1]
            continue
        stack.extend(reversed(children(node)))


def orders_after(name: str) -> bool:
    """Does a call of this last name wait or synchronise (``wait_stream``, ``ev.wait``, ``synchronize``)?"""
    return "wait" in name or "synchronize" in name
