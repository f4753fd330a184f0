"""Streams and events: which names hold them (typing), and which stream a scope or tag denotes (identity).

Identity: a stream is named by a *key*. ``MAIN`` is the stream current at function entry;
``tag:<tag>`` is the stream a TorchAir tag maps to (``npu_stream_switch("s")``,
``record_tagged_stream(t, "s")``); ``tag?:<code>`` a tag that is not a literal; otherwise the key of the
stream expression (its source text, or the dataflow's refinement of it). :func:`scope_stream_key` is the
one answer to "which stream does this ``with`` item switch to", :func:`tagged_stream_key` to "which
stream does this tag name"; :func:`stream_label` words a key for messages.

Typing:

A value is a *stream* when it comes from ``torch.npu.Stream()`` / ``torch.cuda.Stream()`` /
``current_stream()`` / ``default_stream()`` (directly, through an alias or a project wrapper that returns
one), an *event* when it comes from ``Event()`` / ``npu_create_tagged_event()`` / ``Stream.record_event()``,
and an *event list* / *stream list* when a ``self.*`` attribute holds a list (or list comprehension) of
those. Used by the dataflow to decide what ``x.record()`` / ``x.wait()`` / ``x.synchronize()`` mean.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.file import CallSite, ClassInfo, FileModel, FunctionInfo, dotted, string_value
from streamlint.model.syntax import class_field_annotation

if TYPE_CHECKING:
    from collections.abc import Callable

    from streamlint.model.project import Project
    from streamlint.model.uses import ApiUse

MAIN = "<main>"  # the stream current at function entry
UNKNOWN_STREAM = "<unknown stream>"
STREAM = "stream"
MAIN_STREAM = "main stream"  # current_stream()/default_stream() captured outside any stream scope
EVENT = "event"
STREAM_LIST = "stream list"
EVENT_LIST = "event list"

_STREAM_ROLES = frozenset({Role.STREAM_NEW, Role.CURRENT_STREAM, Role.DEFAULT_STREAM})
_EVENT_ROLES = frozenset({Role.EVENT_NEW, Role.TAGGED_EVENT_CREATE})


def derived(project: Project, name: str) -> dict:
    """A cache for facts derived from several files. It lives on the project's path index, which the
    engine replaces whenever any file changes (``Engine.set_override``), so it never goes stale."""
    return project.path_index.derived.setdefault(name, {})


def kind_of_call(project: Project, file: FileModel, call: cst.Call, _depth: int = 0) -> str | None:
    """STREAM / EVENT when a call creates or returns a stream or an event, else None."""
    site = file.call_site(call)
    if site is None:
        return None
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "record_event":
        return EVENT
    for use in project.api_uses(file, site):
        if use.role in (Role.CURRENT_STREAM, Role.DEFAULT_STREAM) and _outside_stream_scopes(project, file, site):
            return MAIN_STREAM
        if use.role in _STREAM_ROLES:
            return STREAM
        if use.role in _EVENT_ROLES:
            return EVENT
    if _depth < 3:
        target = project.call_target(file, site)
        if target is not None:
            return returned_kind(project, target[1], target[0], _depth + 1)
    return None


def _outside_stream_scopes(project: Project, file: FileModel, site: CallSite) -> bool:
    return not any(u.role in (Role.STREAM_SWITCH, Role.NATIVE_STREAM_CONTEXT)
                   for scope in project.enclosing_scopes(file, site.scope) for u in scope.uses)


def kind_of_value(project: Project, file: FileModel, value: cst.BaseExpression, _depth: int = 0) -> str | None:
    """Kind of an assigned value: a stream/event constructor, or a list of them."""
    if isinstance(value, cst.Call):
        return kind_of_call(project, file, value, _depth)
    element: cst.BaseExpression | None = None
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        element = value.elt
    elif isinstance(value, (cst.List, cst.Tuple)) and value.elements:
        element = value.elements[0].value
    if isinstance(element, cst.Call):
        inner = kind_of_call(project, file, element, _depth)
        if inner in (STREAM, MAIN_STREAM):
            return STREAM_LIST
        if inner == EVENT:
            return EVENT_LIST
    return None


def returned_kind(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> str | None:
    """STREAM / EVENT when every value a (small) project function returns is one."""
    kinds: set[str | None] = set()
    for ret in fn.returns:
        value = ret.value
        if value is None:
            continue
        if isinstance(value, cst.Name) and value.value in fn.name_assigns:
            kinds |= {kind_of_value(project, file, v, _depth) for v in fn.name_assigns[value.value]}
        else:
            kinds.add(kind_of_value(project, file, value, _depth))
    kinds.discard(None)
    return kinds.pop() if len(kinds) == 1 else None


def annotation_kind(file: FileModel, fn: FunctionInfo | None, annotation: cst.BaseExpression | None) -> str | None:
    """STREAM / EVENT for an annotation naming the Stream / Event class (``x: torch.npu.Event``)."""
    if annotation is None:
        return None
    spec = apis.lookup(file.resolve(annotation, fn))
    if spec is None:
        return None
    if spec.role is Role.STREAM_NEW:
        return STREAM
    if spec.role is Role.EVENT_NEW:
        return EVENT
    return None


def attr_kind(project: Project, file: FileModel, cls: ClassInfo | None, attr: str) -> str | None:
    """Kind of ``self.<attr>`` in a class, from its ``self.<attr> = ...`` / ``Cls.<attr> = ...``
    assignments (any method), else from a class-level field annotation."""
    if cls is None:
        return None
    cache = derived(project, "attr_kinds").setdefault(id(cls), {})
    if attr not in cache:
        cache[attr] = None
        kinds: set[str | None] = set()
        # `self.x = ...`, and class attributes initialised lazily: `Cls.x = ...` / `cls.x = ...`
        targets = {f"self.{attr}", f"{cls.name}.{attr}", f"cls.{attr}"}
        for method in cls.methods.values():
            for assign in method.assigns:
                if assign.target in targets:
                    kinds.add(kind_of_value(project, file, assign.value))
        kinds.discard(None)
        if not kinds:
            kinds.add(annotation_kind(file, None, class_field_annotation(cls.node, attr)))
            kinds.discard(None)
        cache[attr] = kinds.pop() if len(kinds) == 1 else None
    return cache[attr]


def local_kind(project: Project, file: FileModel, fn: FunctionInfo, name: str) -> str | None:
    """Kind of a local name when every assignment to it in the function gives the same kind."""
    values = fn.name_assigns.get(name)
    if not values:
        params = fn.node.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == name and param.annotation is not None:
                return annotation_kind(file, fn.parent, param.annotation.annotation)
        return None
    kinds = {kind_of_value(project, file, v) for v in values}
    return kinds.pop() if len(kinds) == 1 else None


def stream_label(key: str) -> str:
    """Human wording of a stream key."""
    if key == MAIN:
        return "the current stream"
    if key.startswith("tag:"):
        return f'stream "{key[4:]}"'
    if key.startswith("tag?:"):
        return f"the stream tagged {key[5:]}"
    if key.startswith("<stream@"):
        return "a new stream"
    return f"`{key}`"


def tagged_stream_key(tag: str) -> str:
    """The stream a TorchAir stream tag names (``npu_stream_switch(tag)``)."""
    return f"tag:{tag}"


def scope_stream_key(file: FileModel, use: ApiUse, *,
                     constant: Callable[[cst.BaseExpression], str | None] | None = None,
                     stream: Callable[[cst.BaseExpression], str] | None = None) -> str:
    """The key of the stream a stream scope switches to: ``npu_stream_switch(tag)`` (directly or through
    a wrapper, which may fix the tag) → :func:`tagged_stream_key`, or ``tag?:<code>`` when the tag is not
    a literal; ``torch.npu.stream(s)`` → the key of ``s``.

    Without hooks the answer is syntactic (the source text of ``s``). The dataflow passes what it knows
    about values: ``constant(expr)`` — the string a non-literal tag written at the call holds, if any;
    ``stream(expr)`` — the key of the stream object ``s`` evaluates to."""
    if use.role is Role.STREAM_SWITCH:
        expr = use.value("stream_tag")
        tag = string_value(expr) if expr is not None else None
        if tag is None and expr is not None and constant is not None and use.arg("stream_tag") is not None:
            tag = constant(expr)
        if tag is not None:
            return tagged_stream_key(tag)
        return f"tag?:{file.code(expr)}" if expr is not None else "tag?:<unknown>"
    expr = use.arg("stream")
    if expr is None:
        inner = use.receiver_attrs.get("stream")
        if inner is not None and on_self(use) and (dotted(inner) or "").startswith("self."):
            # `with self._stream_ctx():` whose body opens `torch.cuda.stream(self._stream)`: the same object
            return stream(inner) if stream is not None else dotted(inner)
        return UNKNOWN_STREAM
    return stream(expr) if stream is not None else file.code(expr)


def on_self(use: ApiUse) -> bool:
    """The use goes through one wrapper method called on ``self``: ``self.*`` inside it is the caller's."""
    func = use.node.func
    return len(use.wrappers) == 1 and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
        and func.value.value == "self"


__all__ = [
    "MAIN",
    "UNKNOWN_STREAM",
    "scope_stream_key",
    "stream_label",
    "tagged_stream_key",
    "EVENT",
    "EVENT_LIST",
    "MAIN_STREAM",
    "STREAM",
    "STREAM_LIST",
    "annotation_kind",
    "attr_kind",
    "derived",
    "kind_of_call",
    "kind_of_value",
    "local_kind",
    "on_self",
    "returned_kind",
]
