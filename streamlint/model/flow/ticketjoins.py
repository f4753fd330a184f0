"""Join steps handed a ticket whose event nobody waits on (issue 16, [caller-consumer]).

A producer often hands its caller a small record instead of the data: ``Ticket(slot, done)``, where ``done``
is the event it recorded on its side stream after queuing the work (``done = self.copy_stream.record_event()``),
returned or stored for the caller. The record is the producer's *hand-back summary*: its field ``done`` marks
work pending on that stream, and whoever reads the work must first make its stream wait on the field. The
caller usually does that through a small join step of the producer's API (``loader.wait_ready(ticket)``, a
method named for joining, :func:`~streamlint.model.flow.joinsteps.is_join_step`) whose whole effect is
``current_stream().wait_event(ticket.done)``; its readers are the caller's code after the call, so no single
function's dataflow shows the race when that wait is lost.

A join step taking a parameter annotated with such a record class (``ticket: Ticket``, ``Optional[Ticket]``)
that never names the event field (``ticket.done``) nor hands the record on (the bare name as an argument of a
call that is not a test, a receiver of a method, stored, returned) joins nothing of it; when, in addition,
nothing in the whole project consumes that field (no ``x.done.wait()`` / ``wait_event(x.done)`` /
``synchronize()`` / ``query()``, no alias ``ev = x.done``, no hand-on ``helper(x.done)``: any mention of the
field but a store into it, a record on it or a test of it counts), the recorded work is joined by nobody and the
join step given the ticket is where the wait belongs (SL201 medium, the producer's record as related location).

The field is a ticket event only when a construction the project shows (``handedevents.construction_fields``:
by keyword or position) gives it an event recorded in the constructing function (a ``s.record_event()`` call,
or a local bound to one, or a local event ``ev`` with ``ev.record(s)``), and that function neither names the
event again after the record (a wait, a synchronisation, a hand-on) nor joins anything after it (a ``wait*`` /
``sync*`` call: it may cover the work). Silent when the recording stream is joined after the work by other code
of the class (:mod:`~streamlint.model.flow.deadevents`: the event is a leftover), when every caller of the
join step orders right after the call, and when the join step synchronises the device.

A tuple record (a ``NamedTuple``) is no ticket for the join-step finding: its holders may unpack it
(``row, ev = lease``) and wait on the event without naming the field.

The same module judges a join step that joins a handle parameter on an early-return branch only
(:func:`branch_joins`; not in a file importing no torch, not for a host primitive such as ``threading.Event``,
not when the main path calls a helper of the class or file that joins)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.devobjects import annotation_classes, param_annotation
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.handedevents import _uses  # (a name's mentions, not as a keyword or attribute name)
from streamlint.model.streams import derived
from streamlint.model.syntax import call_name, local_nodes
from streamlint.model.walk import children, descendants

if TYPE_CHECKING:
    from streamlint.model.flow.joinsteps import SilentJoin
    from streamlint.model.project import Project

_JOIN_CALLS = frozenset({"wait_stream", "wait_event", "wait", "synchronize", "query"})
_TORCH_ROOTS = frozenset({"torch", "torch_npu", "torchair"})
_HOST_ROOTS = frozenset({"threading", "asyncio", "multiprocessing", "concurrent", "queue", "subprocess"})
# calls that only look at a value (a test, a message), never order it or hand it on
_LOOKS = frozenset({"isinstance", "hasattr", "callable", "len", "bool", "id", "type", "print", "repr", "str",
                    "hash", "format"})


def ticket_joins(project: Project, file: FileModel) -> list[SilentJoin]:
    """Every join step of the file handed a ticket whose event field nothing waits on (module docstring)."""
    from streamlint.model.flow.joinsteps import SilentJoin, _end, _stub, is_join_step
    from streamlint.model.flow.protocols import synchronizes_device

    memo = derived(project, "ticket_joins")
    if id(file) in memo:
        return memo[id(file)]
    memo[id(file)] = []
    out: list[SilentJoin] = []
    for fn in file.iter_functions():
        if not is_join_step(fn) or _stub(fn) or synchronizes_device(project, file, fn):
            continue
        found = None
        for param in fn.params:
            annotation = param_annotation(fn, param) if param not in ("self", "cls") else None
            classes = annotation_classes(project, file, fn, annotation) if annotation is not None else None
            if not classes or _handed_on(fn, param):
                continue
            for cls, module in classes:
                if _positional(cls):
                    continue  # (a tuple record: its holders may unpack it, ``slot, ev = lease``, unseen by field)
                for field, (producer, record) in sorted(ticket_fields(project, module, cls).items()):
                    if _names_field(fn, param, field) or field_consumed(project, field, cls.name):
                        continue
                    found = SilentJoin(fn, _end(fn), "ticket-event", f"{param}.{field}", producer, record,
                                       cls.name)
                    break
                if found is not None:
                    break
            if found is not None:
                break
        if found is not None and not _callers_order(project, file, fn):
            out.append(found)
    memo[id(file)] = out
    return out


def _positional(cls: ClassInfo) -> bool:
    """Is the record class a tuple (a ``NamedTuple``, a ``namedtuple(...)`` base, ``tuple``), whose fields its
    holders may read by unpacking or indexing rather than by name?"""
    return any(base.rsplit(".", 1)[-1] in ("NamedTuple", "namedtuple", "tuple") or "namedtuple" in base
               for base in cls.bases)


def _callers_order(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does every seen caller of the join step order its stream: is its next call a stream / event / device join
    itself (``wait_stream``, ``wait_event``, ``wait``, ``synchronize``), not merely a call named for waiting
    (``policy.on_wait(label)``, a timing hook), or does the caller join a whole stream or the device anywhere?"""
    from streamlint.model.flow.callers import callers_of, calls_after

    def orders(site) -> bool:
        if (next(calls_after(site), (None, ""))[1] or "") in _JOIN_CALLS - {"query"}:
            return True
        # a caller joining the whole stream or device anywhere (``wait_stream(loader.side)`` before a loop of
        # bookkeeping join steps) needs no event join from the step
        return site.function is not None and any(s.method in ("wait_stream", "synchronize")
                                                 for s in site.function.calls)

    sites = callers_of(project, file, fn)
    return bool(sites) and all(orders(site) for _, site in sites)


def ticket_fields(project: Project, file: FileModel, cls: ClassInfo) -> dict[str, tuple[FunctionInfo, cst.CSTNode]]:
    """The hand-back summary of a record class: field -> (the constructing function, the record) for each field
    some construction in the project gives an event recorded there and left to whoever holds the record (see
    the module docstring). Memoised per class."""
    from streamlint.model.handedevents import construction_fields

    memo = derived(project, "ticket_fields")
    if id(cls) in memo:
        return memo[id(cls)]
    memo[id(cls)] = {}
    out: dict[str, tuple[FunctionInfo, cst.CSTNode]] = {}
    for model in project.files_containing((f"{cls.name}(".encode(),)):
        for fn in model.iter_functions():
            for site in fn.calls:
                if site.target is None or site.target.rsplit(".", 1)[-1] != cls.name:
                    continue
                found = project.symbol(site.target, model)
                if found is None or found[0] is not cls:
                    continue
                for field, value in construction_fields(project, file, cls, site.node).items():
                    record = _recorded_event(fn, value)
                    if record is not None and field not in out and _left_pending(project, model, fn, record, value):
                        out[field] = (fn, record)
                        derived(project, "ticket_records")[id(record)] = model
    memo[id(cls)] = out
    return out


def record_model(project: Project, record: cst.CSTNode) -> FileModel | None:
    """The file of a record :func:`ticket_fields` found (for the finding's related location)."""
    return derived(project, "ticket_records").get(id(record))


def _recorded_event(fn: FunctionInfo, value: cst.BaseExpression | None) -> cst.CSTNode | None:
    """The record that makes ``value`` (a construction's argument) a recorded event: ``s.record_event()`` itself,
    a local bound only to such calls, or a local event recorded with ``ev.record(...)``."""
    if isinstance(value, cst.Call):
        return value if call_name(value) == "record_event" else None
    if not isinstance(value, cst.Name) or value.value in fn.all_params:
        return None
    bound = fn.name_assigns.get(value.value, ())
    if bound and all(call_name(v) == "record_event" for v in bound):
        return bound[0]
    if bound and all(isinstance(v, cst.Call) and (dotted(v.func) or "").rsplit(".", 1)[-1] == "Event" for v in bound):
        return next((site.node for site in fn.calls if site.method == "record"
                     and isinstance(site.node.func, cst.Attribute) and isinstance(site.node.func.value, cst.Name)
                     and site.node.func.value.value == value.value), None)
    return None


def _left_pending(project: Project, model: FileModel, fn: FunctionInfo, record: cst.CSTNode,
                  value: cst.BaseExpression) -> bool:
    """Does the constructing function leave the recorded work to the record's holder: no join after the record
    (a wait / synchronisation / query call, or a call named for one), and the event named nowhere else than in
    its binding, its record and the construction? And is its stream not joined after the work by other code of
    the class (a leftover event, :mod:`~streamlint.model.flow.deadevents`)?"""
    from streamlint.model.flow.deadevents import recorded_on_joined_stream

    line = model.span(record).start_line
    for site in fn.calls:
        method = (site.method or "").lower()
        if (site.method in _JOIN_CALLS or "wait" in method or "sync" in method) \
                and model.span(site.node).start_line >= line:
            return False
    if isinstance(value, cst.Name):
        records = sum(1 for site in fn.calls if site.method == "record" and isinstance(site.node.func, cst.Attribute)
                      and isinstance(site.node.func.value, cst.Name) and site.node.func.value.value == value.value)
        if _uses(fn.node, value.value) > len(fn.name_assigns.get(value.value, ())) + records + 1:
            return False  # (named again: waited, handed on, kept elsewhere)
    owner = model.classes.get(fn.class_name or "")
    if owner is not None and owner.methods.get(fn.node.name.value) is fn:
        record_node = _statement_record(fn, record)
        if record_node is not None and recorded_on_joined_stream(project, model, owner, fn, record_node):
            return False
    return True


def _statement_record(fn: FunctionInfo, record: cst.CSTNode) -> cst.CSTNode | None:
    """The node deadevents reads a record from: the ``ev = s.record_event()`` assignment, else the call."""
    for a in fn.assigns:
        if a.value is record:
            return a.node
    return record if isinstance(record, cst.Call) else None


def _handed_on(fn: FunctionInfo, param: str) -> bool:
    """Does ``fn`` hand the record ``param`` itself on: an argument of a call that is not a test (bare or in a
    display), the receiver of a method call (the record's own method may wait), stored, returned / yielded, a
    ``with`` item, or captured by a nested function? ``ticket.slot`` (another field) or ``x is ticket`` is not."""
    for node in local_nodes(fn.node.body):
        if isinstance(node, (cst.FunctionDef, cst.Lambda)) and _bare(node, param):
            return True
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and _is(node.func.value, param):
                return True
            if (call_name(node) or "") not in _LOOKS and any(_bare(a.value, param) for a in node.args):
                return True
        elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            if node.value is not None and _bare(node.value, param):
                return True
        elif isinstance(node, (cst.Return, cst.Yield)) and node.value is not None and _bare(node.value, param):
            return True
        elif isinstance(node, cst.WithItem) and _bare(node.item, param):
            return True
    return False


def _is(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _bare(node: cst.CSTNode, name: str) -> bool:
    """``name`` itself, or in a display / starred / call argument of ``node`` (not as the base of an attribute,
    a subscript, a comparison or an f-string: those look at it)."""
    if _is(node, name):
        return True
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return any(_bare(e.value, name) for e in node.elements)
    if isinstance(node, cst.Dict):
        return any(isinstance(e, cst.DictElement) and _bare(e.value, name) for e in node.elements)
    if isinstance(node, (cst.StarredElement, cst.Arg)):
        return _bare(node.value, name)
    if isinstance(node, (cst.FunctionDef, cst.Lambda)):
        return any(_is(n, name) for n in descendants(node))
    return False



def _names_field(fn: FunctionInfo, param: str, field: str) -> bool:
    """Does ``fn`` name ``param.<field>`` (or take it with ``getattr``) anywhere?"""
    for n in descendants(fn.node.body):
        if isinstance(n, cst.Attribute) and n.attr.value == field and _is(n.value, param):
            return True
        if isinstance(n, cst.Call) and call_name(n) == "getattr" and n.args and _is(n.args[0].value, param):
            return True
    return False


def field_consumed(project: Project, field: str, owner: str | None = None) -> bool:
    """Does any code of the project mention ``<x>.<field>`` otherwise than storing into it (an assignment target),
    recording on it (``x.field.record(s)``) or testing it (``if x.field is None``, ``if x.field:``)? Any other
    mention (a wait, a synchronisation, a query, an alias, a hand-on, a return) may consume the event. ``owner``:
    the record class; a mention whose receiver cannot be its object (``self`` of an unrelated class, a parameter
    typed or bound as one: :func:`~streamlint.model.flow.joinowners.may_reach`) does not count. Past the
    caller-file bound the answer is yes (the record is handed back: files that never name its class hold it)."""
    from streamlint.model.flow.joinowners import may_reach, owner_class
    from streamlint.model.options import MAX_CALLER_FILES

    memo = derived(project, "ticket_field_consumed")
    key = (field, owner)
    if key in memo:
        return memo[key]
    memo[key] = False
    paths = project.paths_containing((f".{field}".encode(),))
    found = owner_class(project, owner) if owner is not None else None
    # (no narrowing to the files naming the record class past the bound: a ticket is handed back by construction,
    # and its holders wait on it from files that never name its class, `t = cache.fetch(..)` then a helper)
    if len(paths) > MAX_CALLER_FILES:
        memo[key] = True
        return True
    for model in filter(None, map(project.file, paths)):
        if found is None:
            consumed = _consumed_in(model.module, field)
        else:
            consumed = any(_consumed_in(s, field) for s in model.module.body
                           if not isinstance(s, (cst.FunctionDef, cst.ClassDef))) \
                or any(_consumed_in(fn.node.body, field, lambda n, fn=fn, m=model: may_reach(
                    project, m, fn, n, field, owner)) for fn in model.iter_functions())  # type: ignore[arg-type]
        if consumed:
            memo[key] = True
            return True
    return False


def _consumed_in(root: cst.CSTNode, field: str, reach=None) -> bool:
    stack: list[tuple[cst.CSTNode, str]] = [(root, "")]
    while stack:
        n, role = stack.pop()
        if isinstance(n, cst.Attribute) and n.attr.value == field:
            if role not in ("store", "test", "record") and (reach is None or reach(n)):
                return True
            continue
        if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            stack += [(t, "store") for t in targets]
            if n.value is not None:
                stack.append((n.value, ""))
            continue
        if isinstance(n, (cst.If, cst.While)):
            stack.append((n.test, "test"))
            stack += [(c, "") for c in children(n) if c is not n.test]
            continue
        if isinstance(n, cst.Comparison) and all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in n.comparisons):
            stack += [(c, "test") for c in children(n)]
            continue
        if isinstance(n, cst.UnaryOperation) and isinstance(n.operator, cst.Not):
            stack.append((n.expression, "test"))
            continue
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "record":
            stack.append((n.func.value, "record"))
            stack += [(a, "") for a in n.args]
            continue
        if role == "test" and isinstance(n, (cst.BooleanOperation, cst.Comparison)):
            stack += [(c, "test") for c in children(n)]  # (`a.f is None or a.f.query()`: the query still counts)
            continue
        stack += [(c, "") for c in children(n)]
    return False


def branch_joins(project: Project, file: FileModel) -> list[SilentJoin]:
    """Join steps that join a handle parameter on an early-return branch only: ``if pair is None:
    handle.wait(); return`` and then, on the path that falls through to the end, never name ``handle`` again
    (no wait, no hand-on) nor join anything else. The branch says what the step is for (its caller reads the
    work the handle stands for after the call); the path that skips it leaves that work unjoined. Not a branch
    testing the handle itself (``if handle is None: return``), and silent when the step synchronises the device
    or every seen caller makes a real join right after the call."""
    from streamlint.model.flow.joinsteps import SilentJoin, _end, handled, is_join_step
    from streamlint.model.flow.protocols import synchronizes_device

    memo = derived(project, "branch_joins")
    if id(file) in memo:
        return memo[id(file)]
    out: list[SilentJoin] = []
    if not any(q.split(".", 1)[0] in _TORCH_ROOTS for q in file.names.values()):
        memo[id(file)] = out
        return out  # (no torch import: ``ev.wait()`` is a thread's / a process's, not a device join)
    for fn in file.iter_functions():
        body = list(fn.node.body.body) if isinstance(fn.node.body, cst.IndentedBlock) else []
        if not is_join_step(fn) or not body or synchronizes_device(project, file, fn):
            continue
        for param in fn.params:
            if param in ("self", "cls") or _host_primitive(file, fn, param):
                continue
            cut = max((i for i, stmt in enumerate(body) if _joining_exit(stmt, param)), default=None)
            rest = body[cut + 1:] if cut is not None else []
            if cut is None or not rest or any(handled(stmt, param) or _joins_any(stmt) or _calls_joining(file, fn, stmt)
                                              for stmt in rest) \
                    or any(isinstance(n, (cst.Return, cst.Raise)) for stmt in rest for n in descendants(stmt)):
                continue
            if not _callers_order(project, file, fn):
                out.append(SilentJoin(fn, _end(fn), "branch-handle", param, None, body[cut]))
            break
    memo[id(file)] = out
    return out


def _joining_exit(stmt: cst.CSTNode, param: str) -> bool:
    """``if <test not naming param>: ...; param.wait(); return``: a branch that joins ``param`` (a wait /
    synchronisation call on it, or it handed to ``wait_event`` / ``wait_stream``) and leaves."""
    if not isinstance(stmt, cst.If) or stmt.orelse is not None or any(_is(n, param) for n in descendants(stmt.test)):
        return False
    inner = list(stmt.body.body) if isinstance(stmt.body, cst.IndentedBlock) else []
    last = inner[-1] if inner else None
    if not (isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, cst.Return) for s in last.body)):
        return False
    for n in descendants(stmt.body):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute):
            method = n.func.attr.value
            if method in _JOIN_CALLS - {"query"} and _is(n.func.value, param):
                return True
            if method in ("wait_event", "wait_stream") and any(_is(a.value, param) for a in n.args):
                return True
    return False


def _host_primitive(file: FileModel, fn: FunctionInfo, param: str) -> bool:
    """Is ``param`` annotated with a host concurrency type (``threading.Event``, an ``asyncio`` / process /
    ``concurrent.futures`` object): its ``wait()`` blocks the host, it stands for no device work."""
    annotation = param_annotation(fn, param)
    qual = (file.resolve(annotation, fn) or "") if annotation is not None else ""
    return qual.split(".", 1)[0] in _HOST_ROOTS


def _calls_joining(file: FileModel, fn: FunctionInfo, stmt: cst.CSTNode) -> bool:
    """Does the statement call a method of ``fn``'s class (``self._drain()``) or a function of the file that
    makes a join call itself (it may join the handle with the rest of the pending work)?"""
    cls = file.classes.get(fn.class_name or "")
    for n in descendants(stmt):
        if not isinstance(n, cst.Call):
            continue
        callee = None
        if isinstance(n.func, cst.Attribute) and _is(n.func.value, "self") and cls is not None:
            callee = cls.methods.get(n.func.attr.value)
        elif isinstance(n.func, cst.Name):
            callee = next((f for f in file.iter_functions() if f.class_name is None
                           and f.node.name.value == n.func.value), None)
        if callee is not None and callee is not fn and _joins_any(callee.node.body):
            return True
    return False


def _joins_any(stmt: cst.CSTNode) -> bool:
    """Does the statement make any join call (a wait, a synchronisation, a call named for one)?"""
    return any(isinstance(n, cst.Call) and ((call_name(n) or "") in _JOIN_CALLS or "wait" in (call_name(n) or "")
                                            or "sync" in (call_name(n) or "")) for n in descendants(stmt))


__all__ = ["branch_joins", "field_consumed", "record_model", "ticket_fields", "ticket_joins"]
