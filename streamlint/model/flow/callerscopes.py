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
- ``distinct``: both made only by stream constructor calls, different ones (:func:`_births`: a field of the
  caller's object, an element of a list field of fresh streams ``self._lanes[i]``, and the callee's own field);
  a stream the caller made itself (a local, or inline in the ``with``); another field of the same object or an
  element of one; a held object's field built with another stream: a real second stream;
- ``unknown``: any other stream (another object's field with no construction seen, a parameter, a getter's
  result): may be ``key``.

The answer is the first call site whose scope is ``same`` or ``unknown`` when EVERY site is one of them and no
site is ``distinct``; None when a call is made outside every scope by a caller with no such callers of its own
(the entry stream may then be the device's default stream, a real second stream), a scope is not a plain
stream scope (a graph capture, a project wrapper that may run its block on the current stream:
:func:`~streamlint.model.flow.ambient.plain_scope`), a caller may be unseen (no call site, the name handed by
reference, a base class that may call it, a call in a lambda or nested def, a default stream kept in a field of
the object: the entry stream may be that one), or too many sites. A race between the entry stream and ``key``
is then not reported medium or high: whether it is a race depends on a stream identity the analysis cannot
establish (SL201 / SL301 report it ``low`` and say what they assume). The calls read are the project's calls by
name, less those on a parameter every caller binds to another class (:mod:`~streamlint.model.flow.receivers`), plus
the calls through a hook record the method was handed into (:mod:`~streamlint.model.flow.hookfields`; the record is
their receiver, so the callee's stream has no name there: a scope may be it, never the very field)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.syntax import descendants, node_code
from streamlint.model.flow.ambient import _default_field, _writers, ambient_evidence, field_alias, plain_scope
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.fieldfacts import MAX_SITES, _deferred, _referenced, _unseen_base
from streamlint.model.flow.hookfields import hook_sites
from streamlint.model.flow.inlinewrappers import NONE_ONLY, may_hold_none
from streamlint.model.flow.receivers import foreign_receiver

if TYPE_CHECKING:
    from streamlint.model.project import Project

MAX_DEPTH = 3  # callers of callers followed for a call made outside every stream scope
_FIELD = re.compile(r"self\.\w+")
_BUSY = object()


def _scope_expr(project: Project, model: FileModel, site) -> tuple[str, object, bool] | None:
    """(source text, expression, whether a wrapper may run the block on the current stream instead) of the stream
    in the innermost stream scope around a call site (:func:`~streamlint.model.flow.ambient.plain_scope`);
    ("", None, False) outside every stream scope or in a scope on the current stream; None for any other scope."""
    found = plain_scope(project, model, site)
    if not found:
        return None if found is None else ("", None, False)
    expr, inline = found
    if site.function is not None and _current(project, model, site.function, expr):
        return "", None, False
    return dotted(expr) or node_code(expr), expr, inline


def _new(model: FileModel, fn: FunctionInfo, value) -> bool:
    """Is ``value`` a call of a stream constructor (``torch.cuda.Stream(device=d)``)?"""
    spec = apis.lookup(model.resolve(value.func, fn)) if isinstance(value, cst.Call) else None
    return spec is not None and spec.role is apis.Role.STREAM_NEW


def _made(model: FileModel, fn: FunctionInfo, value, element: bool) -> frozenset | None:
    """The constructor calls ``value`` (or, ``element``, each element of the list it builds) comes from, else None."""
    if not element:
        return frozenset((value,)) if _new(model, fn, value) else None
    if isinstance(value, (cst.List, cst.Tuple)) and value.elements and all(
            isinstance(e, cst.Element) and _new(model, fn, e.value) for e in value.elements):
        return frozenset(e.value for e in value.elements)
    if isinstance(value, cst.ListComp) and _new(model, fn, value.elt):
        return frozenset((value.elt,))
    return None


_MUTATORS = frozenset({"append", "extend", "insert", "__setitem__"})


def _field_births(project: Project, model: FileModel, cls, field: str, element: bool) -> frozenset | None:
    """The constructor calls every value of ``self.<field>`` of ``cls`` comes from (``element``: of each element
    of the list it holds), when it is only ever bound to fresh streams, in the class, never in a subclass or on
    another receiver, and the list is never changed in place; else None."""
    from streamlint.model.accelerators import direct_subclasses
    from streamlint.model.flow.fieldfacts import _assigns, _rebound_outside

    built = _assigns(cls, field) if cls is not None else None
    if not built or _rebound_outside(project, field[5:]) or any(
            _assigns(sub, field) for sub, _ in direct_subclasses(project, model, cls)):
        return None
    found: frozenset = frozenset()
    for method, value in built:
        made = _made(model, method, value, element)
        if made is None:
            return None
        found |= made
    if element and _changed(cls.node, field):
        return None
    return found


def _changed(node, field: str) -> bool:
    """Is the list ``self.<field>`` changed in place in ``node`` (``append``, an item assigned)?"""
    for sub in descendants(node):
        if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Attribute) and sub.func.attr.value in _MUTATORS \
                and dotted(sub.func.value) == field:
            return True
        targets = [t.target for t in sub.targets] if isinstance(sub, cst.Assign) else \
            [sub.target] if isinstance(sub, (cst.AugAssign, cst.AnnAssign)) else []
        if any(isinstance(t, cst.Subscript) and dotted(t.value) == field for t in targets):
            return True
    return False


def _births(project: Project, model: FileModel, caller: FunctionInfo, expr) -> frozenset | None:
    """The stream constructor calls the caller's scope stream ``expr`` comes from: made inline
    (``with stream(torch.cuda.Stream()):``), a local bound only to such calls, a field of the caller's object
    only ever bound to them or an element of a list field of them (``self._lanes[i]``); None when unknown (a
    parameter, a getter's result, another object's field)."""
    if expr is None:
        return None
    if isinstance(expr, cst.Call):
        return _made(model, caller, expr, False)
    if isinstance(expr, cst.Name):
        values = caller.name_assigns.get(expr.value)
        if not values or expr.value in caller.all_params:
            return None
        found: frozenset = frozenset()
        for value in values:
            made = _made(model, caller, value, False)
            if made is None:
                return None
            found |= made
        return found
    element = isinstance(expr, cst.Subscript)
    text = dotted(expr.value if element else expr)
    if text is None or not _FIELD.fullmatch(text) or caller.class_name is None:
        return None
    return _field_births(project, model, model.classes.get(caller.class_name), text, element)


def _current(project: Project, model: FileModel, caller: FunctionInfo, expr) -> bool:
    from streamlint.model.streams import is_current_stream

    try:
        return bool(is_current_stream(project, model, caller, expr))
    except Exception:  # (a shape the classifier does not expect: not known current)
        return False


def _relation(project: Project, model: FileModel, caller: FunctionInfo, key: str | None, text: str, expr,
              births: frozenset | None) -> str:
    """What the caller's scope stream ``expr`` (source ``text``) is to the callee's stream, named ``key`` in the
    caller's terms (a ``self.*`` chain; None when the caller cannot name it) and made by the constructor calls
    ``births`` (None when unknown)."""
    if key is not None and key == text:
        return "same"
    made = _births(project, model, caller, expr)
    if made is not None and (births is not None and not made & births or not isinstance(expr, cst.Attribute)
                             and not isinstance(expr, cst.Subscript)):
        return "distinct"  # (two streams from different constructor calls; a stream the caller made itself)
    if key is None:
        return "unknown"
    base = dotted(expr.value) if isinstance(expr, cst.Subscript) else text
    if base is not None and _FIELD.fullmatch(base) and _FIELD.fullmatch(key):
        return "distinct"  # (two fields of one object, or an element of another field: two streams, as
        # flow/ambient.py takes them)
    if not _FIELD.fullmatch(text):
        return "unknown"
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
    if name.startswith("__") or fn.parent is not None:
        return True
    if _referenced(project, name, file.path) and hook_sites(project, file, fn) is None:
        return True  # (handed by reference, and not only into project hook records whose calls are all seen)
    cls = file.classes.get(fn.class_name or "")
    return fn.class_name is not None and (cls is None or _unseen_base(project, file, cls, name))


def _sites(project: Project, file: FileModel, fn: FunctionInfo, key: str | None, depth: int,
           births: frozenset | None, nullable: bool = False) -> tuple | None:
    """(first call site, its scope text) when every call of ``fn`` runs inside a scope that is ``key`` or may be
    (see the module docstring), else None."""
    if depth > MAX_DEPTH or _unseen(project, file, fn):
        return None
    memo = project.derived("caller_scopes")
    cut = project.derived("caller_scopes_cut")
    mkey = (id(fn), key, depth, births, nullable)
    if mkey in memo:
        found = memo[mkey]
        if found is _BUSY:
            cut["cut"] = True  # (a cycle through the callers: unknown here, not for good)
            return None
        return found
    outer = cut.get("cut", False)
    cut["cut"] = False
    memo[mkey] = _BUSY
    found = _compute(project, file, fn, key, depth, births, nullable)
    if cut["cut"]:
        del memo[mkey]  # (an answer cut by a cycle in progress is not kept: the order of the questions does not
        # change the answers)
    else:
        memo[mkey] = found
    cut["cut"] = outer or cut["cut"]
    return found


def _compute(project: Project, file: FileModel, fn: FunctionInfo, key: str | None, depth: int,
             births: frozenset | None, nullable: bool) -> tuple | None:
    hooked = hook_sites(project, file, fn) or []
    sites = [(model, site) for model, site in callers_of(project, file, fn) or []
             if not foreign_receiver(project, model, site, fn)] + hooked  # (flow/receivers.py)
    if not sites or len(sites) > MAX_SITES:
        return None
    first = None
    for model, site in sites:
        caller = site.function
        if caller is None or caller is fn or _deferred(project, caller, site):
            return None
        here = None if any(site is s for _m, s in hooked) else _in_caller(caller, site.receiver, key)
        # (a call through a hook record: its receiver is the record, the callee's streams have no name there)
        scope = _scope_expr(project, model, site)
        if scope is None:
            return None
        text, expr, inline = scope
        if text == "":
            up = _sites(project, model, caller, here, depth + 1, births, nullable)
            if up is None:
                return None  # (outside every scope of a caller run where no scope is seen: the default stream)
            first = first or up
            continue
        relation = _relation(project, model, caller, here, text, expr, births)
        if relation == "distinct" or inline and relation != "same" and not (
                inline == NONE_ONLY and relation == "unknown" and nullable):
            return None  # (a wrapper that may run the block inline leaves the caller's current stream: another
            # stream unless the scope is the very field, None for both then; or unless it runs inline only where
            # its argument is None and the callee's stream may be None too: if the two are one object, both are
            # None together, flow/inlinewrappers.py)
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
    births = _field_births(project, file, cls, key, False) if _FIELD.fullmatch(key) else None
    return _sites(project, file, fn, key, 0, births, may_hold_none(project, file, cls, key))


def param_caller_scopes(project: Project, file: FileModel, fn: FunctionInfo, key: str) -> tuple | None:
    """:func:`caller_scopes` for a stream reached through a parameter of ``fn`` (``slot.compute_stream``, a decode
    slot handed in): (file model, call node, the caller's scope text) when every project call of ``fn`` runs inside
    a stream scope of its caller (through callers that call it outside every scope, as for a field) that is not
    evidently another stream (one the caller made itself). The parameter's stream has no name in the caller's terms
    here: a scope on a stream handed to the caller may be it (the slot built with the runtime's stream, the
    scheduler handed that stream and entering it), so a race between the entry stream and ``key`` rests on a stream
    identity the analysis cannot establish. None (the race keeps its confidence) when the parameter is rebound in
    ``fn``, a caller may be unseen, a call is made outside every scope, or a caller's scope is on a stream it or its
    object made (a constructor call inline, in a local, in a field only ever bound to new streams): that the handed
    object holds that very stream is not seen."""
    from streamlint.model.flow.handlestreams import rebound

    root = re.match(r"[A-Za-z_]\w*", key)
    if root is None or root.group(0) in ("self", "cls") or key[root.end():root.end() + 1] not in (".", "[") \
            or root.group(0) not in fn.all_params or root.group(0) in rebound(fn):
        return None
    if fn.class_name is not None:
        cls = file.classes.get(fn.class_name)
        if cls is None or _default_field(project, file, cls):
            return None  # (the object keeps the default stream in a field: the entry stream may stand for it)
    return _sites(project, file, fn, None, 0, frozenset(), _none_only_scope(project, file, fn, key))
    # (no births of the handed object's stream are known: a scope on a stream the caller's object made itself, or
    # one made inline or in a local, is another one unless the handed object was built with it, which is not seen)


def _none_only_scope(project: Project, file: FileModel, fn: FunctionInfo, key: str) -> bool:
    """Does ``fn`` enter ``key`` through a wrapper that runs its block inline only where its stream is None
    (``with stream_context(slot.compute_stream):``)? Then ``key`` may be None, and a caller's scope through such a
    wrapper may be inline for the same reason (one object, None in both)."""
    from streamlint.model.flow.ambient import may_run_inline

    for site in file.scopes:
        if site.function is not fn:
            continue
        scope = next(iter(project.enclosing_scopes(file, site)), None)
        use = next((u for u in scope.uses if u.role in apis.STREAM_SCOPE_ROLES), None) if scope is not None else None
        expr = use.arg("stream") if use is not None else None
        if expr is not None and node_code(expr) == key and may_run_inline(project, use) == NONE_ONLY:
            return True
    return False


def _rebound(project: Project, file: FileModel, cls, key: str) -> bool:
    """Is the field ``key`` seen to be rebound after construction: by a method of the class other than its
    construction, by a subclass, or on another receiver? (Unlike
    :func:`~streamlint.model.flow.fieldfacts.stable_field`, a class that may set fields by name, ``self.__dict__``,
    is not such evidence: that leaves the identity unknown, not known to change.)"""
    from streamlint.model.accelerators import direct_subclasses
    from streamlint.model.flow.fieldfacts import _assigns, _construction, _rebound_outside

    return any(not _construction(project, file, cls, m) for m, _ in _assigns(cls, key)) \
        or any(_assigns(sub, key) for sub, _ in direct_subclasses(project, file, cls)) or _rebound_outside(project, key[5:])


def scoped_evidence(interp, a: str, b: str, field: str | None) -> tuple | None:
    """:func:`caller_scopes` for a race of the function ``interp`` runs between its entry stream and a
    ``self.*`` stream (``a`` / ``b``); for a step's field ``field`` (the earlier side is a write of another
    method of the class, on its callers' current stream), asked of every such writer."""
    from streamlint.model.streams import MAIN

    other = b if a == MAIN else a if b == MAIN else None
    if other is None:
        return None
    project, file = interp.project, interp.file
    if not other.startswith("self."):  # (a stream of an object handed in: `slot.compute_stream`)
        return None if field or interp.depth else param_caller_scopes(project, file, interp.fn, other)
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


__all__ = ["caller_scopes", "param_caller_scopes", "race_evidence", "scoped_evidence"]
