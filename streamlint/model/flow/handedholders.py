"""An event handed on with the object that holds it (issue 16, [event-sync-elsewhere]).

A codec runtime records ``buffer.copy_done`` after the D2H copy of a chunk into ``buffer``, then wraps the buffer
in a job (``job = CodecJob(buffer=buffer, ...)``): the cold path synchronises the event at once, the warm path
queues the job (``self._pending.append(job)``) and a later step synchronises ``job.buffer.copy_done`` before it
reads the host copy. Naming the event is a use of its last record (``State.used_events``); so is handing its
holder on: a local ``H`` whose field event ``H.F`` this path recorded, given as an argument to a project class or
function, or put in a container (``append`` / ``put`` / ``add`` ...), travels with its events, which its receiver
waits. The dropped-event check (:meth:`~streamlint.model.flow.hostsync.HostSyncs.dropped_joins`) then sees the
event handed on, not dropped -- provided another function of the project does consume an event of that field
(``job.buffer.copy_done.synchronize()``: :func:`~streamlint.model.flow.escapes.field_stream_waited`); a holder
handed to a helper that only reads its size, or kept in a history nobody waits from, still drops the event. A
holder only read or tested (``len(buffer)``, a library call) hands nothing on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst

if TYPE_CHECKING:
    from streamlint.model.flow.values import State

_CONSUMING = ("wait_event", "wait", "synchronize", "query")
_KEEPING = frozenset({"append", "appendleft", "extend", "insert", "add", "put", "put_nowait"})


class HandedHolders:
    """Mixin of :class:`~streamlint.model.flow.interp.Interp`. Interp state it uses: ``depth``, ``cfile``,
    ``fn``, ``project``."""

    def call(self, st: State, e: cst.Call) -> object:
        out = super().call(st, e)  # type: ignore[misc]
        if not self.depth and st.events and _hands_on(self, e):  # type: ignore[attr-defined]
            for arg in e.args:
                if isinstance(arg.value, cst.Name) and arg.value.value not in self.fn.all_params:  # type: ignore[attr-defined]
                    prefix = f"{arg.value.value}."
                    st.used_events.update(k for k in st.events if k.startswith(prefix) and _waited_elsewhere(
                        self.project, k[len(prefix):], self.fn))  # type: ignore[attr-defined]
        return out


def _waited_elsewhere(project, field: str, fn) -> bool:
    """Does another function of the project wait on, synchronise or query an event taken out of field
    ``field`` (``job.buffer.copy_done.synchronize()``, a name bound from it): the receiver's side of the hand-on
    (:func:`~streamlint.model.flow.escapes.field_stream_waited`)? A dotted field (``buffer.meta.done``) is
    judged by its last name."""
    from streamlint.model.flow.escapes import field_stream_waited

    attr = field.split("[", 1)[0].rsplit(".", 1)[-1]
    return attr.isidentifier() and field_stream_waited(project, attr, fn, _CONSUMING)


def _hands_on(interp, e: cst.Call) -> bool:
    """Is ``e`` a call that keeps what it is given: a project class or function, or a container's keeping
    method?"""
    if isinstance(e.func, cst.Attribute) and e.func.attr.value in _KEEPING:
        return True
    site = interp.cfile.call_site(e)
    return site is not None and site.target is not None and interp.project.symbol(site.target, interp.cfile) is not None


__all__ = ["HandedHolders"]
