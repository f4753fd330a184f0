"""The host as the consumer of asynchronous device work: device-to-host copies read before they finish.

``x.to("cpu", non_blocking=True)``, ``x.cpu(non_blocking=True)`` and ``pinned.copy_(x, non_blocking=True)``
queue the copy on the current stream and return at once: the host tensor they fill is *pending* on that
stream until a host synchronisation covers the copy (``stream.synchronize()``, ``event.synchronize()`` on
an event recorded after it, a device-wide ``synchronize()``, a blocking transfer such as ``.item()`` on
that stream: ``Orderings.sync_*``, ``st.host``). The host reading a pending tensor — a conversion to Python
values, formatting, a CPU op, a branch test, handing it to a file, a serialiser, a queue or a socket (the API
table's ``HOST_CONSUMER_*``), also through a local container whose slots (nested ones too:
``state[mode]["amax"] = host``) hold it — reads bytes the device has not written yet (SL201 at the read, the copy as
the related location). Returning or storing a pending tensor is no read: its holder may synchronise an
event recorded after the copy before it reads (vLLM-style async outputs); nor are its metadata (shape,
dtype, numel), ``is None`` tests, views, or a copy back to the device (ordered by the stream).

A view of a pending tensor is pending too: ``.numpy()`` of the copy's result shares its memory, and the host
reading the array (``int(splits.sum())``) reads the copy's bytes. The host also reads split sizes when it sets a
collective up (``all_to_all_single(..., output_split_sizes=splits)``), and the arguments a project function
reads on the host in its own body (``host_read_params``: a conversion, ``.tolist()``, a split-size keyword),
inlined or not. When an inlined helper of the module handed the tensor back still pending (``mark_exit``), the
helper's return is reported too: the synchronisation is missing where the pending values leave it.

When the host synchronised an event recorded on that stream *before* the copy and then reads the copy's
result, the event was recorded too early: it is the promise the host relied on, and it does not cover the
copy. That is reported at the record as an early record (model: ``Orderings.uncovered_records`` for device
waiters), not at the read.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.apis import HOST_CONSUMER_FUNCTIONS, HOST_CONSUMER_METHODS, HOST_VERDICTS
from streamlint.model.placement import BLOCKING_HOST_READS
from streamlint.model.flow.results import EarlyRecord, HostRead
from streamlint.model.flow.values import Access, CVal, EVal, KVal, State, TupVal, TVal
from streamlint.model.walk import children
from streamlint.model.file import dotted
from streamlint.model.syntax import contains, local_nodes, mentions_name, target_names
from streamlint.model.placement import DEVICE_MOVES, copy_destination, device_evident, host_library, host_source, \
    host_value, pinned_source
from streamlint.model.flow.callers import callers_of
from streamlint.model.apis import Role
from streamlint.model.captures import capture_kind
from streamlint.model.streams import derived
from streamlint.model.uses import bind_arguments
from streamlint.model.tensors import META_METHODS, host_target, non_blocking
from streamlint.model.tensorvocab import META_ATTRS, MULTI_VIEW_METHODS, VIEW_METHODS

# builtins that look at an object, not at a tensor's data
_NO_DATA_CALLS = frozenset({"isinstance", "len", "type", "id", "hasattr", "getattr", "callable", "issubclass"})


def data_names(expr: cst.CSTNode, fields: bool = False):
    """The names in ``expr`` whose tensor data the host evaluates: not the operands of ``is`` / ``is not``,
    of ``isinstance`` / ``len`` / ``type``, nor a tensor named only for its metadata (``x.shape``,
    ``x.numel()``); nested functions and lambdas are not entered. With ``fields``, an object's field read
    for its data (``self.pinned[0]``) is yielded whole, as the ``self.<attr>`` attribute node."""
    if isinstance(expr, cst.Name):
        yield expr
        return
    if fields and isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) \
            and expr.value.value == "self" and expr.attr.value not in META_ATTRS | META_METHODS:
        yield expr
        return
    if isinstance(expr, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return
    if isinstance(expr, cst.Attribute) and expr.attr.value in META_ATTRS | META_METHODS:
        return
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in _NO_DATA_CALLS:
        return
    if isinstance(expr, cst.Call) and dotted(expr.func) in _METADATA_FUNCTIONS:
        return  # ``torch.is_tensor(t)``: the type, not the data
    if isinstance(expr, cst.Comparison) and all(isinstance(c.operator, (cst.Is, cst.IsNot))
                                                for c in expr.comparisons):
        return
    for child in children(expr):
        yield from data_names(child, fields)


def async_host_copy_call(call: cst.CSTNode, method: str | None, copies: bool = True) -> bool:
    """A call that may queue an asynchronous device-to-host copy (``hostreads``): ``.to("cpu",
    non_blocking=True)``, ``.cpu(non_blocking=True)``, and with ``copies`` ``dst.copy_(src, non_blocking=True)``
    (whose direction the syntax does not tell)."""
    if method is None or not isinstance(call, cst.Call) or not non_blocking(call):
        return False
    return (copies and method == "copy_") or (method != "pin_memory" and host_target(call, method))


_NO_HOST_READ_METHODS = VIEW_METHODS | MULTI_VIEW_METHODS | META_METHODS | {"numpy", "record_stream", "detach",
                                                                          "requires_grad_", "share_memory_"}

# torch functions that look only at a tensor's type or metadata (``torch.is_tensor(t) and t.is_cuda``)
_METADATA_FUNCTIONS = frozenset({"torch.is_tensor", "torch.is_storage", "torch.is_floating_point", "torch.is_complex",
                                 "torch.numel", "torch.typename"})


class HostReads:
    """Asynchronous device-to-host copies and the host reads of their results (mixin of the interpreter).

    Interp state it uses: ``anchor``, ``cfg``, ``clock``, ``early_records``, ``host_reads``, ``record_sites``,
    ``timing_events``, ``waited_events``."""

    def host_test(self, st: State, e: cst.BaseExpression) -> object:
        """The test of a conditional expression (``a if n > 0 else b``) is evaluated by the host, as an
        ``if``'s: its operands are host values (or read by a synchronising ``bool``), no work on a stream."""
        self.host_depth += 1
        try:
            return self.ev(st, e)
        finally:
            self.host_depth -= 1

    def host_arithmetic(self, st: State, e: cst.Call) -> TVal | None:
        """``max(1, budget // n)``, ``min(index + count, layers)``: the builtins comparing two or more values
        by truth (a multi-element tensor has none) work on host numbers: their arguments are host
        arithmetic and their result a host value."""
        if not (isinstance(e.func, cst.Name) and e.func.value in ("max", "min") and e.func.value not in st.env
                and len(e.args) >= 2 and not any(a.star or a.keyword for a in e.args)):
            return None
        for arg in e.args:
            self.host_test(st, arg.value)
        return self.new_tensor(st, self.new_storage(st, "host", st.cur, None, None).sid)

    def async_host_copy(self, st: State, out: TVal, sources: list, pinned: bool = False,
                        source: cst.BaseExpression | None = None) -> TVal:
        """``out`` (a host tensor) is filled by a copy just queued on the current stream (in an inlined helper
        too: the copy is then the caller's call of it, ``anchor``) from ``sources``. Only a source the device
        produced here makes ``out`` pending: not a parameter or an object's field of unknown placement, nor
        an earlier copy's host result (a host tensor's copy to the host is a no-op)."""
        if not any(st.stores[tv.sid].kind in ("local", "pool") and st.stores[tv.sid].d2h is None
                   and not self.is_host(st, tv) for v in sources for tv in self.tensors(st, v) if tv.sid in st.stores):
            if pinned and source is not None and self._device_evident(source) \
                    and any(st.stores[tv.sid].kind in ("arg", "long") and st.stores[tv.sid].d2h is None
                            and not self.is_host(st, tv) for v in sources for tv in self.tensors(st, v)
                            if tv.sid in st.stores):
                self.evident_copies.add(id(self.anchor))
                return self.unplaced_host_copy(st, out)  # (a parameter or a field the code shows is device memory,
                # `if t.is_cuda:` / `self.dev = torch.zeros(n, device=device)`, copied into page-locked memory)
            return out  # (a host tensor, such as an earlier copy's result, copied to the host again: a no-op)
        S = st.stores.get(out.sid)
        if S is not None and self.anchor is not None:
            S.d2h = Access(st.cur, self.clock, self.anchor, {})
            if pinned and not st.regions:  # page-locked: it runs after the call returns (pending_exit); not
                # a captured copy (it runs at replay: captures.py)
                self.pinned_copies.add(id(self.anchor))
                self.grad_slot(st, out)
        return out

    def _device_evident(self, source: cst.BaseExpression) -> bool:
        """Is a copy's source of unknown placement evidently device memory (``placement.device_evident``)?"""
        cls = self.cfile.classes.get(self.cfn.class_name or "") if self.cfn.class_name else None
        site = next((s for s in self.cfn.calls if any(n is source for n in local_nodes(s.node))), None)
        return device_evident(source, self.cfn, cls, site.guards if site is not None else ())

    def maybe_synced(self, st: State, receiver: cst.BaseExpression | None = None, value: object = None) -> None:
        """The host reads a value of unknown placement as a Python value (``token_count.item()``, ``x.tolist()``;
        a tracked tensor's read is ``blocking_copy``): if it is device data, the host waited for everything queued
        on the current stream so far, copies included; if it is host data (a NumPy array, a CPU tensor) it waited
        for nothing. A pending copy's host read after it is then reported less sure (``HostRead.placed``). A value
        evidently on the host (:meth:`evidently_host`) waits for nothing: no effect."""
        if self.cfg.mode in ("eager", "cuda") and not self.evidently_host(receiver, value):
            st.maybe_syncs[st.cur] = self.clock

    def evidently_host(self, receiver: cst.BaseExpression | None, value: object) -> bool:
        """Is the receiver of an ``.item()`` / ``.tolist()`` host data: a constant, a field holding a host value
        (:meth:`~streamlint.model.flow.hostfields.HostFields.host_attribute`), a host array library's result
        (``np.asarray(lens).sum()``), or a local / ``self.*`` field every binding of which gives host memory
        (``stats = hist.cpu()``, ``self.lens = torch.from_numpy(arr)``: :func:`~streamlint.model.placement.host_source`)?"""
        if isinstance(value, CVal) or isinstance(value, KVal) and self.host_attribute(value):
            return True
        if receiver is None:
            return False
        cls = self.cfile.classes.get(self.cfn.class_name or "")
        return host_source(receiver, self.cfn, cls, value=lambda v: host_value(v) or self._library_result(v))

    def _library_result(self, e: cst.BaseExpression) -> bool:
        """A call of a host array library, or a method chain on one that does not move it (``np.stack(rows).sum()``)."""
        while isinstance(e, cst.Call):
            if host_library(self.cfile.resolve(e.func, self.cfn)):
                return True
            if not isinstance(e.func, cst.Attribute) or e.func.attr.value in DEVICE_MOVES:
                return False
            e = e.func.value
        return False

    def placed_copy(self, st: State, copy: Access) -> bool:
        """Is the copy's pending state certain: its source placed, and no host read of a value of unknown
        placement on its stream since (:meth:`maybe_synced`)?"""
        return id(copy.node) not in self.unplaced_copies and st.maybe_syncs.get(copy.stream, -1) < copy.time

    def hedged_copy(self, st: State, copy: Access) -> bool:
        """Is the copy's source of unknown placement, and has the host since read (``.item()``) or copied to the host
        (``.cpu()``, ``.to("cpu")`` without ``non_blocking``) a value of unknown placement on its stream
        (:meth:`maybe_synced`)? The code takes both for device data (it copies the first asynchronously); if it is
        right, the blocking call waited for the copy too: a report rests on two guesses against the code's own."""
        return id(copy.node) in self.unplaced_copies and st.maybe_syncs.get(copy.stream, -1) >= copy.time

    def unplaced_host_copy(self, st: State, out: TVal) -> TVal:
        """``p.to("cpu", non_blocking=True)`` of a value the flow does not place (a module's parameter, an element
        of a collection handed in): only a device tensor copies asynchronously (a host one is returned as it is),
        so ``out`` is the pinned result of a copy queued on the current stream, pending until a host
        synchronisation; its host reads are reported less sure (``HostRead.placed`` False: medium)."""
        S = st.stores.get(out.sid)
        if S is not None and self.anchor is not None and not st.regions:
            S.d2h = Access(st.cur, self.clock, self.anchor, {})
            self.pinned_copies.add(id(self.anchor))
            self.unplaced_copies.add(id(self.anchor))
            self.grad_slot(st, out)  # (`p.grad = p.grad.to("cpu", non_blocking=True)`: hostgrads.py)
        return out

    def host_read(self, st: State, expr: cst.CSTNode, consumer: str = "a host read") -> None:
        """The host reads the tensors named in ``expr``."""
        if self.cfg.mode not in ("eager", "cuda"):
            return
        # the names it evaluates, and the object's fields this call holds (``self.splits`` an inlined helper set)
        names = [n.value for n in data_names(expr)] + [
            f"self.{n.attr.value}" for n in local_nodes(expr) if isinstance(n, cst.Attribute)
            and isinstance(n.value, cst.Name) and n.value.value == "self" and f"self.{n.attr.value}" in st.env]
        # and the object's long-lived fields a copy of this call left pending (``self.pinned[:, :k].copy_(dev,
        # non_blocking=True)``, then ``self.pinned[0].tolist()``: the field's one storage, ``long_tensor``)
        names += [key for n in data_names(expr, fields=True) if isinstance(n, cst.Attribute)
                  and (key := f"self.{n.attr.value}") not in st.env and key not in names
                  and (sid := st.long.get(key)) is not None and st.stores[sid].d2h is not None]
        for name in names:
            v = st.env.get(name)
            # the tensors it is, and those a local container holds in its slots (``state["scale"] = host``)
            sids = [tv.sid for tv in (self._held(v) if not isinstance(v, KVal) else self.tensors(st, v))] \
                + list(st.held.get(name, ()))  # (a field's buffer: ``pinned = self.staging``)
            if v is None and name.startswith("self.") and (sid := st.long.get(name)) is not None:
                sids.append(sid)
            for sid in sids:
                S = st.stores.get(sid)
                if S is not None and S.d2h is not None:
                    self._consume(st, S.d2h, name, consumer, S.exit)

    def host_compute(self, st: State, tvs: list[TVal]) -> None:
        """A CPU op reads (or writes) these host tensors on the host, at the call."""
        if self.cfg.mode not in ("eager", "cuda"):
            return
        for tv in tvs:
            S = st.stores.get(tv.sid)
            if S is not None and S.d2h is not None:
                self._consume(st, S.d2h, self.label(st, tv.sid) or S.name or "tensor", "a CPU op", S.exit)

    def cpu_op(self, st: State, node: cst.CSTNode) -> bool:
        """Is ``node`` (an op on host tensors only) a torch computation the host runs now: a Python operator,
        a tensor method, a ``torch.*`` function? An unknown function handed a host tensor may only look
        at its metadata or pass it on (a host callback launched on the stream)."""
        if isinstance(node, (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.AugAssign)):
            return True
        if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
            return False
        if self.transfer_from_unknown(st, node):
            return False
        if node.func.attr.value in ("to", "cuda", "npu") and (node.func.attr.value != "to" or any(
                a.keyword is not None and a.keyword.value == "device" or a.keyword is None
                and not isinstance(a.value, cst.Attribute) for a in node.args)):
            return False  # (may be) a copy to the device: ordered by the stream
        if node.func.attr.value in _NO_HOST_READ_METHODS:
            return False  # a view (``.numpy()`` shares the buffer), metadata, bookkeeping: the bytes are not read
        recv = node.func.value  # (a local, or a field of ``self`` this call holds: ``self.out_host.sum()``)
        while isinstance(recv, cst.Subscript):  # (an element or slice of one: ``pinned[0, :k].to(torch.int64)``)
            recv = recv.value
        code = self.cfile.code(recv) if isinstance(recv, (cst.Name, cst.Attribute)) else ""
        if isinstance(st.env.get(code), TVal):
            return True
        bound = st.env.get(code)
        key = bound.key if isinstance(bound, KVal) else code if bound is None else ""
        if key.startswith("self.") and (sid := st.long.get(key)) is not None and st.stores[sid].d2h is not None:
            return True  # a long-lived field a D2H copy of this call fills (a pinned staging buffer; ``h = self.pinned``)
        site = self.cfile.call_site(node)
        target = (site.target or "") if site is not None else ""
        return target.startswith("torch.") and target not in _METADATA_FUNCTIONS

    def pinned_place(self, dest: cst.BaseExpression, pinned: bool = False) -> bool:
        """Is the destination of a non-blocking copy (``pinned[k:k + 1]``) a local or a field of this object that
        only ever holds host memory (``self.staging = torch.empty(n, pin_memory=True)`` wherever it is set)?
        With ``pinned``: page-locked host memory (:func:`~streamlint.model.placement.pinned_source`)."""
        root = copy_destination(dest)
        cls = self.cfile.classes.get(self.fn.class_name or "") if self.fn.class_name else None
        if not isinstance(root, (cst.Name, cst.Attribute)):
            return False
        return pinned_source(root, self.fn, cls) if pinned else host_source(root, self.fn, cls)

    def pending_exit(self, st: State, returned: object, node: cst.CSTNode | None) -> None:
        """The function ends (``node``: its ``return``, else its last statement) while a non-blocking copy it
        queued into page-locked host memory may still run, and that memory leaves it: returned (also inside a
        returned tuple or record, or a local list returned), or a field of the object (the host reads the
        staging slot later). Nothing in the function synchronised the copy's stream after it (``st.host``), and
        no event was recorded there after it (an event kept or handed back is the consumer's protocol). Reported
        (SL201 at the exit) only when a caller in the project is seen reading the result on the host before any
        synchronisation, and not every call site synchronises after the call; a field only when another method of
        the object reads it on the host."""
        if self.depth or self.cfg.mode not in ("eager", "cuda") or node is None or not self.pinned_copies:
            return
        sids = [tv.sid for tv in self.tensors(st, returned)]
        if isinstance(node, cst.Return) and node.value is not None:
            sids += [sid for n in data_names(node.value) for sid in st.held.get(n.value, ())]
            sids += [tv.sid for tv in self.tensors(st, self.dict_values.get(id(node.value)))]
        fields = [sid for sid, S in st.stores.items() if S.kind == "long" and (S.name or "").startswith("self.")]
        for sid in dict.fromkeys(sids + fields):
            S = st.stores.get(sid)
            copy = S.d2h if S is not None else None
            if copy is None or id(copy.node) not in self.pinned_copies or st.host.get(copy.stream, -1) >= copy.time:
                continue
            if st.shape_syncs.get(copy.stream, -1) >= copy.time:
                continue  # a data-dependent-shape op after the copy waited for its stream
            if any(snap.get(copy.stream, -1) >= copy.time for snap in st.events.values()):
                continue  # an event recorded after the copy: whoever holds it synchronises before reading
            if sid not in sids and self.early_field_record(st, S.name or "", copy):
                continue  # (fenced by an event field recorded before the copy: reported there, pendingfields.py)
            if id(node) in self.host_reads or any(r.copy is copy.node for r in self.host_reads.values()) \
                    or self._class_synchronises():
                return  # (the copy's host read is reported already: one defect, one finding)
            if sid not in sids and not self._field_read_on_host(S.name or ""):
                continue  # a field no other method reads on the host (an offload slot only copied back to the device
                # on the same stream, `self.host_buf[:n].to(dev, non_blocking=True)`: the stream orders that read)
            covered, reader = self._callers_synchronise()
            if covered or reader is None:
                return  # (no caller seen reading it on the host: the reader may synchronise in a helper of its own,
                # `stream_synchronize()` before its split sizes are used; too weak to report)
            holder = next((n for n, held in st.held.items() if sid in held and isinstance(node, cst.Return)
                           and node.value is not None and n in {d.value for d in data_names(node.value)}), None)
            name = holder or self.label(st, sid) or S.name or "tensor"
            how = "returned" if sid in sids else "a field"
            self.host_reads[id(node)] = HostRead(node, name, copy.stream, copy.node,
                                                 f"{how}:{reader}" if reader else how, self.cfg.mode, "exit",
                                                 placed=self.placed_copy(st, copy),
                                                 hedged=self.hedged_copy(st, copy))
            return

    def _class_synchronises(self) -> bool:
        """Another method of the object synchronises the host with the device (``wait_for_save()`` calling
        ``self.copy_stream.synchronize()``, ``torch.cuda.synchronize()``, an event's ``query()``): the object's
        own protocol completes the copies it leaves behind before its readers go on."""
        cls = self.cfile.classes.get(self.fn.class_name or "") if self.fn.class_name else None
        return cls is not None and any(site.method in ("synchronize", "query") for m in cls.methods.values()
                                       if m is not self.fn for site in m.calls)

    def _callers_synchronise(self, file=None, fn=None, depth: int = 0) -> tuple[bool, str | None]:
        """Does every call site of this function in the project synchronise the host after the call (a
        ``synchronize()`` / event ``query()``, a blocking ``.item()`` / ``.tolist()`` of another value, later in
        the calling function), or capture it into a graph (the copy runs at replay: captures.py)? Some call
        site captures it: yes. A caller handing the result on (``return [to_host(x) for x in xs]``) is judged
        by its own callers (two levels up). Second: a caller seen reading the call's result on the host with no
        such synchronisation before (``ids.tolist()``), by name, if any."""
        sites = callers_of(self.project, file or self.file, fn or self.fn)
        if not sites:
            return not depth, None  # no caller seen (a hook or callback handed by reference, an API): its protocol is
            # unknown, so silent; a caller handing the result on with no caller of its own does not synchronise
        synced, reader = True, None
        for model, site in sites:
            if any(Role.GRAPH_CAPTURE in use.roles() for use in self.project.enclosing_scopes(model, site.scope)) \
                    or capture_kind(self.project, model, site.scope) is not None:
                return True, None
            caller = site.function
            syncs = [model.span(o.node).start_line for o in caller.calls
                     if self._synchronises_after(model, caller, site.node, o)] if caller is not None else []
            if caller is None or not syncs and not (depth < 2 and self._hands_on(caller, site.node)
                                                    and self._callers_synchronise(model, caller, depth + 1)[0]):
                synced = False
            if caller is not None and reader is None:
                first_sync = min(syncs, default=None)
                read = next((o for o in caller.calls if o.method in ("item", "tolist", "numpy")
                             and self._reads_result(model, caller, site.node, o)
                             and (first_sync is None or model.span(o.node).start_line < first_sync)), None)
                reader = caller.qualname if read is not None else None
        return synced, reader

    def _field_read_on_host(self, name: str) -> bool:
        """Does another method of the object read field ``self.<f>`` (``name``, maybe subscripted) on the host:
        ``.tolist()`` / ``.item()`` / ``.numpy()`` / ``.tobytes()`` of an expression holding it?"""
        cls = self.cfile.classes.get(self.fn.class_name or "") if self.fn.class_name else None
        field = name.split("[", 1)[0]
        if cls is None or not field.startswith("self."):
            return False
        return any(site.method in ("tolist", "item", "numpy", "tobytes") and isinstance(site.node.func, cst.Attribute)
                   and any(self.cfile.code(n) == field for n in local_nodes(site.node.func.value)
                           if isinstance(n, cst.Attribute))
                   for m in cls.methods.values() if m is not self.fn for site in m.calls)

    def _hands_on(self, caller, call: cst.Call) -> bool:
        """Does ``caller`` return ``call``'s result (the call itself, or a name bound to it, in a return)?"""
        names = self._results(caller, call)
        return any(isinstance(n, cst.Return) and n.value is not None and (
            any(x is call for x in local_nodes(n.value)) or any(d.value in names for d in data_names(n.value)))
            for n in local_nodes(caller.node.body))

    @staticmethod
    def _results(caller, call: cst.Call) -> set[str]:
        return {name for name, values in caller.name_assigns.items()
                if any(v is call or any(n is call for n in local_nodes(v)) for v in values)}

    def _reads_result(self, model, caller, call: cst.Call, other) -> bool:
        """``ids.tolist()`` after ``ids = sampler.sample_ids(logits)``: the host reads the call's result."""
        if model.span(other.node).start_line < model.span(call).start_line \
                or not isinstance(other.node.func, cst.Attribute):
            return False
        results = self._results(caller, call)
        return any(n.value in results for n in data_names(other.node.func.value))

    @staticmethod
    def _synchronises_after(model, caller, call: cst.Call, other) -> bool:
        """Is ``other`` (a call in ``caller``) a host synchronisation after ``call``: ``synchronize()`` /
        ``query()``, or a blocking ``.item()`` / ``.tolist()`` of another value than ``call``'s result (that
        one is the read itself)?"""
        if model.span(other.node).start_line < model.span(call).start_line or other.node is call:
            return False
        if other.method in ("synchronize", "query") or other.method in ("cpu", "to") and not non_blocking(other.node) \
                and host_target(other.node, other.method):
            return True  # (a blocking copy to the host waits for its stream too)
        if other.method not in ("item", "tolist") or not isinstance(other.node.func, cst.Attribute):
            return False
        results = HostReads._results(caller, call)
        return not any(n.value in results for n in data_names(other.node.func.value))

    def transfer_from_unknown(self, st: State, node: cst.CSTNode) -> bool:
        """``host_buf.copy_(src, non_blocking=True)`` with a source of unknown placement (a parameter of
        any type, an object's field): ``non_blocking`` means something only for a copy between host and
        device memory, so the copy is a transfer queued on the current stream (work an event recorded
        there must come after), not a CPU op on host data."""
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "copy_"
                and non_blocking(node)):
            return False
        src = next((a.value for a in node.args if a.keyword is None or a.keyword.value == "src"), None)
        if src is None or host_source(src, self.fn, None):
            return False  # (``torch.from_numpy(a)``, a local only ever assigned host memory: host to host)
        known = [tv for tv in self.tensors(st, st.env.get(src.value))] if isinstance(src, cst.Name) else []
        return not known or not all(self.is_host(st, tv) for tv in known)

    def host_consumer_call(self, st: State, e: cst.Call, target: str | None) -> None:
        """``torch.save(buf, f)``, ``q.put(buf)``, ``writer.write_record(name, buf, n)``: a call of the API
        table's host consumers reads the host tensors it is handed. An event handed along with them is a
        hand-off (the receiver synchronises it before reading: ``Expressions.handoff``)."""
        self.host_gradients(st, e)  # (a copy into a pinned ``.grad``, a host optimizer's step: hostgrads.py)
        func = e.func
        if isinstance(func, cst.Attribute):
            if func.attr.value not in HOST_CONSUMER_METHODS and target not in HOST_CONSUMER_FUNCTIONS:
                return
            if isinstance(func.value, cst.Name) and isinstance(st.env.get(func.value.value), TVal):
                return  # a tensor method (``Tensor.put``)
            consumer = target if target in HOST_CONSUMER_FUNCTIONS else f".{func.attr.value}()"
        elif isinstance(func, cst.Name) and (func.value in HOST_CONSUMER_FUNCTIONS
                                             or target in HOST_CONSUMER_FUNCTIONS):
            if func.value in st.env:
                return  # a local rebinding the name
            consumer = f"{target or func.value}()"
        else:
            return
        names = [n for arg in e.args for n in data_names(arg.value)]
        if any(isinstance(st.env.get(n.value), EVal) for n in names):
            return
        for arg in e.args:
            self.host_read(st, arg.value, consumer)

    def held_element_read(self, st: State, e: cst.Call, method: str | None) -> None:
        """``s[0].view(-1).tolist()`` where ``s`` walks a local container of pending host copies
        (:meth:`hold_elements`): not a tensor the flow tracks, but the host reads what the copy fills."""
        if method not in ("tolist", "item") or e.args:
            return
        names = [n.value for n in data_names(e.func.value)]
        if any(n in st.held and not isinstance(st.env.get(n), TVal) for n in names):
            self.host_read(st, e.func.value, f".{method}()")

    def shape_sync(self, st: State, e: cst.Call, method: str | None, target: str | None) -> None:
        """``torch.repeat_interleave(ids, counts)`` with a tensor of repeats and no ``output_size=``,
        ``x.nonzero()``, ``torch.unique(x)``, ``x.masked_select(m)``: the result's size depends on the data, so
        the host waits for the current stream before the call returns (noted for :meth:`pending_exit`)."""
        name = method or (target or "").rsplit(".", 1)[-1]
        if method is None and not (target or "").startswith("torch."):
            return
        if name == "repeat_interleave":
            if any(a.keyword is not None and a.keyword.value == "output_size" for a in e.args):
                return
            repeats = [a.value for a in e.args if a.keyword is None][0 if method else 1:][:1] + \
                [a.value for a in e.args if a.keyword is not None and a.keyword.value == "repeats"]
            if not repeats or isinstance(repeats[0], cst.Integer) or isinstance(repeats[0], cst.Name) \
                    and not self.tensors(st, st.env.get(repeats[0].value)):
                return
        elif name not in _SHAPE_SYNC_OPS:
            return
        st.shape_syncs[st.cur] = self.clock

    def split_size_reads(self, st: State, e: cst.Call, target: str | None) -> None:
        """``all_to_all_single(out, inp, output_split_sizes=splits, ...)``: the host reads split sizes when it
        sets the collective up (a ``*_split_sizes`` keyword of any call; positions 3 and 4 of
        ``all_to_all_single``), a tensor or a numpy array of them too. A project function reads on the host the
        arguments of the parameters it reads so (:func:`host_read_params`), inlined or not."""
        if self.cfg.mode not in ("eager", "cuda") or not any(self._pending_arg(st, a.value) for a in e.args):
            return  # (no argument a pending copy fills: nothing to read)
        positional = (target or "").endswith("all_to_all_single")
        for i, arg in enumerate(e.args):
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword is not None and keyword.endswith("split_sizes") or keyword is None and positional \
                    and i in (2, 3) and not arg.star:
                self.host_read(st, arg.value, f"`{keyword or 'split sizes'}=`")
        site = self.cfile.call_site(e)
        found = self.project.call_target(self.cfile, site) if site is not None and site.target else None
        if found is None or found[0] is self.cfn:
            return
        fn = found[0]
        params = fn.params[1:] if fn.class_name and fn.params[:1] == ("self",) else fn.params
        read = host_read_params(self.project, fn)
        for name, expr in bind_arguments(params + fn.kwonly, e, kwonly=fn.kwonly).items():
            if name in read and expr is not None:
                self.host_read(st, expr, f"{fn.node.name.value}() on the host")

    def _pending_arg(self, st: State, expr: cst.BaseExpression) -> bool:
        """Does ``expr`` name (a field holding) a host tensor some asynchronous copy fills?"""
        if isinstance(expr, cst.Name):
            names = [expr.value]
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            names = [f"self.{expr.attr.value}"]
        else:
            return False  # (split sizes and host-read arguments are handed by name)
        return any(st.stores.get(sid) is not None and st.stores[sid].d2h is not None for name in names
                   for sid in [tv.sid for tv in self._held(st.env.get(name))] + list(st.held.get(name, ())))

    def hold_pending(self, st: State, target: cst.Subscript, v: object) -> None:
        """``state[mode]["scale"] = host``: the local container at the root of a nested slot holds the host
        tensors a pending device-to-host copy fills; the host reading the container (``pickle.dumps(state)``)
        reads them (``host_read``)."""
        root = target.value
        while isinstance(root, cst.Subscript):
            root = root.value
        if not isinstance(root, cst.Name) or root.value not in st.env:
            return
        held = tuple(tv.sid for tv in self._held(v) if tv.sid in st.stores and st.stores[tv.sid].d2h is not None)
        if held:
            st.held[root.value] = tuple(dict.fromkeys(st.held.get(root.value, ()) + held))

    def displayed(self, v: object, value_node: cst.BaseExpression | None) -> object:
        """The value stored by an assignment: for a dict display (which evaluates to no value of its own), the
        values it was built from (``dict_values``), so that storing it in a field or a slot keeps them."""
        if v is None and isinstance(value_node, cst.Dict):
            return self.dict_values.get(id(value_node))
        return v

    def hold_dict(self, st: State, name: str, value_node: cst.BaseExpression | None) -> None:
        """``staged = {"values": pinned, ...}``: the local dict holds the tensors its literal's values are."""
        held = tuple(tv.sid for tv in self.tensors(st, self.dict_values.get(id(value_node))))
        if held:
            st.held[name] = held

    def hold_elements(self, st: State, items: cst.BaseExpression, target: cst.BaseExpression) -> None:
        """``for job, s in launched:`` / ``[t for s in outs for t in s.tolist()]`` over a local container that
        holds host tensors a pending copy fills (``launched.append((job, pinned[k:k + 1]))``): the names bound
        to its elements may be those tensors, so the host reading them reads the container's pending copies.
        ``enumerate(xs)`` / ``zip(xs, ...)`` / ``reversed(xs)`` walk the same elements."""
        names = [items.value] if isinstance(items, cst.Name) else []
        if isinstance(items, cst.Call) and isinstance(items.func, cst.Name) \
                and items.func.value in ("enumerate", "zip", "reversed", "list", "tuple"):
            names = [a.value.value for a in items.args if isinstance(a.value, cst.Name)]
        held = [sid for n in names for sid in st.held.get(n, ())] + [
            tv.sid for n in names if isinstance(st.env.get(n), TupVal) for tv in self._held(st.env[n])]
        sids = tuple(dict.fromkeys(sid for sid in held if sid in st.stores and st.stores[sid].d2h is not None))
        if sids:
            for n in target_names(target):
                st.held[n] = tuple(dict.fromkeys(st.held.get(n, ()) + sids))

    @staticmethod
    def _held(v: object) -> list[TVal]:
        if isinstance(v, TVal):
            return [v]
        if isinstance(v, TupVal):
            return [x for item in v.items for x in HostReads._held(item)]
        return []

    def _consume(self, st: State, copy: Access, name: str, consumer: str, exit: cst.CSTNode | None = None) -> None:
        if st.host.get(copy.stream, -1) >= copy.time:
            return  # a synchronisation after the copy
        if self._early_for_host(st, copy) or self.anchor is None:
            return
        if id(copy.node) in self.evident_copies and any(snap.get(copy.stream, -1) >= copy.time
                                                        for snap in st.events.values()):
            return  # (an assumed device source, and an event recorded after the copy: its holder's protocol decides
            # when the host may read, Megatron's `d2h_event` synchronised at a configured point)
        if id(self.anchor) not in self.host_reads:
            self.host_reads[id(self.anchor)] = HostRead(self.anchor, name, copy.stream, copy.node, consumer,
                                                        self.cfg.mode, placed=self.placed_copy(st, copy),
                                                        hedged=self.hedged_copy(st, copy))
        if exit is not None and id(exit) not in self.host_reads:  # the helper that handed it back unsynchronised
            self.host_reads[id(exit)] = HostRead(exit, name, copy.stream, self.anchor, consumer, self.cfg.mode,
                                                 "returned", placed=self.placed_copy(st, copy),
                                                 hedged=self.hedged_copy(st, copy))

    def mark_exit(self, st: State, fn, mod, ret: object) -> dict:
        """An inlined helper of this module hands back host tensors its copies still fill, with no host
        synchronisation covering them: returned, or stored in fields of the caller's object (``self.splits =
        d2h.numpy()``: those fields, returned here, are the caller's to read). If the caller reads them on the
        host, the helper that handed them back pending is where the synchronisation is missing too (its last
        return, reported with the read). Called with the helper's final state (``st.env`` its names)."""
        if self.cfg.mode not in ("eager", "cuda") or mod is not self.file:
            return {}
        me = st.env.get("self")
        fields = {k: v for k, v in st.env.items() if k.startswith("self.") and isinstance(v, (TVal, TupVal))
                  and any(self._pending(st, tv) for tv in self._held(v))} \
            if isinstance(me, KVal) and me.key == "self" else {}
        if not fields and not any(self._pending(st, tv) for tv in self._held(ret)):
            return {}
        returns = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.Return)]
        exit = max(returns, key=lambda n: self.cfile.span(n).start_line) if returns else None
        for v in [ret, *fields.values()]:
            for tv in self._held(v):
                S = st.stores.get(tv.sid)
                if self._pending(st, tv) and S.exit is None:
                    S.exit = exit
        return fields

    @staticmethod
    def _pending(st: State, tv: TVal) -> bool:
        S = st.stores.get(tv.sid)
        return S is not None and S.d2h is not None and st.host.get(S.d2h.stream, -1) < S.d2h.time

    def _early_for_host(self, st: State, copy: Access) -> bool:
        """An event the host synchronised, recorded on the copy's stream before the copy (an early record)."""
        stream, time = copy.stream, copy.time
        found = False
        for key, snap in st.events.items():
            recorded = snap.get(stream, -1)
            site = self.record_sites.get((key, stream, recorded))
            if recorded >= time or key not in self.waited_events or key in self.timing_events \
                    or st.host.get(stream, -1) < recorded:
                continue  # not recorded here before the copy, or the host never synchronised it
            if site is None:  # an event field an inlined helper recorded before its copy into a pinned field: that
                # helper's run reports the early record (pendingfields.py), not this read
                found = found or key.startswith("self.") and (key, stream, recorded) in self.inlined_records
                continue
            node, label = site
            found = True
            if id(node) not in self.early_records:
                self.early_records[id(node)] = EarlyRecord(node, label, stream, copy.node, self.cfg.mode, False)
        return found


# ops whose result size depends on tensor data: the host waits for the stream to learn it
_SHAPE_SYNC_OPS = frozenset({"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"})

_HOST_READ_BUILTINS = HOST_CONSUMER_FUNCTIONS | {"sum", "list", "tuple"}


def host_read_params(project, fn) -> frozenset[str]:
    """The parameters a function reads on the host in its own body (memoised per function): handed as a
    ``*_split_sizes`` keyword, to a Python conversion / host consumer (``int(n)``, ``sum(splits)``), or
    converted by ``.tolist()`` / ``.item()``."""
    memo = derived(project, "host_read_params")
    if id(fn) in memo:
        return memo[id(fn)]
    params = set(fn.params) - {"self"}
    found: set[str] = set()
    for node in local_nodes(fn.node.body) if params else ():
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        exprs: list[cst.CSTNode] = []
        if isinstance(func, cst.Name) and func.value in _HOST_READ_BUILTINS and func.value not in params:
            exprs = [a.value for a in node.args]
        elif isinstance(func, cst.Attribute) and func.attr.value in ("tolist", "item") and not node.args:
            exprs = [func.value]
        exprs += [a.value for a in node.args if a.keyword is not None and a.keyword.value.endswith("split_sizes")]
        found.update(n.value for x in exprs for n in data_names(x) if n.value in params)
    memo[id(fn)] = frozenset(found)
    return memo[id(fn)]


def host_blocking_helper(project, file, fn) -> bool:
    """Does a project function (not inlined: it orders no streams) block the host on the current stream's
    work on every path past its guard clauses: a statement of its own body, not under a branch or a loop,
    with a host verdict on device data (``torch.testing.assert_close``, ``torch.allclose``: the API table's
    ``HOST_VERDICTS``) or a blocking read (``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()`` with no
    argument) of what it was handed (a parameter)? A call of it returns only once the current stream ran what it
    was handed (memoised)."""
    memo = derived(project, "host_blocking_helper")
    if id(fn) in memo:
        return memo[id(fn)]
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else ()
    top = {id(stmt) for stmt in body if isinstance(stmt, cst.SimpleStatementLine)}
    params = tuple(p for p in fn.all_params if p not in ("self", "cls"))
    found = False
    for site in fn.calls:
        if site.function is not fn or site.in_loop or site.scope is not None:  # (guards: its guard clauses)
            continue
        if site.target in HOST_VERDICTS:
            read = [a.value for a in site.node.args]
        elif site.method in BLOCKING_HOST_READS and not site.node.args and site.receiver is not None:
            read = [site.receiver]
        else:
            continue
        if not any(id(s) in top and contains(s, site.node) for s in body):  # (a statement of its own body)
            continue
        if any(mentions_name(x, *params) for x in read):  # (of what it is handed: a host value's `.item()` waits on nothing)
            found = True
            break
    memo[id(fn)] = found
    return found
