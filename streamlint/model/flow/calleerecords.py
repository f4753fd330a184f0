"""Events a callee records after the work it was handed (issue 16, [event-recorded-in-callee]).

A pipeline schedule shares one event between a plan object and the nodes it builds (``LayerPlan(layer,
self.event, ...)``, ``StageNode(fn, stream, event)``); each node runs its work inside a project context manager
that waits the event on entry and records it on exit (``with stream_guard(self.stream, self.event):``). The
function that drives the schedule records the plan's event once before the layers (``plan.record_current_stream()``)
and waits it on the communication stream after them (``plan.wait_current_stream()``): the record it sees precedes
the layers' output, yet the last record of that event is the one the last node made on exit, after its work.

So a call this function makes that is handed an object taken from the event's holder (``f_layer =
plan.get_layer(i)``; ``LayerPlan.run(f_layer, x)``, ``f_layer.attn.forward(x)``), not the holder itself (its own
methods are followed, their records seen), and that runs project code entering such a recording scope for a
field ``F`` (:func:`scope_recorded_fields`: a ``@contextmanager`` recording a parameter after its ``yield``,
entered with ``X.F`` for that parameter; :func:`_enters_recording`), re-records the holder's event ``H.F``. A
library call handed the holder's data (``torch.matmul(x, plan.weights[0])``) records nothing. The re-record is taken on the current stream after the call: a wait on
``holder.F`` then covers what the call produced. An event recorded in a callee *before* the work (the holder's own
``record_current_stream()`` ahead of a plain op) still leaves the work uncovered; so does work handed to no
object of the holder."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst

if TYPE_CHECKING:
    from streamlint.model.flow.values import State

# the name `record` where a call may follow it (blanks, line continuations, a comment inside brackets, then `(`): a
# superset of the `p.record(...)` calls :func:`_recorded_after_yield` reads (LibCST keeps a name's own spelling)
_RECORD_CALL = re.compile(rb"record(?<![A-Za-z0-9_]record)(?![A-Za-z0-9_])[ \t\f\r\n\\]*[(#]")
_PRIMITIVES = frozenset({"record", "record_event", "wait", "wait_event", "wait_stream", "synchronize", "query",
                         "elapsed_time"})


class CalleeRecords:
    """Mixin of :class:`~streamlint.model.flow.interp.Interp`: after a call of this function (depth 0), the
    events its holder shares with the objects the call is handed are taken as recorded on the current stream.
    Interp state it uses: ``depth``, ``cfn``, ``project``; it asks orderings (record)."""

    def call(self, st: State, e: cst.Call) -> object:
        out = super().call(st, e)  # type: ignore[misc]
        if not self.depth and any("." in k and not k.startswith("<") for k in st.events):  # type: ignore[attr-defined]
            for key in callee_rerecorded(self.project, self.cfn, e, self.cfile):  # type: ignore[attr-defined]
                self.record(st, st.cur, key)  # type: ignore[attr-defined]
        return out


def callee_rerecorded(project, fn, call: cst.Call, file=None) -> list[str]:
    """The event keys (``plan.event``) a call in ``fn`` may record after its work: for each name handed to it
    (an argument or the receiver) that is an object taken from a name ``H`` of ``fn`` (``H.get_layer(i)``,
    ``H.layers[i]``, or a name ``fn`` assigns from one: ``f_layer = H.get_layer(i)``, ``for f_layer in
    H.layers``), ``H.F`` for every field ``F`` of :func:`scope_recorded_fields` that the call itself may record:
    it runs a project callable that enters, directly or through its own calls, a recording scope handed ``X.F``
    (:func:`_enters_recording`; a library call, ``torch.matmul(x, H.weights[0])``, records nothing). ``H``
    itself handed (the receiver of ``H.record_current_stream()``) does not count: the flow follows its
    methods."""
    if fn is None:
        return []
    fields = scope_recorded_fields(project)
    if not fields:
        return []
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in _PRIMITIVES:
        return []  # (the event or stream's own method: `plan.event.wait(s)` is no callee)
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    handed = [a.value for a in call.args] + ([receiver] if receiver is not None else [])
    scope = (*fn.all_params, *fn.locals)
    holders = []
    for expr in handed:
        root = _root(expr)
        if not isinstance(root, cst.Name):
            continue
        found = [_taken_from(fn, root.value)]
        fetched = isinstance(expr, (cst.Call, cst.Subscript))  # (not a plain field `H.buf`, `H.buf.add_(x)`)
        if root is not expr and root.value in scope and fetched:
            found.append(root.value)  # (`plan.get_layer(i)` handed on, `plan.nodes[0].forward(x)`)
        holders.extend(h for h in found if h is not None and h not in ("self", "cls") and h not in holders)
    if not holders or file is None:
        return []
    site = file.call_site(call)
    if site is None:
        return []
    fields = {f for f in fields if _enters_recording(project, fn, file, site, f)}
    return [f"{h}.{f}" for h in holders for f in sorted(fields)]


def _enters_recording(project, fn, file, site, field: str) -> bool:
    """Does the call ``site`` (in ``fn``) run a project callable that enters a recording scope handed ``X.field``
    (:func:`scope_recorded_fields`), itself or through the calls it makes (four levels, 64 functions)? A call is
    followed to its resolved project targets; a method called on an object the flow cannot type (a parameter or
    local of the caller, ``f_layer.attn.forward(x)``) to the methods of that name in the files that enter the
    recording scopes. A call on anything else (a module, ``torch.matmul``) runs no project code here."""
    scan = _recording_scan(project)
    enterers, by_name = scan["enterers"], scan["by_name"]
    memo = project.path_index.derived.setdefault("callee_enters_recording", {})
    mkey = (id(site.node), field)
    if mkey in memo:
        return memo[mkey]
    memo[mkey] = False
    frontier = [(t, m) for t, m in _targets(project, fn, file, site, by_name)]
    seen: set[int] = set()
    for _level in range(4):
        nxt = []
        for target, model in frontier:
            if id(target) in seen or len(seen) >= 64:
                continue
            seen.add(id(target))
            if field in enterers.get(id(target), ()):
                memo[mkey] = True
                return True
            for inner in target.calls:
                nxt.extend(_targets(project, target, model, inner, by_name))
        frontier = nxt
    return False


def _targets(project, fn, file, site, by_name) -> list:
    found = list(project.call_targets(file, site))
    if found:
        return found
    func = site.node.func
    if isinstance(func, cst.Attribute):
        root = _root(func.value)
        if isinstance(root, cst.Name) and root.value in (*fn.all_params, *fn.locals) \
                and root.value not in ("self", "cls"):
            return list(by_name.get(func.attr.value, ()))
    return []


def _root(expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    return expr


def _taken_from(fn, name: str) -> str | None:
    """The name ``H`` every assignment of ``name`` in ``fn`` takes its value from through attributes, calls
    and subscripts (``H.get_layer(i)``, ``H.layers[i]``, a loop over ``H.layers``); None when there is none,
    several, or the value is ``H`` itself (an initial ``None`` does not count)."""
    memo = fn.__dict__.setdefault("_taken_from", {})
    if name in memo:
        return memo[name]
    values = list(fn.name_assigns.get(name, ()))
    for node in _loops(fn.node):
        if isinstance(node.target, cst.Name) and node.target.value == name:
            values.append(node.iter)
    roots = set()
    for value in values:
        if isinstance(value, cst.Name) and value.value == "None":
            continue  # (`f_layer = b_layer = None` before the loop)
        if not isinstance(value, (cst.Attribute, cst.Subscript, cst.Call)):
            roots.add(None)
            continue
        root = _root(value)
        ok = isinstance(root, cst.Name) and root.value != name and root.value in (*fn.all_params, *fn.locals)
        roots.add(root.value if ok else None)
    found = roots.pop() if len(roots) == 1 else None
    memo[name] = found
    return found


def _loops(node: cst.CSTNode) -> list[cst.For]:
    from streamlint.model.syntax import local_nodes

    return [n for n in local_nodes(node) if isinstance(n, cst.For)]


def scope_recorded_fields(project) -> frozenset[str]:
    """Field names ``F`` the project hands, as ``X.F``, to a recording scope: a ``@contextmanager`` generator
    that records one of its parameters (``event.record(stream)``) after its ``yield`` (in a ``finally`` or
    after it). Memoised per project."""
    return _recording_scan(project)["fields"]


def _recording_scan(project) -> dict:
    """The fields of :func:`scope_recorded_fields`; ``enterers``: per function (``id``) entering such a scope
    the fields it hands it; ``by_name``: the methods (with their file) of the files that enter one, by name."""
    derived = project.path_index.derived
    if "scope_recorded_scan" in derived:
        return derived["scope_recorded_scan"]
    recorders: dict[int, tuple[str, ...]] = {}
    names: set[str] = set()
    # a recorder's module spells `contextmanager`, `yield` and a call of `record` (a generator decorated so, recording
    # a parameter after its yield): only the files holding all three are parsed (torch-npu: 35 -> 5)
    spelled = set(project.paths_containing((b"yield",))) & set(project.paths_containing((b"record",)))
    for model in filter(None, map(project.file, (p for p in project.paths_containing((b"contextmanager",))
                                                 if p in spelled and _RECORD_CALL.search(project.file_bytes(p) or b"")))):
        for fn in model.iter_functions():
            if fn.yields and any(d.rsplit(".", 1)[-1] == "contextmanager" for d in fn.decorators):
                recorded = _recorded_after_yield(fn)
                if recorded:
                    recorders[id(fn)] = recorded
                    names.add(fn.node.name.value)
    fields: set[str] = set()
    enterers: dict[int, set[str]] = {}
    by_name: dict[str, list] = {}
    if recorders:
        for model in project.files_containing(tuple(n.encode() for n in sorted(names))):
            for fn in model.iter_functions():
                if fn.class_name:
                    by_name.setdefault(fn.node.name.value, []).append((fn, model))
                for scope in fn.scopes:
                    for call in scope.calls:
                        site = model.call_site(call)
                        found = project.call_target(model, site) if site is not None else None
                        if found is None or id(found[0]) not in recorders:
                            continue
                        from streamlint.model.uses import bind_arguments

                        bound = bind_arguments(found[0].params, call, kwonly=found[0].kwonly)
                        for p in recorders[id(found[0])]:
                            arg = bound.get(p)
                            if isinstance(arg, cst.Attribute):
                                fields.add(arg.attr.value)
                                enterers.setdefault(id(fn), set()).add(arg.attr.value)
    out = derived["scope_recorded_scan"] = {"fields": frozenset(fields), "enterers": enterers, "by_name": by_name}
    return out


def _recorded_after_yield(fn) -> tuple[str, ...]:
    """The parameters of a generator ``fn`` recorded (``p.record(...)``) after its first ``yield`` in source
    order (the ``finally`` of a ``try: yield``, or the statements after it)."""
    from streamlint.model.syntax import local_nodes

    params = set(fn.all_params)
    seen_yield = False
    out = []
    for node in local_nodes(fn.node):  # (pre-order: source order)
        if isinstance(node, cst.Yield):
            seen_yield = True
        elif seen_yield and isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value == "record" and isinstance(node.func.value, cst.Name) \
                and node.func.value.value in params:
            out.append(node.func.value.value)
    return tuple(dict.fromkeys(out))


__all__ = ["CalleeRecords", "callee_rerecorded", "scope_recorded_fields"]
