"""Hand-backs to the caller: tensors returned, or written into arguments, whose last write is queued on a side
stream nothing joined into the entry stream (the caller goes on using them on its current stream), and a
``@contextmanager`` whose caller's with-body runs on the side stream it yields in. Split out of
:mod:`~streamlint.model.flow.storage`, whose accesses and races it reports through."""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.attrstreams import foreign_stream
from streamlint.model.flow.flagjoins import skipped_join_flag
from streamlint.model.flow.callerwaits import returned_handle_waits
from streamlint.model.flow.bodyinputs import bodies_read_caller_device, bodies_unseen, callers_cannot_fork
from streamlint.model.flow.escapes import handed_value, tensor_boxes
from streamlint.model.flow.fieldfamilies import callers_join, family
from streamlint.model.flow.hostfields import HostFields
from streamlint.model.flow.localevents import hands_event_holder, join_gated_by_result, stays_local
from streamlint.model.flow.leaves import callers_view, left_on_side_streams, loop_joined, unordered_caller
from streamlint.model.flow.recordjoins import record_joins, sibling_fence
from streamlint.model.flow.protocols import class_joins, holder_joins, joined_keys, reached_outside, sibling_consumer_waits
from streamlint.model.flow.values import Access, CVal, EVal, KVal, State, Storage, TVal, TupVal, ordered_before
from streamlint.model.streams import MAIN
from streamlint.model.syntax import contains


class HandOuts(HostFields):
    """What the function hands back to its caller unjoined (mixin of :class:`~streamlint.model.flow.interp.Interp`,
    base of :class:`~streamlint.model.flow.storage.Storages`, whose ``race`` / ``tensors`` / ``label`` it uses)."""

    def unjoined_escape(self, st: State, returned: object, node: cst.CSTNode | None) -> None:
        """Tensors handed back to the caller (the returned value, arguments written here) whose last write
        is queued on a side stream that nothing joined into the entry stream: the caller goes on using
        them on its current stream (a join escape). Not when an event recorded after the write is handed
        over too (kept on ``self``, returned, a parameter's), nor when another method of the class joins
        that stream (a caller protocol). Long-lived tensors written here on a side stream leave the same way
        (:mod:`~streamlint.model.flow.leaves`: ``held``)."""
        if self.depth or self.cfg.mode not in ("eager", "cuda") or self.deferred_end and not self.seeded_hand_back(st, returned) or node is None \
                or st.cur != MAIN or self._hands_over(returned, tensor_boxes(st, self.fn, node)) \
                or hands_event_holder(self.file, self.fn, node):  # (`return outs, done`, `done` a local list of events)
            return  # (captured graphs join their outputs; a return inside a scope is a wrapper's)
        know = st.know(MAIN)
        candidates = [tv.sid for tv in self.tensors(st, returned)]
        holders = {n.value: st.held[n.value] for n in _names_in(node) if n.value in st.held}
        candidates += [sid for sids in holders.values() for sid in sids]
        grads = self.__dict__.get("gradient_sids", ())  # (a gradient stays its parameter's: it leaves as long-lived
        candidates += [sid for sid, S in st.stores.items() if S.kind == "arg" and sid not in grads]  # state, below)
        held = set(left_on_side_streams(self, st)) - set(candidates)  # long-lived tensors written here on a
        # side stream (leaves.py): their stream's joins are looked for project-wide there
        for sid in dict.fromkeys(candidates + sorted(held)):
            S = st.stores.get(sid)
            lw = self.handed_write(S, node) if S is not None and S.kind != "host" else None
            if lw is None or lw.stream == MAIN or lw.node is None or ordered_before(lw, know):
                continue
            if self.event_handed_over(st, lw, returned, sid) or sid not in held and self.joined_elsewhere(lw.stream, own=sid not in self.family_sids) \
                    or sid in self.family_sids and callers_join(self.project, self.file, self.fn, lw.stream) \
                    or isinstance(node, cst.Return) and sibling_consumer_waits(self.file, self.fn, node.value) \
                    or self.caller_may_join(lw.stream) or join_gated_by_result(self.fn, self.file, node, lw.stream) \
                    or record_joins(self.project, self.file, self.fn, node, lw.stream, self.label(st, sid)) \
                    or sibling_fence(self.project, self.file, self.fn, lw.stream) \
                    or self._handle_waited(node, sid, st):
                continue  # (`if should_sync: stream.synchronize()`, the flag computed from the results; recordjoins.py:
                # a work record whose method joins the stream; a sibling's fence of it)
            inner = self._helper_return(S, node) if sid not in held else None
            if inner is not None:  # the root cause is the helper's hand-back: reported there, with its scope
                node, lw = inner[1], Access(lw.stream, lw.time, inner[0], lw.snap, lw.label, lw.part)
            saved, self.anchor = self.anchor, node
            try:
                returned_name = handed.value if isinstance(handed := handed_value(node), cst.Name) \
                    and handed.value not in ("True", "False", "None") else None
                holder = next((name for name, sids in holders.items() if sid in sids), None)
                self.race(st, "read", S, lw, MAIN, self.label(st, sid) or holder or returned_name,
                          escape=True,
                          held=("unseen" if loop_joined(self.fn, lw) else callers_view(self.project, self.file, self.fn))
                          if sid in held else "",
                          caller=unordered_caller(self.project, self.file, self.fn) if sid in held else None,
                          flag=skipped_join_flag(self.fn.node, st, lw.stream))
            finally:
                self.anchor = saved

    def _handle_waited(self, node: cst.CSTNode, sid: int, st: State) -> bool:
        """The pending tensor is the tuple part every seen caller waits on before it uses the rest (callerwaits.py:
        ``views, ready = buf.upload(...)`` then ``store.wait_for(ready)``): the hand-back is the join handle."""
        name = self.label(st, sid)
        return name is not None and returned_handle_waits(self.project, self.file, self.fn, node, name) == "joined"

    def with_body(self, st: State) -> None:
        """A ``@contextmanager`` yielding inside a side-stream scope: the caller's with-body runs on that stream
        and reads what the caller made before the ``with``, unordered unless the side stream waited for the current
        stream before the yield, and only when some with-body may read such a tensor (bodyinputs.py). Not on a
        stream parameter or one the object was built with (the caller forks it), nor on one the analysis
        cannot name or the project cannot see (attrstreams.py)."""
        params = [p for p in self.fn.all_params if p not in ("self", "cls")]
        if self.depth or self.anchor is None or not self.cfg.raw or self.cfg.args_exempt or st.cur == MAIN \
                or st.cur in self.param_streams or st.cur.startswith("<") or foreign_stream(self, st.cur) \
                or not any(d.rsplit(".", 1)[-1] == "contextmanager" for d in self.fn.decorators) \
                or not all(callers_cannot_fork(self.project, self.file, self.fn, p) for p in params
                           if re.search(rf"(?<![\w.]){re.escape(p)}\b", st.cur)):
            return
        caller = Access(MAIN, 0, None, {})
        if not ordered_before(caller, st.know(st.cur)) and bodies_read_caller_device(self.project, self.file, self.fn):
            S = Storage(self.new_id(), "with-body", "arg", MAIN, caller)
            self.race(st, "read", S, caller, st.cur, "the with-body", body=True,  # (no `with` of it seen: "unseen")
                      held="unseen" if bodies_unseen(self.project, self.file, self.fn) else "")

    def event_handed_over(self, st: State, lw: Access, returned: object, sid: int | None = None) -> bool:
        """An event recorded after the pending write ``lw`` that the caller may wait on: kept on an object, in a
        container, handed to a call or returned; not one that stays in a local of this function
        (localevents.py: ``events[i].record(s)`` then the join loop over ``events``)."""
        return any((not key.startswith("<") and not self.own_guard(key) and not (
                    not self.depth and stays_local(self.file, self.fn, key)) or key in self.handed_events)
                   and snap.get(lw.stream, -1) >= lw.time and not self.bundled_elsewhere(key, sid)
                   and not self.family_seeded(key, sid) and not self.kept_guard(key, sid, lw)
                   for key, snap in st.events.items())

    def kept_guard(self, key: str, sid: int | None, lw) -> bool:
        """An event a class protocol's producer recorded after the pending write ``lw`` it left in the field ``sid``
        (seeded at this consumer's entry), kept on the object where nothing but the class can reach it: no code
        outside the class names that event field, no method returns it or hands it on
        (:func:`~streamlint.model.flow.protocols.reached_outside`), and no method of the class that does not read
        the field waits on it (``protocols._expected``, which seeded the write). The caller handed the field has
        then no handle on that work: the wait it needs was this consumer's to make, not the caller's."""
        seeded = self.__dict__.get("protocol_seeds", {}).get(sid)
        if sid in self.__dict__.get("outside_seeds", ()) and seeded is not None and lw is not None \
                and lw.time == seeded[0] and key in seeded[1]:
            return True  # a record's event, the record handed to nobody (recordwriters.handed_record): no handle
        found = re.match(r"self\.(\w+)", key)
        if seeded is None or found is None or lw is None or lw.time != seeded[0] or key not in seeded[1]:
            return False
        base = family(key) or key  # (entries' keys are the producer's text: ``self.ready[slot]`` is no key here)
        cls = self.file.classes.get(self.fn.class_name or "")  # type: ignore[attr-defined]
        producer = self.protocol_sources.get(sid)  # type: ignore[attr-defined]
        if cls is None or any((family(k) or k) == base for m in cls.methods.values() if m.node.name.value != producer
                              for k in joined_keys(self.file, m)):  # type: ignore[attr-defined]
            return False  # a method waits on the event (on some entry, on some path): this one, or a join step
        return not reached_outside(self.project, self.file, cls, found.group(1))  # type: ignore[attr-defined]

    def _helper_return(self, S, node: cst.CSTNode) -> tuple[cst.With, cst.Return] | None:
        """(scope, return) of a method of this class, run inline here (its end deferred to its same-class
        callers: interp._called_by_own_class), that made ``S`` in its own side-stream scope and hands it back
        with its only return after that scope, when this function hands back that call's result unchanged
        (``return self._gather(x)``, or a name bound only to it): where the missing join belongs (one finding,
        at its root cause, not at each caller's hand-back)."""
        if S.origin is None or S.origin[0] is not self.file:
            return None
        scope = S.origin[1]
        helper = self.file.function_of.get(id(scope))
        if helper is None or helper is self.fn or helper.class_name is None or helper.class_name != self.fn.class_name:
            return None
        handed = handed_value(node)
        if isinstance(handed, cst.Name) and len(bound := self.fn.name_assigns.get(handed.value, ())) == 1:
            handed = bound[0]
        if not (isinstance(handed, cst.Call) and isinstance(handed.func, cst.Attribute) and isinstance(
                handed.func.value, cst.Name) and handed.func.value.value == "self"
                and handed.func.attr.value == helper.node.name.value):
            return None
        end = self.file.span(scope).end_line
        after = [r for r in helper.returns if r.value is not None and not contains(scope, r)
                 and self.file.span(r).start_line > end]
        return (scope, after[0]) if len(after) == 1 and len(helper.returns) == 1 else None

    def _hands_over(self, v: object, boxes: tuple[int, ...] = ()) -> bool:
        """A returned tuple that carries more than tensors, constants and ``boxes`` of tensors (escapes.py): an event,
        a collective's work handle, an object: the caller is handed what it needs to join."""
        if not isinstance(v, TupVal):
            return isinstance(v, EVal)
        return any(self._hands_over(i) if isinstance(i, TupVal) else not isinstance(i, (TVal, CVal)) and not (
            isinstance(i, KVal) and i.key in self.fn.all_params)  # what the caller passed in: no handle made here
                   and k not in boxes for k, i in enumerate(v.items))

    def caller_may_join(self, stream: str) -> bool:
        """A stream handed in as a parameter: the caller owns it and may join it after the call. Only a
        nested function whose enclosing function orders no stream at all (no wait, no synchronize) is
        known not to."""
        if stream not in self.fn.all_params or self.joins_itself(stream):
            return False
        parent = self.fn.parent
        if parent is None:
            return True
        return any(site.method in ("wait_stream", "wait_event", "wait", "synchronize")
                   and not contains(self.fn.node, site.node) for site in parent.calls)

    def joins_itself(self, stream: str) -> bool:
        """The function forks the stream parameter and, on some path, makes the current stream wait for it
        (``current_stream().wait_stream(stream)`` or an event: TE's graphed ``forward`` replaying on
        ``cuda_graph_stream``): the join is its own, on every path."""
        calls = [(site.method, self.file.code(site.node.func.value), site.node.args) for site in self.fn.calls
                 if isinstance(site.node.func, cst.Attribute)]
        return any(m == "wait_stream" and recv == stream for m, recv, _ in calls) and any(
            m in ("wait_stream", "wait_event") and "current_stream" in recv for m, recv, _ in calls)

    def joined_elsewhere(self, stream: str, own: bool = True) -> bool:
        """Another method of the class, or of a project base class it inherits the protocol from, waits for
        (or synchronizes) this ``self.*`` stream, by name or through a local bound to it (``stream =
        self.reduction_stream if overlap else current_stream()`` ... ``current_stream().wait_stream(stream)``);
        for a stream of an object it holds (``self.hc._gate_stream``), a method of that object's class.
        ``own=False`` (an entry of a field family handed back): only a join by a holder of this object counts
        (``current_stream().wait_stream(self.store.stream)`` in its caller), not another method of the class."""
        if not stream.startswith("self."):
            return False
        cls = self.file.classes.get(self.fn.class_name or "")
        if own and cls is not None and class_joins(self.project, self.file, cls, stream.replace('"', "'"), self.fn):
            return True
        return holder_joins(self.project, self.file, self.fn, stream)


def _names_in(node: cst.CSTNode | None) -> list[cst.Name]:
    """The names a ``return`` (``yield``) statement's value mentions (``outs[0] if n == 1 else outs``)."""
    if (value := handed_value(node)) is None:
        return []
    out, stack = [], [value]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            out.append(n)
        elif not isinstance(n, (cst.Lambda, cst.Call)):
            stack.extend(n.children)
    return out
