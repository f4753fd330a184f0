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
  ``p`` to the same ``self.<field>``, and nothing swaps either after construction (:func:`stable_field`: the
  class assigns the field only in its ``__init__``, no subclass assigns it, no other receiver does --
  ``runtime._codec.stream = s`` --, a byte-level search over the files naming it).
- :func:`ambient_stream`: the ``self.<attr>`` stream (in the method's own terms) current at EVERY call of a
  method in the project: each call sits in a stream scope on a stable ``self.*`` stream of the caller (through
  a project wrapper too), made on the same object (``self.helper()``, the name unchanged) or on an object
  the caller holds (``self.codec.run()``: translated by :func:`field_alias`), or sits outside every stream
  scope of a caller whose own ambient stream is known (transitively, at most three callers up). Unknown
  (None) when some caller may be unseen: no call site (a public entry), the method's name mentioned anywhere
  not followed by ``(`` (a callback handed by reference, a hook table, a string), a class with a base (a base
  outside the project -- ``nn.Module.__call__`` runs ``forward`` -- or a project base naming the method), a
  dunder, a call written in a lambda or a nested def (run later, by whoever is handed it); and when a field
  is rebound after construction (not one stream), too many sites, a scope on anything but such a field, a
  conditional scope, or callers that disagree. Answers cut by the depth bound or by a cycle in progress are
  not memoised, and a memoised one is refused where its chain of callers would pass the bound (the result does
  not depend on the order of the questions). Two names of one stream reached through other objects
  (``self.runtime.decode_slots[i].compute_stream``, a scope on ``slot.compute_stream``, a held object's field made
  from a constructor argument) are resolved by :mod:`~streamlint.model.flow.provenance`; a method whose name is
  too common to search (``run``) has its calls read from the one field its instances are confined to
  (:mod:`~streamlint.model.flow.confined`).

The interpreter takes the ambient stream for the entry stream (``State.same``: one stream under two names)
unless the object keeps the default stream in a field (the entry stream, MAIN, may then stand for that field,
which is another stream), and a step-state writer method (:mod:`~streamlint.model.stepstate`) that runs on the
very stream of the access is no other stream's write. :func:`runs_under` lowers a race with a field some call
runs the code under only when nothing shows an unseen caller that runs it elsewhere (:func:`_unseen_caller`)
and the constructor does not run it outside every scope."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.fieldfacts import (  # noqa: F401  (stable_field: part of this module's answers)
    MAX_SITES, _assigns, _deferred, _rebound_outside, _referenced, _unseen_base, stable_field)
from streamlint.model.stepstate import step_writers
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.project import Project

MAX_DEPTH = 3  # callers of callers followed for a call made outside every stream scope
_FIELD = re.compile(r"self\.\w+")


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
    if cls is None or not chain.startswith("self.") or chain.count(".") < 2 and "[" not in chain:
        return None
    memo = project.derived("field_alias")
    key = (id(cls), chain)
    if key not in memo:
        from streamlint.model.flow.provenance import self_alias

        memo[key] = None
        memo[key] = (_field_alias(project, file, cls, chain) if chain.count(".") == 2 and "[" not in chain else None) \
            or self_alias(project, file, cls, chain)  # (held through other objects: flow/provenance.py)
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
    if not stable_field(project, file, cls, field) or not stable_field(project, file, cls, f"self.{obj}", True) \
            or _rebound_outside(project, attr):
        return None  # the field (or the held object, or its stream) is swapped after construction, by a
        # subclass or from outside: the held object may keep the old stream
    return field


def plain_scope(project: Project, model: FileModel, site) -> tuple | None:
    """The innermost stream scope around a call site: ``()`` outside every stream scope, ``(stream expression,
    inline)`` for a scope on one stream (``with torch.cuda.stream(e):``, or a project wrapper of it), ``inline``
    when a wrapper may run the block on the current stream instead (``if stream is None: yield``); None for any
    other (a graph capture, a scope choosing among streams). Shared with
    :mod:`~streamlint.model.flow.callerscopes`."""
    for scope in project.enclosing_scopes(model, site.scope):
        use = next((u for u in scope.uses if u.role in apis.STREAM_SCOPE_ROLES), None)
        if use is None:
            if scope.roles() & ({apis.Role.GRAPH_CAPTURE} | apis.NO_BREAK_SCOPE_ROLES):
                return None  # (a capture runs the body on its own capture stream)
            continue  # (another context manager: a timer, no_grad, a lock)
        if use.role is not apis.Role.NATIVE_STREAM_CONTEXT or use.node is not scope.site.item.item:
            return None
        expr = use.arg("stream")
        return None if expr is None else (expr, may_run_inline(project, use))
    return ()


def may_run_inline(project: Project, use) -> bool | str:
    """May the project wrappers a stream scope goes through run the block without entering the stream: a null
    arm (``nullcontext()``), an enabling flag, a guarded forwarding call, a ``yield`` outside the wrapper's
    stream scope? ``NONE_ONLY`` when the one wrapper does so only where its stream argument is None
    (``if stream is None: yield`` / ``else: with torch.cuda.stream(stream): yield``,
    :func:`~streamlint.model.flow.inlinewrappers.none_only`): the block then runs on the current stream exactly
    when there is no stream to enter, as ``torch.cuda.stream(None)`` does."""
    from streamlint.model.flow.inlinewrappers import NONE_ONLY, none_only
    from streamlint.model.syntax import contains

    if use.enabled is not None:
        return True
    guarded = False
    for name in use.wrappers:
        found = project.function(name, use.file)
        spec = project.wrapper(*found) if found is not None else None
        if spec is None or spec.enable_params:
            return True
        fn = found[0]
        calls = {id(v.call) for v in spec.variants if v.call is not None}
        if any(site.guards for site in fn.calls if id(site.node) in calls) or any(
                not any(contains(s.with_node, y) for s in fn.scopes) for y in fn.yields):
            if len(use.wrappers) != 1 or not none_only(fn, spec, calls):
                return True
            guarded = True
    return NONE_ONLY if guarded else False


def _scope_stream(project: Project, model: FileModel, site) -> str | None:
    """``self.<field>`` of the innermost stream scope around a call site; "" outside every stream scope;
    None for a scope on anything else (a parameter, a local, a tag, a conditional scope). A wrapper that runs
    the block inline when the field is None is a scope on it all the same: the method's own scope on that
    same field is then a no-op, and its entry stream is still the one it uses."""
    found = plain_scope(project, model, site)
    if not found:
        return None if found is None else ""
    text = dotted(found[0])
    if text is not None and _FIELD.fullmatch(text):
        return text
    return _held_field(project, model, site, found[0])


def _held_field(project: Project, model: FileModel, site, expr) -> str | None:
    """The caller's ``self.<field>`` a scope on another path denotes (``slot.compute_stream``, the slot one of
    ``self.runtime.decode_slots``): :mod:`~streamlint.model.flow.provenance`."""
    from streamlint.model.flow.provenance import _text, expr_path, self_alias

    caller = site.function
    path = expr_path(expr)
    if path is None or caller is None or caller.class_name is None:
        return None
    return self_alias(project, model, model.classes.get(caller.class_name), _text(*path), caller)


def _unseen_caller(project: Project, file: FileModel, fn: FunctionInfo, key: str) -> bool:
    """Is there positive evidence that ``fn`` also runs where the field ``key`` need not be current: its name
    handed on by reference, a base that may call it, a call deferred in a lambda or a nested def, the field
    rebound after construction, or a default stream kept in a field of the object?"""
    cls = file.classes.get(fn.class_name or "")
    name = fn.node.name.value
    if cls is None or _referenced(project, name, file.path) or _unseen_base(project, file, cls, name) \
            or not stable_field(project, file, cls, key) or _default_field(project, file, cls):
        return True
    return any(site.function is not None and _deferred(project, site.function, site)
               for _model, site in callers_of(project, file, fn) or ())


def _default_field(project: Project, file: FileModel, cls: ClassInfo) -> bool:
    """Does the object keep the default (or the then-current) stream in a field?"""
    from streamlint.model.streams import MAIN_STREAM, attr_kind

    fields = {a.target[5:] for m in cls.methods.values() for a in m.assigns
              if a.target.startswith("self.") and a.target.count(".") == 1 and "[" not in a.target}
    return any(attr_kind(project, file, cls, attr) == MAIN_STREAM for attr in sorted(fields))


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
    attrs = set(_kept_params(held_cls)) | {a.target[5:] for m in held_cls.methods.values() for a in m.assigns
                                           if _FIELD.fullmatch(a.target)} if held_cls is not None else set()
    matches = {f"self.{attr}" for attr in sorted(attrs) if field_alias(project, model, cls, f"{text}.{attr}") == key}
    return matches.pop() if len(matches) == 1 else None


_BUSY = object()


def ambient_stream(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> str | None:
    """``self.<attr>``: the stream of ``fn``'s object current at every project call of ``fn`` (see the
    module docstring), else None. Memoised per project with the length of the chain of callers it rests on,
    so that the answer does not depend on the order of the questions: an answer cut by the depth bound or by
    a cycle still in progress is not kept, and a kept one is refused where its chain would pass the bound."""
    if fn.class_name is None or fn.params[:1] != ("self",) or fn.parent is not None \
            or fn.node.name.value.startswith("__"):
        return None
    return _lookup(project, file, fn, _depth)[0]


def _lookup(project: Project, file: FileModel, fn: FunctionInfo, depth: int) -> tuple[str | None, int]:
    """(ambient stream, height: the longest chain of callers' ambient streams it used)."""
    if fn.class_name is None or fn.params[:1] != ("self",) or fn.parent is not None \
            or fn.node.name.value.startswith("__"):
        return None, 0
    memo = project.derived("ambient_stream")
    cut = project.derived("ambient_cut")
    found = memo.get(id(fn))
    if found is _BUSY or depth > MAX_DEPTH or (found is not None and depth + found[1] > MAX_DEPTH):
        cut["cut"] = True  # (a cycle through the callers, or too deep from here: unknown here, not for good)
        return None, 0
    if found is not None:
        return found
    outer = cut.get("cut", False)
    cut["cut"] = False
    memo[id(fn)] = _BUSY
    found = _ambient(project, file, fn, depth)
    if cut["cut"]:
        del memo[id(fn)]
    else:
        memo[id(fn)] = found
    cut["cut"] = outer or cut["cut"]
    return found


def _ambient(project: Project, file: FileModel, fn: FunctionInfo, depth: int) -> tuple[str | None, int]:
    from streamlint.model.flow.entryctx import _called_near_streams

    from streamlint.model.flow.confined import confined_callers

    name = fn.node.name.value
    cls = file.classes.get(fn.class_name or "")
    if cls is None or _unseen_base(project, file, cls, name):
        return None, 0  # (a base may call it: `nn.Module.__call__` runs `forward`)
    sites = callers_of(project, file, fn) if _called_near_streams(project, name) else None
    if sites and len(sites) <= MAX_SITES and not _referenced(project, name, file.path):
        found = _agreed(project, file, fn, cls, sites, depth)
        if found[0] is not None:
            return found
    # (no caller, a caller whose body names no stream, too many, a mention by reference, callers that disagree
    # -- a common name's calls on other objects --: unless every instance is held in one field of its builder,
    # whose calls are then all of them, flow/confined.py)
    sites = confined_callers(project, file, fn)
    if not sites or len(sites) > MAX_SITES:
        return None, 0
    return _agreed(project, file, fn, cls, sites, depth)


def _agreed(project: Project, file: FileModel, fn: FunctionInfo, cls: ClassInfo, sites: list, depth: int) \
        -> tuple[str | None, int]:
    """(the one ``self.*`` stream of ``fn``'s object current at every call of ``sites``, height) else (None, 0)."""
    found: set[str] = set()
    height = 0
    for model, site in sites:
        caller = site.function
        if caller is None or caller is fn or _deferred(project, caller, site):
            return None, 0  # (a call in a nested def or a lambda runs later, by whoever is handed it)
        key = _scope_stream(project, model, site)
        if key == "":
            key, up = _lookup(project, model, caller, depth + 1)
            height = max(height, up + 1)
        if key is None or not stable_field(project, model, model.classes.get(caller.class_name or ""), key):
            return None, 0  # (a field rebound after construction is not one stream: `self._cur = self._streams[i]`)
        key = _translate(project, model, caller, site.receiver, file, fn, key)
        if key is None or not stable_field(project, file, cls, key):
            return None, 0
        found.add(key)
        if len(found) > 1:
            return None, 0
    return (found.pop(), height) if found else (None, 0)


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
    ambient = ambient_stream(project, file, fn)
    if ambient is None or cls is None or _default_field(project, file, cls):
        return None  # (the object keeps the default stream in a field: MAIN may stand for it, not the entry)
    return ambient


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
        if _unseen_caller(project, file, target, key):
            return None  # (it also runs where that stream need not be current: no lowering)
        sites = callers_of(project, file, target) or []
        for model, site in sites[:MAX_SITES * 2]:
            caller = site.function
            if caller is None or caller is target:
                continue
            current = _scope_stream(project, model, site)
            if current == "" and caller.node.name.value == "__init__" and isinstance(site.receiver, cst.Name) \
                    and site.receiver.value == "self":
                return None  # (run by the constructor outside every scope: not on a stream the object holds)
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


__all__ = ["ambient_evidence", "ambient_stream", "entry_ambient", "field_alias", "may_run_inline", "runs_under", "steps_on"]
