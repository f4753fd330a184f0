"""Tensor storage and lifetimes: allocations, accesses, races and frees.

Every op reads and writes storages on the current stream; an access that is not ordered after the
last conflicting access on another stream is a :class:`~streamlint.model.flow.results.Race`. A local
storage dies on ``del``, on rebinding of its last name, on ``untyped_storage().resize_(0)`` or at
function end unless it escaped (or escaped into a field of the object that another method drops: records.py);
dying while another stream may still use it without ``record_stream`` is a Lifetime hazard."""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.attrstreams import unseen_pair
from streamlint.model.flow.ambient import steps_on
from streamlint.model.flow.callerscopes import race_evidence
from streamlint.model.flow.batchguards import KEEP, inner_statement, race_guard
from streamlint.model.flow.callers import steps_synced
from streamlint.model.flow.chosenstreams import handed_wait
from streamlint.model.flow.discardedreads import discarded_read, message_only
from streamlint.model.flow.siblingevents import sibling_wait
from streamlint.model.flow.elementaliases import collection_wait, same_turn
from streamlint.model.flow.gradplaces import gradient_place
from streamlint.model.flow.indexsyms import parts_distinct
from streamlint.model.flow.unseenmethods import unseen_self_call
from streamlint.model.flow.entryctx import entry_of
from streamlint.model.flow.escapes import events_in, kept_handoff, self_field
from streamlint.model.flow.handouts import HandOuts
from streamlint.model.flow.localstreams import dies_at_return
from streamlint.model.flow.hostargs import host_by_callers, worker_thread_only
from streamlint.model.flow.queuehandoffs import queued_unordered
from streamlint.model.flow.syncedresults import synced_by_callers
from streamlint.model.flow.protocols import callback_read, handed_write
from streamlint.model.flow.results import Lifetime, Race, Unjoined, ViewEscape
from streamlint.model.flow.values import (
    Access,
    EVal,
    FieldsVal,
    KVal,
    State,
    Storage,
    TVal,
    TupVal,
    merge_clock,
    ordered_before,
)
from streamlint.model.streams import MAIN
from streamlint.model.flow.calls import event_waited_elsewhere
from streamlint.model.flow.handedfields import forked_elsewhere, step_source
from streamlint.model.stepstate import forks_for_callers
from streamlint.model.tensorvocab import META_ATTRS


_ELEMENT = re.compile(r"[^\[]*\[\s*(-?\d+|[A-Za-z_]\w*)\s*\]")
_ENTRY = re.compile(r"[^\[]*\[\s*('[^'\\]*')\s*\]")  # a constant string key, as rendered (repr)


class Storages(HandOuts):
    """Storages, tensor accesses, races and lifetimes (mixin of :class:`~streamlint.model.flow.interp.Interp`).

    Interp state it uses: ``anchor``, ``cfg``, ``clock``, ``deferred_end``, ``depth``, ``entry``, ``file``,
    ``h2d``, ``lifetimes``, ``own_withs``, ``races``, ``unjoined``, ``view_escapes``. It asks orderings
    (kind_of).
    """

    def new_storage(self, st: State, kind: str, stream: str, name: str | None, write: Access | None) -> Storage:
        if st.pending and kind == "local":
            self.check_pending(st, stream)
        s = Storage(self.new_id(), name, kind, stream, write)
        if kind == "local" and stream != MAIN:
            s.origin = self.scope_origin(st, stream)
        st.stores[s.sid] = s
        return s

    def scope_origin(self, st: State, stream: str) -> tuple | None:
        """(file, ``with`` node) of the innermost open scope on ``stream``: where the entry discipline of
        the allocating stream is read (the scope may sit in a helper of another module)."""
        run = next((r for r in reversed(st.runs) if r.stream == stream), None) if stream in st.stack else None
        if run is None or not run.node.items:
            return None
        file = next((f for f, _ in reversed(self.frames) if f.scope_site(run.node.items[0]) is not None), None)
        return (file, run.node) if file is not None else None

    def new_tensor(self, st: State, sid: int, base: int | None = None, multi: str | None = None) -> TVal:
        v = TVal(self.new_id(), sid, base, self.clock, multi)
        st.vals[v.vid] = v
        if base is not None and base in st.deps:
            st.deps[v.vid] = list(st.deps[base])
        return v

    def host_tensor(self, st: State) -> TVal:
        """A tensor in host memory (a CPU factory, ``.cpu()``, ``pin_memory()``): no stream produces or
        owns it, so it takes part in no device race and no allocator-reuse hazard."""
        self.tick()
        return self.new_tensor(st, self.new_storage(st, "host", st.cur, None, None).sid)

    def is_host(self, st: State, tv: TVal) -> bool:
        S = st.stores.get(tv.sid)
        return S is not None and S.kind == "host"

    def long_tensor(self, st: State, key: str, glob: bool = False, part: str | None = None) -> TVal:
        base_key = element_field_key(key)
        sid = st.long.get(base_key)
        if sid is None:  # (first met after a graph replay: maybe one of the graph's static outputs)
            step = None if glob or st.replayed else step_source(self.project, self.file, self.fn, base_key,
                                                                      self.cfg.mode)
            write = Access(MAIN, 0, None, {}) if step else None if glob else st.replayed  # step: the caller's
            sid = self.new_storage(st, "long", MAIN, base_key, write).sid  # step wrote it (stepstate.py)
            st.long[base_key] = sid
            self.step_sources.update({sid: step} if step else {})
        tv = self.new_tensor(st, sid)
        element = _ELEMENT.match(key)  # `bufs[0]`, a representative element `grads[-1]`, `pieces[i]` in a round
        if element is not None:  # of a range / enumerate loop (rounds.py): that element's part
            tv.part = self.index_part(st, element.group(1)) if element.group(1).isidentifier() else element.group(1)
        elif (entry := _ENTRY.match(key)) is not None:  # `self.meta["zero"]`: one entry of a mapping (a tensor
            tv.part = f"[{entry.group(1)}]"  # takes no string key), another place than `self.meta["scale"]`
        tv.part = tv.part or part  # (`self.kv[k + 1]`, `self.ring[self.active]`: flow/indexsyms.py)
        return tv

    # ---- tensor accesses
    def tensors(self, st: State, v: object) -> list[TVal]:
        if isinstance(v, TVal):
            return [v]
        if isinstance(v, TupVal):
            out: list[TVal] = []
            for item in v.items:
                out += self.tensors(st, item)
            return out
        if isinstance(v, KVal) and not v.opaque and self.kind_of(st, v) is None and not v.key.startswith("<") \
                and not self.host_attribute(v):
            return [self.long_tensor(st, v.key, v.glob, v.part)]
        if isinstance(v, KVal) and v.opaque and v.key.split("[", 1)[0] in st.long:
            return [self.long_tensor(st, v.key, part=v.part)]  # a place a tensor op wrote earlier (:meth:`place`)
        if isinstance(v, KVal) and v.opaque and (grad := gradient_place(base := element_field_key(v.key))) \
                and self.kind_of(st, v) is None:
            if grad not in st.long:  # `handle.flat_param.grad`: a gradient backward left on the current stream
                st.long[grad] = self.new_storage(st, "arg", MAIN, grad, Access(MAIN, 0, None, {})).sid
                self.__dict__.setdefault("gradient_sids", set()).add(st.long[grad])
            st.long.setdefault(base, st.long[grad])  # (`.grad.data`: the same storage)
            return [self.long_tensor(st, v.key, part=v.part)]  # (gradplaces.py)
        return []

    def placed_element(self, st: State, v: object) -> KVal | None:
        """An element of a collection of untracked type whose elements a tensor op wrote (``for g in grads``
        after ``dist.all_reduce(grads[0])``): a place of the same storage; an element of a long-lived tensor
        collection (the static buffers of a replayed graph) or of a comprehension of device copies (``for b in
        blocks: b.record_stream(cur)``): a view of it; else nothing known."""
        if isinstance(v, FieldsVal):
            return v  # a list of records a project call handed back: each element is such a record (recordresults.py)
        if isinstance(v, TVal) and v.sid in st.stores and (st.stores[v.sid].kind == "long" or st.stores[v.sid].copies):
            return self.new_tensor(st, v.sid, v.vid)
        if isinstance(v, KVal) and (v.opaque and v.key.split("[", 1)[0] in st.long or v.key.startswith("self.")):
            return KVal(f"{v.key}[:]", v.glob, True)
        return None

    def copies_value(self, st: State, node: cst.For, name: str) -> TVal | None:
        """``for v in dev.values()`` / ``for k, v in dev.items()`` over a comprehension of device copies
        (``dev = {k: h.to(d, non_blocking=True) for ...}``): ``v`` is a view of the copies (``v.record_stream(cur)``
        records them); None for any other loop or target."""
        it, target = node.iter, node.target
        if not (isinstance(it, cst.Call) and not it.args and isinstance(it.func, cst.Attribute)
                and it.func.attr.value in ("values", "items")):
            return None
        if it.func.attr.value == "values" and not (isinstance(target, cst.Name) and target.value == name):
            return None
        if it.func.attr.value == "items" and not (isinstance(target, cst.Tuple) and len(target.elements) == 2
                                                  and isinstance(target.elements[1].value, cst.Name)
                                                  and target.elements[1].value.value == name):
            return None
        v = self.ev(st, it.func.value)
        S = st.stores.get(v.sid) if isinstance(v, TVal) else None
        return self.new_tensor(st, v.sid, v.vid) if S is not None and S.copies else None

    def place(self, st: State, v: object) -> object:
        """A value of untracked type that a tensor op writes (``dist.all_reduce(bucket.data)``,
        ``p.grad.copy_(...)``, ``torch.add(a, b, out=buffers[i])``) is a tensor: from then on the place (the
        attribute / element chain it was reached by) is a long-lived storage like a ``self.*`` tensor, so a
        side-stream write of it orders (and races with) its later uses whatever object holds it."""
        if isinstance(v, KVal) and v.opaque and not v.key.startswith("<") and self.kind_of(st, v) is None:
            return self.long_tensor(st, v.key)
        return v

    def op(self, st: State, node: cst.CSTNode, reads: list, writes: list = (), result: bool = True,
           read_writes: bool = True) -> TVal | None:
        t, s = self.tick(), st.cur
        rs = [tv for v in reads for tv in self.tensors(st, v)]
        ws = [tv for v in writes for tv in self.tensors(st, self.place(st, v))]
        if read_writes:
            rs += ws
        if rs and not self.h2d and all(self.is_host(st, tv) or st.stores[tv.sid].d2h is not None for tv in rs + ws) \
                and self.cpu_op(st, node):  # (a storage a D2H copy fills is host memory, a pinned field's too)
            self.host_compute(st, rs + ws)  # a CPU op: the host reads its operands now
        know = st.know(s)
        persist: dict[str, int] = {}
        for tv in rs + ws:
            for dep in st.deps.get(tv.vid, ()):
                merge_clock(persist, dep)
            if self.cfg.implicit_edges:
                lw = st.stores[tv.sid].last_write
                if lw is not None and lw.stream != s and lw.snap is not None:
                    merge_clock(persist, lw.snap)
        if persist:
            persist.pop(s, None)
            merge_clock(st.vc.setdefault(s, {}), persist)
            merge_clock(know, persist)
        for tv in rs:
            self.access(st, tv, s, t, know, False)
        for tv in ws:
            self.access(st, tv, s, t, know, True)
        st.last_op[s] = t
        host = self.host_depth or bool(rs) and not self.h2d and self.host_result(st, node, rs)
        if not host and not isinstance(self.anchor, (cst.If, cst.While, cst.For, cst.With)):  # (a host test's operand)
            st.work[s] = t
            if s != MAIN and self.anchor is not None:
                self.note_work(s, t)
            elif s == MAIN:
                self.note_thread_work(t, node)
        if not result:
            return None
        if host:
            return self.new_tensor(st, self.new_storage(st, "host", s, None, None).sid)  # a CPU op on host data
        snap = dict(know) | {s: t}
        # a tensor made during a graph capture lives in the graph's private pool, not in the stream's
        made = Access(s, t, self.anchor, snap, inner=inner_statement(self))
        storage = self.new_storage(st, "pool" if st.regions else "local", s, None, made)
        return self.new_tensor(st, storage.sid)

    def host_result(self, st: State, node: cst.CSTNode, rs: list[TVal]) -> bool:
        """An op on host data runs on the host. Arithmetic with a host tensor operand stays there too
        when the other operands are long-lived values of unknown type (``ids * self.block_size``): a
        device tensor operand would make the expression invalid."""
        if all(self.is_host(st, tv) for tv in rs):
            return not self.transfer_from_unknown(st, node)
        return isinstance(node, cst.BinaryOperation) and any(self.is_host(st, tv) for tv in rs) \
            and all(self.is_host(st, tv) or st.stores[tv.sid].kind == "long" for tv in rs)

    def alloc(self, st: State, node: cst.CSTNode) -> TVal:
        """``torch.empty*``: memory from the current stream's pool, no kernel, so no producer to order. But
        the block may be one that stream freed while its earlier kernels still use it (the caching
        allocator reuses it at once for that stream's own later work): another stream touching the new
        tensor before any write must first wait on the allocating stream (:meth:`access`)."""
        t = self.tick()
        storage = self.new_storage(st, "local", st.cur, None, None)
        if not st.regions:  # (a graph's private pool is no stream's)
            storage.born = Access(st.cur, t, self.anchor, dict(st.know(st.cur)) | {st.cur: t})
        return self.new_tensor(st, storage.sid)

    def access(self, st: State, tv: TVal, s: str, t: int, know: dict[str, int], write: bool) -> None:
        S = st.stores.get(tv.sid)
        if S is None or S.kind == "host" or (st.regions and st.regions[-1][2] == "deferred"):
            return  # (work captured without a synchronising entry runs at replay, not here)
        part = tv.part

        def conflicts(acc: Access) -> bool:
            return acc.stream != s and not ordered_before(acc, know) \
                and not parts_distinct(acc.part, part)

        # the last write, or the first unordered write of another element's part (`out[i]` per element)
        lw = next((w for w in (S.last_write, *S.parts) if w is not None and conflicts(w)), S.last_write)
        if S.born is not None:
            if write and lw is None and not S.reads and conflicts(S.born) and S.born.stream not in know:
                # its first use, a write, on a stream that never waited on the allocating one (precision
                # first: a wait before the allocation orders the kernels of most blocks it can reuse; a
                # first read may only look at its metadata, in a helper the flow does not follow)
                self.race(st, "alloc", S, S.born, s, self.label(st, tv.sid))
            S.born = None
        if not write:
            if self.cfg.raw and lw is not None and conflicts(lw) and not (self.h2d and S.kind == "arg"):
                self.race(st, "read", S, lw, s, self.label(st, tv.sid))
            S.reads.append(Access(s, t, self.anchor, part=part))
        else:
            if self.cfg.waw and lw is not None and conflicts(lw):
                self.race(st, "write-after-write", S, lw, s, self.label(st, tv.sid))
            elif self.cfg.war:
                hits = [r for r in S.reads if conflicts(r)]  # (the first, but one a gated hand-off is not before it)
                r = next((r for r in hits if (S.sid, r.time) not in self.handed_gates), hits[0] if hits else None)
                if r is not None:
                    self.race(st, "write-after-read", S, r, s, self.label(st, tv.sid))
            prev = S.last_write
            # (a write of one element leaves an earlier write of the whole in force on the others: `ring[k & 1]`
            # filled here while a previous call's fill of the ring is still pending)
            S.parts = [*S.parts, prev] if prev is not None and (parts_distinct(prev.part, part) or prev.part is None
                                                                and part is not None and prev.node is not None) else []
            snap = dict(know)
            snap[s] = t
            S.last_write = Access(s, t, self.anchor, snap, part=part, inner=inner_statement(self))
            (self.helper_writes.add if self.depth else self.helper_writes.discard)(S.sid)
            S.reads = [r for r in S.reads if parts_distinct(r.part, part)]
        if S.kind in ("local", "arg") and s != S.alloc:  # (an argument dies only by resize_(0))
            S.uses.append(Access(s, t, self.anchor, label=self.label(st, tv.sid)))
        self.check_view_escape(st, tv)

    def race(self, st: State, kind: str, S: Storage, earlier: Access, s: str, label: str | None = None,
             escape: bool = False, body: bool = False, replay: bool = False, held: str = "", caller: tuple | None = None,
             flag: str | None = None) -> None:
        outer = self.caller_context(S, earlier, s) if self.depth else None  # the caller's name for it
        if self.anchor is None or self.depth and outer is None or unseen_pair(self, earlier.stream, s):
            return
        if kind == "read" and not (escape or body or replay or held) and discarded_read(self.fn.node, self.anchor):
            return  # a fresh value of tensor operators, dropped: nothing ever uses what the read saw
        gates = self.race_gates(S.sid, earlier.time)
        self.relied_on(st, earlier, s, gates)
        key = (id(self.anchor), (name := outer or label or S.name or "tensor"), kind)
        if earlier.time < self.handshake_time and earlier.stream == MAIN and s.rsplit(".", 1)[-1] in self.handshake_forks:
            return  # the thread that woke this one forked ``s`` from the current stream before it signalled
        if S.kind == "arg" and earlier.time <= self.entry_time and S.name \
                and (host_by_callers(self.project, self.file, self.fn, S.name, self.anchor)
                     or worker_thread_only(self.project, self.file, self.fn)
                     and not queued_unordered(self.project, self.file, self.fn, S.name)
                     or synced_by_callers(self.project, self.file, self.fn, S.name)
                     or forks_for_callers(self.file, self.fn, s)):
            return  # a host tensor handed in (no stream produced it), a caller on a worker thread (not one taking it off
            # a queue its object fills with no ordering: flow/queuehandoffs.py), a result every
            # caller's host synchronised (syncedresults.py), or a sibling method that forks the stream from the
            # current one for the object's users (stepstate.py)
        handed = handed_wait(self.fn, st, earlier.stream, s, earlier.time, S.kind == "arg" and earlier.time
                             <= self.entry_time and not body, escape)  # a stream the caller hands in orders it (low)
        seeded = self.__dict__.get("protocol_seeds", {}).get(S.sid)  # (the seed may be kept among the parts)
        protocol = self.protocol_sources.get(S.sid) \
            if S.last_write is earlier or seeded is not None and earlier.time == seeded[0] else None
        unproven = self.__dict__.get("protocol_unproven", {}).get(S.sid) if protocol else None
        if protocol is not None and (kind != "read" and not handed_write(self, S, kind, s) or replay
                                     or callback_read(self, self.anchor)
                                     or unproven is not None and (escape or body or held)):
            return  # a class protocol says who must join before a read, not what a later write may do (nor, when
            # the class shows no join, a hand-back: the caller may join before its own read: flow/unproven.py)
        step = self.step_sources.get(S.sid) if earlier.node is None and earlier.time == 0 else None
        if step is not None and (forked_elsewhere(self.file, self.fn, s) or set(st.know(s)) - {s}
                                 or steps_synced(self.project, self.file, self.fn, step)
                                 or steps_on(self.project, self.file, self.fn, S.name, s, st.same)):
            return  # the class forks that stream in a step of its own, it waited here on a stream not named,
            # every caller synchronises the device after the writer's step before it calls this (flow/callers.py),
            # or every writer runs on this very stream by its callers (flow/ambient.py)
        element = collection_wait(self, st.know(s), earlier.stream, earlier.time)
        if element is not None and same_turn(self, S.sid, earlier.stream, element):
            return  # the slot read holds the producer's tensor only where the joined element is the producer's
            # (`if g == primary: cents[g] = centroids`, waited through `reduce[g]`: flow/elementaliases.py)
        kept = self.races.get(key)
        if kept is not None and kept.gates and not gates:
            kept = None  # (a hand-off the function may gate: a race no hand-off gates takes its place)
        if (guard := race_guard(self, kept, earlier)) is not KEEP:
            self.races[key] = Race(kind, self.anchor, name, earlier.stream, s, earlier.node,
                                   S.kind == "arg" and earlier.time <= self.entry_time, self.cfg.mode, escape, body,
                                   replay, earlier.time < self.handshake_time, self.caller_stream(earlier.stream, s),
                                   protocol, held, caller, step=step, inlined=self.inner if self.depth else None,
                                   unknown=S.sid in self.unknown_results,
                                   opaque=self.__dict__.get("opaque_calls", {}).get(id(earlier.node), ""), guessed=self.guessed_args.get(S.sid, ""),
                                   dispatched=self.__dict__.get("dispatched_args", {}).get(S.sid, ""),
                                   foreign=self.__dict__.get("foreign_args", {}).get(S.sid, ""),
                                   helper_guess=self.__dict__.get("helper_guesses", {}).get(S.sid, ""),
                                   helper_built=S.sid in self.__dict__.get("built_guesses", ()),
                                   host_handed=self.handed_host(S.sid, earlier.time), entry=entry_of(self, S, earlier, s),
                                   process=self.__dict__.get("process_handoff", ""),
                                   gates=gates,
                                   ambient=race_evidence(self, earlier.stream, s, step and S.name),
                                   handed_wait=handed, batch_guard=guard,
                                   unproven=unproven, flag=flag if kept is None or kept.flag else None,
                                   release=self.__dict__.get("release_sources", {}).get(S.sid)
                                   if kind == "write-after-read" else None,
                                   labelled=message_only(self.fn.node, self.anchor) if kind == "read" else None,
                                   sibling=sibling_wait(self.fn.node, self.anchor, earlier.node, name),
                                   element=element,
                                   unseen_method=unseen_self_call(self.project, self.file, self.fn, earlier.node,
                                                                  self.anchor),
                                   cause=(
                                       st.know(s).get(earlier.stream, -1), earlier.time, self.clock))

    def caller_stream(self, a: str, b: str) -> str | None:
        """The stream parameter of a race with the entry stream: the caller may pass its own stream there."""
        for param, other in ((a, b), (b, a)):
            if param in self.param_streams and other == MAIN:
                return param
        return None

    def label(self, st: State, sid: int) -> str | None:
        """A variable bound to storage ``sid`` now, preferring one written in the current statement."""
        names = [n for n, v in st.env.items() if isinstance(v, TVal) and v.sid == sid]
        if not names:
            return None
        if len(names) > 1 and self.anchor is not None and self.depth == 0:
            code = self.file.code(self.anchor)
            for n in names:
                if re.search(rf"(?<![\w.]){re.escape(n)}\b", code):
                    return n
        return names[0]

    def check_view_escape(self, st: State, tv: TVal) -> None:
        if self.depth or self.anchor is None or not st.waits:
            return
        base = tv.base
        while base is not None:
            for time, wnode, wname in st.waits.get(base, ()):
                if tv.created < time:
                    key = (tv.vid, id(wnode))
                    if key not in self.view_escapes:
                        name = st.stores[tv.sid].name or "view"
                        alias = self._name_of(st, tv) or name
                        self.view_escapes[key] = ViewEscape(self.anchor, alias, wname, wnode)
                    return
            parent = st.vals.get(base)
            base = parent.base if parent is not None else None

    def _name_of(self, st: State, tv: TVal) -> str | None:
        return next((name for name, v in st.env.items() if v is tv), None)

    # ---- lifetime
    def referenced(self, st: State, sid: int) -> bool:
        def holds(v: object) -> bool:
            return v.sid == sid if isinstance(v, TVal) else isinstance(v, TupVal) and any(holds(i) for i in v.items)

        return any(holds(v) for env in (st.env, *self.outer_envs) for v in env.values())

    def escape(self, st: State, v: object, into: cst.BaseExpression | None = None) -> None:
        """``v`` outlives the call: returned, kept by a callee, stored in ``into`` (a field, a container slot)."""
        self.note_bundles(st, v, into)  # (a record of values an event guards: escapes.py)
        for e in events_in(v):
            self.handed_events.add(e.key)  # kept on an object / in a container: someone else waits on it
            self.note_handed(st, e.key)  # a use of the event; a record after it still reaches the holder
            self.field_events.setdefault(e.key, set()).add((self_field(into) or "") if into is not None else "")
        for tv in self.tensors(st, v):
            S = st.stores.get(tv.sid)
            if S is not None:
                S.escaped = True
                self.note_kept(st, S, into)  # where it is kept (records.py: the object's held fields)

    def free(self, st: State, sid: int, how: str, node: cst.CSTNode | None, force: bool = False) -> None:
        S = st.stores.get(sid)
        if S is None or S.kind not in ("local", "arg") or S.dead or (S.kind == "arg" and how != "resize_(0)"):
            return  # resize_(0) frees an argument's storage whatever the caller still holds
        if not force and self.referenced(st, sid):
            return
        if S.escaped and how != "resize_(0)":
            if how != "function end":
                return
        S.dead = True
        if self.depth and how != "function end":
            if sid > self.inline_floor:
                return  # a helper's own temporary, dead inside the helper: the helper's own analysis reports it
            node = self.anchor
        know = st.know(S.alloc)
        entry_covers = None
        deferred: list[Access] = []
        for u in S.uses:
            if u.stream == S.alloc or u.stream in S.recorded or know.get(u.stream, -1) >= u.time:
                continue
            if entry_covers is None:
                entry_covers = self.next_entry_waits(st, S.alloc, S.origin)
            if entry_covers and (u.stream == MAIN or st.know(MAIN).get(u.stream, -1) >= u.time) \
                    and (how == "function end" or not self.entry_chained(S.alloc)):
                continue  # the allocating stream's next work starts with a wait on the current stream (a free
                # between two entries that share one wait is settled at the stream's next allocation instead)
            if u.node is None:
                return
            if how != "function end":
                # the block goes back to the allocating stream's pool: only that stream's next allocation can
                # take it, so a join of the user into it before then (or, with the entry discipline, into the
                # current stream) still comes first
                deferred.append(u)
                continue
            self.report_lifetime(st, S, u, how, node, end=True)
            return
        if deferred:
            st.pending.append((sid, tuple(deferred), how, node, bool(entry_covers)))

    def report_lifetime(self, st: State, S: Storage, u: Access, how: str, node: cst.CSTNode | None,
                        end: bool = False) -> None:
        """``end``: the block is settled at the function's end (no later allocation of the function takes it)."""
        key = (id(u.node), S.name)
        seen = self.lifetimes.get(key)
        if (seen is None or seen.escaped) and not unseen_pair(self, S.alloc, u.stream):
            handed = how == "function end" and self.published_after(st, u)
            released = self.held_release(st, S) if S.escaped and how == "function end" and not handed else None
            how, node, escaped = (how, node, (S.escaped or handed) and how == "function end") if released is None \
                else ("release", released, False)  # kept in a field another method drops unjoined
            if seen is not None and escaped:
                return  # (a path that hands the join out does not hide another path's unjoined free)
            self.lifetimes[key] = Lifetime(u.node, u.label or S.name or "tensor", S.alloc, u.stream, how, node, escaped,
                                           self.cfg.mode, kept_event=kept_handoff(st, u, how == "function end" and not escaped),
                                           pooled=end and dies_at_return(self.file, self.fn, S))

    def check_pending(self, st: State, stream: str | None) -> None:
        """Frees with a use on another stream the allocating stream had not joined yet: the block returns to
        the allocating stream's pool, and only that stream's next allocation can hand it out again (issue 16:
        a join before that allocation covers the free). They are settled at the allocating stream's next
        allocation (``stream``: is the use ordered before it?) or at the function's end (``None``: the next
        allocation comes after the return, ordered after what the allocating stream knows then; with the
        entry discipline, after what the current stream knows, which the next entry waits on)."""
        keep = []
        for sid, uses, how, node, covers in st.pending:
            S = st.stores.get(sid)
            if S is None or (stream is not None and S.alloc != stream):
                keep.append((sid, uses, how, node, covers))
                continue
            know = st.know(stream if stream is not None else MAIN if covers else S.alloc)
            late = next((u for u in uses if know.get(u.stream, -1) < u.time), None)
            if late is not None:
                self.report_lifetime(st, S, late, how, node, end=stream is None)
        st.pending = keep

    def published_after(self, st: State, u: Access) -> bool:
        """Was an event recorded on ``u``'s stream after ``u`` and handed out (the result, ``self.done`` that every
        caller waits on right after the call, or a receiver call given it with the tensors it guards on this path:
        ``self.attn(q, k, v, rel_bias=bias, rel_bias_event=ev)``, not one whose code only keeps it)? Its waiter
        carries the join: it waits before its own work on the current stream, ordering the stream's earlier uses."""
        if any(snap.get(u.stream, -1) >= u.time for key, snap in st.handed_off.items() if key[:1] != "~"):
            return True
        handed = {ev.key for ev in _events_in(st.ret)}
        return any(snap.get(u.stream, -1) >= u.time and (key in handed or (
            key.startswith("self.") and key.count(".") == 1 and event_waited_elsewhere(self.project, self.file, self.fn, key[5:])))
                   for key, snap in st.events.items())

    def unbind(self, st: State, old: object, how: str, node: cst.CSTNode | None) -> None:
        for tv in self.tensors(st, old) if isinstance(old, (TVal, TupVal)) else ():
            self.free(st, tv.sid, how, node)

    # ---- values of untracked type freed explicitly
    def free_untracked(self, st: State, name: str, how: str = "resize_(0)") -> None:
        """``t.untyped_storage().resize_(0)`` on a value whose storage is not tracked (an element of a
        collection handed in, an opaque result): it frees the block whoever holds the object, into the
        pool of the caller's current stream (where arguments are made). A side-stream use of it, or of
        the collection it walks, with no record on that stream and no join of the current stream since,
        is the lifetime hazard. ``how`` "unset" / "unset-shared": an attribute rebound (:meth:`unset_place`)."""
        if self.depth or self.anchor is None:
            return
        for coll in st.elem_of.get(name, ()):  # an element of a tracked collection (`*inputs`): free its storage
            for tv in self.tensors(st, st.env.get(coll)):
                S = st.stores.get(tv.sid)
                if S is not None:
                    S.recorded |= st.loose_rec.get(name, frozenset())  # `t.record_stream(s)` on the element
                self.free(st, tv.sid, "resize_(0)", self.anchor, force=True)
                break
        walked = tuple(n for n, colls in st.elem_of.items() if name in colls)
        names = (name, *st.elem_of.get(name, ()), *walked)
        recorded = st.loose_rec.get(name, frozenset())  # (the last: the elements a loop walked of a collection freed)
        know = st.know(MAIN)
        for u in sorted((u for n in names for u in st.loose_uses.get(n, ())), key=lambda a: a.time):
            if u.stream == MAIN or u.stream in recorded or know.get(u.stream, -1) >= u.time or u.node is None:
                continue
            key = (id(u.node), name)
            if key not in self.lifetimes:
                label = name if u.label in (None, name) else u.label if u.label in walked \
                    else f"{u.label}[...]"  # an element of the collection
                self.lifetimes[key] = Lifetime(u.node, label, MAIN, u.stream, how, self.anchor, False,
                                               self.cfg.mode)
            return

    def bind(self, st: State, name: str, v: object, node: cst.CSTNode | None) -> None:
        if name in st.loose_uses or name in st.elem_of or name in st.loose_rec:
            st.elem_of.pop(name, None)
            if not (isinstance(node, cst.Call) and any(isinstance(a.value, cst.Name) and a.value.value == name
                                                       for a in node.args)):
                st.loose_uses.pop(name, None)  # a new object; `x = f(..., x)` may hand back what it was given
                st.loose_rec.pop(name, None)
        self.forget_places(st, name)  # `p = next(it)`: the places of the old object are not the new one's
        self.rebind_name_sym(st, name, node)  # (its index symbol: flow/indexsyms.py)
        old = st.env.get(name)
        if isinstance(old, TVal) and isinstance(node, cst.Call) and any(
                isinstance(a.value, cst.Name) and a.value.value == name for a in node.args):
            S = st.stores.get(old.sid)
            if S is not None and S.kind == "arg":  # `x = f(..., x)` may hand back the caller's tensors
                st.loose_uses[name] = [*st.loose_uses.get(name, ()), *S.uses]
        st.env[name] = v
        st.held.pop(name, None)
        st.fields.pop(name, None)
        self.slot_rebound(st, name, node)
        self.invalidate(st, name)
        if isinstance(v, TVal):
            S = st.stores.get(v.sid)
            if S is not None and S.name is None:
                S.name = name
        for tv, attr in zip(v.items, v.names) if isinstance(v, FieldsVal) else ():
            S = st.stores.get(tv.sid)  # a record's fields (recordresults.py): `pages.keys`
            if S is not None and S.name is None:
                S.name = f"{name}.{attr}"
        if old is not None and old is not v:
            self.unbind(st, old, "rebinding", node)

    def invalidate(self, st: State, name: str) -> None:
        if not st.assume and not st.clauses:
            return
        pattern = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
        held = st.assume.get(name) is True
        for key in [k for k in st.assume if pattern.search(k)]:
            del st.assume[key]
        if st.clauses:
            # a clause about the old value goes, but `not name or x` stays true where the old value held
            # (`if overlap: overlap = small_batch`: the new value holds only where the old one did)
            st.clauses = [c for c in st.clauses
                          if not any(pattern.search(k) and not (held and k == name and not p) for k, p in c)]

    # ---- function end
    def finalize(self, st: State) -> None:
        self.dropped_joins(st)
        for key, stream, time, _last in self.uncovered_records(st):
            node, _label = self.record_sites[(key, stream, time)]
            if id(node) not in self.early_records:
                self.early_records[id(node)] = self.early_record(st, key, stream, time)
        for sid, S in list(st.stores.items()):
            if S.kind == "local" and not S.dead:
                self.free(st, sid, "function end", None, force=True)
        if st.pending:
            self.check_pending(st, None)
        know = st.know(MAIN)
        for run in st.runs:
            if self.deferred_end and run.top:
                continue  # a helper method: its same-class caller is analysed with this scope inlined
            same_file = run.top or id(run.node) in self.own_withs
            if same_file and run.stream != MAIN and run.last is not None and know.get(run.stream, -1) < run.last:
                self.unjoined.setdefault((id(run.node), "function"),
                                         Unjoined(run.node, run.stream, "function", self.cfg.mode, self.entry))


def _events_in(v: object) -> list[EVal]:
    if isinstance(v, EVal):
        return [v]
    return [e for item in v.items for e in _events_in(item)] if isinstance(v, TupVal) else []


def element_field_key(key: str) -> str:
    """The storage a long-lived key names: a collection and its elements are one storage (``self.kv[i]`` is
    ``self.kv``), while a field of an element is the same field of every element, not the element's other
    fields (``self.buckets[k].buffer`` and ``self.buckets[k].elements`` are ``self.buckets[].buffer`` and
    ``self.buckets[].elements``: a bucket's count read on the host is not a read of its flat buffer). A tensor
    metadata attribute is no field: ``kv_cache[0].shape[1]`` names the element, so the collection ``kv_cache``
    (``self.buckets[k].buffer.shape`` names ``self.buckets[].buffer``)."""
    head, bracket, _ = key.partition("[")
    if not bracket:
        return key
    out, depth = [], 0
    for ch in key[len(head):]:  # the chain with every subscript dropped
        depth += (ch == "[") - (ch == "]")
        if depth == 0 and ch != "]":
            out.append(ch)
    fields = "".join(out).split(".")[1:]
    meta = next((i for i, f in enumerate(fields) if f in META_ATTRS), len(fields))
    chain = "".join(f".{f}" for f in fields[:meta])
    return f"{head}[]{chain}" if chain else head
