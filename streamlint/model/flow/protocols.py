"""Stream protocols on object state across the methods of a class (issue 16 §3, "Caller protocols",
"Streams the way training frameworks hold them").

Training and serving code keeps its streams, events and buffers on ``self``: ``prefetch()`` / ``start()``
/ ``reload()`` forks work onto ``self.stream`` that writes ``self.buf`` (and records ``self.event``
after it), and ``get()`` / ``forward()`` / ``finish()`` later reads ``self.buf`` on the current stream,
after ``current_stream().wait_stream(self.stream)`` or a wait on ``self.event``. The order of the two
calls is the caller's, so neither method alone shows the race.

This module summarises, per class, what each method leaves on a side stream for the others: it runs the
interpreter on every method with a side-stream scope (the *producer*; also one whose scope is in a helper
method of the class it calls, ``pack()`` running ``self._spill(host, act)`` and keeping ``host``) and keeps,
at its exits (the end of its body and each ``return``), the
``self.*`` fields whose last write is queued on a stream the current stream has not joined (with the
``self.*`` events recorded after that write). A *consumer* method reading such a field is then analysed
with the producer's write pending at its entry (:meth:`Interp.run` seeds it): a read with no join on that
path is a race (SL201, medium confidence: the order of the calls is assumed from the protocol).

Only when the class's own protocol says the join is expected in the consumer (precision first):

* the producer records a ``self.*`` event after the write (someone is meant to wait on it), or another
  consumer of the field joins the producing stream (or that event) before its own read;
* no method of the class that does not read the field joins the stream or the event (a dedicated join
  step, ``wait()``, that the caller runs between the two: the order is then the caller's, unknowable
  here), and no code outside the class reaches the stream or the event (``obj.event.wait()``,
  ``return self.event``: the join is handed out);
* the consumer is not the producer itself, nor ``__init__``, nor a method the class only ever calls inside a
  side-stream scope of the producer's (part of the producer's work on that stream: :func:`_run_inside_scopes`).

The join step itself is checked too (:func:`.droppedevents.dropped_events`): a method that tests the object's event (or one
taken from its container, ``ev = self.events.get(k)``) and drops it (``self.event = None``, ``self.events[k] =
None``) with no wait, no host sync, not handing it on, while another method records it after its work, leaves that
work joined by nobody, unless every method handing the results out waits it first (:mod:`.joinedreads`). A consumer
returning the field on a stream nobody joins must join too (:mod:`.handbacks`). Not done: globals, other objects."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.builtrecords import built_writes, named_fields
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.escapes import events_in
from streamlint.model.flow.fieldfamilies import family, family_pending, unresolved_waits, waits_on
from streamlint.model.flow.handbacks import hands_back, records_on, unjoined_hand_back
from streamlint.model.flow.inflight import asked, finished, started
from streamlint.model.flow.priorreaders import run_before_join
from streamlint.model.flow.producerbound import may_leave_pending
from streamlint.model.flow.joinhelpers import handed_to_join, join_helper_keys, join_helper_names
from streamlint.model.flow.unproven import next_call_order, order_seen, shared_stream_key, unproven_ok
from streamlint.model.flow.values import Access, ordered_before
from streamlint.model.streams import MAIN, derived
from streamlint.model.syntax import call_name, local_nodes, normalized_code

if TYPE_CHECKING:
    from streamlint.model.project import Project


Runner = Callable[["Project", FileModel, FunctionInfo, str], Any]


@dataclass(frozen=True)
class Pending:
    """A ``self.*`` field a producer method leaves written on a side stream nothing joined."""

    field: str  # ``self.buf``
    stream: str  # the stream key of the write (``self.copy_stream``)
    producer: FunctionInfo
    node: cst.CSTNode | None  # the write (a statement of the producer)
    events: tuple[str, ...]  # ``self.*`` events recorded after the write, on its stream
    family: bool = False  # ``self.F`` holds it in an entry (``self.F[k] = t``: flow/fieldfamilies.py)
    early: tuple[str, ...] = ()  # event families the producer records on the stream only before the write
    handles: bool = False  # the producer records some event on that stream (a join handle: handbacks.py)
    guessed: bool = False  # the write made a value of unknown type taken for device data (a call's result)
    unproven: str | None = None  # the class shows no join the reader is expected to make (flow/unproven.py): ""
    holder: str = ""  # the name the consumer holds the object by, when it is no method of its class (typedholders.py)
    outside: bool = False  # written by a function outside the class through a name typed to it (recordwriters.py)
    # (LOW), or the method of the class seen calling the producer and then the reader (MEDIUM)


_JOINS = ("wait_stream", "wait_event", "wait", "synchronize", "query")
# calls that take a stream or an event without handing it to anyone: joins, records, stream scopes, and the
# builtins that only inspect a value or a container (`len(self._events)`)
_STREAM_CALLS = frozenset((*_JOINS, "record_event", "record", "stream", "use_stream", "StreamContext",
                           "record_stream", "len", "bool", "id", "isinstance", "repr", "str"))
_norm = normalized_code


def joined_keys(file: FileModel, fn: FunctionInfo) -> set[str]:
    """The streams and events ``fn`` joins by their text: ``x.wait_stream(S)``, ``x.wait_event(E)``,
    ``E.wait()`` / ``E.synchronize()`` / ``E.query()``, ``S.synchronize()``."""
    out: set[str] = set()
    for site in fn.calls:
        if site.method not in _JOINS:
            continue
        node = site.node
        if site.method in ("wait_stream", "wait_event") and node.args:
            out.add(_norm(file.code(node.args[0].value)))
        elif isinstance(node.func, cst.Attribute):
            out.add(_norm(file.code(node.func.value)))
    return out


def synchronizes_device(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """A device-wide host synchronisation in ``fn`` (the API table's ``synchronize()`` role, however it is
    reached: ``torch.npu.synchronize()``, an alias, an accelerator object's ``synchronize()``)."""
    return any(use.role is apis.Role.DEVICE_SYNCHRONIZE
               for site in fn.calls if site.method == "synchronize" for use in project.api_uses(file, site))


def _mentions(file: FileModel, fn: FunctionInfo, field: str) -> bool:
    from streamlint.model.flow.joinowners import code_without_comments  # (a comment naming it is no mention)
    return re.search(rf"{re.escape(field)}\b(?!\s*=[^=])", code_without_comments(file.code(fn.node.body))) is not None


def reached_outside(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """Does code outside ``self`` reach the attribute ``attr`` (``obj.attr``, ``h.attr[i]``), anywhere in the
    project, or does a method of the class return it or pass it on?"""
    memo = derived(project, "protocol_reached_outside")
    key = (id(cls), attr)
    if key in memo:
        return memo[key]
    pattern = re.compile(rf"(?<![\w.])(?!(?:self|cls)\b)[A-Za-z_]\w*(?:\[[^\]]*\])?\.{re.escape(attr)}\b"
                         rf"(?!\s*\()(?!(?:\[[^\]]*\])?\s*=(?!=))")  # a store from outside is one more producer
    own = re.compile(rf"(?:return|yield)\b[^\n]*(?<!len\()(?<!bool\()\bself\.{re.escape(attr)}\b"  # (not `len(self.q)`)
                     rf"|(\w+)\(\s*self\.{re.escape(attr)}\s*[,)]")
    found = False
    marker = (f".{attr}".encode(),)
    naming = set(project.paths_containing((cls.name.encode(),)))
    for path in project.paths_containing(marker):  # the class's module and the modules naming it hold its objects
        if path != file.path and path not in naming:
            continue
        data = project._bytes(path)
        if data is None:
            continue
        text = data.decode("utf-8", "replace")
        if pattern.search(text):
            found = True
            break
    if not found:
        body = file.code(cls.node)  # (rendered once per class: memoised per node by the file model)
        helpers: set[str] | None = None
        for m in own.finditer(body):
            if m.group(1) in _STREAM_CALLS:
                continue
            if m.group(1) is not None and helpers is None:  # handed to a helper that only joins it: kept
                helpers = join_helper_names(project, file, cls, attr)
            if m.group(1) is None or m.group(1) not in (helpers or ()):
                found = True
                break
    memo[key] = found
    return found


def _producer_pending(project: Project, file: FileModel, fn: FunctionInfo, mode: str, runner: Runner,
                      prefix: str = "self.") -> list[Pending]:
    """Run ``fn`` and keep the ``self.*`` fields it leaves on a side stream, unjoined on every exit path that
    writes them there (``prefix``: the fields of another object ``fn`` holds, ``cand.``, on any stream of
    ``fn``'s: :mod:`.recordwriters`)."""
    own = prefix == "self."
    interp = runner(project, file, fn, mode)
    if interp is None:
        return []
    found: dict[str, Pending | None] = {}
    for st in (*interp.exits, *interp.returned):  # falling off the end or at a `return` (`return payload`)
        know = st.know(MAIN)
        handed = _handed_back(interp, st) if st in interp.returned else None
        fields = {k: sid for k, sids in interp.field_writes.items()
                  for sid in [next((i for i in reversed(sids) if i in st.stores), None)] if sid is not None}
        fields = {k: sid for k, sid in fields.items() if k.startswith(prefix)}
        fields.update({k: sid for k, sid in st.long.items() if k.startswith(prefix) and k not in fields})
        plain: set[str] = set()  # the fields whose own storage a side stream wrote on this path
        for field, sid in fields.items():
            S = st.stores.get(sid)
            lw = S.last_write if S is not None and S.kind != "host" else None
            if lw is None or lw.stream == MAIN or lw.time == 0 or "." not in field:
                continue
            plain.add(field)
            stream = lw.stream if lw.stream.startswith("self.") or not own \
                else shared_stream_key(project, file, fn, lw.stream)
            if ordered_before(lw, know) or stream is None or "[" in field \
                    or handed is not None and _handed_join(st, handed, sid, lw):
                found[field] = None  # joined on this path (or not a stream of the object's, or handed back)
                continue
            events = tuple(sorted(k for k, snap in st.events.items()
                                  if k.startswith(prefix) and snap.get(lw.stream, -1) >= lw.time)) if own \
                else tuple(sorted(k for k, e in interp.__dict__.get("field_events", {}).items() if k.startswith(prefix)
                                  and st.events.get(e, {}).get(lw.stream, -1) >= lw.time))
            old = found.get(field, 0)
            if old is None:
                continue
            if old and (old.stream != stream):
                found[field] = None
                continue
            found[field] = Pending(field, stream, fn, lw.node, events, handles=records_on(interp, st, lw.stream),
                                   outside=not own,
                                   guessed=sid in interp.unknown_results or sid in interp.__dict__.get("helper_guesses", {}))

        def pending_write(S):
            lw = S.last_write
            if lw is None or lw.stream == MAIN or lw.time == 0:
                return ()  # not written on a side stream on this path
            return None if ordered_before(lw, know) or not lw.stream.startswith("self.") \
                or handed is not None and _handed_join(st, handed, S.sid, lw) else lw
        for field, entry in family_pending(interp, st, pending_write).items() if own else ():
            old = found.get(field, 0)
            if old is None or field in plain:  # (a field only read here, `self.F[k] = self.F[k].to(dev)`, is
                continue  # a family all the same)
            if entry is None or old and (old.stream != entry[0].stream or not old.family):
                found[field] = None
                continue
            found[field] = Pending(field, entry[0].stream, fn, entry[0].node, entry[1], True, entry[2],
                                   records_on(interp, st, entry[0].stream))
    return [p for p in found.values() if p]


def _handed_back(interp, st) -> tuple[set[str], set[int]]:
    """The events and the storages of what a producer returns at ``st`` (``return ready``, ``return buf,
    ev``): its caller holds them."""
    return {e.key for e in events_in(st.ret)}, {tv.sid for tv in interp.tensors(st, st.ret)}


def _handed_join(st, handed: tuple[set[str], set[int]], sid: int, lw) -> bool:
    """The producer hands its caller the pending tensor itself or an event recorded after its write: the
    caller may join it before any other method reads the field (the order is the caller's: no protocol)."""
    events, sids = handed
    return sid in sids or any(st.events.get(k, {}).get(lw.stream, -1) >= lw.time for k in events)


def class_pending(project: Project, file: FileModel, cls: ClassInfo, mode: str, runner: Runner) -> list[Pending]:
    """Every field some method of ``cls`` leaves written on a side stream of the object, unjoined."""
    memo = derived(project, "class_pending")
    key = (id(cls), mode)
    if key in memo:
        asked(project, "class_pending", key)
        return memo[key]
    memo[key] = []
    started(project, "class_pending", key)
    out: list[Pending] = []
    for m in cls.methods.values():
        if m.params[:1] != ("self",) or not _scoped(project, file, cls, m):
            continue  # no side-stream scope of its own
        if not may_leave_pending(project, file, m, mode):
            continue  # its run writes only on the entry stream, the host or tag streams (producerbound.py)
        out += _producer_pending(project, file, m, mode, runner)
    memo[key] = out
    finished(project, "class_pending", key)
    return out


def _own_scope(project: Project, file: FileModel, m: FunctionInfo) -> bool:
    return any(project.scope_use(file, site).roles() & apis.STREAM_SCOPE_ROLES for site in m.scopes)


def _scoped(project: Project, file: FileModel, cls: ClassInfo, m: FunctionInfo) -> bool:
    """A producer candidate: ``m`` opens a side-stream scope itself, or calls a method of its own class that
    does (``self._spill(host, act)`` copying into ``host`` on ``self.d2h``, which ``m`` then keeps in a field:
    the helper runs inline in ``m``'s run, so what it leaves on the object is ``m``'s)."""
    if _own_scope(project, file, m):
        return True
    for site in m.calls:
        f = site.node.func
        if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "self":
            helper = cls.methods.get(f.attr.value)
            if helper is not None and helper is not m and helper.params[:1] == ("self",) \
                    and _own_scope(project, file, helper):
                return True
    return False


def _self_calls(fn: FunctionInfo, name: str) -> list:
    return [s for s in fn.calls if s.method == name and isinstance(s.receiver, cst.Name) and s.receiver.value == "self"]


def _in_side_scope(project: Project, file: FileModel, site) -> bool:
    scope = site.scope
    while scope is not None:
        if project.scope_use(file, scope).roles() & apis.STREAM_SCOPE_ROLES:
            return True
        scope = scope.parent
    return False


def _run_inside_scopes(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo) -> set[FunctionInfo]:
    """The methods of ``cls`` that run ``fn`` inside a side-stream scope of their own (``forward()`` calling
    ``self._launch()`` under ``self.side``) when every ``self.fn(...)`` of the class is in such a scope: ``fn`` is
    then part of that method's work on the side stream, not a later reader of what an earlier run left there
    (empty when ``fn`` is also called outside a side-stream scope: a reader its caller may run unjoined)."""
    name = fn.node.name.value
    callers = {m: sites for m in cls.methods.values() if (sites := _self_calls(m, name))}
    if any(not _in_side_scope(project, file, site) for sites in callers.values() for site in sites):
        return set()
    return set(callers)


def protocol_inputs(project: Project, file: FileModel, fn: FunctionInfo, mode: str, runner: Runner) -> list[Pending]:
    """The producers' pending writes ``fn`` reads while the class's protocol expects it to join them.
    ``runner`` runs the interpreter on a producer method with no seeding of its own (None: it gave up)."""
    cls = file.classes.get(fn.class_name or "")
    if fn.node.name.value == "__init__" or mode not in ("eager", "cuda"):
        return []
    if cls is None or cls.methods.get(fn.node.name.value) is not fn or fn.params[:1] != ("self",):
        return _holder_inputs(project, file, fn, mode, runner)
    memo = derived(project, "protocol_inputs")
    key = (id(fn), mode)
    if key in memo:
        asked(project, "protocol_inputs", key)
        return memo[key]
    memo[key] = []
    started(project, "protocol_inputs", key)
    inside = _run_inside_scopes(project, file, cls, fn)  # (nor a method the producers run in their scope)
    produced = class_pending(project, file, cls, mode, runner)
    own = {(q.field, q.stream) for q in produced if q.producer is fn}  # what fn leaves pending at its exits: its
    # next call reads it (as the reader of another producer of the class it runs itself: next_call_order)
    pending = [p for p in produced if p.producer is not fn
               and _mentions(file, fn, p.field) and p.producer not in inside
               and not run_before_join(file, cls, fn, {_norm(p.stream), *(_norm(e) for e in p.events)})]
    out = [p if strength == "medium" else replace(p, unproven=order_seen(cls, p.producer, fn)
                                                  or next_call_order(p.producer, fn, (p.field, p.stream) in own))
           for p in pending if (strength := _expected(project, file, cls, fn, p))]
    out += _holder_inputs(project, file, fn, mode, runner)  # (objects its fields hold: `self.pager: Pager`)
    out += _built_inputs(project, file, cls, fn, mode, runner, {p.field for p in out})
    # a container field's entries (fieldfamilies.py): a wait on any entry of the event family that covers the
    # writes is the join (on some path: `if ev is not None: ev.wait()`; keys are not compared across methods)
    # a wait on an event family the producer records only *before* the write (``early``) would cover it had the
    # record come after: the producer's early-record finding is the root cause, reported once, there
    out = [p for p in out if not p.family or not waits_on(file, fn, (*p.events, *p.early))]
    families = {e for p in out if p.family for e in (*p.events, *p.early)}
    if families and (unresolved_waits(file, fn, families) or _family_event_handed_on(project, file, fn, families)):
        out = [p for p in out if not p.family]  # a wait on an event it cannot place, or a taken event handed to a
        # callee (`self._block_on(done)`, which may wait it): silence
    memo[key] = out
    finished(project, "protocol_inputs", key)
    return out


def _holder_inputs(project: Project, file: FileModel, fn: FunctionInfo, mode: str, runner: Runner) -> list[Pending]:
    """The protocol inputs of a function holding an object of a project class by an annotated name (a parameter,
    the ``self`` of an ``autograd.Function`` staticmethod, an annotated local: :mod:`.typedholders`), read as a
    consumer of that class: its producers' pending writes ``fn`` reads through the name, when the class's protocol
    gives evidence of the join (never the unproven, low reading: the type is the code's claim, not a binding)."""
    from streamlint.model.flow.recordwriters import handed_record, record_writes
    from streamlint.model.flow.typedholders import typed_holders

    memo = derived(project, "holder_inputs")
    key = (id(fn), mode)
    held = memo.get(key)
    if held is not None and held[0] is fn:
        return held[1]
    memo[key] = (fn, [])
    out: list[Pending] = []
    joined = {re.sub(r"\[[^\]]*\]", "[]", k) for k in joined_keys(file, fn)}  # (entries: keys not compared)
    for name, cls, cmod in typed_holders(project, file, fn):
        called = {m for site in fn.calls if site.receiver is not None and _norm(file.code(site.receiver)) == name
                  and (m := cls.methods.get(site.method or "")) is not None}
        joining = {m for m in called if joined_keys(cmod, m) or join_helper_keys(project, cmod, m)
                   or synchronizes_device(project, cmod, m)}  # (`pager.wait_uploaded(receipt)`: a join step)
        values = fn.name_assigns.get(name, []) if name not in fn.all_params and "." not in name else []
        spelled = _norm(file.code(values[0])) if len(values) == 1 else name  # (`sched: S = ctx.sched`: the
        # interpreter keys its fields by what the local holds)
        for p in (*class_pending(project, cmod, cls, mode, runner), *record_writes(
                project, cmod, cls, mode, lambda m, prefix, cmod=cmod: _producer_pending(
                    project, cmod, m, mode, runner, prefix) if _own_scope(project, cmod, m)
                and may_leave_pending(project, cmod, m, mode) else [])):
            q = _renamed(p, name)
            if p.outside and (handed_record(project, file, fn, name, q.events, joined_keys, _STREAM_CALLS)
                              or not _mentions(file, fn, q.field)):
                continue  # (the record handed to a callee that may wait its event, or whose wait is not seen)
            if {re.sub(r"\[[^\]]*\]", "[]", _norm(k)) for k in (q.stream, *q.events, *q.early)} & joined:
                continue  # it joins the stream or an entry of the event (which entry: not compared)
            if joining - {p.producer}:
                continue  # it runs a join step of the object: what that joins is the object's own business
            if p.producer is fn or not _mentions(file, fn, q.field) or p.guessed \
                    or _expected(project, cmod, cls, fn, p) != "medium":
                continue
            if p.family and (waits_on(file, fn, (*q.events, *q.early))
                             or unresolved_waits(file, fn, {*q.events, *q.early})
                             or _family_event_handed_on(project, file, fn, {*q.events, *q.early})):
                continue
            q = _renamed(p, spelled, name)
            out.append(q if cmod is file else replace(q, node=None))  # (a write of another module: no line here)
    memo[key] = (fn, out)
    return out


def _renamed(p: Pending, name: str, holder: str = "") -> Pending:
    """``p`` as a function holding the object by ``name`` spells it (``self.buf`` -> ``sched.buf``)."""
    def ren(key: str) -> str:
        return f"{name}.{key[5:]}" if key.startswith("self.") else key
    return replace(p, field=ren(p.field), stream=ren(p.stream), events=tuple(map(ren, p.events)),
                   early=tuple(map(ren, p.early)), holder=holder or name)


def _built_inputs(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo, mode: str, runner: Runner,
                  taken: set[str]) -> list[Pending]:
    """The writes the record's builders left pending (builtrecords.py) on fields ``fn`` hands back, unless the
    record has another join: a method of the class joining the stream field (a join step), the stream field
    reached outside the class, a caller of ``fn`` synchronising the device. Medium; low when the callers of ``fn``
    cannot be listed (the hand-back's reader is unseen)."""
    out: list[Pending] = []
    if not any(hands_back(file, fn, f) for f in named_fields(project, file, cls) - taken):
        return out
    for field, stream, builder, node in built_writes(project, file, cls, mode, runner):
        if field in taken or not hands_back(file, fn, field) or reached_outside(project, file, cls, stream[5:]) \
                or any(_norm(stream) in joined_keys(file, m) for m in cls.methods.values() if m is not fn):
            continue
        callers = callers_of(project, file, fn)
        if any(site.function is not None and synchronizes_device(project, model, site.function)
               for model, site in callers or ()):
            continue
        out.append(Pending(field, stream, builder, node, (), unproven=None if callers else ""))
    return out


def _family_event_handed_on(project: Project, file: FileModel, fn: FunctionInfo, families: set[str]) -> bool:
    """Does ``fn`` hand a local bound from an entry of one of ``families`` (``done = self._ready.popleft()``,
    ``kv, ready = self.pending.popleft()``) to a callee that can join it (``self._block_on(done)`` waiting its
    parameter: :func:`~streamlint.model.flow.joinhelpers.handed_to_join`), or return / store the taken event?
    Recycling it (``self._free.append(ev)``), logging it, or handing only the data part on is no join."""
    names = {n for n, values in fn.name_assigns.items() if any(family(_norm(file.code(v))) in families for v in values)}
    text = file.code(fn.node.body)
    for name in names:
        ref = rf"\b{re.escape(name)}"
        if re.search(rf"(?:return|yield)\b[^\n]*{ref}\b", text) \
                or re.search(rf"=\s*{ref}\b(?!\s*(?:is|==|!=|\.|\[))", text):
            return True
    parts: set[str] = set(names)  # the names of a tuple taken from the family (its data and its event alike)
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) \
                and family(_norm(file.code(node.value))) in families:
            parts |= {el.value.value for t in node.targets if isinstance(t.target, (cst.Tuple, cst.List))
                      for el in t.target.elements if isinstance(el.value, cst.Name)}
    return any(handed_to_join(project, file, fn, n) for n in parts)


def family_consumer(project: Project, file: FileModel, fn: FunctionInfo, mode: str, runner: Runner) -> bool:
    """A method with stream work but no stream scope of its own (a join ``wait_event(self._events[k])``, a
    fallback copy) reading a container field a producer left pending: it runs on the producer's native path,
    where its join covers the entries or does not (fieldfamilies.py)."""
    return any(p.family for p in protocol_inputs(project, file, fn, mode, runner))


def _expected(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo, p: Pending) -> str | None:
    """Does the class's protocol expect ``fn`` to join ``p`` before reading it? ``"medium"``: the class says so
    (an event recorded after the write, another reader joining first, an unjoined hand-back); ``"low"``: nothing
    in the class joins it at all (flow/unproven.py); None: no (a join step, a stream or event reached outside)."""
    keys = {_norm(p.stream), *(_norm(e) for e in p.events), *p.early}
    evidence = bool(p.events) or bool(p.early) and waits_on(file, fn, p.early)
    for m in cls.methods.values():
        if m is fn or m is p.producer:
            continue
        joins = joined_keys(file, m) | join_helper_keys(project, file, m)
        looped = _loop_joins(file, m, joins) if p.family else {}
        if p.family:  # a wait on an entry of an event family (``self.events[k]``, ``.pop(k)``) is on the family
            joins |= {family(k) or k for k in joins} | set(looped)
        if not joins & keys and not synchronizes_device(project, file, m):
            continue
        if not _mentions(file, m, p.field) or looped.get(p.field):
            return None  # a join step that reads nothing: the caller orders the calls
        evidence = True  # another consumer joins before its read
    if not (evidence or unjoined_hand_back(project, file, cls, fn, p, synchronizes_device)):
        # (or it hands the field back to its caller on a stream nobody joins: handbacks.py)
        if p.family or p.guessed or not unproven_ok(file, cls, fn, p.producer, p.stream) or joined_keys(file, fn) \
                or join_helper_keys(project, file, fn) or synchronizes_device(project, file, fn) \
                or _own_scope(project, file, fn):
            return None  # (a reader joining something it is not matched to: an early record, a handle; unsure;
            # or one with stream scopes of its own, whose own races on the field are its findings)
        evidence = False
    else:
        evidence = True
    for key in keys if not p.outside else ():  # (a record's fields are reached outside: that is how it is used)
        if key.startswith("self.") and key.count(".") == 1 and reached_outside(project, file, cls, key[5:]):
            return None
    return "medium" if evidence else "low"


def _loop_joins(file: FileModel, fn: FunctionInfo, joins: set[str]) -> dict[str, bool]:
    """The container fields ``fn`` joins by waiting the events of its elements in a loop (``for _, ev in self.q:
    current_stream().wait_event(ev)``): field -> the loop only waits (its other names are unused, a join step)."""
    out: dict[str, bool] = {}
    for node in local_nodes(fn.node.body):
        if not isinstance(node, cst.For):
            continue
        it = node.iter
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) \
                and it.func.attr.value in ("values", "copy") and not it.args:
            it = it.func.value  # (`self.q.copy()`, `self.events.values()`)
        elif isinstance(it, cst.Call) and call_name(it) in ("list", "tuple") and len(it.args) == 1:
            it = it.args[0].value
        field = _norm(file.code(it))
        names = [n for n in local_nodes(node.target) if isinstance(n, cst.Name)]
        if not field.startswith("self.") or field.count(".") != 1 or not any(n.value in joins for n in names):
            continue
        body = file.code(node.body)
        rest = [n.value for n in names if n.value not in joins and n.value != "_"]
        out[field] = out.get(field, True) and not any(re.search(rf"\b{re.escape(r)}\b", body) for r in rest)
    return out


def handed_write(interp, S, kind: str, stream: str) -> bool:
    """A write on the current stream over a protocol's pending field (not a container family) in a consumer that
    returns that very storage to its caller (``k_out = self.ring[k & 1]; k_out.copy_(new); return k_out``): the
    method is a step of the buffer's data path, not housekeeping (a ``reset()`` zeroing it), so its write races the
    producer's still queued one."""
    return kind == "write-after-write" and stream == MAIN and S.sid not in interp.family_sids \
        and S.name is not None and _returns_storage(interp.file, interp.fn, S.name)


def _returns_storage(file: FileModel, fn: FunctionInfo, field: str) -> bool:
    """Does ``fn`` return ``field`` itself, an entry or slice of it, or a name some binding of which is one of
    those (also as an item of a returned tuple)? Not a value computed from it (``self.buf[:n].max()``)."""
    def place(expr) -> bool:
        code = _norm(file.code(expr))
        return code == field or code.startswith(field + "[") and code.endswith("]")

    def named(expr) -> bool:
        if place(expr):
            return True
        if not isinstance(expr, cst.Name):
            return False  # (a call's result, `scores.softmax(-1)`: computed from it)
        return expr.value not in fn.all_params and any(place(v) for v in fn.name_assigns.get(expr.value, ()))

    for ret in fn.returns:
        value = ret.value
        items = [el.value for el in value.elements] if isinstance(value, cst.Tuple) else [value] if value else []
        if any(named(item) for item in items):
            return True
    return False


def callback_read(interp, anchor) -> bool:
    """The protocol's read at ``anchor`` is only an argument of a callable the object holds (``self.release_fn(t)``,
    not a method of the class, not resolved in the project): what it does with the tensor (read it, drop a
    reference, nothing) is unknown, so the class protocol reports no read there (precision first)."""
    stmt = anchor.body[0] if isinstance(anchor, cst.SimpleStatementLine) and len(anchor.body) == 1 else anchor
    call = stmt.value if isinstance(stmt, cst.Expr) else None
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
            and call.func.value.value == "self"):
        return False
    cls = interp.cfile.classes.get(interp.cfn.class_name or "")
    site = interp.cfile.call_site(call)
    return cls is not None and call.func.attr.value not in cls.methods and site is not None \
        and interp.project.call_target(interp.cfile, site) is None \
        and _ctor_callable(interp.cfile, cls, call.func.attr.value)


def _ctor_callable(file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """``self.attr`` is bound only from a constructor parameter (``self.release_fn = release_fn`` in
    ``__init__``, or ``None``): a callable the object's user supplies, not a kernel / op / module attribute."""
    found = False
    for a in file.assigns:
        if a.target != f"self.{attr}" or a.function is None or a.function.class_name != cls.name:
            continue
        v = a.value
        if isinstance(v, cst.Name) and v.value == "None":
            continue
        if not (a.function.node.name.value == "__init__" and isinstance(v, cst.Name)
                and v.value in (*a.function.params, *a.function.kwonly)):
            return False
        found = True
    return found


def seed(interp, st, pending: list[Pending]) -> None:
    """At the consumer's entry: each pending field's write queued on its stream (a previous call of the
    producer), the events recorded after it, the stream's work known to a device synchronisation."""
    for p in pending:
        t = interp.tick()
        S = interp.new_storage(st, "long", MAIN, p.field, Access(p.stream, t, p.node, {p.stream: t}))
        st.long[p.field] = S.sid
        interp.protocol_sources[S.sid] = p.producer.qualname if p.outside \
            else f"{p.holder}.{p.producer.node.name.value}" if p.holder else p.producer.node.name.value
        if p.unproven is not None:
            interp.__dict__.setdefault("protocol_unproven", {})[S.sid] = p.unproven
        interp.__dict__.setdefault("protocol_seeds", {})[S.sid] = (t, p.events)  # (handbacks.HandBacks.kept_guard)
        if p.outside:  # a record's field another function wrote (recordwriters.py)
            interp.__dict__.setdefault("outside_seeds", set()).add(S.sid)
        st.last_op[p.stream] = max(st.last_op.get(p.stream, 0), t)
        for e in p.events:
            st.events[e] = {p.stream: t}
        for e in p.early:  # recorded before the write: a wait on them does not cover it
            st.events.setdefault(e, {p.stream: t - 1})
        if p.family:
            interp.family_events = True
            interp.seeded_families.update((*p.events, *p.early))
            interp.family_sids.add(S.sid)


def class_joins(project, file, cls, wanted: str, skip=None, depth: int = 0) -> bool:
    """Does a method of ``cls`` (or of a project base class, three levels up) other than ``skip`` wait for
    or synchronize the stream ``wanted`` (``self.reduction_stream``)?"""
    if depth > 3:
        return False

    def names(method, expr: cst.BaseExpression) -> bool:
        if file.code(expr).replace('"', "'") == wanted:
            return True
        if isinstance(expr, cst.Name):  # a local bound to it (on some branch)
            for value in method.name_assigns.get(expr.value, ()):
                options = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
                if any(file.code(o).replace('"', "'") == wanted for o in options):
                    return True
        return False

    for method in cls.methods.values():
        if method is skip:
            continue
        for site in method.calls:
            if site.method == "wait_stream" and any(names(method, a.value) for a in site.node.args[:1]) \
                    or site.method == "synchronize" and isinstance(site.node.func, cst.Attribute) \
                    and names(method, site.node.func.value):
                return True
    for base in cls.bases:
        sym = project.symbol(base, file)
        if sym is not None and isinstance(sym[0], ClassInfo) \
                and class_joins(project, sym[1], sym[0], wanted, skip, depth + 1):
            return True
    return False


def holder_joins(project, file, fn, stream: str) -> bool:
    """``self.hc._gate_stream``, left with work by ``self.hc.mix(...)`` (a method of the held object's class,
    run inline): another method of that class joins its own ``self._gate_stream`` (``combine`` waits on it
    before reading what ``mix`` returned), the class's protocol for the results it hands back."""
    parts = stream.split(".")
    if len(parts) != 3 or parts[0] != "self" or fn.class_name is None:
        return False
    holder = f"self.{parts[1]}"
    cls = file.classes.get(fn.class_name)
    for method in (cls.methods.values() if cls is not None else (fn,)):
        for site in method.calls:
            func = site.node.func
            if not (isinstance(func, cst.Attribute) and file.code(func.value) == holder):
                continue
            found = project.call_target(file, site)
            if found is None or found[0].class_name is None:
                continue
            owner = found[1].classes.get(found[0].class_name)
            if owner is not None and class_joins(project, found[1], owner, f"self.{parts[2]}", found[0]):
                return True
    return False


def sibling_consumer_waits(file, fn, returned: cst.BaseExpression | None) -> bool:
    """``return hidden_states, event, hook`` where a sibling method of the class takes exactly these as its
    parameters (``def combine_b(self, hidden_states, event, hook)``) and waits on one of them or calls it
    (``event.current_stream_wait()``, ``hook()``): the tuple is the sibling's argument list, handed back
    with the join handle the library returned with the tensors; the consumer owns the wait."""
    if fn.class_name is None or not isinstance(returned, cst.Tuple):
        return False
    names = [el.value.value for el in returned.elements if isinstance(el.value, cst.Name)]
    if len(names) < 2 or len(names) != len(returned.elements):
        return False
    cls = file.classes.get(fn.class_name)
    for method in (cls.methods.values() if cls is not None else ()):
        params = [p for p in method.params if p != "self"]
        if method is fn or params != names:
            continue
        for site in method.calls:
            func = site.node.func
            if isinstance(func, cst.Name) and func.value in params[1:]:
                return True  # `hook()`: a completion hook
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                    and func.value.value in params[1:] and ("wait" in func.attr.value
                                                            or func.attr.value == "synchronize"):
                return True  # `event.current_stream_wait()`, `work.wait()`
    return False
