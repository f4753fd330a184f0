"""Slot pools: a tensor field the class touches only through slots its callers choose (issue 16 §3, step state).

A staging pool for transfers (``self.pool = torch.empty(size, dtype=torch.uint8, ...)`` in construction) is carved
into slots an allocator hands out, and every method reads or writes it only at a slot its caller names::

    def put(self, slot, x):
        view = self.pool[slot.offset : slot.offset + x.nbytes]
        view.copy_(x.view(torch.uint8).flatten())

    def take(self, slot, shape, dtype, stream):
        with torch.cuda.stream(stream):
            return self.pool[slot.offset : slot.offset + n].view(dtype).reshape(shape).clone()

A write in ``put`` is evidence that *that slot* changes during the step, not that the slot another call reads
does (as a write to one block of a paged cache, ``self.kv[layer][block]``, is none for the other blocks:
:mod:`~streamlint.model.stepstate`). So such a field is no step state for the writes at a slot: a side stream
reading the slot its own caller named needs no fork for the other calls' writes (which slot holds what is the
allocator's protocol, not a stream order).

A field is a slot pool when, outside construction, every subscript of it is a slice whose lower bound reads a
parameter of the method (``self.pool[h.offset + k : ...]``: a caller-chosen slot, not a fixed prefix like
``self.buf[:n]``) and every other use reads only its metadata (``.device``, ``.dtype``, ``.data_ptr()``, ...).
A use of the whole field (handed to a call, a collective, ``self.pool.zero_()``, a view of all of it, a plain
index ``self.pool[i]``) keeps its writes step evidence (precision first)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.filefacts import ClassInfo
from streamlint.model.syntax import local_nodes
from streamlint.model.walk import children

_METADATA = frozenset({"device", "dtype", "shape", "data_ptr", "numel", "element_size", "size", "nbytes", "is_pinned",
                       "is_cuda", "dim", "ndim", "stride", "is_contiguous", "itemsize"})


def _params(fn) -> set[str]:
    return set(fn.all_params) - {"self", "cls"}


def _slot_slice(sub: cst.Subscript, params: set[str]) -> bool:
    """``pool[<lower> : ...]`` with one slice whose lower bound names a parameter (a caller-chosen slot)."""
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Slice):
        return False
    lower = sub.slice[0].slice.lower
    return lower is not None and any(isinstance(n, cst.Name) and n.value in params
                                     for n in [lower, *local_nodes(lower)])


def slot_pools(cls: ClassInfo, construction: set[str]) -> frozenset[str]:
    """The fields ``F`` (``self.F``) of ``cls`` that only its construction methods touch whole: every other method
    reaches them only at a caller-chosen slot or reads their metadata (module docstring)."""
    fields: dict[str, bool] = {}
    slotted: set[str] = set()
    for name, fn in cls.methods.items():
        if name in construction:
            continue
        params = _params(fn)
        stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(fn.node.body, None)]
        while stack:
            node, parent = stack.pop()
            if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
                field = node.attr.value
                if isinstance(parent, cst.Subscript) and parent.value is node:
                    ok = _slot_slice(parent, params)
                    slotted.add(field)
                elif isinstance(parent, cst.Attribute) and parent.value is node:
                    ok = parent.attr.value in _METADATA
                else:
                    ok = False
                fields[field] = fields.get(field, True) and ok  # (one use of the whole field: not a pool)
                continue
            stack.extend((child, node) for child in children(node))
    return frozenset(f for f, ok in fields.items() if ok and f in slotted)


__all__ = ["slot_pools"]
