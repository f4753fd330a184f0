"""Effects of a project method on its own object's state, applied at its call (mixin of
:class:`~streamlint.model.flow.interp.Interp`).

A method of this object (``self._save_grads()``) or of an object it holds (``self.permuter.permute(mb, x)``) that
has no stream work of its own is not run inline: before this, such a call touched nothing but its arguments, and a
sibling method filling ``self._grads[name]`` on the current stream while another hands the same tensors to a
collective under a side-stream scope of the caller was no producer / consumer pair at all. The method's summary
(:func:`~streamlint.model.flow.objeffects.method_effects`: the places of ``self`` it writes, reads and sets, from
its body and the methods of ``self`` it calls) is applied here on the caller's current stream, so the pair is
ordered (or not) at the caller's call sites exactly as if both bodies were written there:

Slots are keyed by their index as the caller renders it (objeffects' ``_index``): ``self._unshard(i + 1)`` of a
method filling ``self.full[j]`` fills ``self.full[i + 1]``, a slot other than the ``self.full[i]`` the caller reads
next; only an index the caller cannot name (a loop variable or a local of the method, a slice) is *any* slot,
``self._grads[?]``.

* read and written places are accesses of the receiver's long-lived storages, the slot's key its part (two
  keyed slots are different places; an any-slot access conflicts with the whole container or another any-slot
  access, never with a keyed slot: which slot it is is not known, precision first);
* a set slot gets a new tensor made on this stream by this call, kept under its key (as are the tensors a call
  here or a helper run inline puts in a slot: :meth:`OwnState.field_slot_put`), which a later summary or
  subscript naming the same key reads back (never another key's tensor).

Methods with stream work of their own (a scope, a wait, a record, events held in fields) keep running inline."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import FileModel, FunctionInfo, dotted
from streamlint.model.flow.effects import held_object
from streamlint.model.flow.objeffects import ANY, EVERY, SLOT_KEY, method_effects, rekey, slot_walkers
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

        def index(name: str) -> str | None:  # `self.full[j + 1]` of the method's `j`: the slot our argument names
            arg = bound.get(name)
            ok = isinstance(arg, (cst.Name, cst.Integer, cst.SimpleString, cst.Attribute, cst.BinaryOperation))
            return self.render(st, arg) if ok else None

        for k in sorted(fx.field_sets):  # new tensors in its slots, made on this stream by this call
            made = self.op(st, e, [], result=True)
            if isinstance(made, TVal) and made.sid in st.stores:
                st.stores[made.sid].name = f"{base.key}.{k.split('[', 1)[0]}"  # (named after the container)
            self.escape(st, made)
            st.env[f"{base.key}.{rekey(k, index)}"] = made

        def place(k: str) -> list[TVal]:  # (a slot this call or an earlier one filled: the tensor put there)
            key = f"{base.key}.{rekey(k, index)}"
            held = self.filled_slot(st, key)
            if held is not None:
                return self.tensors(st, held)
            out = self.tensors(st, KVal(key))
            slot = SLOT_KEY.search(key)
            for tv in out:  # a slot keyed by what the element regex leaves whole (`i + 1`, any index `?`)
                if tv.part is None and slot is not None and "$" not in slot.group(1) and slot.group(1) != EVERY:
                    tv.part = slot.group(1) if slot.group(1) == ANY else f"[{slot.group(1)}]"
            return out

        reads = [tv for k in sorted(fx.field_reads - fx.field_writes) for tv in place(k)]
        writes = [tv for k in sorted(fx.field_writes) for tv in place(k)]
        if reads or writes:
            self.op(st, e, reads, writes, result=False)

    def field_slot_put(self, st: State, target: cst.Subscript, v: object) -> None:
        """``self.reloaded[key] = t`` in this call (or a helper run inline): the tensor the object's container
        now holds in the slot the rendered key names (any slot ``[?]`` for a slice or several indices), for a
        later subscript naming the same slot or a sibling method's summary reading it (:meth:`own_state_effects`)."""
        if not isinstance(v, (TVal, TupVal)) or not self.tensors(st, v):
            return
        place = self.render(st, target.value)
        if not (place.startswith("self.") and place.count(".") == 1 and "[" not in place):
            return
        single = len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index)
        st.env[f"{place}[{self.render(st, target.slice[0].slice.value) if single else ANY}]"] = v

    def filled_slot(self, st: State, key: str) -> object | None:
        """The tensor a call here (or a helper run inline) put in the slot ``key`` names (``self.full[i + 1]``,
        ``self._grads[?]``: the same rendered key, never another slot's); for every slot of the container
        (``self.stash[*]``, a loop over its keys) the tensors put in any of its slots; None when it filled none."""
        if not key.startswith("self.") or "[" not in key:
            return None
        if f"[{EVERY}]" not in key:
            held = st.env.get(key)
            return held if isinstance(held, (TVal, TupVal)) else None
        head, _, rest = key.partition(f"[{EVERY}]")
        if rest:
            return None  # (a field of every element: not kept per slot)
        found = [v for k, v in st.env.items() if k.startswith(head + "[") and k.endswith("]")
                 and "[" not in k[len(head) + 1:] and isinstance(v, (TVal, TupVal))]
        return None if not found else found[0] if len(found) == 1 else TupVal(tuple(found[-4:]))

    def walked_slot(self, e: cst.Subscript, key: str) -> str:
        """``self.stash[key]`` inside ``for key in self.stash:`` of the function at hand: every slot
        (``self.stash[*]``); else ``key`` as rendered."""
        index = e.slice[0].slice.value if len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) else None
        if not (isinstance(index, cst.Name) and key.startswith("self.")):
            return key
        container = dotted(e.value)
        if container is None or container not in slot_walkers(self.cfn.node).get(index.value, ()):
            return key
        return f"{key.rpartition('[')[0]}[{EVERY}]"
