"""Join steps known by their callers: the parameter every seen caller hands its only handle on queued work
(issue 16, [caller-consumer]: "a one-line join helper whose meaning is all in its callers").

:mod:`~streamlint.model.flow.joinsteps` judges a function as a join step when its name says so (``wait_*``,
``sync_*``, ``finish_*``). Many join helpers are named for something else (``main_wait(event)``, ``fence(ev)``,
``StreamCtx.handoff(ev)``): what makes them join steps is how the project calls them. Each caller queues work,
makes and records an event after it, and hands that event to the helper as the one thing it ever does with it::

    with side.use():
        decode_into(blocks, payload)
        ev = side.record_event()          # the caller's only handle on the decode
    side.main_wait(ev)                    # ... handed to the helper, never named again

The helper is then the callers' join of that work, whatever its name: if it only tests the parameter (``if event
is not None: ...``) and neither waits on it nor hands it on, the callers' later reads of the work are unordered,
and the root cause is in the helper (where :mod:`.joinsteps` reports it: ``stream-param``, at its last statement).

:func:`handed_join_param` names that parameter. Evidence, all of it required (precision first):

* the project shows at least one call site of the function (:func:`~streamlint.model.flow.callers.callers_of`;
  none, or calls that cannot be listed: no evidence, silence), and each resolves to it (a call on a receiver the
  project cannot type may reach a same-named method of another class);
* at every call site the argument bound to the parameter is a local name of the calling function every binding
  of which is a new event (:func:`~streamlint.model.flow.droppedevents.fresh_event`: ``torch.cuda.Event()``,
  ``s.record_event()``) that the caller records (``ev.record(s)``, or made by ``record_event``);
* the caller names that event nowhere else: no wait, no host sync, no return, no store, no other call (what it
  recorded is held by the helper alone).

A call site whose argument is anything else (a parameter of the caller, a field, an expression, an event the
caller also waits on) breaks the evidence: the helper may then be a mere observer of the event."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.streams import derived
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project


def _bound_params(fn: FunctionInfo, call: cst.Call) -> dict[str, cst.BaseExpression | None]:
    """The call's arguments by ``fn``'s parameter names (``self`` / ``cls`` bound by an attribute receiver)."""
    params = fn.params
    if fn.class_name and params[:1] in (("self",), ("cls",)) and isinstance(call.func, cst.Attribute):
        params = params[1:]
    return bind_arguments(params + fn.kwonly, call, kwonly=fn.kwonly)


def _sole_handle(file: FileModel, caller: FunctionInfo, name: str, call: cst.Call) -> bool:
    """Is ``name`` a local of ``caller`` bound only to new events it records, named nowhere but in its
    bindings, its records and calls of the same shape as ``call`` (the hand-off to the helper)?"""
    from streamlint.model.flow.droppedevents import _names_in, fresh_event
    from streamlint.model.syntax import call_name

    values = caller.name_assigns.get(name, ())
    if name in caller.all_params or not values or not all(fresh_event(file, caller, v) for v in values):
        return False
    records = [site for site in caller.calls if site.method == "record" and isinstance(site.node.func, cst.Attribute)
               and isinstance(site.node.func.value, cst.Name) and site.node.func.value.value == name]
    if not records and not any(call_name(v) == "record_event" for v in values):
        return False  # made and never recorded: no handle on any work
    callee = call_name(call)
    handoffs = [site for site in caller.calls if call_name(site.node) == callee
                and any(isinstance(a.value, cst.Name) and a.value.value == name for a in site.node.args)]
    counts = _names_in(caller.node)
    if name in counts.get(" declared", ()):
        return False  # a global / nonlocal other code reads
    return counts.get(name, 0) == len(values) + len(records) + len(handoffs)


def handed_join_param(project: Project, file: FileModel, fn: FunctionInfo) -> str | None:
    """The parameter of ``fn`` every seen caller hands the only handle it keeps on work it queued (see the
    module), or None. Memoised per function."""
    memo = derived(project, "handed_join_param")
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = None
    from streamlint.model.flow.callers import callers_of

    params = [p for p in (*fn.params, *fn.kwonly) if p not in ("self", "cls")]
    sites = callers_of(project, file, fn) if params else None
    if not sites:
        return None
    found: str | None = None
    for model, site in sites:
        caller = getattr(site, "function", None)
        target = project.call_target(model, site)
        if caller is None or caller is fn or target is None or target[0] is not fn:
            return None  # (a call on a receiver the project cannot type may run a same-named method of another
            # class: a stand-in whose body only counts what it is handed)
        bound = _bound_params(fn, site.node)
        handed = [p for p in params if isinstance(arg := bound.get(p), cst.Name)
                  and _sole_handle(model, caller, arg.value, site.node)]
        if len(handed) != 1 or found is not None and handed[0] != found:
            return None
        found = handed[0]
    memo[id(fn)] = found
    return found


__all__ = ["handed_join_param"]
