"""Stream and event methods in the dataflow: ``wait_stream``, ``wait_event``, ``record_event``,
``event.record()/wait()/synchronize()/query()``, ``stream.synchronize()``, ``elapsed_time`` (timing events),
hand-offs that escape (``ESCAPE_METHODS``, tensors handed over with their ready event, raw stream handles handed
to native libraries), ``graph.replay()`` and ``record_stream`` on values whose storage is
not tracked, and a method named for a wait on an object of unknown type (``ctx.try_wait_event(...)``): it
orders the current stream after everything queued so far, as ``x.wait()`` on an unknown object does; a
library function handed stream objects orders them with the current stream (``library_stream_sync``).
A mixin of the interpreter (see interp.Interp), split from exprs.py."""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.filefacts import ClassInfo
from streamlint.model.flow.effects import param_effects
from streamlint.model.flow.heldaliases import other_bindings
from streamlint.model.flow.ipchandoffs import PUTS, event_handle_call, handed_event_keys, process_queue
from streamlint.model.flow.elementwaits import sibling_record
from streamlint.model.flow.values import EVal, KVal, RecordVal, State, SVal, TVal, merge_clock, ordered_before
from streamlint.model.argkinds import argument_kind
from streamlint.model.streams import EVENT, MAIN, STREAM, derived
from streamlint.model.tensors import library_record
from streamlint.model.tensorvocab import ESCAPE_METHODS
from streamlint.model.syntax import local_nodes
from streamlint.model.uses import bind_arguments
from streamlint.model.walk import children

# A stream's raw runtime handle (``torch.npu.Stream.npu_stream``, ``torch.cuda.Stream.cuda_stream``), handed to
# native libraries (ctypes / pybind collectives and kernels) to queue their work on that stream.
NATIVE_STREAM_HANDLES = frozenset({"npu_stream", "cuda_stream"})
# a runtime's host synchronisation with one stream, handed the stream's raw handle
_NATIVE_STREAM_SYNC = re.compile(r"(?:^|\.)(?:cuda|hip|cu|musa)StreamSynchronize$|(?:^|\.)aclrtSynchronizeStream$")


def collection_waited(fn, arg: cst.BaseExpression) -> bool | None:
    """``for producer in streams: side.wait_stream(producer)``: a wait on each element of a collection of
    streams the flow cannot resolve (``bucket.copy_streams or {current_stream()}``, the streams that wrote
    into a buffer). True when the collection lists the current stream (its expression, or the one assigned
    to its name, calls ``current_stream()``): the waiter is ordered after it; False when the members are
    unknown: one of them may be the caller's stream, so what the caller produced before the call is taken
    as ordered (precision first). None when ``arg`` is no such loop element."""
    if fn is None or not isinstance(arg, cst.Name):
        return None
    loops = [n for n in local_nodes(fn.node) if isinstance(n, cst.For) and isinstance(n.target, cst.Name)
             and n.target.value == arg.value]
    if len(loops) != 1:
        return None
    iters = [loops[0].iter]
    if isinstance(loops[0].iter, cst.Name):
        iters += [a.value for a in local_nodes(fn.node) if isinstance(a, cst.Assign) and len(a.targets) == 1
                  and isinstance(a.targets[0].target, cst.Name) and a.targets[0].target.value == loops[0].iter.value]
    calls = [n for e in iters for n in local_nodes(e) if isinstance(n, cst.Call)]
    if any(isinstance(c.func, (cst.Name, cst.Attribute)) and (c.func.value if isinstance(c.func, cst.Name)
           else c.func.attr.value) == "current_stream" for c in calls):
        return True
    if isinstance(loops[0].iter, cst.Call) and isinstance(loops[0].iter.func, cst.Name) \
            and loops[0].iter.func.value in ("range", "enumerate", "zip"):
        return None  # (indices, pairs: not the streams themselves)
    return False


class SyncMethods:
    def _given(self, st: State, waited: object, arg: cst.BaseExpression, at: cst.Call) -> str | None:
        """The kind of what a ``wait_stream`` / ``wait_event`` is handed: the value's, as the dataflow tracks it,
        else what the function's own code says of the expression (:func:`~streamlint.model.argkinds.argument_kind`)."""
        if isinstance(waited, (SVal, EVal)):
            return STREAM if isinstance(waited, SVal) else EVENT
        return argument_kind(self.project, self.cfile, self.cfn, arg, at)

    def sync_method(self, st: State, e: cst.Call, recv: object, name: str, kind: str | None,
                    arg0: cst.BaseExpression | None) -> tuple[bool, object]:
        """(handled, result) of a method call on a stream / event / graph / opaque value."""
        if event_handle_call(e) and (isinstance(recv, EVal) or kind == EVENT):
            return True, self.named(st, EVal(self.event_key(st, recv, e.func.value)))  # the event, for another process
        if name == "wait_stream" and arg0 is not None:
            waiter = self.stream_key(st, recv, e.func.value)
            waited = self.ev(st, arg0)
            if self._given(st, waited, arg0, e) == EVENT:
                self.wait_event(st, waiter, self.event_key(st, waited, arg0))  # `s.wait_stream(ev)`: as above
                return True, None
            producer = self.stream_key(st, waited, arg0)
            self.wait_stream(st, waiter, producer)
            members = collection_waited(self.cfn, arg0)
            if members is not None:  # `for s in producer_streams: side.wait_stream(s)`: every member waited
                snap = st.vc.setdefault(waiter, {})  # (the current stream listed: all it queued so far; else
                snap[MAIN] = max(snap.get(MAIN, -1), self.clock if members else self.entry_time)  # the caller's)
            return True, None
        if name == "wait_event" and arg0 is not None:
            waited = self.ev(st, arg0)
            if self._given(st, waited, arg0, e) == STREAM:
                # `cur.wait_event(side_stream)`: a stream where an event belongs raises when it runs (SL202
                # reports it there); its intent, a join on that stream, is what the later uses are judged by
                self.wait_stream(st, self.stream_key(st, recv, e.func.value), self.stream_key(st, waited, arg0))
                return True, None
            self.wait_event(st, self.stream_key(st, recv, e.func.value), self.event_key(st, waited, arg0))
            return True, None
        if name == "record_event":
            stream = self.stream_key(st, recv, e.func.value)
            key = self.event_key(st, self.ev(st, arg0), arg0) if arg0 is not None else self.anonymous_key("event", e)
            self.record(st, stream, key, site=arg0 if arg0 is not None else e)
            return True, EVal(key)
        if name == "elapsed_time" and not isinstance(recv, TVal) and arg0 is not None:
            self.timing_events.update((self.event_key(st, recv, e.func.value),
                                       self.event_key(st, self.ev(st, arg0), arg0)))
        if (not isinstance(recv, TVal) or name == "record") and kind != STREAM \
                and name in ("record", "wait", "synchronize", "query"):  # a tensor has no record(): a mistyped event
            key = self.event_key(st, recv, e.func.value)
            sibling = sibling_record(st.events, key)  # an element by an unresolved index (elementwaits.py)
            known = key in st.events or kind == EVENT or sibling is not None
            stream = self.stream_key(st, self.ev(st, arg0), arg0) if arg0 is not None else st.cur
            if name == "record":
                self.record(st, stream, key, site=e.func.value)  # tensors have no record(): this is an event
            elif name == "wait":
                if known:
                    self.wait_event(st, stream, key)
                else:
                    self.wait_everything(st, stream)  # a collective's work handle, or an event recorded elsewhere
            elif known:  # synchronize() / query(): the host has seen the event complete (a query: where its
                self.waited_events.add(key)  # result says so, flow/polls.py)
                self.host_sees(st, e, name, dict(st.events.get(key) or sibling or {MAIN: 0}), True)
            else:  # an event recorded elsewhere (e.g. a field inherited from a library class): as for a known one
                self.host_sees(st, e, name, {s: self.clock for s in (*st.last_op, *st.vc, MAIN)}, True)
            return True, None
        if "wait" in name and name not in ("wait", "wait_stream", "wait_event") and kind is None \
                and not isinstance(recv, TVal) and not self._resolved(e):
            _, reads, writes = self.call_args(st, e)  # `ms_ctx.try_wait_event(layer, i, KEY)` on an object the
            if any(self.tensors(st, v) for v in reads + writes):  # flow cannot type: it uses its tensors here,
                self.op(st, e, reads, writes, result=False)  # then (a helper named for a wait) orders the
            self.wait_everything(st, st.cur)  # current stream (precision first)
            return True, None
        if kind == STREAM and name in ("synchronize", "query"):
            key = self.stream_key(st, recv, e.func.value)
            self.host_sees(st, e, name, {**st.vc.get(key, {}), key: self.clock}, False)  # (a query: flow/polls.py)
            return True, None
        if name in ESCAPE_METHODS and not isinstance(recv, TVal):
            to_process = name in PUTS and process_queue(self.cfile, self.cfn, e.func.value)
            values = [self.ev(st, arg.value) for arg in e.args]
            if to_process:  # another process reads them after the IPC event recorded here (ipchandoffs.py)
                snaps = [st.events[k] for k in handed_event_keys(values) if k in st.events]
                device = [tv for v in values for tv in self.tensors(st, v) if not self.is_host(st, tv)
                          and not self._event_covers(st, tv, snaps)]  # (an event handed along: the receiver's)
                if device:
                    self.process_handoff = f"`{self.cfile.code(e.func)}()`"
                    try:
                        self.op(st, e, device, result=False)
                    finally:
                        self.process_handoff = ""
            for arg, v in zip(e.args, values):
                if name == "append" and len(e.args) == 1:  # a side-stream call's result of unknown type (listreads.py)
                    v = self.unknown_element(st, e.func.value, arg.value, v)
                    if isinstance(e.func.value, cst.Name):  # `outs.append(fn())`, `outs` handed back (opaqueresults.py)
                        v = self.opaque_result(st, e.func.value.value, arg.value, v)
                self.escape(st, v, into=e.func.value)
                if name == "append" and len(e.args) == 1:
                    self.slot_append(st, e.func.value, v)  # `outs.append(y)` ... `outs[i]` (slots.py)
                held = tuple(tv.sid for tv in self.tensors(st, v))
                if held and name in ("append", "extend", "insert") and isinstance(e.func.value, cst.Name) \
                        and e.func.value.value in st.env:  # a local list: handing it back hands them back
                    box = e.func.value.value
                    st.held[box] = tuple(dict.fromkeys(st.held.get(box, ()) + held))
            return True, None
        if name in ("capture_begin", "capture_end") and not isinstance(recv, TVal):
            self.inline_capture(st, name)  # `g.capture_begin()` .. `g.capture_end()` (replays.py)
            return True, None
        if name == "replay" and not e.args and not isinstance(recv, TVal):
            self.replay(st, e)  # a captured graph runs on this stream, reading its static inputs
            return True, None
        if name == "record_stream" and arg0 is not None and isinstance(e.func.value, (cst.Name, cst.Attribute)) \
                and (holder := dotted(e.func.value)) is not None:
            untracked = not self.tensors(st, recv)
            if untracked or isinstance(e.func.value, cst.Attribute) or isinstance(recv, KVal) and recv.opaque:
                # an element of a collection, an opaque result, an attribute place (`p.grad`: storage.unset_place;
                # also once an in-place op made it a tracked tensor: the record holds when the attribute is rebound;
                # a name holding such a place, `saved = p.grad.data`: gradplaces.py tracks it, the rebinding too)
                self.loose_record(st, holder, self.stream_key(st, self.ev(st, arg0), arg0))
            if untracked:
                return True, None
        return False, None

    @staticmethod
    def _event_covers(st: State, tv: TVal, snaps: list) -> bool:
        """Is the last write of ``tv`` covered by one of the event snapshots ``snaps`` (recorded after it)?"""
        lw = st.stores[tv.sid].last_write if tv.sid in st.stores else None
        return lw is not None and any(snap.get(lw.stream, -1) >= lw.time for snap in snaps)

    def _resolved(self, e: cst.Call) -> bool:
        site = self.cfile.call_site(e)
        return site is None or self.project.call_target(self.cfile, site) is not None \
            or self.project.instance_method(self.cfile, site) is not None

    def handoff(self, st: State, e: cst.Call) -> bool:
        """``consumer.submit(q, ready_event)``: tensors handed to other code together with an event
        recorded after their last write (the receiver waits on it before using them) are not used by
        this call; they escape to the receiver."""
        if not e.args or not all(_plain(a.value) for a in e.args):
            return False
        values = [self.ev(st, a.value) for a in e.args]
        keyed = {key: st.events[key] for v, a in zip(values, e.args)
                 if self.kind_of(st, v) == EVENT and (key := self.event_key(st, v, a.value)) in st.events}
        joined = self.receiver_joins(e)  # (a project receiver that only keeps the event joins nothing now)
        waited = {key for v, a in zip(values, e.args) if (key := self.event_key(st, v, a.value)) in keyed
                  and (joined is None or id(a.value) in joined)}
        snaps = list(keyed.values())
        tensors = [tv for v in values for tv in self.tensors(st, v)]
        if not snaps or not tensors:
            return False
        know = st.know(st.cur)
        for tv in tensors:  # (those already ordered before this stream need no event)
            lw = st.stores[tv.sid].last_write
            if lw is not None and not ordered_before(lw, know) and lw.stream != st.cur \
                    and not any(snap.get(lw.stream, -1) >= lw.time for snap in snaps):
                return False
        for v in values:
            self.escape(st, v)
        # (the records as handed; "~": to a project receiver that keeps the event and waits on it nowhere)
        st.handed_off.update((key if key in waited else f"~{key}", dict(snap)) for key, snap in keyed.items())
        return True

    def receiver_joins(self, e: cst.Call) -> set[int] | None:
        """The argument expressions of ``e`` whose event the receiver waits on or synchronises (on some path, also
        through its helpers: :func:`~streamlint.model.flow.effects.param_effects`) when ``e`` runs a project
        function; None when it runs code the analysis cannot read (its waiter is assumed). A receiver that only
        keeps the event (``self.inflight[key] = ready``, a queue for a writer thread) leaves the current stream
        unordered after the record: its later allocations may still take a block the side stream reads."""
        site = self.cfile.call_site(e)
        target = self.project.call_target(self.cfile, site) if site is not None else None
        if target is None:
            return None
        callee, cfile = target
        method = callee.class_name is not None and callee.params[:1] in (("self",), ("cls",)) \
            and isinstance(e.func, cst.Attribute)
        effects = param_effects(self.project, cfile, callee)
        named = (callee.params[1:] if method else callee.params) + callee.kwonly
        bound = bind_arguments(named, e, kwonly=callee.kwonly)
        onward = _handed_on(self.project, cfile, callee)
        kept = {id(expr) for name, expr in bound.items() if name in named and name not in onward
                and not effects.get(name, frozenset()) & {"wait", "sync"}}
        # (an argument the receiver takes in `**kwargs` / `*args`, or hands on to a call the analysis cannot follow,
        # `forward_batch.attn_backend.forward(q, k, v, **kwargs)` reaching a backend's `rel_bias_event.wait()`:
        # its waiter is assumed, as for a receiver the analysis cannot read)
        return {id(a.value) for a in e.args if id(a.value) not in kept}

    def records_handed_out(self, st: State, e: cst.Call) -> None:
        """``connector.start_load_kv(LoadMetadata(slot_mapping=slots, ...))``: a record object of another package
        (:func:`~streamlint.model.tensors.library_record`) handed to a call outside the project. Such a record is
        the unit a library queues (a layerwise loader keeps it in the generator it stores for later rounds): the
        tensors it holds may live on in the callee, so their local names dying frees nothing the flow can see
        (they escape: a death at the return is reported only in strict mode)."""
        for arg in e.args:
            value = arg.value
            if isinstance(value, cst.Name) and isinstance(st.env.get(value.value), RecordVal):
                self.escape(st, st.env[value.value])
            elif isinstance(value, cst.Call) and (inner := self.cfile.call_site(value)) is not None \
                    and library_record(inner.target) and self.project.symbol(inner.target, self.cfile) is None:
                for item in value.args:
                    if isinstance(item.value, cst.Name) and item.value.value in st.env:
                        self.escape(st, st.env[item.value.value])

    def library_stream_sync(self, st: State, e: cst.Call, site) -> bool:
        """``tex.bulk_overlap_ag_with_external_gemm(ub, send_stream, recv_stream)``: a function of a library
        outside the project (not torch) handed stream objects schedules its work on them and synchronises them
        with the current stream in a way the flow cannot see; precision first, each is taken as ordered with
        the current stream both ways from here. Returns False: the call is then evaluated as usual."""
        target = site.target if site is not None else None
        if target and target.split(".")[0] not in ("torch", "torch_npu", "torchair") and not self.depth:
            self.hand_owners(st, e)
        root = e.func
        while isinstance(root, cst.Attribute):
            root = root.value
        if not target or target.split(".")[0] in ("torch", "torch_npu", "torchair") or not isinstance(root, cst.Name) \
                or root.value in st.env or root.value in self.cfn.all_params or root.value not in self.cfile.names \
                or self.project.call_target(self.cfile, site) is not None or self.project.symbol(target, self.cfile):
            return False  # (only a module-level import from outside the project: `tex.f(...)`, no project class)
        for arg in e.args:
            v = self.ev(st, arg.value) if isinstance(arg.value, (cst.Name, cst.Attribute)) else None
            stream = self.stream_key(st, v, arg.value) if v is not None and not isinstance(v, TVal) else None
            if stream is not None and (self.kind_of(st, v) == STREAM or stream in st.last_op):  # (a stream, or
                self.wait_stream(st, st.cur, stream)  # an untyped value this function queued work on as one)
                self.wait_stream(st, stream, st.cur)
        return False

    def hand_owners(self, st: State, e: cst.Call) -> None:
        """``general_gemm(..., ub=ub_obj)``: an object handed to a call outside torch that the flow does not
        see into (a library, or a project wrapper reaching one) may own streams (a userbuffers communicator)
        that the library orders with the current stream when it launches there (TE makes the communicator's
        send / recv streams wait on the main stream). A stream later taken from that object in this function
        (``send, recv = ub_obj.get_communication_stream()``) is taken as ordered after what the current
        stream had queued at that call (orderings.scope_stream)."""
        snap = dict(st.know(st.cur))
        snap[st.cur] = self.clock
        for arg in e.args:
            if isinstance(arg.value, cst.Name) and not isinstance(st.env.get(arg.value.value), (TVal, EVal)) \
                    and self.kind_of(st, st.env.get(arg.value.value)) is None:
                merge_clock(self.handed_owners.setdefault(arg.value.value, {}), snap)

    def native_launch(self, st: State, e: cst.Call) -> bool:
        """``lib.CommAllReduce(buf(x.data_ptr()), buf(y.data_ptr()), n, comm, handle(s.npu_stream))``: a
        native library call handed one stream's raw handle queues its work on that stream, whatever stream
        is current on the host, on the memory of the tensors whose raw pointers it is handed (read, and
        maybe written: the signature is not known)."""
        memo = derived(self.project, "native_launch_parts")  # (syntactic; a call is evaluated many times)
        held = memo.get(id(e))
        if held is None or held[0] is not e:  # (the node is kept with its answer: an id is never reused under it)
            held = memo[id(e)] = (e, *_launch_parts(e, self.cfn))
        _node, handles, pointers = held
        if len(handles) == 1 and not pointers and _NATIVE_STREAM_SYNC.search(dotted(e.func) or ""):
            # `cudart.cudaStreamSynchronize(c_void_p(s.cuda_stream))`: the host waits for the stream, as
            # `s.synchronize()` does (also `hipStreamSynchronize`, `aclrtSynchronizeStream`)
            handle = self.ev(st, handles[0])
            if self.kind_of(st, handle) not in (STREAM, None):
                return False
            key = self.stream_key(st, handle, handles[0])
            self.host_sees(st, e, "synchronize", {**st.vc.get(key, {}), key: self.clock}, False)
            return True
        if len(handles) != 1 or not pointers:
            return False
        handle = self.ev(st, handles[0])
        if self.kind_of(st, handle) not in (STREAM, None):
            return False
        stream = self.stream_key(st, handle, handles[0])
        tensors = [self.ev(st, p) for p in pointers]
        if not any(self.tensors(st, v) for v in tensors):
            return False
        st.stack.append(stream)
        try:
            self.op(st, e, tensors, tensors, result=False)
        finally:
            st.stack.pop()
        return True


def _launch_parts(e: cst.Call, fn=None) -> tuple[list[cst.BaseExpression], list[cst.BaseExpression]]:
    """The raw stream handles (``s.npu_stream``, or a local of ``fn`` bound once, by a plain assignment, to one:
    ``stream_int = s.cuda_stream``) and the tensors of raw pointers (``x.data_ptr()``) among the arguments of a call (not
    inside a lambda or a nested def)."""
    handles: list[cst.BaseExpression] = []
    pointers: list[cst.BaseExpression] = []
    stack: list[cst.CSTNode] = [a.value for a in e.args]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Attribute) and n.attr.value in NATIVE_STREAM_HANDLES:
            handles.append(n.value)
            continue
        if isinstance(n, cst.Name) and fn is not None and n.value not in fn.all_params:
            bound = fn.name_assigns.get(n.value, ())
            if len(bound) == 1 and isinstance(bound[0], cst.Attribute) and bound[0].attr.value in NATIVE_STREAM_HANDLES \
                    and n.value not in other_bindings(fn):  # (no loop / with / walrus / augmented / except target)
                handles.append(bound[0].value)
            continue
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "data_ptr" \
                and not n.args:
            pointers.append(n.func.value)
            continue
        if isinstance(n, (cst.Lambda, cst.FunctionDef)):
            continue
        stack.extend(children(n))
    return handles, pointers


def _handed_on(project, file, fn) -> set[str]:
    """The parameters of ``fn`` it passes as such (``p``, ``*p``, ``**p``) to a call whose code the analysis cannot
    follow (no project function): what happens to them there is unseen. Building a project class's record
    (``WriteJob(payload=host, ready=ready)`` queued for a writer thread) only keeps them."""
    params = set(fn.all_params)
    out: set[str] = set()
    for site in fn.calls:
        names = {a.value.value for a in site.node.args if isinstance(a.value, cst.Name) and a.value.value in params}
        if not names - out or project.call_target(file, site) is not None:
            continue
        sym = project.symbol(site.target, file) if site.target is not None else None
        if sym is None or not isinstance(sym[0], ClassInfo):
            out |= names
    return out


def _plain(e: cst.BaseExpression) -> bool:
    """An argument evaluated without running anything (a name, an attribute, a literal, a negated flag)."""
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
        return _plain(e.expression)
    return isinstance(e, (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.SimpleString))
