"""Expression evaluation: what value each expression yields and which ops it queues.

Names, attributes, subscripts and comprehensions map to abstract values; calls are dispatched to known
stream APIs (:meth:`Expressions.api`), tensor methods (:meth:`.outsidecalls.OutsideCalls.method`), collectives and
generic torch / project calls (:meth:`.outsidecalls.OutsideCalls.generic`), or inlined helpers (:mod:`.calls`)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.apis import Role
from streamlint.model.file import string_value
from streamlint.model.filefacts import ClassInfo
from streamlint.model.flow.entryctx import note_call
from streamlint.model.flow.computed import computes_tensor, device_factory
from streamlint.model.flow.devicecopies import async_copy_element, device_copy_at
from streamlint.model.flow.counters import NVal, counter_part
from streamlint.model.flow.recordresults import device_record, record_field, record_result
from streamlint.model.flow.places import cached_stream_getter, host_arguments, memoised
from streamlint.model.flow.recursion import recursive_call
from streamlint.model.flow.calls import kept_arguments, metadata_only, plain_container, stored_params
from streamlint.model.flow.enqueues import enqueue_only, kept_names
from streamlint.model.flow.heldaliases import held_after_call
from streamlint.model.flow.objeffects import method_effects, object_method
from streamlint.model.flow.values import (CVal, EVal, EventRecordVal, FieldsVal, IVal, KVal, NONE, RecordVal, SVal, State,
                                          TVal, TupVal, known_truth, record_value)
from streamlint.model.streams import declared_globals, EVENT, MAIN, STREAM, current_stream_getter, installed_stream_getter
from streamlint.model.flow.leaves import closure_container
from streamlint.model.syntax import node_code, target_names
from streamlint.model.waits import host_handshake, signaller_forks
from streamlint.model.uses import bind_arguments
from streamlint.model.flow.hostreads import host_blocking_helper
from streamlint.model.flow.recordreturns import declared_host
from streamlint.model.flow.hosthelpers import host_state_class, returns_host_memory
from streamlint.model.flow.devicework import host_bookkeeping
from streamlint.model.tensors import library_record
from streamlint.model.placement import pinned_arm
from streamlint.model.tensorvocab import META_ATTRS, NON_TENSOR_KWARGS, VIEW_ATTRS


# Methods only streams, events and tensors have: on a receiver the model cannot resolve (a class attribute of
# another class, ``Base.quant_stream``), still the ordering they name, never a project function.
STREAM_ORDERING_METHODS = frozenset({"wait_stream", "wait_event", "record_event", "record_stream"})


_RECORD_COPIES = frozenset({"dataclasses.replace"})  # a copy of a dataclass record: host bookkeeping, no kernel


class Expressions:
    """Expression evaluation and call dispatch (mixin of :class:`~streamlint.model.flow.interp.Interp`; the
    calls it does not inline are evaluated by :class:`~streamlint.model.flow.outsidecalls.OutsideCalls`).

    Interp state it uses: ``anchor``, ``clock``, ``depth``, ``file``, ``h2d``, ``project``. It asks calls
    (inline, inline_target); control (decide); orderings (anonymous_key, event_key, kind_of, record, render,
    stream_key, sync_all, sync_stream, wait_event, wait_everything, wait_stream); storage (alloc, escape,
    free, new_tensor, op, tensors)."""

    def is_global(self, name: str) -> bool:
        fn = self.cfn
        while fn is not None:
            if name in fn.locals or name in fn.all_params or name in fn.local_aliases:
                return False
            fn = fn.parent
        return True

    # ---- expressions
    def ev(self, st: State, e: cst.BaseExpression) -> object:
        kind = type(e)  # (LibCST node classes are never subclassed: an identity test, not the ABC isinstance)
        if kind is cst.Name:
            v = e.value
            if v in st.env:
                return self.named(st, st.env[v])
            if v == "None":
                return NONE
            if v in ("True", "False"):
                return CVal(v == "True")
            placed = st.globs.get((self.cfile.module_name, v)) if st.globs else None
            if placed is not None and (self.is_global(v) or v in declared_globals(self.cfn)):
                return placed  # the value a setter of this module stored in the global on this path
            if v != "self" and self.is_global(v) and v not in self.cfile.names:
                return KVal(v, glob=True)
            if v == "self":
                return KVal("self")
            return self.graph_output(st, v)  # (None: untyped)
        if kind in (cst.Integer, cst.Float):
            return CVal(e.value)
        if kind in (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString):
            self.host_read(st, e, "an f-string")  # an f-string formats the tensors it names on the host
            return CVal(string_value(e) if not isinstance(e, cst.FormattedString) else None)
        if kind is cst.Attribute:
            attr = e.attr.value
            if attr in META_ATTRS:
                return None
            if isinstance(e.value, cst.Name) and attr in st.fields.get(e.value.value, ()):
                return st.fields[e.value.value][attr]  # a record object's field: what it was built with
            base = self.ev(st, e.value)
            if isinstance(base, (FieldsVal, EventRecordVal)):  # a project call's record (recordresults.py); a record
                return record_field(base, attr) if isinstance(base, FieldsVal) else base.field(attr)  # built here
            if isinstance(base, TVal):
                if attr in VIEW_ATTRS:
                    return self.new_tensor(st, base.sid, base.vid)
                return None
            if isinstance(base, KVal):
                if base.key == "self" and f"self.{attr}" in st.env:
                    return st.env[f"self.{attr}"]  # a field this call set to tracked tensors
                return KVal(f"{base.key}.{attr}", base.glob, base.opaque)
            return None
        if kind is cst.Subscript:
            return self.subscript(st, e)
        if kind is cst.Call:
            return self.call(st, e)
        if kind is cst.BinaryOperation:
            left, right = self.ev(st, e.left), self.ev(st, e.right)
            if isinstance(left, NVal) or isinstance(right, NVal):  # `i - 1` in a step of a counted loop
                return self.counter_value(st, e)
            if isinstance(e.left, (cst.List, cst.Tuple)) and isinstance(e.operator, cst.Multiply):
                return None  # `[None] * n`: a Python list of n slots (slots.py), whatever `n` is
            if isinstance(e.operator, cst.Add) and (isinstance(left, TupVal) or isinstance(right, TupVal)):
                # `(pinned[k:k + 1],) + sampled[1:]`: a longer tuple, no tensor op (`[main] + side`: elements.py)
                return self.spliced(st, e, left, right)
            if self.tensors(st, left) or self.tensors(st, right):
                return self.op(st, e, [left, right])
            return None
        if kind is cst.UnaryOperation:
            inner = self.ev(st, e.expression)
            if isinstance(e.operator, cst.Not):
                return None
            return self.op(st, e, [inner]) if self.tensors(st, inner) else None
        if kind is cst.BooleanOperation:
            return self.boolean_operation(st, e)
        if kind is cst.Comparison:
            return self.comparison(st, e)  # (a membership test on a dict / set reads no tensor: membership.py)
        if kind in (cst.Tuple, cst.List):
            return TupVal(tuple(self.ev(st, el.value) if not isinstance(el, cst.StarredElement) else
                                self.starred_item(st, el.value) for el in e.elements))
        if kind is cst.IfExp:
            self.host_test(st, e.test)
            known = self.decide(st, e.test)
            if known is True:
                return self.ev(st, e.body)
            if known is False:
                return self.ev(st, e.orelse)
            body = self.ev(st, e.body)
            orelse = self.ev(st, e.orelse)
            arm = pinned_arm(e)  # `x if x.is_pinned() else x.pin_memory()`: host memory on both arms
            mine, other = (body, orelse) if arm is e.body else (orelse, body)
            if arm is not None and (ts := self.tensors(st, other)) and all(self.is_host(st, tv) for tv in ts):
                return mine if self.written_in_place(st, mine) else self.host_tensor(st)  # (`x` this run saw
                # written in place keeps its state: a pending D2H into it; a value made by an op, pinned, was made on
                # the host, and one handed in, pinned, is host memory)
            return body
        if kind in (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp):
            return self.comprehension(st, e)
        if isinstance(e, cst.Dict):  # `{"values": x.to("cpu", non_blocking=True)}`: its values are computed here
            values = []
            for el in e.elements:
                if isinstance(el, cst.DictElement):
                    self.ev(st, el.key)
                values.append(self.ev(st, el.value))
            self.dict_values[id(e)] = TupVal(tuple(values))  # (what a name bound to it holds: hold_dict)
            return None
        if kind is cst.Await:
            return self.ev(st, e.expression)
        return None

    def written_in_place(self, st: State, v: object) -> bool:
        """Has an in-place access this run saw (``buf.copy_(dev, non_blocking=True)``, ``buf.add_(x)``) last written a
        storage of ``v``, or is an asynchronous D2H copy into it known?"""
        for tv in self.tensors(st, v):
            S = st.stores.get(tv.sid)
            node = S.last_write.node if S is not None and S.last_write is not None else None
            node = node.value if isinstance(node, cst.Expr) else node  # (the statement of the access)
            if S is not None and S.d2h is not None or isinstance(node, cst.Call) and isinstance(
                    node.func, cst.Attribute) and node.func.attr.value.endswith("_"):
                return True
        return False

    def keyed_entry(self, st: State, base: object, key: str) -> object:
        """``meta["zero"]`` of a mapping held as a tensor or a place: that entry only, one place per constant key
        (two streams each touching their own entries do not race)."""
        if isinstance(base, TVal):
            view = self.new_tensor(st, base.sid, base.vid)
            view.part = f"[{key!r}]"
            return view
        if isinstance(base, KVal):
            return KVal(f"{base.key}[{key!r}]", base.glob, base.opaque)
        return base

    def boolean_operation(self, st: State, e: cst.BooleanOperation) -> object:
        """The value of ``a or b`` / ``a and b``: the operand Python hands back. A left operand of known
        truth decides alone (``None or current_stream()`` is the current stream, a stream object is true: the
        right operand is not evaluated); of unknown truth, the value both operands agree on (``s = s or
        self._compute()`` where ``s`` is None or already that stream on every path), else unknown."""
        left = self.ev(st, e.left)
        truth = known_truth(left)
        truth = self.scoped_truth(st, e, left) if truth is None else truth  # (`self.side or ...`: scopenone.py)
        is_or = isinstance(e.operator, cst.Or)
        if truth is is_or:
            return left  # `stream or ...` / `None and ...`: short-circuits to the left operand
        right = self.ev(st, e.right)
        if truth is not None:
            return right
        return left if is_or and left is not None and left == right and not isinstance(left, TVal) else None

    def comprehension(self, st: State, e) -> object:
        """A comprehension over a tracked tensor value (a tensor, the ``*inputs`` handed in) binds its
        target to an element: a view of that storage, so what the element expression does to it (read
        it on this stream) is an access of the collection's memory. A list of such views (``[t.detach()
        for t in inputs]``) is a view of the same storage: handed on, it is still the caller's tensors. A
        selection of an untracked collection's own elements is that collection (:meth:`selection`)."""
        if (selected := self.selection(st, e)) is not None:
            return selected
        if (each := self.comprehension_over_held(st, e)) is not None:
            return each  # `[o[0] for o in outs]`, `outs` a local list of device tensors (listreads.py)
        saved, saved_held = dict(st.env), dict(st.held)
        f = e.for_in
        walked: set[int] = set()
        while f is not None:
            it = self.ev(st, f.iter)
            if isinstance(it, KVal) and it.opaque:  # a collection whose elements a tensor op wrote (`grads`)
                it = next(iter(self.tensors(st, it)), it)
            element = self.new_tensor(st, it.sid, it.vid) if isinstance(it, TVal) and f.inner_for_in is None \
                and isinstance(f.target, cst.Name) and not self.is_host(st, it) else it if isinstance(
                    it, FieldsVal) and isinstance(f.target, cst.Name) else None  # (a record of a list of them)
            if element is not None:
                walked.add(element.sid)
            for n in target_names(f.target):
                st.env[n] = element
                st.held.pop(n, None)
            self.hold_elements(st, f.iter, f.target)  # a local list of pending host copies
            f = f.inner_for_in
        before = set(st.stores)
        v = self.ev(st, e.value if isinstance(e, cst.DictComp) else e.elt)
        st.env, st.held = saved, saved_held
        if isinstance(e, (cst.ListComp, cst.GeneratorExp)) and isinstance(v, TVal) and v.sid in walked:
            return self.new_tensor(st, v.sid, v.vid)
        if isinstance(v, TVal) and v.sid in st.stores and v.sid not in before and not self.is_host(st, v) \
                and async_copy_element(e.value if isinstance(e, cst.DictComp) else e.elt):
            st.stores[v.sid].copies = True  # (a loop over it walks its copies: storage.placed_element)
            return self.new_tensor(st, v.sid, v.vid)  # `{k: t.to(dev, non_blocking=True) for ...}`: one transfer
        return None

    def subscript(self, st: State, e: cst.Subscript) -> object:
        base = self.ev(st, e.value)
        idx_vals = []
        for el in e.slice:
            if isinstance(el.slice, cst.Index):
                idx_vals.append(self.ev(st, el.slice.value))
        if isinstance(base, FieldsVal):
            return base  # an element of a list of records a project call handed back (recordresults.py)
        if not isinstance(base, TVal) and (slot := self.slot_get(st, e)) is not None:
            return slot  # a list's element the function put there, or the caller's (slots.py)
        if isinstance(base, TupVal) and (part := self.stream_slice(base, e)) is not None:
            return part  # `streams[1:]` of a literal list of streams: its real items
        if isinstance(base, TupVal) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
            iv = e.slice[0].slice.value
            if isinstance(iv, cst.Integer):
                i = int(iv.value, 0)
                return base.items[i] if -len(base.items) <= i < len(base.items) else None
            index = self.ev(st, iv)
            if isinstance(index, NVal):  # a step of an alternating-streams loop: its real element
                return base.items[index.n] if -len(base.items) <= index.n < len(base.items) else None
            if isinstance(index, IVal) and base.items:  # a representative element of a literal list
                i = int(index.pos)
                return base.items[i] if -len(base.items) <= i < len(base.items) else base.items[-1]
            return None
        if isinstance(base, TVal):
            if any(self.tensors(st, v) for v in idx_vals):
                return self.op(st, e, [base] + idx_vals)
            view = self.new_tensor(st, base.sid, base.vid)
            if len(idx_vals) == 1 and isinstance(idx_vals[0], IVal):
                view.part = idx_vals[0].pos  # `out[i]`: the part of one element of a collection loop
            elif len(idx_vals) == 1 and isinstance(idx_vals[0], NVal):
                view.part = counter_part(e, idx_vals[0])  # `dq[:, i - 1]` in a step of a counted loop
            elif len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) \
                    and isinstance(e.slice[0].slice.value, cst.Name):
                view.part = self.index_part(st, e.slice[0].slice.value.value)
            elif len(idx_vals) == 1 and isinstance(idx_vals[0], CVal) and isinstance(idx_vals[0].value, str):
                view.part = f"[{idx_vals[0].value!r}]"  # `meta["zero"]`: a mapping's entry, one place per key
            if view.part is None and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
                view.part = self.sym_part(st, e.slice[0].slice.value)  # `ring[k & 1]` (indexsyms.py)
            return view
        if base is None and isinstance(e.value, cst.Name) and st.held.get(e.value.value) \
                and closure_container(self.cfn, e.value.value):
            # `out = blocks[0]` after `blocks[i % 2] = attn(...)`, ``blocks`` the enclosing function's list: the
            # tensor this function last put in a slot (which slot an index names is not tracked)
            return self.new_tensor(st, st.held[e.value.value][-1])
        if base is None and len(e.slice) > 1 and any(isinstance(v, TVal) and not self.is_host(st, v) for v in idx_vals):
            return self.op(st, e, idx_vals)  # `kv[pages, offsets]`: advanced indexing by device tensors, a new tensor
        if isinstance(base, KVal):
            if len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
                return KVal(f"{base.key}[{self.render(st, e.slice[0].slice.value)}]", base.glob, base.opaque,
                            part=base.part or self.sym_part(st, e.slice[0].slice.value))  # (indexsyms.py)
            return KVal(f"{base.key}[:]", base.glob, base.opaque, part=base.part)
        if base is None and len(idx_vals) == 1 and isinstance(idx_vals[0], IVal) and isinstance(e.value, cst.Name):
            # `ev = events[i]` in a round of an element loop over a local list of events: that element
            key = self.render(st, e)
            kind = self.kind_of(st, KVal(key))
            return SVal(key) if kind == STREAM else EVal(key) if kind == EVENT else None
        return None

    def call_args(self, st: State, call: cst.Call,
                  keywords: dict[str, object] | None = None) -> tuple[list, list, list]:
        """(positional values, tensor-read values, out= write values); ``keywords`` collects the values
        of the keyword arguments by name."""
        positional, reads, writes = [], [], []
        for arg in call.args:
            v = self.ev(st, arg.value)
            if arg.keyword is not None and keywords is not None:
                keywords[arg.keyword.value] = v
            if id(arg.value) in self.host_args:  # `dst_rank: int` of a project callee: a Python scalar, no read
                v = None
            if arg.keyword is None:
                positional.append(v)
                if not (self.project_call and isinstance(v, TVal) and self.carries_event(st, v)):
                    reads.append(v)  # (one handed over with its ready event: the callee waits on it)
            elif arg.keyword.value == "out":
                writes.append(v)
            elif arg.keyword.value not in NON_TENSOR_KWARGS:
                reads.append(v)
        return positional, reads, writes

    @staticmethod
    def bind_keywords(positional: list, keywords: dict[str, object], params: tuple[str, ...]) -> list:
        """The positional values completed by the keyword arguments named after the parameters ``params``
        (``output=o, input=x`` is ``(o, x)``); a position no argument fills is None."""
        bound = list(positional) + [None] * max(0, len(params) - len(positional))
        for i, name in enumerate(params):
            if bound[i] is None and name in keywords:
                bound[i] = keywords[name]
        return bound

    def call(self, st: State, e: cst.Call) -> object:
        site = self.cfile.call_site(e)
        if not self.depth and id(e) in self.entry_getters:
            return SVal(MAIN)  # the cached stream every caller runs this function on (forks.callers_current_getters)
        func = e.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        # x.untyped_storage().resize_(0): explicit free
        if method == "resize_" and isinstance(func.value, cst.Call) and isinstance(func.value.func, cst.Attribute) \
                and func.value.func.attr.value in ("untyped_storage", "storage"):
            owner = self.ev(st, func.value.func.value)
            if isinstance(owner, TVal) and e.args and isinstance(e.args[0].value, cst.Integer) \
                    and int(e.args[0].value.value, 0) == 0:
                self.tick()  # a free, no kernel: its hazard is the lifetime one (SL301), never a race as well
                self.free(st, owner.sid, "resize_(0)", self.anchor, force=True)
            elif not self.tensors(st, owner) and isinstance(func.value.func.value, cst.Name) and e.args \
                    and isinstance(e.args[0].value, cst.Integer) and int(e.args[0].value.value, 0) == 0:
                self.free_untracked(st, func.value.func.value.value)
            return None
        if site is not None and site.target == "typing.cast" and len(e.args) == 2:
            return self.ev(st, e.args[1].value)  # `cast(T, v)` is `v`
        self.split_size_reads(st, e, site.target if site is not None else None)
        uses = tuple(u for u in (self.project.api_uses(self.cfile, site) if site is not None else ())
                     if u.wrappers or u.modes is None or self.cfg.mode in u.modes)  # (not on this path)
        direct = [u for u in uses if not u.wrappers]
        if direct:  # (`torch.save(state, f)` / `print(x)`, graph breaks too, read what they are handed on the host)
            self.host_consumer_call(st, e, site.target if site is not None else None)
            return self.api(st, e, direct[0])
        waits = [u for u in uses if u.role is Role.WAIT_TENSOR]
        if waits:
            return self.api(st, e, waits[0])
        if not uses and (host := self.host_arithmetic(st, e)) is not None:
            return host
        if not uses:
            self.host_consumer_call(st, e, site.target if site is not None else None)
            self.held_element_read(st, e, method)
            self.shape_sync(st, e, method, site.target if site is not None else None)
            self.host_signal(st, e)
            self.thread_signal(st, e, site)  # (after a `set_stream` to a side stream: threadstreams.py)
            self.signal_handover(st, e)  # an event handed to another thread with tensors (handedearly.py)
            self.engine_send(st, e, site)
        if site is not None and self.collect is not None and not self.depth:
            note_call(self, st, e, site)  # a project callee: what this call hands it (entryctx.py)
        if not uses and self.handoff(st, e):
            return None
        if not uses and site is not None and self.project.call_target(self.cfile, site) is None:
            self.records_handed_out(st, e)
        if not uses and host_handshake(self.cfile, self.cfn, e):
            self.handshake_time = self.tick()  # another thread may order the streams before it signals
            self.handshake_forks = signaller_forks(self.cfile, e)
            return None
        if not uses and (self.native_launch(st, e) or self.library_stream_sync(st, e, site)):
            return None
        if site is not None:
            getter = self.project.call_target(self.cfile, site)
            if getter is None and (typed := object_method(self.project, self.cfile, self.cfn, e.func)) is not None:
                getter = typed.method, typed.module  # `context.current_stream()`, `context = self.context`
            if getter is not None and current_stream_getter(self.project, getter[1], getter[0]):
                return SVal(st.cur)  # a project helper returning the current stream
            if getter is not None and installed_stream_getter(self.project, getter[1], getter[0]):
                return SVal(MAIN)  # a per-device stream the project installed as current (set_stream)
            target = self.inline_target(site)
            target = None if target is not None and device_record(self.project, target[1], target[0]) else target
            if target is not None:
                if cached_stream_getter(target[0]):
                    return SVal(MAIN)  # caches the stream current at its first call: the default stream
                result = self.inline(st, e, *target)
                if isinstance(result, SVal) and memoised(target[0]):
                    key = self.memo_key(st, e, target[0])
                    return SVal(key) if key is not None else result
                return result
            self.forget_literals(st, e, getter)  # a method not run here may store another literal (fieldliterals.py)
            if recursive_call(self, st, e, site):  # (a helper inlined calling itself: recursion.py)
                return None
            handed = self.handed_back(st, e, site)
            if handed is not None:
                return handed
        if uses:
            return self.api(st, e, uses[0])
        target = site.target if site is not None else None
        if target in _RECORD_COPIES and e.args and e.args[0].keyword is None and not e.args[0].star:
            # `dataclasses.replace(result, kind="simd")`: a new record holding the same references, built on the
            # host: no kernel reads them
            items = tuple(self.ev(st, arg.value) for arg in e.args)
            return items[0] if not any(self.tensors(st, v) for v in items[1:]) else RecordVal(items)
        if site is not None and target is not None:
            sym = self.project.symbol(target, self.cfile)
            if (sym is not None and isinstance(sym[0], ClassInfo) and plain_container(sym[0])) \
                    or (sym is None and library_record(target)):  # (a library's record class: tensors.py)
                # a dataclass / NamedTuple / plain holder: it keeps the tensors handed in, touches no memory
                items = tuple(self.ev(st, arg.value) for arg in e.args)
                return record_value(self.project, sym[1], sym[0], e, items) if sym is not None else RecordVal(items)
        kept = kept_names(kept_arguments(self.project, self.cfile, site)) if site is not None else []
        if kept and enqueue_only(self, st, e, kept, site):
            out = None  # a setter / enqueue keeping every argument: it hands the tensors over, reads none
        else:
            out = self.dispatch_seeing_work(st, e, method, target, site)
            held_after_call(self, st, e, out, site, stored_params)  # what a held object keeps: no free here
            found = self.project.call_target(self.cfile, site) if site is not None else None
            if found is not None and host_blocking_helper(self.project, found[1], found[0]) \
                    and any(not self.is_host(st, tv) for a in e.args if isinstance(a.value, cst.Name)
                            for tv in self.tensors(st, st.env.get(a.value.value))):
                self.blocking_copy(st, st.cur)  # a check helper the host waits in (`assert_close`, `.item()`)
        for expr in kept:
            self.escape(st, st.env.get(expr.value))  # the callee keeps it beyond the call
        self.callee_frees(st, e)  # `_free_storage(bucket)`, `release()`: a helper / closure freeing storage
        return out

    def dispatch(self, st: State, e: cst.Call, method: str | None, target: str | None) -> object:
        site = self.cfile.call_site(e)
        found = self.project.call_target(self.cfile, site) if site is not None else None
        if found is None and site is not None:  # `store.flat_grads()`, `store: GradStore` a parameter (calls.py)
            found = self.declared_method(e.func)
        if found is None and site is not None:  # `group, i = builder.register(...)`, builder a local instance
            found = self.project.instance_method(self.cfile, site)
            returns = found[0].node.returns if found is not None else None
            if returns is not None and "Tensor" in node_code(returns.annotation) \
                    and not returns_host_memory(self.project, found[1], found[0]):
                found = None  # (`-> tuple[Tensor, Tensor]` is no host result; `-> Union[float, Tensor]` whose
                # every return is a host value or a CPU tensor is: hosthelpers.py)
        if found is None and site is not None and site.target is not None \
                and (sym := self.project.symbol(site.target, self.cfile)) is not None \
                and isinstance(sym[0], ClassInfo) and host_state_class(self.project, sym[1], sym[0]):
            self.call_args(st, e)  # (its arguments are read: the object keeps none of them, host fields only)
            return None
        if site is not None and (made := record_result(self, st, e, found)) is not None:
            return made  # a record of device data the callee makes (recordresults.py)
        if site is not None and (applied := self.object_effects(st, e)) is not None:
            return applied[0]
        saved, self.host_args = self.host_args, host_arguments(found[0], e) if found is not None else frozenset()
        saved_call, self.project_call = self.project_call, found is not None
        try:
            return self._dispatch(st, e, method, target, found)
        finally:
            self.host_args, self.project_call = saved, saved_call

    def object_effects(self, st: State, e: cst.Call) -> tuple[object] | None:
        """``group.pack_grads(buf)``, ``group`` an element of a container this object holds (or a loop name
        calling a method only one project class defines): the method's summary applied on the current stream
        (objeffects.py): the arguments it writes written, the others read, a fresh result allocated here.
        None (the generic reading) when the method writes nothing and allocates nothing."""
        found = object_method(self.project, self.cfile, self.cfn, e.func)
        fx = method_effects(self.project, found.module, found.method) if found is not None else None
        if fx is None or not (fx.writes - {"self"} or fx.fresh):
            return None
        method = found.method
        bound = bind_arguments(method.params[1:] + method.kwonly, e, kwonly=method.kwonly)
        written = {id(bound[p]) for p in fx.writes if p != "self" and bound.get(p) is not None}
        self.ev(st, e.func.value)
        saved, self.host_args = self.host_args, host_arguments(method, e)
        try:
            reads, writes = [], []
            for arg in e.args:
                v = self.ev(st, arg.value)
                if id(arg.value) in self.host_args or arg.keyword is not None and arg.keyword.value in NON_TENSOR_KWARGS:
                    continue
                (writes if id(arg.value) in written else reads).append(v)
        finally:
            self.host_args = saved
        if any(self.tensors(st, v) for v in reads + writes):
            self.op(st, e, reads, writes, result=False, read_writes=False)
        return (self.alloc(st, e) if fx.fresh else None,)

    def _dispatch(self, st: State, e: cst.Call, method: str | None, target: str | None, found) -> object:
        if found is not None and all(a.keyword is None and not a.star for a in e.args) \
                and metadata_only(found[0], len(e.args), found[1]):
            for arg in e.args:  # `self._num_bytes(t)`: a helper reading only what describes its tensors
                self.ev(st, arg.value)
            return None
        if found is not None and declared_host(self.project, found[1], found[0]):  # (not `-> List[Detections]`)
            # `self.connector.store_kv(...) -> int`: a project function declaring a host result reads its
            # tensor arguments and gives no tensor
            if isinstance(e.func, cst.Attribute):
                self.ev(st, e.func.value)
            _, reads, writes = self.call_args(st, e)
            if any(self.tensors(st, v) for v in reads + writes) or not host_bookkeeping(self.project, found[1],
                                                                                          found[0]):
                self.op(st, e, reads, writes, result=False)  # (host bookkeeping handed no tensor queues nothing)
            return None
        result = self.helper_call(st, e, method, target, found)  # (a guess without evidence: hosthelpers.py)
        if result is None and found is not None and (computes_tensor(self.project, found[1], found[0])
                                                     or device_copy_at(self.project, found[1], found[0], e)):
            result = self.op(st, e, [])  # a helper computing its result (computed.py) or copying to a device
        elif result is None and found is not None \
                and (kind := device_factory(found[1], found[0], e, self.cfile, self.cfn)) is not None:
            result = self.alloc(st, e) if kind == "empty" else self.op(st, e, [])  # a device factory's tensor
        return self.declared_result(st, found[0], result, found[1]) if found is not None else result

    def dispatch_call(self, st: State, e: cst.Call, method: str | None, target: str | None) -> object:
        own = self._self_prefix()
        if method is not None and (target is None or (own is not None and target.startswith(own))
                                   or target.split(".")[0] in ("self",) or (
                                       method in STREAM_ORDERING_METHODS and self.project.function(target, self.cfile)
                                       is None)):  # `Base.side_stream.wait_stream(...)`: a class attribute
            recv = self.ev(st, e.func.value)
            return self.method(st, e, recv, method)
        return self.generic(st, e, target)

    def _self_prefix(self) -> str | None:
        fn = self.cfn
        return f"{self.cfile.module_name}.{fn.class_name}." if fn.class_name else None
