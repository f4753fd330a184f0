"""The stream scopes every project caller enters around a call, and whether they may be a given stream.

Serving code runs a helper object's method from a scheduler that has entered a stream of its own
(``with stream_context(self._compute_stream): ... self.runtime.launch(batch)``). The method queues work on a
stream of its object (``self._compute_stream`` of the runtime) and takes its entry stream for "the caller's
current stream". When the scheduler's stream and the runtime's are one object (the engine hands the runtime's
stream to the scheduler) there is no second stream; when they are not, there is a race. The analysis often
cannot tell: the two are fields of different objects, handed through constructors and factories it does not
resolve (:mod:`~streamlint.model.flow.ambient` and :mod:`~streamlint.model.flow.provenance` prove the equality
when they can). A finding that rests on the two being different is then a guess.

:func:`caller_scopes` answers once per function and stream: for every project call of ``fn`` (directly, or
through callers that call it outside every stream scope and are themselves called so, at most
:data:`~streamlint.model.flow.ambient.MAX_DEPTH` callers up), the innermost stream scope the caller entered
around the call, and what it is to the callee's ``self.<attr>`` stream ``key``:

- ``same``: the same field of the same object, or a held object's field provably built with it
  (:func:`~streamlint.model.flow.ambient.field_alias`);
- ``distinct``: another field of the same object, a held object's field built with another stream, or a stream
  the caller made itself (``side = torch.cuda.Stream()``): a real second stream;
- ``unknown``: any other stream (another object's field, a parameter, a slot's stream): may be ``key``.

The answer is the first call site whose scope is ``same`` or ``unknown`` when EVERY site is one of them and no
site is ``distinct``; None when a call is made outside every scope by a caller with no such callers of its own
(the entry stream may then be the device's default stream, a real second stream), a scope is not a plain
stream scope (a graph capture, a conditional one), a caller may be unseen (no call site, the name handed by
reference, a base class that may call it, a call in a lambda or nested def, a default stream kept in a field of
the object: the entry stream may be that one), or too many sites. A race between the entry stream and ``key``
is then not reported medium or high: whether it is a race depends on a stream identity the analysis cannot
establish (SL201 / SL301 report it ``low`` and say what they assume)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel, FunctionInfo, dotted
from streamlint.model.flow.ambient import _default_field, _writers, ambient_evidence, field_alias
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.fieldfacts import MAX_SITES, _deferred, _referenced, _unseen_base

if TYPE_CHECKING:
    from streamlint.model.project import Project

MAX_DEPTH = 3  # callers of callers followed for a call made outside every stream scope
_FIELD = re.compile(r"self\.\w+")
_BUSY = object()


def _scope_expr(project: Project, model: FileModel, site) -> tuple[str, object] | None:
    """(text, expression) of the stream in the innermost plain stream scope around a call site; ("", None)
    outside every stream scope; None for any other scope (a graph capture, a wrapper choosing its scope)."""
    for scope in project.enclosing_scopes(model, site.scope):
        use = next((u for u in scope.uses if u.role in apis.STREAM_SCOPE_ROLES), None)
        if use is None:
            if scope.roles() & ({apis.Role.GRAPH_CAPTURE} | apis.NO_BREAK_SCOPE_ROLES):
                return None
            continue
        if use.role is not apis.Role.NATIVE_STREAM_CONTEXT:
            return None
        expr = use.arg("stream") if use.node is scope.site.item.item else _wrapper_arg(scope, use)
        if expr is None:
            return None
        return dotted(expr) or "", expr
    return "", None


def _wrapper_arg(scope, use) -> object | None:
    """The stream a project wrapper of the stream scope is entered with (``with stream_context(s):``): the
    wrapper's one positional argument, when the wrapper's own scope is on its parameter (``use.arg``: that
    parameter's name)."""
    call = scope.site.item.item
    inner = use.arg("stream")
    if not isinstance(call, cst.Call) or not isinstance(inner, cst.Name) or len(call.args) != 1 \
            or call.args[0].keyword is not None and call.args[0].keyword.value != inner.value:
        return None
    return call.args[0].value


def _fresh(project: Project, model: FileModel, caller: FunctionInfo, text: str) -> bool:
    """Is ``text`` a local of the caller bound only to streams it makes itself (``side = torch.cuda.Stream()``)?"""
    values = caller.name_assigns.get(text) if text.isidentifier() else None
    if not values:
        return False
    for value in values:
        spec = apis.lookup(model.resolve(value.func, caller)) if isinstance(value, cst.Call) else None
        if spec is None or spec.role is not apis.Role.STREAM_NEW:
            return False
    return True


def _current(project: Project, model: FileModel, caller: FunctionInfo, expr) -> bool:
    from streamlint.model.streams import is_current_stream

    try:
        return bool(is_current_stream(project, model, caller, expr))
    except Exception:  # (a shape the classifier does not expect: not known current)
        return False


def _relation(project: Project, model: FileModel, caller: FunctionInfo, key: str | None, text: str) -> str:
    """What the caller's scope stream ``text`` is to the callee's stream, named ``key`` in the caller's terms
    (a ``self.*`` chain; None when the caller cannot name it)."""
    if _fresh(project, model, caller, text):
        return "distinct"
    if key is None or not _FIELD.fullmatch(text):
        return "unknown"
    if key == text:
        return "same"
    if _FIELD.fullmatch(key):
        return "distinct"  # (two fields of one object: two streams, as flow/ambient.py takes them)
    alias = field_alias(project, model, model.classes.get(caller.class_name or ""), key)
    if alias is None:
        return "unknown"
    return "same" if alias == text else "distinct"


def _in_caller(caller: FunctionInfo, receiver, key: str | None) -> str | None:
    """The callee's stream ``key`` in the terms of a caller calling it on ``receiver``."""
    if key is None or caller.class_name is None:
        return None
    if isinstance(receiver, cst.Name) and receiver.value == "self":
        return key
    text = dotted(receiver) if receiver is not None else None
    if text is not None and _FIELD.fullmatch(text):
        return f"{text}.{key[5:]}"
    return None


def _unseen(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """May ``fn`` be run by a caller the project does not show?"""
    name = fn.node.name.value
    if name.startswith("__") or fn.parent is not None or _referenced(project, name, file.path):
        return True
    cls = file.classes.get(fn.class_name or "")
    return fn.class_name is not None and (cls is None or _unseen_base(project, file, cls, name))


def _sites(project: Project, file: FileModel, fn: FunctionInfo, key: str | None, depth: int) -> tuple | None:
    """(first call site, its scope text) when every call of ``fn`` runs inside a scope that is ``key`` or may be
    (see the module docstring), else None."""
    if depth > MAX_DEPTH or _unseen(project, file, fn):
        return None
    memo = project.derived("caller_scopes")
    cut = project.derived("caller_scopes_cut")
    mkey = (id(fn), key, depth)
    if mkey in memo:
        found = memo[mkey]
        if found is _BUSY:
            cut["cut"] = True  # (a cycle through the callers: unknown here, not for good)
            return None
        return found
    outer = cut.get("cut", False)
    cut["cut"] = False
    memo[mkey] = _BUSY
    found = _compute(project, file, fn, key, depth)
    if cut["cut"]:
        del memo[mkey]  # (an answer cut by a cycle in progress is not kept: the order of the questions does not
        # change the answers)
    else:
        memo[mkey] = found
    cut["cut"] = outer or cut["cut"]
    return found


def _compute(project: Project, file: FileModel, fn: FunctionInfo, key: str | None, depth: int) -> tuple | None:
    sites = callers_of(project, file, fn)
    if not sites or len(sites) > MAX_SITES:
        return None
    first = None
    for model, site in sites:
        caller = site.function
        if caller is None or caller is fn or _deferred(project, caller, site):
            return None
        here = _in_caller(caller, site.receiver, key)
        scope = _scope_expr(project, model, site)
        if scope is None:
            return None
        text, expr = scope
        if text == "" and expr is not None and not _current(project, model, caller, expr):
            text = "<stream>"  # (a scope on an expression with no dotted name: a call's result)
        if text == "":
            up = _sites(project, model, caller, here, depth + 1)
            if up is None:
                return None  # (outside every scope of a caller run where no scope is seen: the default stream)
            first = first or up
            continue
        if _relation(project, model, caller, here, text) == "distinct":
            return None
        first = first or (model, site.node, text)
    return first


def caller_scopes(project: Project, file: FileModel, fn: FunctionInfo, key: str) -> tuple | None:
    """(file model, call node, the caller's scope text) of a call of ``fn`` made inside a stream scope that
    may be ``fn``'s stream ``key`` (``self.<attr>``, or a path through objects it holds:
    ``self.runtime.slots[i].stream``), when every project call is so (module docstring)."""
    if not key.startswith("self.") or fn.class_name is None or fn.params[:1] != ("self",):
        return None
    cls = file.classes.get(fn.class_name)
    if cls is None or _rebound(project, file, cls, "self." + re.split(r"[.\[]", key[5:])[0]):
        return None  # (rebound while the object lives, `self._active = self._lanes[i]` in a step: the name the
        # callers entered and the one used here need not be one stream, and are seen to change)
    if _default_field(project, file, cls):
        return None  # (the object keeps the default stream in a field: the entry stream may stand for it)
    return _sites(project, file, fn, key, 0)


def _rebound(project: Project, file: FileModel, cls, key: str) -> bool:
    """Is the field ``key`` seen to be rebound after construction: by a method of the class other than its
    construction, by a subclass, or on another receiver? (Unlike
    :func:`~streamlint.model.flow.fieldfacts.stable_field`, a class that may set fields by name, ``self.__dict__``,
    is not such evidence: that leaves the identity unknown, not known to change.)"""
    from streamlint.model.accelerators import _subclasses
    from streamlint.model.flow.fieldfacts import _assigns, _construction, _rebound_outside

    return any(not _construction(project, file, cls, m) for m, _ in _assigns(cls, key)) \
        or any(_assigns(sub, key) for sub, _ in _subclasses(project, file, cls)) or _rebound_outside(project, key[5:])


def scoped_evidence(interp, a: str, b: str, field: str | None) -> tuple | None:
    """:func:`caller_scopes` for a race of the function ``interp`` runs between its entry stream and a
    ``self.*`` stream (``a`` / ``b``); for a step's field ``field`` (the earlier side is a write of another
    method of the class, on its callers' current stream), asked of every such writer."""
    from streamlint.model.streams import MAIN

    other = b if a == MAIN else a if b == MAIN else None
    if other is None or not other.startswith("self."):
        return None  # (a stream of the object or one it holds: `self._compute_stream`, `self.runtime.slots[i].stream`)
    project, file = interp.project, interp.file
    targets = (_writers(project, file, interp.fn, field) or None) if field else [interp.fn]
    if not targets:
        return None
    found = None
    for target in targets:
        got = caller_scopes(project, file, target, other)
        if got is None:
            return None
        found = found or got
    return found


def race_evidence(interp, a: str, b: str, field: str | None) -> tuple | None:
    """What a race between the entry stream and a ``self.*`` stream rests on: the call that runs the code on
    that stream itself (:func:`~streamlint.model.flow.ambient.ambient_evidence`, (file model, call node)), else
    the callers' scopes that may be it (:func:`scoped_evidence`, (file model, call node, the caller's scope))."""
    return ambient_evidence(interp, a, b, field) or scoped_evidence(interp, a, b, field)


__all__ = ["caller_scopes", "race_evidence", "scoped_evidence"]
