"""Syntactic facts about `npu_wait_tensor` / `torchair.ops.record/wait` / event waits (SL202, SL203).

Small helpers over one file: which statement holds a call, later loads of a name, the stream scope a
call runs in, and whether a ``self.*`` event is ever recorded anywhere in its class.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.flow.elementsets import FIRST_OUT, LAST_OUT, element_origins, origins
from streamlint.model.file import FileModel
from streamlint.model.filefacts import CallSite, FunctionInfo
from streamlint.model.streamjoins import issues_stream_work, role_of_left_out, stream_container_store, \
    stream_field_store
from streamlint.model.streams import MAIN, scope_stream_key
from streamlint.model.syntax import local_nodes, memoised, node_code, node_memo
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project


def _small_statements(block: cst.CSTNode) -> Iterator[cst.BaseSmallStatement]:
    """Every small statement under a function body (not descending into expressions or nested defs)."""
    stack: list[cst.CSTNode] = [block]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleStatementLine):
            yield from node.body
        elif isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            stack.extend(reversed(node.body))
        elif isinstance(node, (cst.If, cst.For, cst.While, cst.With, cst.Try, cst.TryStar)):
            for attr in ("body", "orelse", "finalbody"):
                part = getattr(node, attr, None)
                if part is not None:
                    stack.append(part)
            for handler in getattr(node, "handlers", ()):
                stack.append(handler.body)
        elif isinstance(node, cst.Else) or isinstance(node, cst.Finally):
            stack.append(node.body)


def statement_of(fn: FunctionInfo, call: cst.Call) -> cst.BaseSmallStatement | None:
    """The small statement whose value *is* ``call`` (``call(...)``, ``x = call(...)``, ``return call(...)``)."""
    for small in _small_statements(fn.node.body):
        if getattr(small, "value", None) is call:
            return small
    return None


def result_discarded(fn: FunctionInfo, call: cst.Call) -> bool:
    return isinstance(statement_of(fn, call), cst.Expr)


def loads_after(file: FileModel, fn: FunctionInfo, name: str, call: cst.Call) -> bool:
    """Is ``name`` read after ``call`` in program order (or anywhere in a loop containing the call)?"""
    # program order and containment from the lexical pre-order of the function's local nodes (no
    # positions): a node's local descendants follow it contiguously
    nodes = file.local_nodes_of(fn.node.body)
    where = {id(n): i for i, n in enumerate(nodes)}

    def extent(node: cst.CSTNode) -> tuple[int, int]:
        first = where[id(node)]
        return first, first + sum(1 for _ in local_nodes(node)) - 1

    if id(call) not in where:
        return True  # inside a lambda or nested definition: not judged (no finding)
    start, end = extent(call)
    loops = [span for span in (extent(n) for n in nodes[:start] if isinstance(n, (cst.For, cst.While)))
             if end <= span[1]]
    stores: set[int] = set()
    for node in nodes:
        if isinstance(node, cst.AssignTarget) or isinstance(node, (cst.For, cst.CompFor)):
            stores |= {id(n) for n in local_nodes(node.target) if isinstance(n, cst.Name)}
        elif isinstance(node, cst.Attribute):
            stores.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            stores.add(id(node.keyword))
    names = _plain_aliases(fn, name)
    for node in nodes:
        if not isinstance(node, cst.Name) or node.value not in names or id(node) in stores:
            continue
        at = where[id(node)]
        if at > end:  # starts after the call ends
            return True
        if any(lo <= at <= hi for lo, hi in loops) and not start <= at <= end:
            return True
    return False


def _plain_aliases(fn: FunctionInfo, name: str) -> set[str]:
    """``name`` and the names bound to the same object by plain assignments (``h = x`` / ``x = h``)."""
    names = {name}
    changed = True
    while changed:
        changed = False
        for target, values in fn.name_assigns.items():
            for value in values:
                if isinstance(value, cst.Name) and (value.value in names) != (target in names):
                    names |= {value.value, target}
                    changed = True
    return names


def _contains(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """Containment without looking into nested definitions (a name in a nested def is another scope)."""
    return any(n is inner for n in local_nodes(outer))


def stream_scope_key(project: Project, file: FileModel, site: CallSite | None) -> tuple[str, cst.With | None]:
    """(stream key, with-statement) of the innermost stream scope around a call; (MAIN, None) outside."""
    scope = site.scope if site is not None else None
    for use in project.enclosing_scopes(file, scope):
        for api in use.uses:
            if api.role in (Role.STREAM_SWITCH, Role.NATIVE_STREAM_CONTEXT):
                return scope_stream_key(file, api), use.site.with_node
    return MAIN, None


def later_op_on_stream(project: Project, file: FileModel, fn: FunctionInfo, site: CallSite) -> bool:
    """Is there an op (call or arithmetic) after ``site`` in ``fn`` that runs on the same stream?"""
    key = stream_scope_key(project, file, site)
    order = file.lexical_index(fn.node)  # program order without positions
    end = order[id(site.node)][1]
    ordering = {Role.OPS_WAIT, Role.OPS_RECORD, Role.TAGGED_EVENT_RECORD, Role.TAGGED_EVENT_WAIT}
    for other in fn.calls:
        if order[id(other.node)][0] <= end:  # before the call, the call itself or inside it
            continue
        if any(u.role in ordering or u.role in apis.STREAM_SCOPE_ROLES for u in project.api_uses(file, other)):
            continue
        if stream_scope_key(project, file, other)[0] == key[0]:
            return True
    if key[0] == MAIN:
        for small in _small_statements(fn.node.body):
            if order[id(small)][0] <= end or file.scope_of.get(id(small)):
                continue
            if any(isinstance(n, cst.BinaryOperation) for n in local_nodes(small)):
                return True
    return False


def first_in_stream_scope(project: Project, file: FileModel, site: CallSite) -> bool:
    """Is the call the first statement of the body of the stream scope it is in?"""
    key = stream_scope_key(project, file, site)
    with_node = key[1] if key is not None else None
    if not isinstance(with_node, cst.With) or site.scope is None or site.scope.with_node is not with_node:
        return False
    body = with_node.body.body if isinstance(with_node.body, cst.IndentedBlock) else []
    return bool(body) and _contains(body[0], site.node)


def event_recorded_in_class(file: FileModel, fn: FunctionInfo, attr: str) -> bool:
    """Is ``self.<attr>`` ever used other than being waited on / assigned, anywhere in its class?
    (A record through a helper or a wrapper counts: only pure waits make the answer False.)"""
    cls = file.classes.get(fn.class_name or "")
    if cls is None:
        return True
    used = getattr(cls, "_sl_event_uses", None)
    if used is None:
        used = set()
        for method in cls.methods.values():
            stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(method.node.body, None)]
            while stack:
                node, parent = stack.pop()
                if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
                    # `self.done = stream.record_event()` (the stream's method records the event it returns), or an
                    # event this method recorded (`ev.record(s); self.done = ev`)
                    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                    fields = [t.attr.value for t in targets if isinstance(t, cst.Attribute)
                              and isinstance(t.value, cst.Name) and t.value.value == "self"]
                    if fields and _recorded_event(method.node, node.value):
                        used.update(fields)
                if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
                    if not _wait_position(node, parent):
                        used.add(node.attr.value)
                    continue
                if isinstance(node, cst.Arg) and isinstance(parent, cst.Call) and _is_wait_call(parent):
                    inner = node.value
                    if isinstance(inner, cst.Attribute) and isinstance(inner.value, cst.Name) \
                            and inner.value.value == "self":
                        continue
                stack.extend((child, node) for child in children(node))
        cls._sl_event_uses = used  # type: ignore[attr-defined]
    return attr in used


def event_recorded_elsewhere(project: Project, attr: str) -> bool:
    """Does code outside the class record the event through the object that holds it
    (``call.ready.record()`` by the owner of ``call``)? Then a wait on ``self.<attr>`` is effective."""
    for model in project.files_containing((f".{attr}.record(".encode(),)):
        for site in model.calls:
            func = site.node.func
            if site.method != "record" or not isinstance(func, cst.Attribute):
                continue
            holder = func.value
            if isinstance(holder, cst.Attribute) and holder.attr.value == attr \
                    and not (isinstance(holder.value, cst.Name) and holder.value.value == "self"):
                return True
    return False


def _is_wait_call(call: cst.Call) -> bool:
    name = call.func.attr.value if isinstance(call.func, cst.Attribute) else getattr(call.func, "value", "")
    return isinstance(name, str) and "wait" in name


def _wait_position(node: cst.Attribute, parent: cst.CSTNode | None) -> bool:
    if isinstance(parent, cst.AssignTarget):
        return True
    return isinstance(parent, cst.Attribute) and parent.attr.value in ("wait", "query", "synchronize")


# ---- join loops that leave an element of a collection of recorded events out

@dataclass(frozen=True)
class PartialJoin:
    """A loop that waits on the elements of ``collection`` but leaves out its ``dropped`` element
    ("first" / "last"), where ``evidence`` stores a recorded event into a collection of that name."""

    loop: cst.For
    collection: str
    dropped: str
    evidence: tuple[FileModel, cst.CSTNode]
    field: str | None = None  # the elements are objects, each waited through this event field
    stream: bool = False  # the elements (or their ``field``) are side streams the project made, not events


def loop_collection(fn_node: cst.FunctionDef, loop: cst.For) \
        -> tuple[cst.BaseExpression, str, list[str], str | None] | None:
    """(collection, dropped element, names bound to its elements, the field of each element they take) of a
    loop reaching every element of a container but its first or last: ``for e in xs[1:]``,
    ``list(enumerate(xs))[:-1]``, ``list(d.items())[1:]``, ``[r.ready for r in reqs][1:]`` (field ``ready``),
    through local aliases (:mod:`~streamlint.model.flow.elementsets`); None for any other loop."""
    bound = [(name, o) for name, found in origins(fn_node).items() for o in found
             if o.node is loop and o.reach in (FIRST_OUT, LAST_OUT)]
    if not bound:
        return None
    coll, field, reach = bound[0][1].container, bound[0][1].field, bound[0][1].reach
    names = [name for name, o in bound if o.container is coll and o.field == field]
    if not isinstance(coll, (cst.Name, cst.Attribute, cst.Subscript)):
        return None
    return coll, "first" if reach == FIRST_OUT else "last", names, field


def _joined_otherwise(file: FileModel, fn: FunctionInfo, loop: cst.For) -> bool:
    """Does ``fn`` order the left-out element's work another way after the loop: a ``wait_stream`` or a
    ``synchronize()`` (of the device, a stream or an event)?"""
    order = file.lexical_index(fn.node)  # program order without positions
    end = order[id(loop)][1]
    return any(site.method in ("wait_stream", "synchronize") and id(site.node) in order
               and order[id(site.node)][0] > end for site in fn.calls)


def _own_field_class(file: FileModel, fn: FunctionInfo, coll: cst.BaseExpression) -> str | None:
    """The class of ``fn`` when the container is its own field (``self.events``, assigned by a method of the
    class): only that class's records of its elements are evidence, not another class's same-named field."""
    while isinstance(coll, cst.Subscript):
        coll = coll.value
    if not (isinstance(coll, cst.Attribute) and isinstance(coll.value, cst.Name) and coll.value.value == "self"):
        return None
    cls = file.classes.get(fn.class_name or "")
    target = f"self.{coll.attr.value}"
    if cls is None or not any(a.target == target for m in cls.methods.values() for a in m.assigns):
        return None
    return cls.name


def _element_records(model: FileModel, name: str, skip: cst.CSTNode, owner: str | None = None) \
        -> Iterator[cst.CSTNode]:
    """Records, in functions of ``model`` but ``skip``, of the elements of an attribute container named
    ``name`` in place (``for d, ev in self.events.items(): ... ev.record(s)``, ``s.record_event(self.evs[i])``,
    ``ev = self.evs[k]; ev.record()``): the container holds the join handles of that work. With ``owner``, only
    the methods of that class."""
    for fn in model.iter_functions():
        if fn.node is skip or owner is not None and fn.class_name != owner:
            continue
        for site in fn.calls:
            call = site.node
            if not isinstance(call.func, cst.Attribute):
                continue
            target = call.func.value if site.method == "record" else \
                call.args[0].value if site.method == "record_event" and call.args else None
            if target is None:
                continue
            if any(o.field is None and o.holder == name and not isinstance(_root(o.container), cst.Name)
                   for o in element_origins(fn.node, target)):
                yield call


def _holder_name(e: cst.BaseExpression) -> str | None:
    """``self.recv_events[chunk]`` -> ``recv_events``; ``context.events`` -> ``events``."""
    while isinstance(e, cst.Subscript):
        e = e.value
    if isinstance(e, cst.Attribute):
        return e.attr.value
    if isinstance(e, cst.Name):
        return e.value
    return None


def waits_on(body: cst.CSTNode, names: list[str]) -> bool:
    """Does the loop body wait on a loop element (``s.wait_event(e)``, ``e.wait()``, ``e.synchronize()``,
    ``s.wait_stream(e)``)?"""
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method, receiver = node.func.attr.value, node.func.value
            if method in ("wait_event", "wait_stream") and node.args \
                    and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value in names:
                return True
            if method in ("wait", "synchronize") and isinstance(receiver, cst.Name) and receiver.value in names:
                return True
        if not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(children(node))
    return False


def _waited_field(body: cst.CSTNode, names: list[str]) -> str | None:
    """The event (or stream) field of a loop element the loop body waits on (``s.wait_event(o.done)``,
    ``o.done.wait()``, ``o.done.synchronize()``, ``cur.wait_stream(o.update)``): a collection of objects that
    each carry the event or the side stream of their own work."""
    for node in local_nodes(body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method, receiver = node.func.attr.value, node.func.value
            held = node.args[0].value if method in ("wait_event", "wait_stream") and node.args else \
                receiver if method in ("wait", "synchronize") else None
            if isinstance(held, cst.Attribute) and isinstance(held.value, cst.Name) and held.value.value in names:
                return held.attr.value
    return None


_JOIN_CALLS = frozenset({"wait_event", "wait", "synchronize", "wait_stream", "current_stream"})


def only_joins(body: cst.CSTNode) -> bool:
    """A loop body that only joins (its calls wait; the rest is host bookkeeping): leaving out one element
    leaves out only its join, not its work too."""
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call):
            func = node.func
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) \
                else None
            if name not in _JOIN_CALLS:
                return False
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        stack.extend(children(node))
    return True


def _field_record(project: Project, file: FileModel, attr: str) -> tuple[FileModel, cst.CSTNode] | None:
    """Where an object field ``attr`` is recorded as an event after device work, in this file or elsewhere in
    the project: ``self.<attr>.record(...)`` or ``s.record_event(self.<attr>)``."""
    for model in itertools.chain((file,), (m for m in project.files_containing((attr.encode(),)) if m is not file)):
        for fn in model.iter_functions():
            for site in fn.calls:
                call = site.node
                if not isinstance(call.func, cst.Attribute):
                    continue
                target = call.func.value if call.func.attr.value == "record" else \
                    call.args[0].value if call.func.attr.value == "record_event" and call.args else None
                if isinstance(target, cst.Attribute) and target.attr.value == attr:
                    return model, call
    return None


def _recorded_event(fn_node: cst.CSTNode, value: cst.BaseExpression) -> bool:
    """Is a stored value an event recorded after device work: ``stream.record_event()`` (also in a
    conditional expression), or a name recorded in the same function (``e.record(stream)``)?"""
    exprs = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
    for e in exprs:
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "record_event":
            return True
        if isinstance(e, cst.Name) and e.value in node_memo("recorded_names", fn_node, _recorded_names):
            return True
    return False


def _recorded_names(fn_node: cst.CSTNode) -> frozenset[str]:
    """The names ``e`` of every ``e.record(...)`` in ``fn_node`` (nested definitions included)."""
    names: set[str] = set()
    stack: list[cst.CSTNode] = [fn_node]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value == "record" and isinstance(node.func.value, cst.Name):
            names.add(node.func.value.value)
        stack.extend(children(node))
    return frozenset(names)


def _stores_in(fn_node: cst.FunctionDef, name: str, plain: bool) -> Iterator[cst.CSTNode]:
    """Stores of a recorded event into a collection named ``name`` in one function body (not its
    nested defs): ``<...>.name.append(e)`` / ``<...>.name[k] = e``; ``plain``: the collection is a plain
    name (``events``), else an attribute (``ctx.events``)."""
    stack: list[cst.CSTNode] = [fn_node.body]
    while stack:
        cur = stack.pop()
        if isinstance(cur, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(cur, cst.Call) and isinstance(cur.func, cst.Attribute) and cur.func.attr.value == "append" \
                and len(cur.args) == 1 and _holder_name(cur.func.value) == name \
                and plain == isinstance(_root(cur.func.value), cst.Name) \
                and _recorded_event(fn_node, cur.args[0].value):
            yield cur
        if isinstance(cur, cst.Assign) and _recorded_event(fn_node, cur.value) \
                and any(isinstance(t.target, cst.Subscript) and _holder_name(t.target) == name
                        and plain == isinstance(_root(t.target), cst.Name) for t in cur.targets):
            yield cur
        stack.extend(children(cur))


def _event_stores(model: FileModel, name: str, skip: cst.CSTNode,
                  within: cst.CSTNode | None) -> Iterator[cst.CSTNode]:
    """:func:`_stores_in` over the functions of a file but ``skip``; with ``within`` (a plain name in a
    closure) only the functions nested in it (itself included)."""
    for fn in model.iter_functions():
        if fn.node is skip or (within is not None and not (fn.node is within or _contains(within, fn.node))):
            continue
        yield from _stores_in(fn.node, name, within is not None)


def _root(e: cst.BaseExpression) -> cst.BaseExpression:
    """``self.a[i].b`` -> the whole chain when it has an attribute, ``xs[i]`` -> ``xs`` (a plain name)."""
    while isinstance(e, cst.Subscript):
        e = e.value
    return e


def element_taken(fn_node: cst.FunctionDef, code: str, dropped: str, text: str) -> bool:
    """Does ``fn`` take the element the loop leaves out by its index, from the container or a local alias of it
    (``self.events[0]``; ``evs = self.events`` then ``evs[0]``)? Then it may wait on it outside the loop."""
    names = {code.replace(" ", "")}
    for n in local_nodes(fn_node.body):  # aliases: `evs = self.events`, `pending = list(self.events.values())`
        if isinstance(n, cst.Assign) and isinstance(n.value, (cst.Name, cst.Attribute, cst.Call)) \
                and any(name in node_code(n.value).replace(" ", "") for name in names):
            names.update(node_code(t.target) for t in n.targets if isinstance(t.target, cst.Name))
    flat = text.replace(" ", "")
    index = "0" if dropped == "first" else "-1"
    return any(f"{name}[{index}]" in flat for name in names)


def partial_joins(project: Project, file: FileModel, fn: FunctionInfo) -> list[PartialJoin]:
    """Join loops of ``fn`` over ``xs[1:]`` / ``xs[:-1]`` (also through ``list(enumerate(xs))`` /
    ``.values()`` / ``.items()``) that wait on each element, where ``xs`` holds events recorded after
    device work (a store of a recorded event into a collection of that name: in the enclosing function's
    closure for a plain local name, anywhere in the project for an attribute), none of them stored by
    ``fn`` itself, and ``fn`` never names the left-out element (``xs[0]`` / ``xs[-1]``): that element's
    work is never waited for. A collection ``fn`` fills itself is the dataflow's business
    (:mod:`~streamlint.model.flow.elements`)."""
    found: list[PartialJoin] = []
    walked = memoised("local_nodes", fn.node.body)  # (the body's local walk, when the analysis made it)
    if isinstance(walked, tuple) and not any(type(n) is cst.For for n in walked):
        return found  # no loop (the walk below skips nested definitions too; a lambda holds no statement)
    text = None
    stack: list[cst.CSTNode] = [fn.node.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        stack.extend(children(node))
        if not isinstance(node, cst.For):
            continue
        parsed = loop_collection(fn.node, node)
        if parsed is None or _joined_otherwise(file, fn, node):
            continue
        coll, dropped, names, field = parsed
        name = _holder_name(coll)
        if name is None:
            continue
        if field is not None:  # `for e in [r.ready for r in reqs][1:]`: the elements' event field
            if waits_on(node.body, names) and only_joins(node.body):
                evidence = _field_record(project, file, field)
                if evidence is not None:
                    found.append(PartialJoin(node, file.code(coll), dropped, evidence, field))
            continue
        if not waits_on(node.body, names):
            attr = _waited_field(node.body, names)
            if attr is not None and only_joins(node.body):
                evidence, stream = _field_record(project, file, attr), False
                if evidence is None and not issues_stream_work(fn):  # each element carries a side stream of its
                    evidence, stream = stream_field_store(project, file, attr), True  # own (model/streamjoins.py)
                code = file.code(coll)
                text = text if text is not None else file.code(fn.node)
                if evidence is not None and not element_taken(fn.node, code, dropped, text):
                    found.append(PartialJoin(node, code, dropped, evidence, attr, stream))
            continue
        text = text if text is not None else file.code(fn.node)
        code = file.code(coll)
        if element_taken(fn.node, code, dropped, text):
            continue
        plain = isinstance(_root(coll), cst.Name)
        if next(_stores_in(fn.node, name, plain), None) is not None:
            continue  # fn records the elements itself: the dataflow sees them
        evidence = None
        if plain:
            if fn.parent is not None:
                evidence = next(((file, st) for st in _event_stores(file, name, fn.node, fn.parent.node)), None)
        else:
            owner = _own_field_class(file, fn, coll)
            for model in itertools.chain((file,), (m for m in project.files_containing((name.encode(),))
                                                   if m is not file)):
                evidence = next(((model, st) for st in itertools.chain(
                    _event_stores(model, name, fn.node, None),
                    _element_records(model, name, fn.node, owner) if owner is None or model is file else ())),
                    None)
                if evidence is not None:
                    break
            if evidence is None and only_joins(node.body) and not issues_stream_work(fn) \
                    and not role_of_left_out(file, fn, name, dropped):  # the side streams the object made
                evidence = stream_container_store(project, file, fn, name, owner)  # (streamjoins)
                if evidence is not None:
                    found.append(PartialJoin(node, code, dropped, evidence, stream=True))
                continue
        if evidence is not None:
            found.append(PartialJoin(node, code, dropped, evidence))
    return found


__all__ = ["PartialJoin", "consumes_event", "partial_joins", "event_recorded_elsewhere", "event_recorded_in_class", "first_in_stream_scope", "later_op_on_stream", "loads_after",
           "result_discarded", "signaller_forks", "statement_of", "stream_scope_key", "loop_collection", "element_taken",
           "only_joins", "waits_on"]


# host synchronisation objects shared between threads: class -> the methods that block until another
# thread signals (`train_flag.wait()`, `jobs.get()`)
_HANDSHAKE_TYPES = {
    "threading.Event": ("wait",), "threading.Condition": ("wait", "wait_for"), "threading.Barrier": ("wait",),
    "threading.Semaphore": ("acquire",), "threading.BoundedSemaphore": ("acquire",),
    "queue.Queue": ("get",), "queue.SimpleQueue": ("get",), "queue.LifoQueue": ("get",),
    "queue.PriorityQueue": ("get",),
}


def host_handshake(file: FileModel, fn: FunctionInfo, call: cst.Call) -> bool:
    """Does ``call`` block the host until another thread signals it (``train_flag.wait()`` on a
    ``threading.Event``, ``jobs.get()`` on a ``queue.Queue``)? The receiver is a parameter annotated with
    one of those classes, or a local / ``self.*`` attribute made by its constructor. The other thread may
    order the streams before it signals (a companion ``s.wait_stream(current)`` then ``flag.set()``)."""
    func = call.func
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, (cst.Name, cst.Attribute)):
        return False
    method, holder = func.attr.value, file.code(func.value)
    made: list[cst.BaseExpression] = []
    if isinstance(func.value, cst.Name):
        made += fn.name_assigns.get(holder, [])
        for p in (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params):
            if p.name.value == holder and p.annotation is not None:
                made.append(p.annotation.annotation)
    elif holder.startswith("self.") and fn.class_name in file.classes:
        made += [a.value for m in file.classes[fn.class_name].methods.values() for a in m.assigns
                 if a.target == holder]
    for expr in made:
        target = expr.func if isinstance(expr, cst.Call) else expr
        qualname = file.resolve(target, fn) if isinstance(target, (cst.Name, cst.Attribute)) else None
        if qualname is not None and method in _HANDSHAKE_TYPES.get(qualname, ()):
            return True
    return False


# the methods that wake a thread blocked in one of the waits above (``flag.set()``, ``jobs.put(x)``)
_SIGNALS = frozenset(("set", "notify", "notify_all", "release", "put", "put_nowait"))


def _last_name(e: cst.BaseExpression) -> str | None:
    return e.attr.value if isinstance(e, cst.Attribute) else e.value if isinstance(e, cst.Name) else None


_SIGNAL_EVENTS: "weakref.WeakKeyDictionary[FileModel, list]" = weakref.WeakKeyDictionary()


def _stream_signals(file: FileModel) -> list[list[tuple[bool, str, cst.Call]]]:
    """Per function of ``file``, in lexical order: its forks (``True``, ``<...>.s.wait_stream(...)`` /
    ``wait_event``: the stream's last name) and signals (``False``, ``<...>.flag.set()``: the receiver's last
    name). One walk of the module, shared by every handshake :func:`signaller_forks` is asked about."""
    found = _SIGNAL_EVENTS.get(file)
    if found is None:
        found = []
        for fn in file.functions.values():
            events: list[tuple[bool, str, cst.Call]] = []
            for node in local_nodes(fn.node):
                if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
                    continue
                method, last = node.func.attr.value, _last_name(node.func.value)
                if method in ("wait_stream", "wait_event") and node.args and last is not None:
                    events.append((True, last, node))
                elif method in _SIGNALS and last is not None:
                    events.append((False, last, node))
            found.append(events)
        _SIGNAL_EVENTS[file] = found
    return found


def signaller_forks(file: FileModel, call: cst.Call) -> frozenset[str]:
    """The streams (last name, ``gossip_stream`` for ``self.gossip_stream``) that every thread waking the
    handshake ``call`` (``train_flag.wait()``) forks before it signals: each ``<...>.train_flag.set()`` of
    the module comes after a ``<...>.gossip_stream.wait_stream(current)`` in its function. The waiter's
    current-stream work queued before it blocked is then ordered before that stream's next work (both
    threads start on the device's default stream). Empty when a signaller does not fork, or none is seen."""
    name = _last_name(call.func.value) if isinstance(call.func, cst.Attribute) else None
    if name is None:
        return frozenset()
    common: set[str] | None = None
    for events in _stream_signals(file):
        forked: set[str] = set()
        for kind, last, node in events:
            if kind:
                forked.add(last)
            elif last == name and node is not call:
                common = set(forked) if common is None else common & forked
    return frozenset(common or ())


_EVENT_USES = ("wait_event", "wait", "synchronize", "query", "elapsed_time")


def consumes_event(site, names) -> bool:
    """Does the call ``site`` wait on (or otherwise consume) an event ``names(expr)`` recognises: the receiver of
    ``wait_event`` / ``wait()`` / ``synchronize()`` / ``query()`` / ``elapsed_time()``, or an argument of any call
    but a record (a helper that may wait it)?"""
    func = site.node.func
    if site.method in _EVENT_USES and isinstance(func, cst.Attribute) and names(func.value):
        return True
    return site.method not in ("record", "record_event") and any(names(a.value) for a in site.node.args)
