"""Methods called on an untyped parameter, resolved by a name only one project class defines (call graph).

A helper handed a project object without an annotation (``def _unpack(manager, swap, *, prefetch)``) calls
its methods (``swap.launch_h2d(stream)``) where neither the annotation nor a constructor in the function
says which class it is: the call graph had no target, so the stream work the method queues (a host-to-device
copy on a side stream, an event recorded after it) was invisible at the call, and a join the helper then
lost (``current_stream().wait_event(swap.h2d_event)``) ordered nothing the analysis knew of.

The receiver is resolved like a class hierarchy analysis restricted to one candidate, with the duck-typing
evidence of the function itself. All of it is required:

- the receiver is a parameter of the function (not ``self`` / ``cls``, never rebound there) without an
  annotation (an annotation the project cannot resolve names a class outside it);
- the method name is distinctive: not a dunder, two words at least (``launch_h2d``, not ``wait`` / ``step``),
  and no name of the tensor / stream / event / host-handle APIs (``record_stream``, ``wait_event``,
  ``index_select``, ``put_nowait``);
- exactly one ``def`` of that name in the project, a method of a class (a byte scan of at most
  ``MAX_FILES`` files, then their models);
- every attribute the function reads or calls on the receiver is a member of that class (a method, or a
  ``self.*`` field some method of it assigns): the object behaves as that class everywhere it is used here.

Memoised per project and name (the candidate) and per function and receiver (the evidence).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes
from streamlint.model.tensors import tensor_method

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import ClassInfo, FunctionInfo
    from streamlint.model.project import Project

MAX_FILES = 3
_API_NAMES = (apis.STREAM_METHODS | apis.EVENT_METHODS | apis.TENSOR_LIFETIME_METHODS | apis.HOST_CONSUMER_METHODS
              | apis.HOST_SIGNAL_METHODS | apis.HOST_SIGNAL_RECEIVE_METHODS | apis.TRANSFER_ENGINE_SEND_METHODS
              | frozenset({"record_event", "wait_stream", "wait_event", "set_stream", "current_stream", "get_future",
                           "is_completed", "add_done_callback", "named_parameters", "named_buffers", "state_dict",
                           "load_state_dict", "zero_grad", "register_hook", "register_forward_hook"}))


def duck_method(project: Project, file: FileModel, fn: FunctionInfo,
                func: cst.BaseExpression) -> tuple[FunctionInfo, FileModel] | None:
    """The project method ``recv.name(...)`` runs when ``recv`` is an unannotated parameter of ``fn`` and the
    evidence of the module docstring holds; else None."""
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    recv, name = func.value.value, func.attr.value
    if recv in ("self", "cls") or recv not in fn.all_params or recv in fn.name_assigns or not distinctive(name):
        return None
    if any(p.name.value == recv and p.annotation is not None
           for p in (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params)):
        return None
    found = only_definition(project, name)
    if found is None:
        return None
    method, cls, mod = found
    memo = derived(project, "duck_receivers")
    key = (id(fn), recv, id(cls))
    held = memo.get(key)
    if held is None or held[0] is not fn or held[1] is not cls:  # (kept with the answer: ids never reused under it)
        memo[key] = held = (fn, cls, behaves_as(fn, recv, cls))
    return (method, mod) if held[2] else None


def duck_calls(project: Project, file: FileModel, fn: FunctionInfo) -> str | None:
    """The name of the first method ``fn`` calls that only :func:`duck_method` resolves (no call target, no
    annotation; a parameter is no local construction): findings resting on it assume the name resolution (medium)."""
    for site in fn.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and project.call_target(file, site) is None \
                and duck_method(project, file, fn, func) is not None:
            return func.attr.value
    return None


def distinctive(name: str) -> bool:
    words = [w for w in name.split("_") if w]
    return not name.startswith("__") and len(words) >= 2 and name not in _API_NAMES and not tensor_method(name)


def method_definitions(project: Project, name: str) -> list[tuple[FunctionInfo, ClassInfo, FileModel]] | None:
    """Every ``def name(self, ...)`` of the project, each a method of one class (found by a byte search over at
    most :data:`MAX_FILES` files); None when there is none, too many files, or a module function / nested def /
    static method of that name (not one class's method). A module whose summary (``ast``, cached by content) shows
    a top-level ``def name`` answers None without being parsed: its model would hold that module function."""
    memo = derived(project, "duck_definitions")
    if name in memo:
        return memo[name]
    memo[name] = None
    paths = project.paths_containing((f"def {name}(".encode(),))
    if not paths or len(paths) > MAX_FILES:
        return None
    if any((summary := project.summary(path)) is not None and summary.defines_function(name) for path in paths):
        return None  # a module function of that name (below: not one class's method), known without a parse
    found = []
    for path in paths:
        model = project.file(path)
        if model is None:
            return None
        defs = [f for f in model.functions.values() if f.node.name.value == name]
        for f in defs:
            cls = model.classes.get(f.class_name or "") if f.parent is None else None
            if cls is None or cls.methods.get(name) is not f or f.params[:1] != ("self",):
                return None  # a module function, a nested def, a static method: not one class's method
            found.append((f, cls, model))
    memo[name] = found or None
    return memo[name]


def only_definition(project: Project, name: str) -> tuple[FunctionInfo, ClassInfo, FileModel] | None:
    found = method_definitions(project, name)
    return found[0] if found is not None and len(found) == 1 else None


def behaves_as(fn: FunctionInfo, recv: str, cls: ClassInfo) -> bool:
    members = set(cls.methods)
    for m in cls.methods.values():
        members |= {a.target[5:].split(".", 1)[0].split("[", 1)[0] for a in m.assigns if a.target.startswith("self.")}
    used = {n.attr.value for n in local_nodes(fn.node.body) if isinstance(n, cst.Attribute)
            and isinstance(n.value, cst.Name) and n.value.value == recv}
    return bool(used) and used <= members


__all__ = ["duck_calls", "duck_method"]
