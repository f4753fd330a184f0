"""The stream an object's methods run on by their callers, and two names of one stream object.

Serving code holds one compute stream on the engine object and runs its whole step under it
(``with torch.cuda.stream(self._compute_stream):``, or a project wrapper of it), calling helper methods of
the same object and of objects it holds. Such a helper's "current stream" IS that field's stream, and an
object built with it (``self._codec = Codec(model, self._compute_stream)``, the codec keeping
``self.stream = stream``) holds the very same stream under another name. Taking these for different
streams reports races between a stream and itself.

- :func:`field_alias`: ``self.obj.attr`` denotes the same object as ``self.<field>`` of the reading class
  when every assignment of ``self.obj`` in that class builds a project class whose ``__init__`` keeps the
  parameter ``p`` as ``self.attr`` (nothing else of the class assigns it), every such construction binds
  ``p`` to the same ``self.<field>``, and the class assigns that field only in its ``__init__`` (not
  swapped later: the held object would keep the old one).
- :func:`ambient_stream`: the ``self.<attr>`` stream (in the method's own terms) current at EVERY call of a
  method in the project: each call sits in a stream scope on a ``self.*`` stream of the caller (through a
  project wrapper too), made on the same object (``self.helper()``, the name unchanged) or on an object
  the caller holds (``self.codec.run()``: translated by :func:`field_alias`), or sits outside every stream
  scope of a caller whose own ambient stream is known (transitively, depth-bounded). Unknown (None) when
  some caller is unseen: no call site (a public entry), the method's name mentioned other than as a call
  (a callback handed by reference, a hook table), too many sites, a scope on anything but such a field, a
  conditional scope (``ctx if flag else nullcontext()``), or callers that disagree.

The interpreter takes the ambient stream for the entry stream (``State.same``: one stream under two names),
and a step-state writer method (:mod:`~streamlint.model.stepstate`) that runs on the very stream of the
access is no other stream's write."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import ClassInfo, FileModel, FunctionInfo, dotted
from streamlint.model.flow.callers import callers_of
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.stepstate import step_writers
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.project import Project

MAX_DEPTH = 3  # callers of callers followed for a call made outside every stream scope
MAX_SITES = 12
_FIELD = re.compile(r"self\.\w+")


def _assigns(cls: ClassInfo, target: str) -> list[tuple[FunctionInfo, cst.BaseExpression]]:
    return [(m, a.value) for m in cls.methods.values() for a in m.assigns if a.target == target]


def _kept_params(cls: ClassInfo) -> dict[str, str]:
    """attr -> the ``__init__`` parameter the class keeps as ``self.attr`` and assigns nowhere else."""
    ctor = cls.methods.get("__init__")
    if ctor is None or ctor.params[:1] != ("self",):
        return {}
    out: dict[str, str] = {}
    for a in ctor.assigns:
        if a.target.startswith("self.") and a.target.count(".") == 1 and isinstance(a.value, cst.Name) \
                and a.value.value in ctor.all_params and a.value.value not in ctor.name_assigns:
            out[a.target[5:]] = a.value.value
    return {attr: p for attr, p in out.items() if attr not in cls.methods
            and len(_assigns(cls, f"self.{attr}")) == 1}


def field_alias(project: Project, file: FileModel, cls: ClassInfo | None, chain: str) -> str | None:
    """``self.<field>`` of ``cls`` that the stream expression ``chain`` (``self.obj.attr``) provably denotes
    (see the module docstring), else None. Memoised per project and class."""
    if cls is None or chain.count(".") != 2 or not chain.startswith("self.") or "[" in chain:
        return None
    memo = project.derived("field_alias")
    key = (id(cls), chain)
    if key not in memo:
        memo[key] = None
        memo[key] = _field_alias(project, file, cls, chain)
    return memo[key]


def _held_class(project: Project, file: FileModel, call: cst.BaseExpression) -> ClassInfo | None:
    if not isinstance(call, cst.Call):
        return None
    site = file.call_site(call)
    sym = project.symbol(site.target, file) if site is not None and site.target is not None else None
    return sym[0] if sym is not None and isinstance(sym[0], ClassInfo) else None


def _field_alias(project: Project, file: FileModel, cls: ClassInfo, chain: str) -> str | None:
    _, obj, attr = chain.split(".")
    built = _assigns(cls, f"self.{obj}")
    if not built:
        return None
    found: set[str] = set()
    for _method, value in built:
        held = _held_class(project, file, value)
        if held is None:
            return None  # (`self.obj = obj` handed in, a factory's result: what it holds is not seen here)
        p = _kept_params(held).get(attr)
        ctor = held.methods.get("__init__")
        if p is None or ctor is None:
            return None
        arg = bind_arguments(ctor.params[1:] + ctor.kwonly, value, kwonly=ctor.kwonly).get(p)
        text = dotted(arg) if arg is not None else None
        if text is None or not _FIELD.fullmatch(text):
            return None
        found.add(text)
    if len(found) != 1:
        return None
    field = found.pop()
    if any(m.node.name.value != "__init__" for m, _ in _assigns(cls, field)):
        return None  # the field is swapped after construction: the held object may keep the old stream
    return field


def _scope_stream(project: Project, model: FileModel, site) -> str | None:
    """``self.<field>`` of the innermost stream scope around a call site; "" outside every stream scope;
    None for a scope on anything else (a parameter, a local, a tag, a conditional scope)."""
    for scope in project.enclosing_scopes(model, site.scope):
        use = next((u for u in scope.uses if u.role in apis.STREAM_SCOPE_ROLES), None)
        if use is None:
            if scope.roles() & ({apis.Role.GRAPH_CAPTURE} | apis.NO_BREAK_SCOPE_ROLES):
                return None  # (a capture runs the body on its own capture stream)
            continue  # (another context manager: a timer, no_grad, a lock)
        if use.role is not apis.Role.NATIVE_STREAM_CONTEXT or use.node is not scope.site.item.item:
            return None
        expr = use.arg("stream")
        text = dotted(expr) if expr is not None else None
        return text if text is not None and _FIELD.fullmatch(text) else None
    return ""


_REF = r"(?<![\w]){name}\b(?!\s*\()"


def _referenced(project: Project, name: str) -> bool:
    """Is the method's name mentioned in the project other than by a call or its ``def`` (a callback handed
    by reference, ``hooks.post = self._post``, a name in a table)? Byte level over the files naming it."""
    paths = project.paths_containing((name.encode(),))
    if not paths or len(paths) > MAX_CALLER_FILES:
        return True
    ref = re.compile(_REF.format(name=re.escape(name)).encode())
    defn = re.compile(rb"def\s+" + re.escape(name).encode() + rb"\b")
    for path in paths:
        data = project.file_bytes(path) or b""
        if len(ref.findall(data)) > len(defn.findall(data)):
            return True
    return False


def _translate(project: Project, model: FileModel, caller: FunctionInfo, receiver, file: FileModel,
               fn: FunctionInfo, key: str) -> str | None:
    """The caller's ``self.<field>`` stream ``key`` in the terms of ``fn`` called on ``receiver``."""
    if isinstance(receiver, cst.Name) and receiver.value == "self":
        return key
    text = dotted(receiver) if receiver is not None else None
    if text is None or not _FIELD.fullmatch(text) or caller.class_name is None:
        return None
    cls = model.classes.get(caller.class_name)
    held_cls = file.classes.get(fn.class_name or "")
    matches = {f"self.{attr}" for attr in (_kept_params(held_cls) if held_cls is not None else {})
               if field_alias(project, model, cls, f"{text}.{attr}") == key}
    return matches.pop() if len(matches) == 1 else None


def ambient_stream(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> str | None:
    """``self.<attr>``: the stream of ``fn``'s object current at every project call of ``fn`` (see the
    module docstring), else None. Memoised per project."""
    if fn.class_name is None or fn.params[:1] != ("self",) or fn.parent is not None \
            or fn.node.name.value.startswith("__") or _depth > MAX_DEPTH:
        return None
    memo = project.derived("ambient_stream")
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = None  # (in progress: a cycle through the callers answers None)
    found = _ambient(project, file, fn, _depth)
    memo[id(fn)] = found
    return found


def _ambient(project: Project, file: FileModel, fn: FunctionInfo, depth: int) -> str | None:
    from streamlint.model.flow.entryctx import _called_near_streams

    if not _called_near_streams(project, fn.node.name.value):
        return None  # (some caller's body names no stream: a byte-level test before any caller is parsed)
    sites = callers_of(project, file, fn)
    if not sites or len(sites) > MAX_SITES or _referenced(project, fn.node.name.value):
        return None
    found: set[str] = set()
    for model, site in sites:
        caller = site.function
        if caller is None or caller is fn:
            return None
        key = _scope_stream(project, model, site)
        if key == "":
            key = ambient_stream(project, model, caller, depth + 1)
        if key is None:
            return None
        key = _translate(project, model, caller, site.receiver, file, fn, key)
        if key is None:
            return None
        found.add(key)
        if len(found) > 1:
            return None
    return found.pop() if found else None


def entry_ambient(project: Project, file: FileModel, fn: FunctionInfo) -> str | None:
    """:func:`ambient_stream` for a function about to be interpreted, asked only when its entry stream can meet a
    named stream: it opens a ``with`` itself, or calls a method of its own object that does (the callers are not
    searched for every function of a project)."""
    if fn.class_name is None:
        return None
    cls = file.classes.get(fn.class_name)
    if not fn.scopes and not any(site.receiver is not None and isinstance(site.receiver, cst.Name)
                                 and site.receiver.value == "self" and cls is not None
                                 and (m := cls.methods.get(site.method or "")) is not None and m.scopes
                                 for site in fn.calls):
        return None
    return ambient_stream(project, file, fn)


def _writers(project: Project, file: FileModel, fn: FunctionInfo, key: str | None) -> list[FunctionInfo] | None:
    """The methods of ``fn``'s class other than ``fn`` that rewrite the field ``key`` every step
    (:func:`~streamlint.model.stepstate.step_writers`); None when one is not a method of the class itself."""
    cls = file.classes.get(fn.class_name or "")
    if cls is None or not key:
        return None
    own = fn.node.name.value
    names = {m for path, where in step_writers(project, file, cls).items()
             if path == key or path.startswith((key + ".", key + "[")) or key.startswith((path + ".", path + "["))
             for m, _node in where if m != own}
    methods = [cls.methods.get(name) for name in sorted(names)]
    return None if None in methods else methods  # (a base class's writer: not followed)


def steps_on(project: Project, file: FileModel, fn: FunctionInfo, key: str | None, stream: str,
             same: dict[str, str]) -> bool:
    """Do all the methods of ``fn``'s class that rewrite the field ``key`` every step (other than ``fn``) run
    on ``stream`` (their ambient stream is that stream, under its name or one the state takes for it)? Their
    writes are then ordered before this access on that same stream."""
    methods = _writers(project, file, fn, key)
    if not methods:
        return False
    for method in methods:
        ambient = ambient_stream(project, file, method)
        if ambient is None or same.get(ambient, ambient) != stream:
            return False
    return True


def runs_under(project: Project, file: FileModel, fn: FunctionInfo, key: str, field: str | None = None) \
        -> tuple | None:
    """(file model, call node) of a project call of ``fn`` -- or, for a step's field ``field``, of a method of
    its class rewriting it -- made with the ``self.*`` stream ``key`` (in ``fn``'s terms) current: evidence
    that the code runs on that stream itself, when :func:`ambient_stream` cannot prove it for every call (a
    race between the entry stream and ``key`` then rests on the calls not seen). None when no such call is
    found, or when some call is seen to run it with another named stream current."""
    if not _FIELD.fullmatch(key):
        return None
    targets = [fn] + ((_writers(project, file, fn, field) or []) if field else [])
    found: tuple | None = None
    for target in targets:
        if target.class_name is None or target.params[:1] != ("self",) or target.parent is not None:
            continue
        sites = callers_of(project, file, target) or []
        for model, site in sites[:MAX_SITES * 2]:
            caller = site.function
            if caller is None or caller is target:
                continue
            current = _scope_stream(project, model, site)
            if current == "":
                current = ambient_stream(project, model, caller)
            if not current:
                continue
            if _translate(project, model, caller, site.receiver, file, target, current) == key:
                found = found or (model, site.node)
            elif _known_other(project, model, caller, site.receiver, key, current):
                return None  # a call runs it with another stream current: no doubt it is a second stream there
    return found


def _known_other(project: Project, model: FileModel, caller: FunctionInfo, receiver, key: str, current: str) -> bool:
    """Is the callee's stream ``key`` (``self.<attr>``) at this call a named stream of the caller other than the
    one it has current (``current``): the same object's other field, or a held object's field built with another?"""
    if isinstance(receiver, cst.Name) and receiver.value == "self":
        return key != current
    text = dotted(receiver) if receiver is not None else None
    if text is None or not _FIELD.fullmatch(text) or caller.class_name is None:
        return False
    alias = field_alias(project, model, model.classes.get(caller.class_name), f"{text}.{key[5:]}")
    return alias is not None and alias != current


def ambient_evidence(interp, a: str, b: str, field: str | None) -> tuple | None:
    """:func:`runs_under` for a race of the function ``interp`` runs (its streams named in that function's
    terms, also inside an inlined helper) between its entry stream and a ``self.*`` stream (``a`` / ``b``;
    ``field``: the step field the earlier side wrote)."""
    from streamlint.model.streams import MAIN

    other = b if a == MAIN else a if b == MAIN else None
    if other is None:
        return None
    return runs_under(interp.project, interp.file, interp.fn, other, field)


__all__ = ["ambient_evidence", "ambient_stream", "entry_ambient", "field_alias", "runs_under", "steps_on"]
