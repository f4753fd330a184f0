"""The slots of plain Python lists, element by element (mixin of :class:`~streamlint.model.flow.interp.Interp`).

Multi-stream code often keeps one tensor per micro-batch / chunk / layer in a list and reads it back by
index in the same function: ``outs.append(y)`` (or ``outs[i] = y``) on one stream, ``torch.bincount(outs[i])``
inside a side-stream scope a few lines later; or it takes the caller's tensors out of a list argument
(``hidden_states: List[torch.Tensor]``, ``kv: Tuple[torch.Tensor, torch.Tensor]``) by index. A list is not a
tensor, so without this the element read is an opaque value and the producer / consumer pair goes unseen.

A *slot* is the source text of the container name and of its index (``outs[i]``); what was last put there is
what a read of the same text gives:

* ``outs[k] = y`` puts ``y`` in that slot; ``outs.append(y)`` puts ``y`` at the end, which a read by a
  ``for`` loop's variable (``outs[i]``) gives back when it was appended after the loop last bound it (the
  usual ``for i ...: outs.append(f(i)); ... outs[i]``) -- a value of an earlier iteration, a read by a
  literal index or by a counter of its own (``outs[k]``, ``k += 1``) gives nothing (which element such an
  index names is not known);
* a slot whose index names a variable rebound since (the next iteration of ``for i``) is another slot:
  its old value is not read back under the new index -- unless another ``for`` loop bound the variable
  since the value was put (``for i ...: outs[i] = f(i)`` then ``for i ...: g(outs[i])``, the two-loop
  micro-batch pipeline): there ``outs[i]`` is the same element, read back as the last value put;
* a slot one loop filled for every index (``for d ...: w[d] = ...``) and a later loop rewrites element by element
  (``for d ...: w[d] = (w[d], scale)``) holds both: in the later loop's next iteration the slot text names another
  element, one the later loop has not written yet, so a read gives the earlier loop's value (one older generation
  is kept); tuples stored so are unpacked item by item (``w, scale = w[d]`` in a third loop);
* an element of a parameter annotated as a sequence of tensors (``List[torch.Tensor]``, ``Tuple[Tensor,
  Tensor]``) never written here is the caller's tensor, produced on its current stream before the call
  (an argument storage, like a tensor parameter: reported with medium confidence), one storage per
  slot, so two elements never alias;
* rebinding the container name forgets its slots.

Only local names and parameters of the function at hand are containers here (not ``self.*`` fields, nor
names of an inlined helper's caller); anything else keeps the former opaque reading."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.elementaliases import guarded_put
from streamlint.model.flow.values import Access, State, TVal
from streamlint.model.streams import MAIN
from streamlint.model.tensoruse import element_tensor_annotation


def _index(e: cst.Subscript) -> cst.BaseExpression | None:
    if len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) and e.slice[0].slice.star is None:
        return e.slice[0].slice.value
    return None


def _index_names(index: cst.BaseExpression) -> tuple[str, ...]:
    out: list[str] = []
    stack: list[cst.CSTNode] = [index]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            out.append(n.value)
        elif isinstance(n, cst.Attribute):
            stack.append(n.value)
        else:
            stack.extend(n.children)
    return tuple(out)


class Slots:
    """Interp state it uses: ``cfg``, ``cfile``, ``fn``, ``frames``, ``slot_clock``. It asks storage
    (new_storage, new_tensor)."""

    def stamp(self) -> int:
        self.slot_clock += 1
        return self.slot_clock

    def _container(self, st: State, e: cst.BaseExpression) -> str | None:
        """The local container name ``e`` is (a plain name of the function at hand), else None."""
        if len(self.frames) != 1 or not isinstance(e, cst.Name):
            return None
        name = e.value
        if name in self.fn.all_params or name in st.env or name in st.slot_names:
            return name
        return None

    def _binders(self, st: State, index: cst.BaseExpression) -> tuple:
        return tuple(st.bound_at.get(n, (-1, None))[1] for n in _index_names(index))

    def _fresh(self, st: State, put: tuple, index: cst.BaseExpression) -> bool:
        """Does the index name the slot ``put`` (value, stamp, binders) was stored in: every variable of the
        index bound before the store, or bound since by another ``for`` loop than the one it was bound by?"""
        names = _index_names(index)
        return all(st.bound_at.get(n, (-1, None))[0] < put[1] or (
            st.bound_at[n][1] is not None and st.bound_at[n][1] != before)
            for n, before in zip(names, put[2]))

    def slot_put(self, st: State, target: cst.Subscript, v: object) -> None:
        """``xs[k] = v``."""
        name, index = self._container(st, target.value), _index(target)
        if name is None or index is None:
            return
        key = f"{name}[{self.cfile.code(index)}]"
        older = st.slots.get(key)
        if older is not None and older[2] != self._binders(st, index):
            older = older[:3]  # (only one older generation: what an earlier loop put in every slot)
        else:
            older = older[3] if older is not None and len(older) > 3 else None
        st.slots[key] = (v, self.stamp(), self._binders(st, index)) + ((older,) if older is not None else ())
        st.slot_names = st.slot_names | {name}
        guarded_put(self, key, index, target, v)  # (`if g == primary: cents[g] = centroids`: elementaliases.py)
        S = st.stores.get(v.sid) if isinstance(v, TVal) else None
        if S is not None and S.name is None:
            S.name = key  # (named after its slot in a finding)

    def slot_append(self, st: State, recv: cst.BaseExpression, v: object) -> None:
        """``xs.append(v)``."""
        name = self._container(st, recv)
        if name is None:
            return
        st.appended[name] = (v, self.stamp(), None)
        st.slot_names = st.slot_names | {name}

    def slot_get(self, st: State, e: cst.Subscript) -> object | None:
        """What ``xs[k]`` holds, when the function put it there or it is an element of a tensor-sequence
        argument; None when unknown."""
        name, index = self._container(st, e.value), _index(e)
        if name is None or index is None:
            return None
        key = f"{name}[{self.cfile.code(index)}]"
        put = st.slots.get(key)
        if put is not None and self._fresh(st, put, index):
            return put[0]
        if put is not None and len(put) > 3 and self._fresh(st, put[3], index):
            return put[3][0]  # an earlier loop's element, not the one this loop put in a former iteration
        last = st.appended.get(name)
        names = _index_names(index)
        if last is not None and names and all(  # `for i ...: xs.append(y); ... xs[i]`: the loop's variable
                n in st.bound_at and st.bound_at[n][1] is not None and st.bound_at[n][0] < last[1] for n in names):
            return last[0]
        if not self._tensor_sequence_param(name) or self.cfg.args_exempt:
            return None
        S = self.new_storage(st, "arg", MAIN, key, Access(MAIN, 0, None, {}))
        tv = self.new_tensor(st, S.sid)
        st.slots[key] = (tv, self.stamp(), self._binders(st, index))
        return tv

    def _tensor_sequence_param(self, name: str) -> bool:
        if name not in self.fn.all_params:
            return False
        for p in (*self.fn.node.params.posonly_params, *self.fn.node.params.params,
                  *self.fn.node.params.kwonly_params):
            if p.name.value == name:
                return p.annotation is not None and element_tensor_annotation(p.annotation.annotation)
        return False

    def slot_rebound(self, st: State, name: str, node: cst.CSTNode | None) -> None:
        """``name`` is bound again: a new container (its slots go), a new index value (later reads by it
        are of other slots)."""
        st.bound_at[name] = (self.stamp(), id(node) if isinstance(node, cst.For) else None)
        if name in st.slot_names:
            st.slot_names = st.slot_names - {name}
            st.appended.pop(name, None)
            prefix = name + "["
            for key in [k for k in st.slots if k.startswith(prefix)]:
                del st.slots[key]


__all__ = ["Slots"]
