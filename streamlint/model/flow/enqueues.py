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


def enqueue_only(interp, st, e: cst.Call, kept: list[cst.Name], site) -> bool:
    """Does every argument of ``e`` either go to a kept parameter (a name, a display of kept names) or hold no
    tensor (a name or attribute of another kind)? Then the call hands its tensors over and reads none. A display
    counts only when the helper does nothing but keep that parameter (:func:`~streamlint.model.flow.heldaliases.
    reads_kept_on_host`: no unpacking, no read of its elements) and each of its tensors written on another
    stream has an event recorded on that stream after the write (the consumer's join handle, as
    :mod:`~streamlint.model.flow.hostsync` asks of a completion signal)."""
    ids = {id(k) for k in kept}
    for arg in e.args:
        v = arg.value
        if _names_display(v) and all(id(el.value) in ids for el in v.elements):
            if not (_only_kept(interp, site, v) and _recorded_after(interp, st, v)):
                return False
            continue
        if id(v) in ids:
            continue
        if not isinstance(v, (cst.Name, cst.Attribute)) or interp.tensors(st, interp.ev(st, v)):
            return False
    return True


def _only_kept(interp, site, display: cst.BaseExpression) -> bool:
    """Is the parameter the display binds one the project callee only keeps (puts, appends, stores)?"""
    from streamlint.model.flow.heldaliases import held_method, held_receiver, reads_kept_on_host
    from streamlint.model.uses import bind_arguments

    project, file = interp.project, interp.cfile
    found = held_method(project, file, site) if held_receiver(file, site) else project.call_target(file, site)
    if found is None:
        return False
    fn, mod = found
    params = fn.params[1:] if fn.class_name and fn.params[:1] == ("self",) else fn.params
    bound = bind_arguments(params + fn.kwonly, site.node, kwonly=fn.kwonly)
    param = next((name for name, expr in bound.items() if expr is display), None)
    return param is not None and reads_kept_on_host(project, mod, fn, param)


def _recorded_after(interp, st, display: cst.BaseExpression) -> bool:
    """Has every tensor of the display last written on a stream other than the current one an event recorded on
    that stream after the write?"""
    for el in display.elements:
        for tv in interp.tensors(st, st.env.get(el.value.value)):
            S = st.stores.get(tv.sid)
            w = S.last_write if S is not None else None
            if w is not None and w.stream != st.cur \
                    and not any(snap.get(w.stream, -1) >= w.time for snap in st.events.values()):
                return False
    return True


def _names_display(e: cst.BaseExpression) -> bool:
    return isinstance(e, (cst.Tuple, cst.List)) and bool(e.elements) \
        and all(not isinstance(el, cst.StarredElement) and isinstance(el.value, cst.Name) for el in e.elements)


__all__ = ["enqueue_only", "kept_names"]
