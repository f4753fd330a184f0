"""Effects of a project method on its own object's state, applied at its call (mixin of
:class:`~streamlint.model.flow.interp.Interp`).

A method of this object (``self._save_grads()``) or of an object it holds (``self.permuter.permute(mb, x)``) that
has no stream work of its own is not run inline: before this, such a call touched nothing but its arguments, and a
sibling method filling ``self._grads[name]`` on the current stream while another hands the same tensors to a
collective under a side-stream scope of the caller was no producer / consumer pair at all. The method's summary
(:func:`~streamlint.model.flow.objeffects.method_effects`: the places of ``self`` it writes, reads and sets, from
its body and the methods of ``self`` it calls) is applied here on the caller's current stream, so the pair is
ordered (or not) at the caller's call sites exactly as if both bodies were written there:

* read and written places are accesses of the receiver's long-lived storages (``self._grads[:]``, an element a
  parameter of the method names resolved to the caller's argument: ``self.stage[j]``);
* a set container gets new tensors made on this stream by this call, kept as ``self._grads[:]`` (as are the
  tensors a call here or a helper run inline puts in its slots: :meth:`OwnState.field_slot_put`), which a later
  summary or subscript of the container reads back.

Methods with stream work of their own (a scope, a wait, a record, events held in fields) keep running inline."""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.file import FileModel, FunctionInfo
from streamlint.model.flow.effects import held_object
from streamlint.model.flow.objeffects import PARAM_INDEX, method_effects
from streamlint.model.flow.values import KVal, State, TVal, TupVal
from streamlint.model.uses import bind_arguments


class OwnState:
    """Own-state summaries at calls (mixin of :class:`~streamlint.model.flow.interp.Interp`).

    Interp state it uses: ``project``. It asks exprs (ev), orderings (render), storage (escape, op, tensors)."""

    def own_state_effects(self, st: State, e: cst.Call, fn: FunctionInfo, mod: FileModel) -> None:
        """``self._save_grads()`` / ``self.buckets.reduce()``: a project method of this object (or of an object it
        holds) with no stream work of its own, run on the current stream: the places of the receiver's state it
        writes and reads on the device (objeffects.py) are written and read here, so a sibling method reading
        them under a side stream is ordered (or not) after this call like inline code would be."""
        if not (isinstance(e.func, cst.Attribute) and fn.class_name is not None and fn.params[:1] == ("self",)):
            return
        recv = e.func.value
        if not (isinstance(recv, cst.Name) and recv.value == "self" or held_object(recv)):
            return
        fx = method_effects(self.project, mod, fn)
        if fx is None or not (fx.field_writes or fx.field_reads or fx.field_sets):
            return
        base = self.ev(st, recv)
        if not isinstance(base, KVal) or base.opaque or base.glob or not base.key.startswith("self"):
            return
        bound = bind_arguments(fn.params[1:] + fn.kwonly, e, kwonly=fn.kwonly)

        def element(m: re.Match) -> str:  # `self.kv_stage[j]` of the method's `j`: the element our argument names
            arg = bound.get(m.group(1))
            return f"[{self.render(st, arg)}]" if isinstance(arg, (cst.Name, cst.Integer, cst.Attribute)) else "[:]"

        def place(k: str) -> object:  # (an element of a container this call filled: the tensors it put there)
            head, bracket, rest = k.partition("[")
            held = st.env.get(f"{base.key}.{head}[:]") if bracket and "." not in head else None
            return held if held is not None and "." not in rest else KVal(f"{base.key}.{PARAM_INDEX.sub(element, k)}")

        reads = [place(k) for k in sorted(fx.field_reads - fx.field_writes)]
        writes = [place(k) for k in sorted(fx.field_writes)]
        if any(self.tensors(st, v) for v in reads + writes):
            self.op(st, e, reads, writes, result=False)
        for field in sorted(fx.field_sets):  # new tensors in its slots, made on this stream by this call
            made = self.op(st, e, [], result=True)
            if isinstance(made, TVal) and made.sid in st.stores:
                st.stores[made.sid].name = f"{base.key}.{field}"  # (named after the container in a finding)
            self.escape(st, made)
            st.env[f"{base.key}.{field}[:]"] = TupVal((made,))

    def field_slot_put(self, st: State, target: cst.Subscript, v: object) -> None:
        """``self.reloaded[key] = t`` in this call (or a helper run inline): the tensors the object's container
        now holds, kept as ``self.reloaded[:]`` for what a sibling method's summary reads of its elements
        (:meth:`own_state_effects`)."""
        if not isinstance(v, (TVal, TupVal)) or not self.tensors(st, v):
            return
        place = self.render(st, target.value)
        if not (place.startswith("self.") and place.count(".") == 1 and "[" not in place):
            return
        held = st.env.get(f"{place}[:]")
        items = held.items if isinstance(held, TupVal) else (held,) if held is not None else ()
        st.env[f"{place}[:]"] = TupVal((*items[-3:], v))  # (a few: a loop puts one per round)

    def filled_slot(self, st: State, base: KVal) -> object | None:
        """``self.reloaded[k]`` read after a call here (or a helper run inline) put tensors in the container's
        slots: those tensors (which slot a key names is not tracked); None when it filled none."""
        filled = st.env.get(f"{base.key}[:]") if base.key.startswith("self.") and not base.glob else None
        if not isinstance(filled, TupVal):
            return None
        return filled.items[0] if len(filled.items) == 1 else filled
