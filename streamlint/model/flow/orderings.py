"""Streams and orderings: which stream a value or scope denotes, and the vector clocks.

``vc[S][A] >= t`` means every op queued on stream ``A`` up to time ``t`` happens before anything queued
on ``S`` from now on. ``wait_stream``, event record/wait, host synchronisation update the clocks here;
stream keys come from :mod:`streamlint.model.streams` (stream identity) refined by the values the
interpreter tracks (a constant tag, a stream held in a local)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import string_value
from streamlint.model.syntax import local_nodes
from streamlint.model.flow.provenance import held_alias
from streamlint.model.flow.ambient import field_alias
from streamlint.model.flow.paramfields import field_is_current
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.asidejoins import aside_joins_only, waiters_read
from streamlint.model.flow.calls import event_field_waited
from streamlint.model.flow.counters import NVal
from streamlint.model.flow.handlestreams import viewed_stream
from streamlint.model.flow.devicework import helper_site_work
from streamlint.model.flow.elementwaits import sibling_record
from streamlint.model.flow.escapes import field_made_outside, field_only_polled
from streamlint.model.flow.protocols import holder_joins
from streamlint.model.flow.results import EarlyRecord
from streamlint.model.flow.optionalwork import optional_flag
from streamlint.model.flow.elementaliases import created_at
from streamlint.model.flow.releaseguards import release_only
from streamlint.model.flow.threadwaiters import thread_waiter
from streamlint.model.flow.waitertouch import work_meets_waiters
from streamlint.model.flow.values import CVal, EVal, IVal, KVal, NONE, SVal, State, merge_clock
from streamlint.model.stepstate import forks_for_callers
from streamlint.model.uses import bind_arguments
from streamlint.model.streams import (
    EVENT,
    EVENT_LIST,
    MAIN,
    MAIN_STREAM,
    STREAM,
    STREAM_LIST,
    UNKNOWN_STREAM,
    attr_kind,
    local_kind,
    scope_stream_key,
)
from streamlint.model.entries import (
    discipline_for,
    entry_chained,
    entry_verdicts,
    protocol_open,
    scope_entry_keys,
    stream_family,
    stream_text_keys,
)

if TYPE_CHECKING:
    from streamlint.model.uses import ApiUse


class Orderings:
    """Stream / event keys and the vector clocks (mixin of :class:`~streamlint.model.flow.interp.Interp`).

    Interp state it uses: ``clock``, ``file``, ``fn``, ``frames``, ``param_streams``, ``project``. It asks exprs
    (ev).
    """

    def anonymous_key(self, kind: str, node: cst.CSTNode) -> str:
        """A deterministic key for an unnamed stream / event created at ``node`` (never an id(), which
        would leak into messages and differ between runs)."""
        index = self._anonymous.setdefault(id(node), len(self._anonymous))
        if kind == "stream":
            created_at(self, f"<{kind}@{index}>", node)  # type: ignore[arg-type]
        return f"<{kind}@{index}>"

    # ---- rendering (keys for flags, events, streams)
    def render(self, st: State, e: cst.BaseExpression) -> str:
        if isinstance(e, cst.Name):
            v = st.env.get(e.value)
            if isinstance(v, (KVal, SVal, EVal)):
                return v.key
            if isinstance(v, CVal) and v is not NONE:
                return repr(v.value)
            if isinstance(v, IVal):
                return v.pos
            if isinstance(v, NVal):
                return str(v.n)
            return e.value
        if isinstance(e, cst.Attribute):
            return f"{self.render(st, e.value)}.{e.attr.value}"
        if isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
            return f"{self.render(st, e.value)}[{self.render(st, e.slice[0].slice.value)}]"
        if isinstance(e, cst.Integer):
            return repr(int(e.value, 0))
        if isinstance(e, (cst.SimpleString, cst.ConcatenatedString)):
            sv = string_value(e)
            return repr(sv) if sv is not None else self.cfile.code(e)
        if isinstance(e, cst.Call) and not e.args:
            return f"{self.render(st, e.func)}()"
        if isinstance(e, cst.BinaryOperation) and isinstance(self.counter_value(st, e), NVal):
            return str(self.counter_value(st, e).n)  # `xs[(i - 1) % 2]` in a step of a counted loop
        return self.cfile.code(e)

    def kind_of(self, st: State, v: object) -> str | None:
        if isinstance(v, SVal):
            return STREAM
        if isinstance(v, EVal):
            return EVENT
        if isinstance(v, KVal):
            key = v.key
            indexed = "[" in key
            base = key.split("[", 1)[0]
            kind = None
            if base.startswith("self.") and base.count(".") == 1:
                frame_file, frame_fn = next(((f, fn) for f, fn in reversed(self.frames) if fn.class_name),
                                            (self.file, self.fn))
                cls = frame_file.classes.get(frame_fn.class_name or "")
                kind = attr_kind(self.project, frame_file, cls, base[5:])
            elif "." not in base:
                kind = local_kind(self.project, self.cfile, self.cfn, base)
            if indexed:
                return {EVENT_LIST: EVENT, STREAM_LIST: STREAM}.get(kind or "")
            return STREAM if kind == MAIN_STREAM else kind
        return None

    def stream_key(self, st: State, v: object, e: cst.BaseExpression | None) -> str:
        key = self._stream_key(st, v, e)
        return st.same.get(key, key)

    def _stream_key(self, st: State, v: object, e: cst.BaseExpression | None) -> str:
        if isinstance(v, SVal):
            return v.key
        viewed = viewed_stream(self, st, e)  # `as_torch_stream(stream)`: the stream the caller passed (handlestreams.py)
        if viewed is not None:
            return viewed
        if isinstance(v, KVal):
            if v.key.startswith("self.") and v.key.count(".") == 1 and "[" not in v.key:
                frame_file, frame_fn = next(((f, fn) for f, fn in reversed(self.frames) if fn.class_name),
                                            (self.file, self.fn))
                cls = frame_file.classes.get(frame_fn.class_name or "")
                if attr_kind(self.project, frame_file, cls, v.key[5:]) == MAIN_STREAM:
                    return MAIN
            elif v.key.startswith("self.") and (v.key.count(".") >= 2 or "[" in v.key) and self.fn.class_name:
                # `self._codec.stream`, the codec built with `self._compute_stream`: one stream (flow/ambient.py,
                # flow/provenance.py: `self.runtime.slots[i].stream` too)
                alias = field_alias(self.project, self.file, self.file.classes.get(self.fn.class_name), v.key) \
                    or held_alias(self, v.key)
                if alias is not None:
                    return alias
            elif "." in v.key and "[" not in v.key and field_is_current(self.project, self.cfile, self.cfn, v.key):
                return MAIN  # `store.comm_stream`, its class binding the current stream (paramfields.py)
            return v.key
        return self.render(st, e) if e is not None else UNKNOWN_STREAM

    def event_key(self, st: State, v: object, e: cst.BaseExpression | None) -> str:
        key = v.key if isinstance(v, (EVal, KVal)) else self.render(st, e) if e is not None else "<unknown event>"
        return self.family_event_key(st, key)  # an entry of a seeded event family (fieldfamilies.py)

    def scope_stream(self, st: State, use: ApiUse) -> str:
        def constant(expr: cst.BaseExpression) -> str | None:
            v = self.ev(st, expr)
            return v.value if isinstance(v, CVal) and isinstance(v.value, str) else None

        key = scope_stream_key(self.cfile, use, constant=constant,
                               stream=lambda expr: self.stream_key(st, self.ev(st, expr), expr),
                               current=lambda: st.cur)
        owner = self.stream_owner(key)
        if owner is not None and owner in self.handed_owners:  # ordered by the library it was handed to
            merge_clock(st.vc.setdefault(key, {}), self.handed_owners[owner])
        return key

    def stream_owner(self, key: str) -> str | None:
        """The local object a stream named ``key`` was taken from in this function (``send, recv =
        ub_obj.get_communication_stream()`` -> ``ub_obj``), or None."""
        if not key.isidentifier():
            return None
        for node in local_nodes(self.cfn.node):
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) \
                    and isinstance(node.value.func, cst.Attribute) and isinstance(node.value.func.value, cst.Name) \
                    and any(n.value == key for t in node.targets for n in _target_names(t.target)):
                return node.value.func.value.value
        return None

    def next_entry_waits(self, st: State, stream: str, origin: tuple | None = None) -> bool:
        """Whether any work queued on side stream ``stream`` from now on is ordered after what the current
        stream queued up to now: the code is not inside a scope on ``stream`` and every entry onto it
        begins with a wait (:func:`~streamlint.model.entries.entry_discipline`). ``origin``: the (file,
        ``with``) the storage was allocated in, whose file and stream text are asked too (a scope in a
        helper of another module, a stream made in a getter)."""
        if stream == MAIN or stream in st.stack or (stream.startswith("<") and origin is None):
            return False
        if forks_for_callers(self.cfile, self.cfn, stream):
            return True  # a sibling method forks the stream from the current one for the object's users
        family = stream_family(stream)
        pairs = {id(f): (f, fn) for f, fn in ((self.file, self.fn), (self.cfile, self.cfn))}.values()
        if any(protocol_open(self.project, f, fn, family) for f, fn in pairs):
            return False  # a step of a protocol the next step enters with no wait of its own (model/stepchains.py)
        verdicts = [v for f, fn in pairs for v in entry_verdicts(discipline_for(self.project, f, fn, family), family)]
        if origin is not None:
            file, node = origin
            owner = file.function_of.get(id(node))
            verdicts += [v for k in scope_entry_keys(self.project, file, node)
                         for v in entry_verdicts(discipline_for(self.project, file, owner, k), k)]
        if verdicts and all(verdicts):  # a stream handed in: the callers' entries onto what they hand count too
            verdicts += [v for f, fn in ((self.file, self.fn), (self.cfile, self.cfn))
                         for v in caller_entry_verdicts(self.project, f, fn, family)]
        return bool(verdicts) and all(verdicts)

    def entry_chained(self, stream: str) -> bool:
        """Whether the function (or the helper inlined now) enters ``stream`` again after an entry, on the
        strength of one wait before the first (:func:`~streamlint.model.entries.entry_chained`)."""
        family = stream_family(stream)
        return any(entry_chained(self.project, f, fn, family) for f, fn in ((self.file, self.fn), (self.cfile, self.cfn)))

    def wait_stream(self, st: State, waiter: str, producer: str) -> None:
        if waiter == producer:
            return
        snap = st.clock_of(producer)
        snap[producer] = self.clock
        if producer in self.param_streams and producer not in st.last_op:
            snap[MAIN] = max(snap.get(MAIN, -1), self.clock)  # a stream handed in: usually the caller's current one
        merge_clock(st.vc.setdefault(waiter, {}), snap)

    def record(self, st: State, stream: str, key: str, site: cst.BaseExpression | None = None) -> None:
        """Record event ``key`` on ``stream``: it covers what ``stream`` queued so far. ``site`` (the event
        expression of a record written in this function) keeps where that coverage ends."""
        snap = st.clock_of(stream)
        snap[stream] = self.clock
        st.events[key] = snap
        born, handed = st.event_stamps.get(key, (0, -1))
        if not handed > born:
            # (the record's own receiver is no use of the new record; but an event object already put in a
            # container or a field since it was created -- `done.append(ev); ev.record(s)` -- is that object:
            # the holder sees this record, and waits on it there)
            st.used_events.discard(key)
        if site is not None and self.depth == 0 and self.anchor is not None:
            self.record_sites[(key, stream, self.clock)] = (self.anchor, self.cfile.code(site))
        elif site is not None and self.depth:  # (a record in an inlined helper: that helper's own run reports it)
            self.inlined_records.add((key, stream, self.clock))

    # ---- event coverage: what work a recorded event stands for
    def dispatch_seeing_work(self, st: State, e: cst.Call, method: str | None, target: str | None, site) -> object:
        """``dispatch`` (exprs), then :meth:`helper_work` when the call showed no work on the current stream."""
        before = st.work.get(st.cur)
        out = self.dispatch(st, e, method, target)
        self.recorded_use(st, e, site)  # (a callable handed in, on a stream arguments were recorded on: records.py)
        if site is not None and st.work.get(st.cur) == before:
            self.helper_work(st, site)
        return out

    def helper_work(self, st: State, site) -> None:
        """A call of a project helper (a closure, a function walking a payload of unknown type, a method
        filling the object's buffers) the interpreter neither ran inline nor saw touch a tracked tensor, whose
        body queues device work (:func:`~streamlint.model.flow.devicework.queues_device_work`): work on the
        current stream, which an event recorded there before the call does not cover."""
        name = helper_site_work(self.project, self.cfile, self.cfn, site)
        if name is None:
            return
        guessed = name != ""
        t = self.tick()
        if guessed:  # resolved by the method's name only (every definition queues work): the certain work stays
            st.guessed[st.cur] = (self.sure_work(st, st.cur), t)
        st.work[st.cur] = t
        if st.cur == MAIN:
            self.note_thread_work(t)
        if st.cur != MAIN and self.anchor is not None:
            self.note_work(st.cur, t)
            if guessed and self.depth == 0:
                self.guessed_work[t] = name

    def note_work(self, stream: str, t: int) -> None:
        """Work queued on side stream ``stream`` at ``t`` by the statement running now: this function's own
        (``op_sites``), or the call of this function that runs an inlined helper doing it (``work_sites`` has
        both)."""
        self.work_sites.setdefault(stream, []).append((t, self.anchor))
        if self.depth == 0:
            self.op_sites.setdefault(stream, []).append((t, self.anchor))

    def sure_work(self, st: State, stream: str) -> int:
        """The time of the last work on ``stream`` known for certain on this path: not a call resolved by its
        method name only (:meth:`helper_work`)."""
        last = st.work.get(stream, -1)
        guess = st.guessed.get(stream)
        return guess[0] if guess is not None and guess[1] == last else last

    def uncovered_work(self, st: State, stream: str, time: int) -> tuple[cst.CSTNode | None, str | None]:
        """The work on ``stream`` after an event recorded at ``time`` that an early-record finding names, and the
        method name it was guessed by (None: certain). The finding follows the strongest uncovered work: when
        any certain work follows the record, the first of it, however many guessed calls come before it."""
        after = [(t, n) for t, n in self.op_sites.get(stream, ()) if t > time]
        if self.sure_work(st, stream) > time:
            sure = [(t, n) for t, n in after if t not in self.guessed_work]
            return (sure or after or [(None, None)])[0][1], None
        first = after[0] if after else (None, None)
        return first[1], self.guessed_work.get(first[0])

    def uncovered_records(self, st: State) -> list[tuple[str, str, int, int]]:
        """Events this function records on a side stream before work it then queues on that stream, at the
        end of a path: ``(event, stream, record time, last work time)``. A wait on an event orders only the
        work its stream queued before the record; the work after it is left to whoever else joins the
        stream, and here nobody does (no ``wait_stream`` / wait on a later event / host synchronisation on
        this path, no other method of the class joining the stream). Only events someone waits on count:
        kept on an object or in a container, a name the function did not create, or waited here; a timing
        event (read by ``elapsed_time``) stands for no work."""
        found = []
        know = st.know(MAIN)
        for stream, last in st.work.items():
            if stream == MAIN or stream.startswith("<"):
                continue
            joined = know.get(stream, -1) >= last
            covers = [key for key, snap in st.events.items() if snap.get(stream, -1) >= last]
            early = [(snap[stream], key) for key, snap in st.events.items()
                     if key not in covers and (key, stream, snap.get(stream)) in self.record_sites
                     and (not (joined or covers) or key.startswith("self.")) and self.waited_for(key)]
            if not early:
                continue
            time, key = max(early)
            field = key.split("[", 1)[0]
            threaded = thread_waiter(self.project, self.file, self.fn, key) \
                if (joined or covers) and st.host.get(stream, -1) < last \
                and not any(k.split("[", 1)[0] == field for k in covers) else None
            if threaded is not None and not work_meets_waiters(self, st, key, stream, time, last, threaded):
                threaded = None  # the work after the record touches nothing its thread touches (waitertouch.py)
            if threaded is not None:  # its waiter runs on a thread of its own: no join here orders it
                self.thread_waiters[key] = threaded
            elif joined:
                continue
            elif covers:  # a later record covers the work, unless it only guards other values (releaseguards.py)
                release = release_only(self, st, covers, stream, time, last)
                if release is None or not work_meets_waiters(self, st, key, stream, time, last):
                    continue
                self.release_covers[key] = release
            if self.spares_waiters(st, key, stream, time, last) or self.waits_precede_work(st, key, stream, time):
                continue  # the waiters seen here use only what the record already covers, or all waited before
                # the later work was queued (guardedwork.py)
            if not self.joined_elsewhere(stream):
                found.append((key, stream, time, last))
            elif (aside := self.joined_aside(stream, key)) is not None and self.aside_work_read(stream, key, time):
                self.aside_joins[key] = aside  # reported at medium confidence (flow/asidejoins.py)
                found.append((key, stream, time, last))
        return found

    def early_record(self, st: State, key: str, stream: str, time: int) -> EarlyRecord:
        """The finding for the record of ``key`` on ``stream`` at ``time`` that :meth:`uncovered_records` found
        early: the work it leaves out and what the report presumes (a caller's join, an aside join, a release
        event, a threaded waiter)."""
        node, label = self.record_sites[(key, stream, time)]
        work, guessed = self.uncovered_work(st, stream, time)  # type: ignore[attr-defined]
        joins = self.caller_may_join(stream)  # type: ignore[attr-defined]
        after = list({id(n): n for t, n in self.work_sites.get(stream, ()) if t > time}.values())  # type: ignore[attr-defined]
        return EarlyRecord(node, label, stream, work, self.cfg.mode, joins,
                           key in self.presumed_waits, self.aside_joins.get(key), guessed,
                           release=self.release_covers.get(key), thread=self.thread_waiters.get(key),
                           optional=optional_flag(self.fn.node, node, after))

    def aside_work_read(self, stream: str, key: str, time: int) -> bool:
        """Whether the event's waiters may read what the work after its record (at ``time``) writes: the aside
        join covers it for every other reader (:func:`~streamlint.model.flow.asidejoins.waiters_read`)."""
        cls = self.file.classes.get(self.fn.class_name or "")
        field = key.split("[", 1)[0].rsplit(".", 1)[-1]
        statements = list({id(n): n for t, n in self.work_sites.get(stream, ()) if t > time}.values())
        return cls is None or waiters_read(self.project, self.file, cls, field, statements)

    def joined_aside(self, stream: str, key: str) -> str | None:
        """The other method of the class that joins this ``self.*`` stream, when every such join is aside
        from the event protocol (:mod:`~streamlint.model.flow.asidejoins`) and some code of the project waits
        on an event field of this name (the class's consumers rely on the event, not on those joins)."""
        cls = self.file.classes.get(self.fn.class_name or "")
        field = key.split("[", 1)[0].rsplit(".", 1)[-1]
        if cls is None or not stream.startswith("self.") or key.startswith("<") or not field.isidentifier() \
                or holder_joins(self.project, self.file, self.fn, stream) \
                or not event_field_waited(self.project, field):
            return None
        return aside_joins_only(self.project, self.file, cls, stream.replace('"', "'").replace(" ", ""), self.fn)

    def waited_for(self, key: str) -> bool:
        if key in self.timing_events or self.kept_unwaited(key):
            return False
        base = key.split("[", 1)[0]
        if base.isidentifier() and timing_only(self.file, self.fn, base):
            return False  # timing events (made with `enable_timing=True`, read by `elapsed_time`, never waited)
        if key in self.waited_events or key in self.handed_events:
            return True
        field = key.split("[", 1)[0].rsplit(".", 1)[-1] if "." in key.split("[", 1)[0] else None
        if field is not None and not key.startswith("<") and field_only_polled(self.project, field):
            return False  # a progress probe the host polls, no guard (escapes.field_only_polled)
        if key.startswith("self."):  # a field of this object: someone in the project must wait on it
            attr = key[5:].split("[", 1)[0].split(".", 1)[0]
            if event_field_waited(self.project, attr):
                return True
            if field_made_outside(self.project, attr):  # or the other package that makes the event
                self.presumed_waits.add(key)
                return True
            return False
        return not key.startswith("<")

    def wait_event(self, st: State, stream: str, key: str) -> None:
        self.waited_events.add(key)
        snap = st.events.get(key) or sibling_record(st.events, key)  # `done[g][i - 1]` (elementwaits.py)
        if snap is None and not key.startswith("<event@"):
            snap = {MAIN: 0}  # recorded before entry (by the caller, or a previous call): covers pre-entry work
            if st.replayed is not None:  # or recorded by a graph replayed here (a captured record: TE's
                snap = dict(st.replayed.snap or {}) | snap  # ``cuda_graph_event``): covers the replay
        if snap is not None:
            merge_clock(st.vc.setdefault(stream, {}), {s: t for s, t in snap.items() if s != stream})

    def sync_all(self, st: State) -> None:
        for s in (*st.last_op, *st.vc, MAIN):
            st.host[s] = self.clock

    def sync_stream(self, st: State, stream: str) -> None:
        snap = st.clock_of(stream)
        snap[stream] = self.clock
        merge_clock(st.host, snap)

    def blocking_copy(self, st: State, stream: str) -> None:
        """A host-blocking transfer queued on ``stream`` (``.item()``, ``.cpu()``, a ``.to(device)`` /
        ``copy_`` without ``non_blocking=True`` between host and device memory): the call returns only
        once ``stream`` has run it, so the host has seen everything queued on ``stream`` so far. Eager
        execution only: inside a compiled region the call is traced, not run."""
        if self.cfg.mode in ("eager", "cuda"):
            self.sync_stream(st, stream)

    def wait_everything(self, st: State, stream: str) -> None:
        merge_clock(st.vc.setdefault(stream, {}), {s: self.clock for s in (*st.last_op, MAIN) if s != stream})


def caller_entry_verdicts(project, file, fn, family: str, _depth: int = 0) -> list[bool]:
    """The entry-discipline verdicts, in the files of ``fn``'s callers, of the stream a parameter of ``fn``
    holds (``family`` ``streams[0]``, ``streams`` a parameter): what each caller passes (``self.aux_streams``)
    keyed in its own file, and, when that is a parameter of the caller, in its callers' files (two levels).
    Empty when ``family`` does not start with a parameter or the callers cannot be seen."""
    match = re.match(r"[A-Za-z_]\w*", family)
    if fn is None or match is None or match.group(0) not in fn.all_params or match.group(0) in ("self", "cls"):
        return []
    callers = callers_of(project, file, fn) or ()
    params = fn.params[1:] if fn.class_name and fn.params[:1] in (("self",), ("cls",)) else fn.params
    verdicts: list[bool] = []
    for model, site in callers:
        expr = bind_arguments(params + fn.kwonly, site.node, kwonly=fn.kwonly).get(match.group(0))
        if expr is None:
            continue
        text = model.code(expr) + family[match.end():]
        discipline = discipline_for(project, model, site.function, text)  # (`self.side` of the caller's own class)
        for key in stream_text_keys(site.function, text, model):
            verdicts += entry_verdicts(discipline, key)
            if _depth < 1:
                verdicts += caller_entry_verdicts(project, model, site.function, key, _depth + 1)
    return verdicts


def _target_names(target: cst.BaseExpression) -> list:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _target_names(el.value)]
    return []


def _timing_event(file, fn, value: cst.BaseExpression) -> bool:
    """``torch.cuda.Event(enable_timing=True)`` (an event constructor of the API table), or a list / tuple of
    them built by a comprehension or a display."""
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return _timing_event(file, fn, value.elt)
    if isinstance(value, (cst.List, cst.Tuple)):
        return bool(value.elements) and all(_timing_event(file, fn, el.value) for el in value.elements)
    if not isinstance(value, cst.Call):
        return False
    from streamlint.model import apis

    spec = apis.lookup(file.resolve(value.func, fn))
    return spec is not None and spec.role is apis.Role.EVENT_NEW and any(
        a.keyword is not None and a.keyword.value == "enable_timing" and isinstance(a.value, cst.Name)
        and a.value.value == "True" for a in value.args)


def timing_only(file, fn, name: str) -> bool:
    """Is the local ``name`` (in ``fn``) bound only to timing events (``enable_timing=True``; a list of them), read
    by ``elapsed_time`` and never waited on (no ``wait`` / ``wait_event`` / ``synchronize`` call naming it, or a
    loop variable over it)? Such events time work; they are not the join token of anything, so a record
    before later work on their stream leaves nothing unordered."""
    values = fn.name_assigns.get(name) if fn is not None else None
    if not values or name in fn.all_params or not all(_timing_event(file, fn, v) for v in values):
        return False
    names = {name}
    for node in local_nodes(fn.node):  # loop variables over the events (`for s, e in zip(starts, ends)`)
        if isinstance(node, (cst.For, cst.CompFor)) and re.search(rf"\b{re.escape(name)}\b", file.code(node.iter)):
            names |= {n.value for n in local_nodes(node.target) if isinstance(n, cst.Name)}
    pattern = re.compile(rf"\b(?:{'|'.join(re.escape(n) for n in names)})\b")
    timed = False
    for site in fn.calls:
        if site.method in ("wait", "wait_event", "synchronize", "query"):
            texts = [file.code(a.value) for a in site.node.args]
            if isinstance(site.node.func, cst.Attribute):
                texts.append(file.code(site.node.func.value))
            if any(pattern.search(t) for t in texts):
                return False
        elif site.method == "elapsed_time" and pattern.search(file.code(site.node)):
            timed = True
    return timed
