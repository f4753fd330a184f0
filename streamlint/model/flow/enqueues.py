"""Calls that only hand tensors over (issue 16, [cross-thread-event-handoff]): a project setter / enqueue
keeping its arguments (``queue.put(item)``, ``accumulator.append(item)``: :func:`~streamlint.model.flow.calls.
stored_params`) reads none of them on the current stream. A tuple display of names given to a kept parameter
(``emit((layer, slot, gpu_block), queue, acc)``) is kept as a whole: each tensor in it is handed over, not read --
the receiver (another thread's consumer, which waits the event recorded after the copy) owns its ordering."""

from __future__ import annotations

from streamlint._lazy import cst


def kept_names(kept: list[cst.BaseExpression]) -> list[cst.Name]:
    """The names a callee keeps: a kept argument that is a name, or every element of a kept tuple / list display
    of names."""
    out: list[cst.Name] = []
    for expr in kept:
        if isinstance(expr, cst.Name):
            out.append(expr)
        elif _names_display(expr):
            out.extend(el.value for el in expr.elements)
    return out


def enqueue_only(interp, st, e: cst.Call, kept: list[cst.Name]) -> bool:
    """Does every argument of ``e`` either go to a kept parameter (a name, a display of kept names) or hold no
    tensor (a name or attribute of another kind)? Then the call hands its tensors over and reads none."""
    ids = {id(k) for k in kept}
    for arg in e.args:
        v = arg.value
        if _names_display(v) and all(id(el.value) in ids for el in v.elements) or id(v) in ids:
            continue
        if not isinstance(v, (cst.Name, cst.Attribute)) or interp.tensors(st, interp.ev(st, v)):
            return False
    return True


def _names_display(e: cst.BaseExpression) -> bool:
    return isinstance(e, (cst.Tuple, cst.List)) and bool(e.elements) \
        and all(not isinstance(el, cst.StarredElement) and isinstance(el.value, cst.Name) for el in e.elements)


__all__ = ["enqueue_only", "kept_names"]
