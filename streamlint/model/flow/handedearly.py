"""Events recorded before the writes they leave the function with (issue 16, [cross-method] record-event-early).

An event is a promise about the work queued before it on its stream. When a function records it on a side
stream, then queues more work there that writes tensors (itself, or through an inlined helper or closure), and
hands the event out together with those tensors, whoever waits on the event reads the tensors before the writes
land -- whatever else joins the stream (a ``barrier()`` / ``drain()`` method of the class joining it aside does
not order the event's waiter)::

    with torch.cuda.stream(self.io_stream):
        event.record(self.io_stream)               # SL201: recorded before the copy it is handed out with
        weights = {n: w.to(dev, non_blocking=True) for n, w in cpu.items()}
    self._gpu_weights[expert_id] = weights
    self._ready[expert_id] = event

"Together" is one hand-over the interpreter sees (:meth:`HandedEarly.escape`): one value holding both (a tuple
returned or stored, ``self.pending.append((buf, ev))``, a record object ``StepOut(ids=buf, ready=ev)``); two
attributes of one object other than ``self`` (``req.buf = buf; req.ready = ev``); an event parameter with the
tensors handed in; or the same subscript text in two ``self`` fields (``self.bufs[k] = buf; self.events[k] = ev``)
when a method of the class waits the event field and reads the tensor field with no other join
(:func:`_waiter_pairs`). The finding is at the record, only for a record the base does not report already, on a
path where the record is still the event's latest on that stream, the tensor's last write is device work on that
stream after it (not a host ``torch.arange`` / ``torch.cat`` of them; for a list field, the element handed out),
and neither a later record of another event handed out with that tensor (a timing ``end``), nor a host
synchronisation / current-stream join in the function, covers that write. A release (work on the stream before
the record, none of it a write of what the event leaves with), work on another stream and records on the current
stream are left alone. The hand-over state is per function, not per path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.apis import HOST_SIGNAL_METHODS
from streamlint.model.flow.escapes import events_in
from streamlint.model.flow.hostreads import data_names
from streamlint.model.flow.results import EarlyRecord
from streamlint.model.flow.values import KVal, TupVal
from streamlint.model.streams import MAIN
from streamlint.model.walk import descendants

if TYPE_CHECKING:
    from streamlint.model.flow.values import State


def _owner_field(file, target: cst.BaseExpression) -> tuple[str, str] | None:
    """``self.bufs`` -> (``self``, ``bufs``); ``self.cache.bufs`` -> (``self.cache``, ``bufs``)."""
    if isinstance(target, cst.Attribute):
        return file.code(target.value), target.attr.value
    return None


HOST_FACTORIES = frozenset({"arange", "tensor", "as_tensor", "zeros", "ones", "empty", "full", "linspace",
                            "randn", "rand", "randint", "from_numpy"})


def _host_made(e: cst.BaseExpression | None) -> bool:
    """``torch.arange(n)`` (no ``device=``), ``torch.cat([torch.arange(l) for l in lens])``: a host tensor."""
    if isinstance(e, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        e = e.value
    if not isinstance(e, cst.Call) or not isinstance(e.func, cst.Attribute) or not isinstance(e.func.value, cst.Name) \
            or e.func.value.value != "torch" or any(a.keyword is not None and a.keyword.value == "device" for a in e.args):
        return False
    name = e.func.attr.value
    if name in HOST_FACTORIES:
        return True
    if name in ("cat", "stack", "concat") and e.args:
        parts = e.args[0].value
        if isinstance(parts, (cst.ListComp, cst.GeneratorExp)):
            return _host_made(parts.elt)
        if isinstance(parts, (cst.List, cst.Tuple)):
            return bool(parts.elements) and all(_host_made(el.value) for el in parts.elements)
    return False


def _elements(file, node: cst.CSTNode | None, name: str | None) -> set[str]:
    """The element texts of field ``name`` in ``node`` (``self.slots[1 - slot]`` for ``self.slots``)."""
    if node is None or not name:
        return set()
    out: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Subscript(self, n: cst.Subscript) -> None:
            if file.code(n.value) == name:
                out.add(file.code(n))

    node.visit(_V())
    return out


def _waiter_pairs(file, cls) -> set[tuple[str, str]]:
    """(event field, tensor field) pairs some method of ``cls`` waits / reads with no other join: it waits an event
    taken from ``self.E`` (``s.wait_event(self.E.pop(k))``, ``ev = self.E[k]; ev.wait()``) and reads ``self.T``,
    and neither waits a whole stream nor synchronises one (``wait_expert``)."""
    pairs: set[tuple[str, str]] = set()
    for m in cls.methods.values():
        fields: set[str] = set()
        names: dict[str, set[str]] = {}
        waited: set[str] = set()
        other_join = False

        def _fields(e: cst.CSTNode) -> set[str]:
            got: set[str] = set()

            class _F(cst.CSTVisitor):
                def visit_Attribute(self, n: cst.Attribute) -> None:
                    if isinstance(n.value, cst.Name) and n.value.value == "self":
                        got.add(n.attr.value)

                def visit_Name(self, n: cst.Name) -> None:
                    got.update(names.get(n.value, ()))

            e.visit(_F())
            return got

        for node in descendants(m.node, in_order=True):
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                names[node.targets[0].target.value] = _fields(node.value)
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                attr = node.func.attr.value
                if attr == "wait_stream" or attr == "synchronize" and not _fields(node.func.value):
                    other_join = True  # `s.wait_stream(io)`, `torch.cuda.synchronize()`
                elif attr == "wait_event" and node.args:
                    waited |= _fields(node.args[0].value)
                elif attr in ("wait", "synchronize"):
                    waited |= _fields(node.func.value)
            elif isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
                fields.add(node.attr.value)
        if waited and not other_join:
            pairs.update((e, t) for e in waited for t in fields - waited)
    return pairs


def _pending_after(st: State, sid: int, stream: str, time: int) -> bool:
    """Is tensor ``sid`` the host result of a non-blocking device-to-host copy queued on ``stream`` after
    ``time`` and not yet synchronised (hostreads: ``Storage.d2h``)? Only the host reads it, and the host orders
    nothing by stream order: the event it is handed with is its promise, even on the current stream."""
    S = st.stores.get(sid)
    d2h = getattr(S, "d2h", None)
    return d2h is not None and d2h.stream == stream and d2h.time > time and st.host.get(stream, -1) < d2h.time


def _places(v: object, events: dict) -> set[str]:
    """The named places in ``v`` holding an event recorded on this path (``self.loaded[slot]``)."""
    if isinstance(v, KVal):
        return {v.key} if v.key in events else set()
    return {k for item in v.items for k in _places(item, events)} if isinstance(v, TupVal) else set()


class HandedEarly:
    """Early records of events handed out with the tensors written after them (mixin of the interpreter).

    Interp state it uses: ``record_sites``, ``early_records``, ``work_sites``, ``cfg``, ``cfile``; its own:
    ``handovers`` (event -> tensors kept with it), ``keyed`` ((owner, slot text) -> field -> (events, tensors)),
    ``members`` (object name -> (events, tensors) stored in its attributes), ``elems`` (tensor -> element texts
    handed out), ``pairs`` (class -> waiter pairs)."""

    def comprehension(self, st: State, e: cst.CSTNode) -> object:
        """``{n: w.to(dev, non_blocking=True) for n, w in cpu.items()}``: the fresh tensors it builds, kept per
        node (the interpreter gives the collection no value): a name bound to it hands them over."""
        before = set(st.stores)
        out = super().comprehension(st, e)  # type: ignore[misc]
        made = frozenset(sid for sid in set(st.stores) - before
                         if st.stores[sid].kind == "local" and st.stores[sid].last_write is not None)
        if out is None and made:
            self.__dict__.setdefault("built", {})[id(e)] = made
        return out

    def assign(self, st: State, target: cst.BaseExpression, v: object, value_node: cst.BaseExpression) -> None:
        built = self.__dict__.get("built", {})
        if isinstance(target, cst.Name):  # `weights = {... for ...}`: the name holds the comprehension's tensors
            names = self.__dict__.setdefault("built_names", {})
            names.pop(target.value, None)
            if id(value_node) in built:
                names[target.value] = built[id(value_node)]
        if isinstance(target, cst.Subscript):  # `self.bufs[k] = buf` may be taken as a write into a tensor field
            held = self.__dict__.get("built_names", {}).get(value_node.value) \
                if isinstance(value_node, cst.Name) and v is None else None
            self.note_handover(st, v, target, held or frozenset(), value_node)
        super().assign(st, target, v, value_node)  # type: ignore[misc]

    def escape(self, st: State, v: object, into: cst.BaseExpression | None = None) -> None:
        super().escape(st, v, into)  # type: ignore[misc]
        self.note_handover(st, v, into, node=getattr(self, "anchor", None))

    def signal_handover(self, st: State, e: cst.Call) -> None:
        """``self.results.put((done, ids_cpu, out))``: a message to another thread (the API table's
        ``HOST_SIGNAL_METHODS``) handing an event along with tensors (the values of the names it hands, and of
        their attributes, ``out.logprobs``) is a hand-over the receiver may act on at once: an early record on the
        current stream is checked there (a worker loop that never returns has no function end to check at)."""
        func = e.func
        if self.depth or getattr(self, "anchor", None) is None or not isinstance(func, cst.Attribute) \
                or func.attr.value not in HOST_SIGNAL_METHODS:  # type: ignore[attr-defined]
            return
        names = {n.value for arg in e.args for n in data_names(arg.value)}
        items = [v for k, v in st.env.items() if k in names or k.split(".", 1)[0] in names and "." in k]
        v = TupVal(tuple(items))
        if not events_in(v):
            return
        self.note_handover(st, v, None, node=self.anchor)  # type: ignore[attr-defined]
        for k, early in self.handed_early(st, current_only=True).items():
            self.early_records.setdefault(k, early)  # type: ignore[attr-defined]

    def note_handover(self, st: State, v: object, into: cst.BaseExpression | None,
                      held: frozenset[int] = frozenset(), node: cst.CSTNode | None = None) -> None:
        """``v`` leaves the function (kept in ``into``: None for a return or a callee keeping it); ``node``: the
        expression or statement handing it (the element texts of a list field it hands: ``self.slots[slot]``)."""
        events = {e.key for e in events_in(v)} | _places(v, st.events)
        sids = {tv.sid for tv in self.tensors(st, v)} | held  # type: ignore[attr-defined]
        if not events and not sids:
            return
        d = self.__dict__
        for sid in sids:
            S = st.stores.get(sid)
            d.setdefault("elems", {}).setdefault(sid, set()).update(
                _elements(self.cfile, node, S.name if S is not None else None))  # type: ignore[attr-defined]
        if events and sids and isinstance(v, TupVal):
            for key in events:
                d.setdefault("handovers", {}).setdefault(key, set()).update(sids)
        if isinstance(into, cst.Subscript) and len(into.slice) == 1 and isinstance(into.slice[0].slice, cst.Index):
            owned = _owner_field(self.cfile, into.value)  # type: ignore[attr-defined]
            cls = self.cfile.classes.get(self.cfn.class_name or "")  # type: ignore[attr-defined]
            if owned is not None and owned[0] == "self" and cls is not None:
                owned = (f"{id(cls)}", owned[1])
                slot = self.cfile.code(into.slice[0].slice.value)  # type: ignore[attr-defined]
                entry = d.setdefault("keyed", {}).setdefault((owned[0], slot), {}).setdefault(owned[1], (set(), set()))
                entry[0].update(events)
                entry[1].update(sids)
        elif isinstance(into, cst.Attribute) and isinstance(into.value, cst.Name) and into.value.value not in (
                "self", "cls"):
            entry = d.setdefault("members", {}).setdefault(into.value.value, (set(), set()))
            entry[0].update(events)
            entry[1].update(sids)

    def handed_with(self, key: str, st: State | None = None, first: bool = False) -> set[int]:
        """The tensors event ``key`` is handed out with in this function (so far). With ``st`` and ``first`` (the
        record covers no work of this function on its stream: no release after reads), for an event handed in (a
        parameter), also the tensors handed in with it (``def _read_and_copy(self, dst, ready)``)."""
        d = self.__dict__
        out = set(d.get("handovers", {}).get(key, ()))
        params = [p for p in self.fn.all_params if p not in ("self", "cls")]  # type: ignore[attr-defined]
        if st is not None and first and key in params and self.fn is self.cfn:  # type: ignore[attr-defined]
            out.update(sid for sid, S in st.stores.items() if S.kind == "arg" and S.name is not None
                       and S.name.split(".")[0].split("[")[0] in params)
        for (owner, _), fields in d.get("keyed", {}).items():  # only when a method waits the one, reads the other
            pairs = d.setdefault("pairs", {}).get(owner)
            if pairs is None:
                cls = next((c for c in self.cfile.classes.values() if f"{id(c)}" == owner), None)  # type: ignore[attr-defined]
                pairs = d["pairs"][owner] = _waiter_pairs(self.cfile, cls) if cls is not None else set()  # type: ignore[attr-defined]
            with_event = [f for f, (events, _) in fields.items() if key in events]
            out.update(sid for f, (_, sids) in fields.items() if f not in with_event
                       and any((e, f) in pairs for e in with_event) for sid in sids)
        for events, sids in d.get("members", {}).values():
            if key in events:
                out.update(sids)
        return out

    def finalize(self, st: State) -> None:
        found = self.handed_early(st)
        super().finalize(st)  # type: ignore[misc]
        for k, early in found.items():  # a record the base reports keeps its finding and confidence
            self.early_records.setdefault(k, early)  # type: ignore[attr-defined]

    def handed_early(self, st: State, current_only: bool = False) -> dict:
        """The early records of this path (``current_only``: those on the current stream)."""
        know = st.know(MAIN)
        found: dict = {}
        for (key, stream, time), (node, label) in list(self.record_sites.items()):  # type: ignore[attr-defined]
            if stream.startswith("<") and stream != MAIN or id(node) in self.early_records \
                    or current_only and stream != MAIN:  # type: ignore[attr-defined]
                continue
            snap = st.events.get(key)
            if snap is None or snap.get(stream) != time:
                continue  # not this path's record, or recorded again since (the later record wins)
            first = not any(t <= time for t, _ in self.work_sites.get(stream, ()))  # type: ignore[attr-defined]
            handed = sorted(self.handed_with(key, st, first))
            if stream == MAIN:
                handed = [sid for sid in handed if _pending_after(st, sid, stream, time)]
            elif not first and not any(
                    (lw := getattr(st.stores.get(sid), "last_write", None)) is not None and lw.stream == stream
                    and lw.time <= time for sid in handed):
                continue  # a release: only reads of what it leaves with came before it on that stream
            for sid in handed:
                S = st.stores.get(sid)
                lw = S.last_write if S is not None else None
                if stream == MAIN:
                    lw = S.d2h  # (the copy filling the host tensor: _pending_after)
                if lw is None or lw.stream != stream or lw.time <= time:
                    continue
                if st.host.get(stream, -1) >= lw.time or stream != MAIN and know.get(stream, -1) >= lw.time:
                    continue  # synchronised / joined by the current stream here
                if any(k != key and s.get(stream, -1) >= lw.time and sid in self.handed_with(k, st, True)
                       for k, s in st.events.items()):
                    continue  # the write is covered by the event handed out with it (timing `start`/`end`)
                if _host_made(lw.node):
                    continue  # `torch.cat([torch.arange(l) ...])`: host work, no write on the stream
                wrote = _elements(self.cfile, lw.node, S.name)  # type: ignore[attr-defined]
                if wrote and not wrote & self.__dict__.get("elems", {}).get(sid, set()):
                    continue  # `self.slots[1 - slot]` written, `self.slots[slot]` handed (or unknown): no claim
                sites = [n for t, n in self.work_sites.get(stream, ()) if time < t <= lw.time]  # type: ignore[attr-defined]
                work = sites[-1] if sites else lw.node if stream == MAIN else None
                found[id(node)] = EarlyRecord(
                    node, label, stream, work, self.cfg.mode, self.caller_may_join(stream),  # type: ignore[attr-defined]
                    handed=S.name or "")
                break
        return found


__all__ = ["HandedEarly"]
