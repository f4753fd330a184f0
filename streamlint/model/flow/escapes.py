"""Where an event recorded in a function goes, and whether anyone waits on it there.

An event is a promise: "the work queued on its stream before the record is done". A function that records
one and hands it over (kept in a field of ``self``, put in a list / dict / holder, returned with the tensors
it guards) leaves the wait to someone else. ``Storages.escape`` notes where each event goes (the fields of
``self`` it is stored in, or elsewhere); :func:`field_waited` tells whether any code of the project waits
on an event taken out of such a field (directly, ``s.wait_event(x.ready)``; or through a name bound from
it, ``buf, done = self.pending.pop(0)`` then ``done.wait()``, ``for ev in self.events: ev.synchronize()``).
An event kept only in fields nobody waits on guards nothing anyone relies on (:class:`EventEscapes`).
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.calls import event_field_waited, waited_expr
from streamlint.model.flow.values import EVal, State, TupVal
from streamlint.model.file import dotted
from streamlint.model.streams import derived
from streamlint.model.syntax import is_none, local_nodes, target_names

if TYPE_CHECKING:
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project


def events_in(v: object) -> list[EVal]:
    """The events a value carries: itself, or the items of a tuple / holder (nested)."""
    if isinstance(v, EVal):
        return [v]
    if isinstance(v, TupVal):
        return [e for item in v.items for e in events_in(item)]
    return []


def handed_value(node: cst.CSTNode | None) -> cst.BaseExpression | None:
    """The value a statement hands to whoever called the function: ``return v``; ``yield v`` (a generator's
    consumer goes on with the value on its own current stream exactly as a caller does with a returned one:
    a hand-off, a join point like the return); ``yield from xs`` (the items of ``xs``)."""
    if isinstance(node, cst.Return):
        return node.value
    if isinstance(node, cst.Expr) and isinstance(node.value, cst.Yield):
        value = node.value.value
        return value.item if isinstance(value, cst.From) else value
    return None


def tensor_boxes(st: State, fn: FunctionInfo, node: cst.CSTNode | None) -> tuple[int, ...]:
    """The positions of a handed-out literal tuple (``return batch, target``) that name a local container whose
    slots this function filled with tensors (``State.held``), or a local every binding of which but ``None`` is
    such a container (``prev = batch`` in a prefetch loop that yields the previous batch)."""
    value = handed_value(node)
    if not isinstance(value, cst.Tuple) or any(isinstance(el, cst.StarredElement) for el in value.elements):
        return ()  # (``return *outs, box``: the positions need not line up with the tuple value's items)

    def box(name: str) -> bool:
        if st.held.get(name):
            return True
        bound = [v for v in fn.name_assigns.get(name, ()) if not is_none(v)]
        return bool(bound) and all(isinstance(v, cst.Name) and v.value != name and st.held.get(v.value)
                                   for v in bound)

    return tuple(k for k, el in enumerate(value.elements) if isinstance(el.value, cst.Name) and box(el.value.value))


def self_field(expr: cst.BaseExpression) -> str | None:
    """``self.pending`` / ``self.events[i]`` / ``self.slots[k].ready`` -> the first field name (``pending``)."""
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            return expr.attr.value
        expr = expr.value
    return None


def field_waited(project: Project, attr: str) -> bool:
    """Does any code of the project wait on an event kept in field ``attr``: on ``x.attr`` (or an element of
    it) directly, or on a name bound from an expression reading ``.attr`` (an assignment, a ``for`` target, a
    ``with`` target) in the same function?"""
    if event_field_waited(project, attr):
        return True
    memo = derived(project, "event_container_waited")
    if attr not in memo:
        memo[attr] = False
        for model in project.files_containing((attr.encode(),)):
            for fn in model.iter_functions():
                if _bound_and_waited(fn, attr):
                    memo[attr] = True
                    return True
    return memo[attr]


def field_made_outside(project: Project, attr: str) -> bool:
    """Is the object's field ``attr`` (an event the project records, ``self.copy_done.record()``) never bound
    by project code: no ``x.attr = ...``, no class-level ``attr = ...`` / ``attr: T``, no ``setattr`` /
    ``getattr`` by its name, no keyword ``attr=`` (a dataclass / holder built with it)? Then the event is made
    by a class of another package (the owner this code patches or inherits from), and so is its waiter:
    the waiter is presumed, not seen."""
    memo = derived(project, "event_field_made_outside")
    if attr not in memo:
        name = re.escape(attr).encode()
        bound = re.compile(rb"\." + name + rb"\s*(?::[^=\n]*)?=(?!=)|^\s*" + name + rb"\s*(?::[^=\n]*)?=(?!=)|^\s*" + name
                           + rb"\s*:|['\"]" + name + rb"['\"]|[(,]\s*" + name + rb"\s*=(?!=)|\b" + name
                           + rb"\s*\)?\s*(?:,[^=\n]*)?=(?!=)", re.MULTILINE)
        memo[attr] = not any(bound.search(project.file_bytes(path) or b"")
                             for path in project.paths_containing((attr.encode(),)))
    return memo[attr]


def field_only_polled(project: Project, attr: str) -> bool:
    """Is every wait of the project on an event field ``attr`` a host poll branching on it (``if not
    X.attr.query(): ...``): no stream waits on it, the host never blocks on it? Then the event is a progress
    probe of the work before the record (the host picks a buffer by it), not the guard of later work."""
    memo = derived(project, "event_field_only_polled")
    if attr not in memo:
        polls, others = 0, 0
        for model in project.files_containing((attr.encode(),)):
            for fn in model.iter_functions():
                tested = {id(n) for node in local_nodes(fn.node) if isinstance(node, cst.If)
                          for n in local_nodes(node.test)}
                for site in fn.calls:
                    held = waited_expr(site)
                    if isinstance(held, cst.Attribute) and held.attr.value == attr:
                        if site.method == "query" and id(site.node) in tested:
                            polls += 1
                        else:
                            others += 1
        memo[attr] = polls > 0 and others == 0
    return memo[attr]


def _reads_field(expr: cst.CSTNode, attr: str) -> bool:
    return any(isinstance(n, cst.Attribute) and n.attr.value == attr for n in local_nodes(expr))


def _bound_and_waited(fn, attr: str) -> bool:
    waited: set[str] = set()
    for site in fn.calls:
        held = waited_expr(site)
        if isinstance(held, cst.Name):
            waited.add(held.value)
    if not waited:
        return False
    for node in local_nodes(fn.node):
        if isinstance(node, cst.Assign) and _reads_field(node.value, attr):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.For, cst.CompFor)) and _reads_field(node.iter, attr):
            targets = [node.target]
        else:
            continue
        if any(name in waited for t in targets for name in target_names(t)):
            return True
    return False


def class_lineage(model, name: str | None) -> frozenset[str]:
    """``name`` and the names of its base classes, followed through the classes of its own file."""
    seen: set[str] = set()
    todo = [name] if name else []
    while todo:
        cur = todo.pop()
        if cur in seen:
            continue
        seen.add(cur)
        info = model.classes.get(cur)
        todo.extend(b.rsplit(".", 1)[-1] for b in (info.bases if info is not None else ()))
    return frozenset(seen)


def file_wait_sites(model, attr: str) -> tuple[tuple[str | None, frozenset[str], str | None], ...] | None:
    """Every direct wait of one file on an event field named ``attr``, as (the waiting method's class, that class
    and its bases, waiting stream): the stream is ``self.s`` for ``self.s.wait_event(self.attr...)``; it is ``""``
    for another wait on ``self.attr`` (another receiver, ``.wait()`` / ``.synchronize()``), and None for a wait on
    the field of another holder (``self.peer.attr``, ``other.attr``). None when a function waits on a name bound
    from the field (anyone's wait). A fact of the file alone: the same whichever file asks, in any run or split."""
    sites: list[tuple[str | None, frozenset[str], str | None]] = []
    for fn in model.iter_functions():
        if _bound_and_waited(fn, attr):
            return None
        for site in fn.calls:
            held = waited_expr(site)
            if not (isinstance(held, cst.Attribute) and held.attr.value == attr):
                continue
            recv = site.node.func.value if isinstance(site.node.func, cst.Attribute) else None
            stream = dotted(recv) if site.method == "wait_event" and recv is not None else None
            on_self = isinstance(held.value, cst.Name) and held.value.value == "self" and fn.class_name
            own = on_self and stream is not None and stream.startswith("self.") and stream.count(".") == 1
            sites.append((fn.class_name, class_lineage(model, fn.class_name) if on_self else frozenset(),
                          stream if own else "" if on_self else None))
    return tuple(sites)


class EventEscapes:
    """Whether an event handed over from the function has a waiter (mixin of the interpreter).

    Interp state it uses: ``event_bundles``, ``field_events`` (filled by ``Storages.escape``), ``fn``,
    ``project``."""

    def yielded(self, st, node: cst.Expr) -> None:
        """``yield v`` / ``yield from xs``: the generator hands ``v`` to its consumer, which goes on on its current
        stream as a caller does after a return: the same join escape (``HandOuts.unjoined_escape``: SL201 at the
        yield when ``v`` was produced on a side stream that nothing joined, unless an event goes with it). A
        ``yield from`` a call delegates to another generator (its own yields are checked there): only a collection
        of values counts."""
        expr = handed_value(node)
        if expr is None:
            return
        value = self.ev(st, expr)
        if isinstance(node.value.value, cst.From) and not isinstance(value, TupVal):
            return
        self.unjoined_escape(st, value, node)
        self.escape(st, value)

    def own_guard(self, key: str) -> bool:
        """An event kept in a field of ``self`` (``self.done[slot].record()`` after the side-stream work on the
        tensor handed back) that is no join handle for the caller: every wait on it is ``self.<s>.wait_event(
        self.<attr>...)`` in a method of this very class, by a side stream the class makes (``self.s =
        torch.cuda.Stream()``), and nothing joins that stream into the current stream (a slot-reuse guard of the
        object's own copy stream: ``self.copy_stream.wait_event(self.done[slot])`` before it refills the slot).
        Any other wait on a field of that name (``other.done``, ``self.peer.done``, in another class, through a
        name bound from the field, ``.wait()`` / ``.synchronize()``) may be anyone's: a handle. The project-wide
        wait sites are collected once per file and field name, the same for whichever file asks (:func:`file_wait_sites`);
        this file is read first and the scan stops at the first wait that settles the answer."""
        found = re.match(r"self\.(\w+)", key)
        if found is None or self.depth or self.fn.class_name is None:
            return False
        attr = found.group(1)
        asked = derived(self.project, "event_field_own_waiters")  # (file path, class, attr) -> streams | None
        if (self.file.path, self.fn.class_name, attr) not in asked:
            asked[self.file.path, self.fn.class_name, attr] = self._own_waiters(attr)
        waiters = asked[self.file.path, self.fn.class_name, attr]
        return waiters is not None and all(self._made_stream(w) and not self.joined_elsewhere(w) for w in waiters)

    def _own_waiters(self, attr: str) -> frozenset[str] | None:
        """The ``self.<s>`` streams of this class waiting on its field ``attr``, None when any wait of the project
        may be on this object's field by someone else (or this class never waits on it)."""
        memo = derived(self.project, "event_field_wait_sites")  # (file path, attr) -> file_wait_sites
        mine = class_lineage(self.file, self.fn.class_name)
        waiters: set[str] = set()
        others = (m for m in self.project.files_containing((attr.encode(),)) if m.path != self.file.path)
        for model in itertools.chain((self.file,), others):  # (this file first: most fields stop there)
            if (model.path, attr) not in memo:
                memo[model.path, attr] = file_wait_sites(model, attr)
            sites = memo[model.path, attr]
            if sites is None:
                return None
            for cls, lineage, stream in sites:
                if stream is None:
                    return None  # (a wait on the field of another holder: the caller's join may be that one)
                if cls not in mine and self.fn.class_name not in lineage:
                    continue  # (a wait of an unrelated class on its own field of that name: not on this object)
                if not stream or model is not self.file:
                    return None  # (another wait on it, or one of a related class elsewhere: may be the caller's)
                waiters.add(stream)
            if not waiters:  # (this class never waits on it itself: no guard of its own; and an event nobody
                return None  # waits on is a defect of its own, reported by the join-step checks)
        return frozenset(waiters)

    def _made_stream(self, field: str) -> bool:
        """Is ``self.<field>`` assigned in this class only from a stream constructor (``torch.cuda.Stream()``)?"""
        memo = derived(self.project, "class_made_streams")
        mkey = (self.file.path, self.fn.class_name, field)
        if mkey not in memo:
            values = [a.value for f in self.file.functions.values() if f.class_name == self.fn.class_name
                      for a in f.assigns if a.target == field]
            memo[mkey] = bool(values) and all(isinstance(v, cst.Call) and (dotted(v.func) or "").endswith(".Stream")
                                              for v in values)
        return memo[mkey]

    def kept_unwaited(self, key: str) -> bool:
        """An event created here whose only escapes are into fields of ``self`` nobody waits on (one handed in
        is the caller's too: it may wait on it)."""
        fields = self.field_events.get(key) if key.startswith("<") else None
        return bool(fields) and "" not in fields and not any(field_waited(self.project, f) for f in fields)

    def note_bundles(self, st, v: object, into) -> None:
        """``v`` is kept in ``into``: per event it carries, the tensors it is kept with (None: not a record)."""
        bundle = frozenset(tv.sid for tv in self.tensors(st, v)) \
            if isinstance(v, TupVal) and len(v.items) > 1 and into is not None else None
        for e in events_in(v):
            self.event_bundles.setdefault(e.key, []).append(bundle)

    def note_event_field(self, st, target: cst.Attribute, v: object, key: str) -> None:
        """``req.ready = torch.cuda.Event()``: an event stored on an object that holds tensors travels with them;
        whoever is handed the object is handed the event recorded on it (:meth:`carries_event`)."""
        if not isinstance(target.value, cst.Name) or not isinstance(v, EVal):
            return
        held = frozenset(tv.sid for tv in self.tensors(st, st.env.get(target.value.value)))
        for k in {key, v.key} if held else ():
            self.event_bundles.setdefault(k, []).append(held)
            self.__dict__.setdefault("carried_events", set()).add(k)

    def carries_event(self, st, tv) -> bool:
        """Does tensor ``tv`` travel with an event (stored on it, or kept with it in a record) recorded after
        its last write? Handing it to a project function hands that join handle too: the callee waits on it."""
        S = st.stores.get(tv.sid)
        lw = S.last_write if S is not None else None
        return lw is not None and lw.stream != st.cur and self.travels_with(st, tv.sid, lw)

    def travels_with(self, st, sid: int, use) -> bool:
        """Is tensor ``sid`` kept together with an event recorded after its ``use`` on the use's stream (``entry =
        [x, done, stream]; self.inflight.append(entry)``, ``req.ready = ev; ev.record(s); store(req)``)? Whoever
        takes the value from that record takes its join handle with it: it drops or reads it after the event."""
        carried = self.__dict__.get("carried_events", ())
        return any(snap.get(use.stream, -1) >= use.time and (key in self.handed_events or key in carried)
                   and not self.kept_unwaited(key)
                   and any(b is not None and sid in b for b in self.event_bundles.get(key, ()))
                   for key, snap in st.events.items())

    def bundled_elsewhere(self, key: str, sid: int | None) -> bool:
        """Is the event only a record's guard of other values, not a join handle for tensor ``sid``: every
        hand-over keeps it in a tuple with other values but without ``sid`` (``self.pending.append((key,
        staging, done))``: the pool recycles the staging buffer once ``done`` completes), in fields of
        ``self`` whose events no other code waits on with a stream (``wait_event`` / ``.wait()``: host
        ``query()`` / ``synchronize()`` of a reaper order no device consumer)? Then the caller handed ``sid``
        has no handle on that work."""
        bundles = self.event_bundles.get(key)
        fields = self.field_events.get(key)
        if sid is None or not bundles or not fields or "" in fields or any(b is None or sid in b for b in bundles):
            return False
        return not any(field_stream_waited(self.project, f, self.fn) for f in fields)


def field_stream_waited(project: Project, attr: str, fn, methods: tuple[str, ...] = ("wait_event", "wait")) -> bool:
    """Does a function of the project other than ``fn`` wait with a stream (``s.wait_event(ev)``, ``ev.wait()``)
    on an event taken out of field ``attr``: ``x.attr`` itself, a name bound from it, or a loop target over
    it or over a local alias of it (``pending = self.pending`` ... ``for k, buf, ev in pending``)?"""
    return any(other.node is not fn.node for other in field_stream_waiters(project, attr, methods))


def field_stream_waiters(project: Project, attr: str, methods: tuple[str, ...] = ("wait_event", "wait")) -> list:
    """The functions of the project :func:`field_stream_waited` counts (memoised per project)."""
    memo = derived(project, "event_field_stream_waiters")
    if (attr, methods) not in memo:
        memo[attr, methods] = [other for model in project.files_containing((attr.encode(),))
                               for other in model.iter_functions() if _stream_waits_field(other, attr, methods)]
    return memo[attr, methods]


def _stream_waits_field(fn, attr: str, methods: tuple[str, ...]) -> bool:
    waited: set[str] = set()
    for site in fn.calls:
        held = site.node.args[0].value if site.method == "wait_event" and site.node.args else \
            site.node.func.value if site.method in methods and site.method != "wait_event" \
            and isinstance(site.node.func, cst.Attribute) else None
        while isinstance(held, (cst.Subscript, cst.Attribute)) and not (
                isinstance(held, cst.Attribute) and held.attr.value == attr):
            held = held.value
        if isinstance(held, cst.Attribute):
            return True  # `s.wait_event(self.attr[i])`
        if isinstance(held, cst.Name):
            waited.add(held.value)
    if not waited:
        return False
    aliases: set[str] = set()
    for node in local_nodes(fn.node):
        if isinstance(node, cst.Assign) and (_reads_field(node.value, attr) or isinstance(node.value, cst.Name)
                                             and node.value.value in aliases):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.For, cst.CompFor)) and (_reads_field(node.iter, attr) or isinstance(
                node.iter, cst.Name) and node.iter.value in aliases):
            targets = [node.target]
        else:
            continue
        names = {name for t in targets for name in target_names(t)}
        if names & waited:
            return True
        aliases |= names
    return False


def kept_handoff(st: State, u, asked: bool = True) -> str | None:
    """The event recorded after the use ``u`` that this path handed to a project receiver which only keeps it
    (:meth:`~streamlint.model.flow.syncops.SyncMethods.receiver_joins`): a free at the return is then unjoined, as
    that receiver's code says. None when not ``asked`` (a free before the return, an escaped tensor)."""
    return None if not asked else next((k[1:] for k, snap in st.handed_off.items() if k[:1] == "~" and snap.get(u.stream, -1) >= u.time),
                None)
