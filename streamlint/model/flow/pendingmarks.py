"""Pending marks: the flag or slot a recorder leaves with its event, and the code that clears it (issue 16,
[cross-method] events handed between methods and objects).

An event protocol split across methods leaves, besides the event, a *mark* saying that work is in flight: a flag
the recorder raises next to the record (``self._event.record(side); self._pending = True``), or a slot holding the
event itself for whoever comes next (``self._zev_pending = zev`` after ``zev.record(tr)``). The code that clears
the mark takes the work over -- it says "joined" -- so it is where the join belongs, whatever its name:

* The class form -- a method of the class testing the recorder's flag and lowering it (``if not self._pending:
  return ... self._pending = False``), a *fence*, that joins nothing -- is
  :func:`~streamlint.model.flow.lostjoins.unjoined_flag_clears` (one mechanism, reported at the clear).
* ``module_mark_joins``: the same protocol between module functions over global dicts: one records an entry of a global
  events dict on a side stream and raises an entry of a global marks dict (``_mark[l] = step``); another tests the
  marks and lowers the entry (``_mark[l] = -1``). When no function but the recorders names the events dict
  anywhere in the project and the consumer joins nothing, it is reported at its end.
* ``cleared_slots``: a function that takes an event out of a field of some object (``zp = getattr(svc,
  "_zev_pending", None)``, ``ev = plan.ready``), only tests it (``if zp is not None:``) and clears the slot
  (``svc._zev_pending = None``) with no wait, no hand-on, no join of its own: the slot is the protocol's one
  handle on the recorded work, and it is dropped. The field must be a slot of recorded events: project code
  stores into it (``X.<field> = ev``) an event it records in that function (``ev.record(s)``, ``ev =
  s.record_event()``); and no other code of the project waits on that field or takes it and hands it on.

All are SL201 medium: the reader of the recorded work (the fence's caller, the next step) is not seen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, mentions_name, node_code

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.flow.joinsteps import SilentJoin
    from streamlint.model.project import Project


_ORDERING = frozenset({"record", "record_event", "query", "wait_event", "wait_stream", "synchronize", "wait", "join"})


_HELPER_DEPTH = 3  # (project helpers followed below the function: `fence()` -> `_join_side()` -> `_order_after()`)


def _joins_anything(project: Project, file: FileModel, fn: FunctionInfo, skip: frozenset[int] = frozenset(),
                    depth: int = _HELPER_DEPTH, seen: set[int] | None = None) -> bool:
    """Does ``fn`` (but the call nodes in ``skip``) order anything: a join / record / query primitive, a device
    synchronisation, a project function doing one (up to ``_HELPER_DEPTH`` levels down) or named for joining?"""
    from streamlint.model.flow.joinsteps import is_join_step

    seen = set() if seen is None else seen
    seen.add(id(fn))
    for site in fn.calls:
        if id(site.node) in skip:
            continue
        if site.method in _ORDERING:
            return True
        found = project.call_target(file, site)
        if found is None or id(found[0]) in seen:
            continue
        if is_join_step(found[0]) or depth > 1 and _joins_anything(project, found[1], found[0], frozenset(),
                                                                     depth - 1, seen):
            return True
    return False


def _on_current_stream(fn: FunctionInfo, record: cst.CSTNode) -> bool:
    """Is ``record`` (``ev.record()``, ``ev.record(cur)``, ``cur.record_event()``) made on the current stream --
    a marker or a timer, no side-stream work to join?"""
    call = record.value if isinstance(record, cst.Assign) else record
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
        return False
    if call.func.attr.value == "record":
        if not call.args:
            return True
        stream = call.args[0].value
    else:
        stream = call.func.value
    if "current_stream" in node_code(stream):
        return True
    return isinstance(stream, cst.Name) and any(
        "current_stream" in node_code(v) for v in fn.name_assigns.get(stream.value, ()))


def _ordered_around_calls(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does every caller of ``fn`` order right around the call: a wait / synchronisation as the call just before it
    (``torch.cuda.synchronize(); self.reset()``) or just after it?"""
    from streamlint.model.flow.callers import callers_of, orders_after
    from streamlint.model.flow.joinsteps import _callers_join

    sites = callers_of(project, file, fn)
    if not sites:
        return False
    if _callers_join(project, file, fn):
        return True
    for model, site in sites:
        caller = site.function
        if caller is None:
            return False
        at = model.span(site.node).start_line
        before = [(model.span(s.node).start_line, s) for s in caller.calls if model.span(s.node).start_line < at]
        if not before or not orders_after(max(before, key=lambda t: t[0])[1].method or ""):
            return False
    return True


def _uncertain(fn: FunctionInfo, stmt: cst.CSTNode) -> frozenset[int]:
    """The nodes of ``fn`` that may not run when ``stmt`` runs: the ``else`` arms of the tests whose body holds
    ``stmt`` (they never run with it), and the bodies of tests, loops and ``except`` handlers that do not hold it
    (``if _ASSERT: self.check()``: a join there covers only the paths taking it)."""
    out: set[int] = set()
    for node in local_nodes(fn.node.body):
        if isinstance(node, (cst.If, cst.While, cst.For, cst.ExceptHandler)):
            if not any(n is stmt for n in local_nodes(node)):
                out.update(id(n) for n in local_nodes(node.body))
                out.update(id(n) for n in local_nodes(node.orelse)) if getattr(node, "orelse", None) else None
            elif isinstance(node, cst.If) and node.orelse is not None:
                held = any(n is stmt for n in local_nodes(node.body))
                out.update(id(n) for n in local_nodes(node.orelse if held else node.body))
    return frozenset(out)


def _slot_take(stmt: cst.CSTNode) -> tuple[str, str, str] | None:
    """``name = X.<field>`` / ``name = getattr(X, "<field>", None)``: (name, X's text, field)."""
    small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
        return None
    name, value = small.targets[0].target.value, small.value
    if isinstance(value, cst.Attribute) and not (isinstance(value.value, cst.Name) and value.value.value in (
            "self", "cls")):
        return name, node_code(value.value), value.attr.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "getattr" \
            and len(value.args) == 3 and isinstance(value.args[1].value, cst.SimpleString) \
            and node_code(value.args[2].value) == "None":
        field = value.args[1].value.evaluated_value
        holder = node_code(value.args[0].value)
        if isinstance(field, str) and field.isidentifier() and holder not in ("self", "cls"):
            return name, holder, field
    return None


def _clears(body: cst.CSTNode, holder: str, field: str) -> cst.CSTNode | None:
    """The first ``<holder>.<field> = None`` in ``body``."""
    return next((node for node in local_nodes(body) if isinstance(node, cst.Assign) and node_code(node.value) == "None"
                 and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == field
                         and node_code(t.target.value) == holder for t in node.targets)), None)


def _recorded_slot(project: Project, field: str) -> bool:
    """Does code of the project store into ``X.<field>`` an event the storing function records (``ev.record(s)``
    then ``X.<field> = ev``, or ``ev = s.record_event()``)?"""
    memo = derived(project, "pending_recorded_slots")
    if field in memo:
        return memo[field]
    memo[field] = False
    for model in project.files_containing((field.encode(),)):
        for fn in model.iter_functions():
            recorded = {dotted(site.node.func.value) for site in fn.calls
                        if site.method == "record" and isinstance(site.node.func, cst.Attribute)}
            recorded |= {name for name, values in fn.name_assigns.items() if any(
                isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "record_event"
                for v in values)}
            for node in local_nodes(fn.node):
                if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) \
                        and node.value.value in recorded and any(
                        isinstance(t.target, cst.Attribute) and t.target.attr.value == field for t in node.targets):
                    memo[field] = True
                    return True
    return False


def _slot_handled_elsewhere(project: Project, field: str, fn: FunctionInfo) -> bool:
    """Does other code of the project wait on ``X.<field>`` or take it and hand it on?"""
    from streamlint.model.flow.joinsteps import _until_rebound, event_waited_elsewhere, handled

    if event_waited_elsewhere(project, field):
        return True
    for model in project.files_containing((field.encode(),)):
        for other in model.iter_functions():
            if other.node is fn.node:
                continue
            for node in local_nodes(other.node.body):
                if isinstance(node, cst.IndentedBlock):
                    block = list(node.body)
                    for i, stmt in enumerate(block):
                        take = _slot_take(stmt)
                        if take is not None and take[2] == field and any(
                                handled(s, take[0]) for s in _until_rebound(block[i + 1:], take[0])):
                            return True
    return False


def cleared_slots(project: Project, file: FileModel) -> list[SilentJoin]:
    """Functions that take a recorded event out of an object's slot, only test it and clear the slot."""
    memo = derived(project, "pending_cleared_slots")
    if id(file) in memo:
        return memo[id(file)]
    from streamlint.model.flow.joinsteps import SilentJoin, _until_rebound, handled

    out: list[SilentJoin] = []
    memo[id(file)] = out
    for fn in file.iter_functions():
        for node in local_nodes(fn.node.body):
            if not isinstance(node, cst.IndentedBlock):
                continue
            block = list(node.body)
            found = None
            for i, stmt in enumerate(block):
                take = _slot_take(stmt)
                if take is None:
                    continue
                name, holder, field = take
                rest = _until_rebound(block[i + 1:], name)
                clear = next((c for s in rest if (c := _clears(s, holder, field)) is not None), None)
                if clear is None or any(handled(s, name) for s in rest):
                    continue
                test = next((n for s in rest for n in local_nodes(s) if isinstance(n, (cst.If, cst.While))
                             and mentions_name(n.test, name)), None)
                if test is None or _joins_anything(project, file, fn, _uncertain(fn, stmt)) \
                        or not _recorded_slot(project, field) \
                        or _slot_handled_elsewhere(project, field, fn) \
                        or _ordered_around_calls(project, file, fn):
                    continue
                found = SilentJoin(fn, clear, "cleared-slot", f"{holder}.{field}", None, None, name)  # (where the
                # wait belongs: before the slot is cleared)
                break
            if found is not None:
                out.append(found)
                break
    return out


_FALSY = frozenset({"-1", "0", "None", "False"})


def _module_dicts(file: FileModel) -> set[str]:
    """The module's globals bound to an empty dict at its top level (``_qf2_ev: dict = {}``)."""
    out: set[str] = set()
    for stmt in file.module.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            target, value = small.targets[0].target.value, small.value
        elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
            target, value = small.target.value, small.value
        else:
            continue
        if isinstance(value, cst.Dict) and not value.elements or node_code(value) == "dict()":
            out.add(target)
    return out


def _entry_stores(fn: FunctionInfo, name: str) -> tuple[bool, bool]:
    """(raises, lowers): does ``fn`` store a truthy value into an entry of global dict ``name`` (``M[k] = step``),
    and does it lower one (``M[k] = -1`` / ``None`` / ``False`` / ``0``, ``M.pop(k)``, ``del M[k]``)?"""
    raises = lowers = False
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Subscript) and isinstance(
                t.target.value, cst.Name) and t.target.value.value == name for t in node.targets):
            if node_code(node.value) in _FALSY:
                lowers = True
            else:
                raises = True
        elif isinstance(node, cst.Del) and isinstance(node.target, cst.Subscript) \
                and isinstance(node.target.value, cst.Name) and node.target.value.value == name:
            lowers = True
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "pop" \
                and isinstance(node.func.value, cst.Name) and node.func.value.value == name:
            lowers = True
    return raises, lowers


def _side_recorded_entries(fn: FunctionInfo, name: str) -> cst.CSTNode | None:
    """The record, in ``fn``, of an entry of global dict ``name`` on a stream other than the current one
    (``ev = E.setdefault(k, Event()); ... ev.record(side)``, ``E[k].record(side)``) that ``fn`` itself never waits on
    nor synchronises: its join is left to other code."""
    entries = {n for n, values in fn.name_assigns.items() if values and all(
        name in {x.value for x in local_nodes(v) if isinstance(x, cst.Name)} for v in values)}
    waited = {node_code(site.node.args[0].value) for site in fn.calls if site.method == "wait_event" and site.node.args}
    waited |= {node_code(site.node.func.value) for site in fn.calls if site.method in ("wait", "synchronize", "query")
               and isinstance(site.node.func, cst.Attribute)}
    for site in fn.calls:
        node = site.node
        if site.method != "record" or not isinstance(node.func, cst.Attribute) or not node.args \
                or "current_stream" in node_code(node.args[0].value):
            continue
        target = node.func.value
        held = isinstance(target, cst.Name) and target.value in entries or isinstance(target, cst.Subscript) \
            and isinstance(target.value, cst.Name) and target.value.value == name
        if held and node_code(target) not in waited:
            return node
    return None


def module_mark_joins(project: Project, file: FileModel) -> list[SilentJoin]:
    """The module-level form of :func:`mark_joins`: a function records an entry of a global events dict on a side
    stream (``ev_d = _ev.setdefault(("d", l), Event()); ... ev_d.record(side)``) and raises an entry of a global
    marks dict (``_mark[l] = step``); another module function tests that dict and lowers the entry (``if
    _mark.get(l) != step: return False; _mark[l] = -1``), a consumer taking the work over. When no function but
    the recorders names the events dict (no waiter anywhere: the name is searched in the whole project) and the
    consumer joins nothing itself, the recorded work is joined by nobody (SL201 medium, at the consumer's end)."""
    memo = derived(project, "pending_module_marks")
    if id(file) in memo:
        return memo[id(file)]
    from streamlint.model.flow.joinsteps import SilentJoin, _end

    out: list[SilentJoin] = []
    memo[id(file)] = out
    dicts = _module_dicts(file)
    if len(dicts) < 2:
        return out
    fns = [fn for fn in file.iter_functions() if fn.class_name is None and "." not in fn.qualname]
    for events in sorted(dicts):
        recorders = {id(fn): rec for fn in fns if (rec := _side_recorded_entries(fn, events)) is not None}
        if not recorders:
            continue
        namers = [fn for fn in fns if mentions_name(fn.node.body, events)]
        if any(id(fn) not in recorders for fn in namers) or len(list(project.files_containing((events.encode(),)))) > 1:
            continue  # some other code may wait on its entries
        for marks in sorted(dicts - {events}):
            raisers = [fn for fn in fns if id(fn) in recorders and _entry_stores(fn, marks)[0]]
            if not raisers:
                continue
            for fn in fns:
                if id(fn) in recorders or not _entry_stores(fn, marks)[1] or _entry_stores(fn, marks)[0]:
                    continue
                tested = any(isinstance(n, (cst.If, cst.While, cst.IfExp)) and mentions_name(n.test, marks)
                             for n in local_nodes(fn.node.body))
                if tested and not _joins_anything(project, file, fn):
                    out.append(SilentJoin(fn, _end(fn), "mark-event", events, raisers[0],
                                          recorders[id(raisers[0])], marks))
    return out


__all__ = ["cleared_slots", "module_mark_joins"]
