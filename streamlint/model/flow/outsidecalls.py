"""Calls the interpreter does not inline: a function outside the project (a torch.distributed collective, a
host verdict, a builtin, a factory, a view or op of ``torch``, a library's all-reduce wrapper: :meth:`generic`)
and a method called on a value (a stream / event method, a slot of a container, a tensor's copy, view, host read
or in-place op: :meth:`method`). A mixin of the interpreter (see interp.Interp), split from exprs.py."""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.flow.callablerefs import method_reference
from streamlint.model.flow.guessedresults import guessed_result
from streamlint.model.flow.nativewrites import native_written
from streamlint.model.flow.places import module_receiver
from streamlint.model.flow.rootranks import on_root_rank, root_expression
from streamlint.model.flow.values import KVal, State, TVal, TupVal
from streamlint.model.apis import COLLECTIVE_PARAMS, COLLECTIVES, HOST_VERDICTS, RECORD_FUNCTIONS
from streamlint.model.hostpools import TAKES as POOL_TAKES
from streamlint.model.placement import copy_destination, host_library
from streamlint.model.tensors import (BLOCKING_HOST_READS, META_METHODS, device_like, host_factory, host_placed,
                                      host_target, non_blocking, tensor_method, torch_returns_tensor)
from streamlint.model.tensorvocab import (COPY_METHODS, EMPTY_FACTORIES, HOST_VALUE_METHODS, LIKE_FACTORIES,
                                          MULTI_VIEW_METHODS, NON_TENSOR_BUILTINS, OVERWRITE_METHODS, REPACKS,
                                          STORAGE_REBIND_METHODS, VIEW_METHODS)


# An all-reduce wrapper outside the project (``tensor_model_parallel_all_reduce(x)``): the collective
# reduces its input in place and the wrapper returns it
_ALL_REDUCE = re.compile(r"(^|_)all_reduce$")

# In-place methods that set a flag of a tensor or a module, no kernel: they make nothing a tensor.
_FLAG_SETTERS = frozenset({"requires_grad_", "share_memory_", "retain_grad_"})


# Methods of mappings and lists reading one slot, which no tensor has: the result is that element
_MAPPING_READS = frozenset({"get", "pop", "setdefault"})
_QUEUE_TAKES = frozenset({"pop", "popleft", "get", "get_nowait"})  # an element of a seeded list / deque / queue


class OutsideCalls:
    """Non-project call evaluation (mixin of :class:`~streamlint.model.flow.interp.Interp`): ``generic``,
    ``method``. Dispatched from :meth:`Expressions.dispatch_call`."""

    def generic(self, st: State, e: cst.Call, target: str | None) -> object:
        last = target.rsplit(".", 1)[-1] if target else None
        if target in RECORD_FUNCTIONS and len(e.args) > max(RECORD_FUNCTIONS[target]):
            held, where = (e.args[i].value for i in RECORD_FUNCTIONS[target])  # `tensor.record_stream(stream)`
            self.note_record(st, self.tensors(st, self.ev(st, held)), self.stream_key(st, self.ev(st, where), where),
                             self.cfile.code(held))
            return None
        if target and (target.startswith("torch.distributed.") or target.startswith("torch_npu.distributed.")) \
                and last in COLLECTIVES:
            written, read = COLLECTIVES[last]
            keywords: dict[str, object] = {}
            positional, reads, outs = self.call_args(st, e, keywords)
            positional = self.bind_keywords(positional, keywords, COLLECTIVE_PARAMS.get(last, ()))
            ws = [positional[i] for i in written if i < len(positional) and positional[i] is not None]
            rs = [positional[i] for i in read if i < len(positional) and i not in written
                  and positional[i] is not None]
            root = root_expression(e, last)
            if root is not None and on_root_rank(self.cfile, self.cfn, e, root):
                rs, ws = rs + ws, []  # `broadcast(t, src=s)` on rank s (rootranks.py): only reads `t`
            self.op(st, e, rs, ws, result=False)
            return None
        if target in HOST_VERDICTS:  # a Python bool / an exception computed from device data: the host waits
            _, reads, writes = self.call_args(st, e)
            self.op(st, e, reads, writes, result=False)
            if any(not self.is_host(st, tv) for v in reads for tv in self.tensors(st, v)):
                self.blocking_copy(st, st.cur)
            return None
        if target in NON_TENSOR_BUILTINS or target in REPACKS or (target is None and isinstance(e.func, cst.Name)
                                                                  and e.func.value in NON_TENSOR_BUILTINS):
            values = [self.ev(st, arg.value) for arg in e.args]
            if (dotted(e.func) in ("tuple", "list") and len(values) == 1 or target in REPACKS) and values \
                    and isinstance(values[0], TVal) and not e.args[0].star:
                return self.new_tensor(st, values[0].sid, values[0].vid)  # the same tensors (views), repacked
            return None
        if host_factory(target, e):
            positional, _, _ = self.call_args(st, e)
            data = [tv for v in positional[:1] for tv in self.tensors(st, v)] if last in ("tensor", "as_tensor",
                                                                                        "asarray") else []
            if not data:
                return self.host_tensor(st)  # built from host data (a list, a numpy array, a size)
            if all(self.is_host(st, tv) for tv in data):
                return self.host_tensor(st)
            return self.op(st, e, data)
        if last in LIKE_FACTORIES or (last in EMPTY_FACTORIES and target and target.startswith("torch")):
            for arg in e.args:
                self.ev(st, arg.value)
            if host_placed(e):  # `torch.empty_like(x, device="cpu")`, `x.new_zeros(n, pin_memory=True)`: host memory
                return self.host_tensor(st)
            return self.alloc(st, e) if last in EMPTY_FACTORIES else self.op(st, e, [])
        name = target[len("torch."):] if target and target.startswith("torch.") else None
        if name in VIEW_METHODS or name in MULTI_VIEW_METHODS:  # torch.split(x, ...): views of x, like x.split
            if e.args and e.args[0].keyword is None and e.args[0].star == "":
                base = self.ev(st, e.args[0].value)
                for arg in e.args[1:]:
                    self.ev(st, arg.value)
                base = self.tensors(st, base)[0] if isinstance(base, KVal) and base.key.split("[", 1)[0] in st.long else base
                return self.new_tensor(st, base.sid, base.vid, multi="view" if name in MULTI_VIEW_METHODS else None) \
                    if isinstance(base, TVal) else None
        positional, reads, writes = self.call_args(st, e)
        if (held := self.sequence_op_reads(st, e, name)) is not None:
            reads = reads + [held]  # `torch.stack(outs)`: every element of the local list (listreads.py)
        if not writes and _ALL_REDUCE.search(last or "") and positional and self.tensors(st, positional[0]):
            self.op(st, e, reads, positional[:1], result=False)  # reduced in place (HCCL / NCCL): the
            return positional[0]  # wrapper of a serving framework hands that tensor back
        is_torch = torch_returns_tensor(target)
        if is_torch and last in ("tensor", "as_tensor") and not any(self.tensors(st, v) for v in reads):
            result = self.op(st, e, reads)  # host data copied to the device: a blocking transfer
            self.blocking_copy(st, st.cur)
            return result
        if writes:
            self.op(st, e, reads, writes, result=False)
            return writes[0] if len(writes) == 1 else None
        if any(self.tensors(st, v) for v in reads) and host_library(target):
            self.op(st, e, reads, result=False)  # `np.nonzero(mask)`: read on the host, a numpy array results
            return None
        if any(self.tensors(st, v) for v in reads) or is_torch:  # (a place of unknown type only: guessedresults.py)
            seen = is_torch or (target or "").split(".", 1)[0] in ("torch", "torch_npu")  # (`torch.save(buf, f)` reads it)
            return self.op(st, e, reads) if is_torch else guessed_result(
                self, st, reads, self.op(st, e, reads) if seen else self.unseen_call_op(st, e, reads), e)
        return None

    def _host_place(self, e: cst.BaseExpression) -> bool:
        """Is ``e`` (a copy's source or destination: ``self.ptrs``, ``host[:n]``) a local or ``self.*`` field every
        binding of which gives host memory (:meth:`~streamlint.model.flow.hostreads.HostReads.evidently_host`)? A
        copy without ``non_blocking=True`` between it and device memory returns only once the current stream ran it."""
        return self.evidently_host(copy_destination(e), None)  # type: ignore[attr-defined]

    def method(self, st: State, e: cst.Call, recv: object, name: str) -> object:
        args = [a for a in e.args if a.keyword is None]
        kind = self.kind_of(st, recv)
        # the stream / event a stream or event method names, also by keyword (`event.record(stream=s)`)
        arg0 = args[0].value if args else next((a.value for a in e.args if a.keyword is not None
                                                and a.keyword.value in ("stream", "event")), None)
        handled, result = self.sync_method(st, e, recv, name, kind, arg0)
        if handled:
            return result
        if isinstance(recv, KVal) and (recv.glob or self.family_receiver(st, recv)) and name in _MAPPING_READS and args:
            self.call_args(st, e)  # `_STREAMS.get(device.index)`: a slot of a container (no tensor has these methods)
            return KVal(f"{recv.key}[{self.render(st, args[0].value)}]", recv.glob, recv.opaque)
        if isinstance(recv, KVal) and self.family_receiver(st, recv) and name in _QUEUE_TAKES and not args:
            return KVal(f"{recv.key}[0]", recv.glob, recv.opaque)  # `self._batches.popleft()`: an element
        if isinstance(recv, KVal) and name in POOL_TAKES and self.host_pool(recv):
            self.call_args(st, e)
            return self.host_tensor(st)  # `self.free[shape].popleft()`: a buffer of a pool of host memory
        tensors = self.tensors(st, recv)
        if tensors and isinstance(recv, KVal) and (not tensor_method(name) or module_receiver(
                self.project, self.cfile, self.cfn, e.func.value)):  # `self._torch.matmul(...)`: a module's
            tensors = []  # `self.dist_index.get_group()`: an object, not a tensor
        if not tensors and name in OVERWRITE_METHODS and (recv is None or isinstance(recv, KVal) and recv.opaque) \
                and isinstance(e.func.value, (cst.Name, cst.Subscript)):
            # `static_buf.copy_(x)` on a loop variable / element of an untyped collection: only a tensor has it
            tensors = [self.long_tensor(st, self.render(st, e.func.value))]
        if not tensors and host_target(e, name):
            self.call_args(st, e)
            if name != "pin_memory" and non_blocking(e) and not isinstance(recv, KVal):
                self.op(st, e, [], result=False)  # an asynchronous D2H copy of an unknown tensor: work queued here
                return self.unplaced_host_copy(st, self.host_tensor(st))
            if name != "pin_memory" and not non_blocking(e):
                self.maybe_synced(st, e.func.value, recv)  # `counts.sum().cpu()`: if device data, the host waited
            return self.host_tensor(st)  # `batch.cpu()`, `buf.pin_memory()`: host memory whatever the receiver
        if not tensors and isinstance(recv, KVal) and recv.opaque and name in COPY_METHODS:
            _, reads, _ = self.call_args(st, e)
            return self.op(st, e, reads)  # e.g. host_batches[i].to(device): a new tensor on this stream
        if not tensors and recv is None and name in ("to", "cuda", "npu") and non_blocking(e) \
                and isinstance(e.func.value, cst.Name) and e.func.value.value in st.env:
            _, reads, _ = self.call_args(st, e)  # `cpu_t.to(device, non_blocking=True)`, `cpu_t` unpacked from a
            return self.op(st, e, reads)  # record of unknown type: only a tensor copies asynchronously (a new one)
        if not tensors and name in VIEW_METHODS | MULTI_VIEW_METHODS:
            self.call_args(st, e)  # a view of a value of unknown storage allocates nothing: no storage of this call
            return None
        if not tensors and name in ("item", "tolist") and not e.args:
            self.maybe_synced(st, e.func.value, recv)  # `count.item()`: a wait for this stream if `count` is device data (hostreads.py)
        if not tensors:
            _, reads, writes = self.call_args(st, e)
            if (recv is None or isinstance(recv, KVal) and recv.opaque) and not writes \
                    and name.endswith("_") and not name.startswith("_") and name not in _FLAG_SETTERS:
                # `p.data.copy_(src)` on an unknown value: in-place tensor work queued here; on a place reached
                # from a parameter (`bucket.data.div_(n)`) it makes that place a tensor (Storages.place)
                writes = reads[:1] if module_receiver(self.project, self.cfile, self.cfn, e.func.value) else [recv]
            if not writes and (native := native_written(self, st, e, name)) is not None:
                reads, writes = reads + native[0], native[1]  # `comm.allreduce_inplace(t.to_native())` (nativewrites.py)
            if writes:
                self.op(st, e, reads, writes, result=False)
                return None
            refs = {dotted(a.value) for a in e.args if method_reference(self.project, self.cfile, self.cfn, a.value)}
            reads = [v for v in reads if not (isinstance(v, KVal) and v.key in refs)]  # callbacks (callablerefs.py)
            if any(self.tensors(st, v) for v in reads):  # (a method of a value of unknown type: a guess too)
                return guessed_result(self, st, reads, self.unseen_call_op(st, e, reads), e)
            return None
        tv = tensors[0]
        if name == "record_stream" and arg0 is not None:
            stream = self.stream_key(st, self.ev(st, arg0), arg0)  # (a container records every field)
            self.note_record(st, tensors if isinstance(recv, TupVal) else [tv], stream, self.cfile.code(e.func.value))
            return None
        if name in STORAGE_REBIND_METHODS:
            return self.rebind_storage(st, e, tv)
        if host_target(e, name):
            _, reads, _ = self.call_args(st, e)
            if not self.is_host(st, tv):  # a D2H copy read on this stream
                self.op(st, e, [tv] + reads, result=False)
                if name != "pin_memory" and not non_blocking(e):
                    self.blocking_copy(st, st.cur)
                elif name != "pin_memory":  # (PyTorch pins the result of an asynchronous copy to the host)
                    return self.async_host_copy(st, self.host_tensor(st), [tv], pinned=True, source=e.func.value)
            return self.host_tensor(st)
        if name in ("cuda", "npu") or (name == "to" and arg0 is not None and device_like(arg0)):
            _, reads, _ = self.call_args(st, e)
            self.h2d = True
            try:
                result = self.op(st, e, [tv] + reads)
            finally:
                self.h2d = False
            if (self.is_host(st, tv) or self._host_place(e.func.value)) and not non_blocking(e):
                self.blocking_copy(st, st.cur)  # an H2D copy the host waits for
            return result
        if name in HOST_VALUE_METHODS:
            host = self.is_host(st, tv) or (tv.sid in st.stores and st.stores[tv.sid].d2h is not None) or self._host_memory(st, tv)
            if host and name != "numpy":  # (a numpy view of the same memory: no read yet)
                self.host_read(st, e.func.value, f".{name}()")
            self.op(st, e, [tv], result=False)
            if name in BLOCKING_HOST_READS and not host:
                self.blocking_copy(st, st.cur)
            return self.new_tensor(st, tv.sid, tv.vid) if name == "numpy" and self.is_host(st, tv) else None
        if name in META_METHODS:
            for arg in e.args:
                self.ev(st, arg.value)
            return None
        if name in VIEW_METHODS:
            for arg in e.args:
                self.ev(st, arg.value)
            view = self.new_tensor(st, tv.sid, tv.vid)
            view.part = tv.part  # a view of one element stays in it (`kv[k & 1].transpose(0, 1)`: indexsyms.py)
            return view
        if name in MULTI_VIEW_METHODS:
            for arg in e.args:
                self.ev(st, arg.value)
            return self.new_tensor(st, tv.sid, tv.vid, multi="view")
        if name in LIKE_FACTORIES:
            for arg in e.args:
                self.ev(st, arg.value)
            return self.host_tensor(st) if host_placed(e) else \
                self.alloc(st, e) if name in EMPTY_FACTORIES else self.op(st, e, [])
        if name.endswith("_") and not name.startswith("_"):
            _, reads, writes = self.call_args(st, e)
            overwrite = name in OVERWRITE_METHODS
            self.op(st, e, reads, [tv] + writes, result=False, read_writes=not overwrite)
            if name == "copy_" and not non_blocking(e) and (
                    any(self.is_host(st, x) for v in [tv] + reads for x in self.tensors(st, v))
                    or any(self._host_place(a.value) for a in e.args[:1] if a.keyword is None)
                    and not self._host_place(e.func.value)):
                self.blocking_copy(st, st.cur)  # a copy between host and device memory the host waits for (a
                # source field every binding of which is host memory too: `self.ptrs = torch.empty(n, device="cpu")`)
            elif name == "copy_" and (self.is_host(st, tv) or non_blocking(e) and self.pinned_place(e.func.value)) \
                    and any(not self.is_host(st, x) for v in reads for x in self.tensors(st, v)):
                self.async_host_copy(st, tv, reads, pinned=self.pinned_place(e.func.value, pinned=True),
                                     source=next((a.value for a in e.args if a.keyword is None), None))
                # `pinned.copy_(dev, non_blocking=True)`: pending until a host sync
            return tv
        _, reads, writes = self.call_args(st, e)
        if writes:
            self.op(st, e, [tv] + reads, writes, result=False)
            return writes[0]
        return self.op(st, e, [tv] + reads)
