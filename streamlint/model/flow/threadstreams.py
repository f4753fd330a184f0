"""Worker threads that make a side stream their current one, then signal completion (issue 16, [thread-handoff]).

``torch.cuda.set_stream(s)`` makes ``s`` the calling thread's current stream until it is set back: a host thread
that does it at its top (a KV-cache write-back or load worker, an offload thread) queues every later kernel and
copy of its body on ``s``, its own stream, not on the stream its callers see. When such a function then tells
another thread that the work is done -- a message on a queue, a ``threading.Event`` set, a condition notified
(the API table's ``HOST_SIGNAL_METHODS``), or a call of a project function whose body sends such a signal (a
layer counter's ``increment()`` notifying its waiters) -- with no host synchronisation of that stream between
the work and the signal, the receiver acts on a promise the device has not kept: it reads the copies'
destinations, or reuses their sources, while ``s`` still runs (SL201 at the signal, medium: the receiver is
another thread the function does not show).

The work is what the interpreter sees queued on the thread's current stream after the ``set_stream``: kernels on
tracked tensors, and calls of project helpers whose bodies queue device work (the effect summaries of
:mod:`~streamlint.model.flow.devicework`, a method resolved by its distinctive name included). Not reported: work
the host synchronised (``s.synchronize()``, ``torch.cuda.current_stream().synchronize()``, a device-wide
``synchronize()``, a blocking transfer: ``st.host``), a signal that hands an event along (the receiver
synchronises it), a signal sent before any work or after a ``set_stream`` back to the caller's stream, a second
signal with no work queued since an earlier one reported (the layer counter bumped in the loop, then the whole
batch acknowledged after it: one finding per cause), code in an inlined helper (its caller's statement is the
signal), and code not run eagerly. The state is per function, not
per path: a worker sets its stream once, at its top.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.apis import Role
from streamlint.model.flow.devicework import callee_of, helper_site_work
from streamlint.model.flow.hostsync import bare_message, signal_call
from streamlint.model.flow.results import HostRead
from streamlint.model.streams import MAIN, derived

if TYPE_CHECKING:
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.file import FileModel
    from streamlint.model.flow.values import State
    from streamlint.model.project import Project


def _signal_site(site) -> bool:
    """``q.put(x)``, ``done.set()``, ``cond.notify_all()`` on a receiver that is not ``self`` itself."""
    func = site.node.func
    return signal_call(site.node) and not (isinstance(func.value, cst.Name) and func.value.value == "self")


def signals_host(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does ``fn``'s own body send a completion signal to another thread (a counter bumped under a condition it
    notifies, a flag set)? Only the body itself: a helper several calls down is not read as the signal."""
    memo = derived(project, "signals_host")
    if id(fn) not in memo:
        memo[id(fn)] = any(_signal_site(site) for site in fn.calls)
    return memo[id(fn)]


def thread_worker(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does ``fn`` make a stream its thread's current one (``set_stream``) and send a completion signal (directly
    or through a project function whose body sends one)? Such a function is analysed for the signal even with no
    other stream work of its own."""
    if not any(u.role is Role.SET_STREAM for site in fn.calls for u in project.api_uses(file, site)):
        return False
    for site in fn.calls:
        if _signal_site(site):
            return True
        found = callee_of(project, file, fn, site)
        if found is not None and found[0] is not fn and signals_host(project, found[1], found[0]):
            return True
    return False


class ThreadStreams:
    """The thread's current stream made a side stream by ``set_stream`` (mixin of the interpreter).

    Interp state it uses: ``anchor``, ``cfg``, ``cfile``, ``cfn``, ``clock``, ``depth``, ``host_reads``,
    ``handed_events``, ``project``; its own: ``thread_set`` ((stream, call, time) of the last ``set_stream`` to a
    side stream, or None) and ``thread_work`` ((time, statement) of work queued on the current stream since)."""

    def thread_stream_set(self, st: State, e: cst.Call, use) -> None:
        """``torch.cuda.set_stream(self.write_stream)`` in the function's own body."""
        if self.depth != 0 or self.anchor is None:  # type: ignore[attr-defined]
            return
        arg = use.arg("stream")
        if arg is None:
            return
        key = self.stream_key(st, self.ev(st, arg), arg)  # type: ignore[attr-defined]
        if key == MAIN or key.startswith("<"):
            self.__dict__["thread_set"] = None  # (set back to the caller's stream, or one not known)
            return
        self.__dict__["thread_set"] = (key, e, self.tick())  # type: ignore[attr-defined]
        self.__dict__["thread_work"] = []

    def note_thread_work(self, t: int, node: cst.CSTNode | None = None) -> None:
        """Work queued on the function's current stream at ``t`` by the statement running now: a helper's device
        work (``node`` None), or the op ``node`` when its call is evidently device work, itself or in a project
        helper's body (:func:`~streamlint.model.flow.devicework.helper_site_work`: not any method of a value only
        guessed to be a tensor, ``worker.start()``)."""
        if self.__dict__.get("thread_set") is None or self.anchor is None:  # type: ignore[attr-defined]
            return
        if node is not None:
            site = self.cfile.call_site(node) if isinstance(node, cst.Call) else None  # type: ignore[attr-defined]
            if site is None or helper_site_work(self.project, self.cfile, self.cfn, site) is None:  # type: ignore[attr-defined]
                return
        self.__dict__["thread_work"].append((t, self.anchor))  # type: ignore[attr-defined]

    def thread_signal(self, st: State, e: cst.Call, site) -> None:
        """A completion signal (direct, or a project call whose body sends one) after unsynchronised work on the
        stream the function made current."""
        found = self.__dict__.get("thread_set")
        if found is None or self.depth != 0 or self.anchor is None \
                or self.cfg.mode not in ("eager", "cuda"):  # type: ignore[attr-defined]
            return
        key, made, since = found
        last = st.work.get(MAIN, -1)  # (this path's last work on the current stream)
        work = [(t, n) for t, n in self.__dict__.get("thread_work", ()) if since < t <= last]
        if not work:
            return
        if max(st.host.get(MAIN, -1), st.host.get(key, -1)) >= last:
            return  # synchronised by the host after the work
        func = e.func
        if not isinstance(func, cst.Attribute) or not bare_message(st, e):
            return  # (a tensor's or an event's method; an event handed along: the receiver synchronises it)
        recv, name = func.value, func.attr.value
        if not signal_call(e):
            target = callee_of(self.project, self.cfile, self.cfn, site) if site is not None else None  # type: ignore[attr-defined]
            if target is None or not signals_host(self.project, target[1], target[0]):  # type: ignore[attr-defined]
                return
        if any(snap.get(MAIN, -1) >= last or snap.get(key, -1) >= last for k, snap in st.events.items()
               if k in self.handed_events):  # type: ignore[attr-defined]
            return  # an event recorded after the work, kept for its waiter
        reported = self.__dict__.setdefault("thread_signalled", set())
        if work[-1][0] in reported:
            return  # (the signal before this one already reports that work: one finding per cause)
        reported.add(work[-1][0])
        if id(self.anchor) in self.host_reads:  # type: ignore[attr-defined]
            return  # (reported at this signal already: an earlier round of its loop)
        node = work[-1][1]
        self.host_reads[id(self.anchor)] = HostRead(  # type: ignore[attr-defined]
            self.anchor, self.cfile.code(recv), key, node, f".{name}()", self.cfg.mode, "signal")  # type: ignore[attr-defined]


__all__ = ["ThreadStreams", "signals_host"]
