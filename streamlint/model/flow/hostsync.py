"""The host as one more stream: completion signals and dropped join handles while side-stream work is in flight.

The host is ordered after device work only by a host synchronisation (``stream.synchronize()``, an event's
``synchronize()``, a device-wide ``synchronize()``, a blocking transfer: ``st.host``, see :mod:`orderings`).
A function that queues work on a side stream of its own (a ``with stream(side):`` scope) and then tells
another thread or process that the work is done — a message on a queue / pipe / socket, a future's result,
a ``threading.Event`` set (the API table's ``HOST_SIGNAL_METHODS``) — hands over a promise the device has
not kept: the receiver goes on to read the copies' destinations, or to free / reuse the source blocks, while
the side stream still runs (SL201 at the signal, the scope as the related location).

Not reported: work the host synchronised (``st.host``) or the current stream already waits for (a later
blocking transfer on it covers it too), an event recorded after the work and handed along with the signal
(the receiver synchronises it: ``Expressions.handoff``; also an event of unknown origin, taken from a pool with
the buffer, recorded here and sent back with it), a stream some other function of the project
waits for or synchronises (the receiver joins it itself: ``leaves.stream_joined_elsewhere``; a stream taken from a
list of them, ``self.streams[i]``, when a function joins every element of that list, ``for s in self.streams:
s.synchronize()``: a fork of the list's streams does not count there) — a stream only
*forked* elsewhere (``S.wait_stream(cur)``: S made to wait, nothing ordered after it) counts only while no
receiver of the signal is known to ignore it: when every function that waits on the signal's channel
(``flag.wait()``, ``q.get()``) reads on without running on that stream or joining it, the fork protects
nothing the receiver does (``receivers_continue``; a worker thread that goes on on the same stream is
stream-ordered after the work and stays silent), scopes of
inlined helpers (reported in their own function), the current stream's own work (the receiver's stream
order is unknown), and code that is not run eagerly (a captured or compiled region sends nothing at trace
time).

An event recorded after side-stream work is that work's join handle: whoever goes on after the function
synchronises it, waits on it, or receives it (an event kept in a field of ``self`` or of an object handed in
stays with that object for a later method or the caller to wait). When other paths of the function do so (the event is waited,
synchronised or handed on somewhere in it) and one path reaches the function's end without naming the event
again after its record, with nothing else joining the stream on that path, the work that path queued is never
joined: whatever it reports to its caller (a block marked done, a high-water mark raised) is reported before
the device finished (SL201 at the record, medium: the consumer is presumed).
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.apis import HOST_SIGNAL_BARE_METHODS, HOST_SIGNAL_METHODS, HOST_SIGNAL_RECEIVE_METHODS
from streamlint.model.flow.hostreads import data_names
from streamlint.model.flow.leaves import JOIN_METHODS, container_name, field_owner, names_stream, stream_joined_elsewhere, \
    stream_name
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.flow.results import HostRead
from streamlint.model.flow.values import EVal, State, TVal, TupVal
from streamlint.model.streams import MAIN, derived


def signal_call(call: cst.Call) -> bool:
    """``q.put(x)``, ``done.set()``, ``cond.notify_all()``: a method the API table names a host completion signal
    (``HOST_SIGNAL_METHODS``; ``set`` only with no argument, ``HOST_SIGNAL_BARE_METHODS``)."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    name = func.attr.value
    return name in HOST_SIGNAL_METHODS or name in HOST_SIGNAL_BARE_METHODS and not call.args


def bare_message(st: State, call: cst.Call) -> bool:
    """Is the signal ``call`` a promise with nothing to check it by: its receiver no tensor (``Tensor.put``) nor
    event, and no event handed along with the message (the receiver would synchronise that)?"""
    recv = call.func.value if isinstance(call.func, cst.Attribute) else None
    if isinstance(recv, cst.Name) and isinstance(st.env.get(recv.value), (TVal, EVal)):
        return False
    return not any(isinstance(st.env.get(n.value), EVal) for arg in call.args for n in data_names(arg.value))


class HostSyncs:
    """Completion signals of the host (mixin of the interpreter).

    Interp state it uses: ``anchor``, ``cfg``, ``depth``, ``handed_events``, ``host_reads``, ``project``."""

    def host_signal(self, st: State, e: cst.Call) -> None:
        """``queue.put(req_id)``, ``done.set()``: the host signals completion; side-stream work this function
        queued and nobody has joined is still running."""
        if self.cfg.mode not in ("eager", "cuda") or self.depth != 0 or self.anchor is None:
            return
        if not signal_call(e) or not bare_message(st, e):
            return
        recv, method = e.func.value, e.func.attr.value
        know = st.know(MAIN)
        named = {n.value for arg in e.args for n in data_names(arg.value)}
        for run in st.runs:
            if not run.top or run.stream == MAIN or run.last is None or run.stream in st.stack \
                    or know.get(run.stream, -1) >= run.last:
                continue
            if any(st.events.get(k, {}).get(run.stream, -1) >= run.last for k in named):
                continue  # an event of unknown origin (taken from a pool) recorded after the work, sent along
            if any(snap.get(run.stream, -1) >= run.last for key, snap in st.events.items()
                   if key in self.handed_events):
                continue  # an event recorded after the work, stored for its waiter
            sname = stream_name(run.stream)
            of = field_owner(self.file, self.fn, run.stream)
            if sname is not None and stream_joined_elsewhere(self.project, sname, field_of=of) and not (
                    not stream_joined_elsewhere(self.project, sname, forks=False, field_of=of)
                    and receivers_continue(self.project, signal_name(recv), sname) is False):
                continue  # the receiver (or another method) synchronises that stream itself
            box = container_name(run.stream) if sname is None else None  # `self.streams[i]`: an element of a list
            if box is not None and stream_joined_elsewhere(self.project, box, forks=False):
                continue  # a join of that list's elements (`for s in self.streams: s.synchronize()`), not a fork
            if id(self.anchor) not in self.host_reads:
                self.host_reads[id(self.anchor)] = HostRead(self.anchor, self.cfile.code(recv), run.stream,
                                                            run.node, f".{method}()", self.cfg.mode, "signal")
            return

    def named(self, st: State, v: object) -> object:
        """``v``, the value of a name the code evaluates: naming an event is a use of its last record."""
        if isinstance(v, EVal):
            st.used_events.add(v.key)
        elif isinstance(v, TupVal):
            for item in v.items:
                if isinstance(item, EVal):
                    st.used_events.add(item.key)
        return v

    def dropped_joins(self, st: State) -> None:
        """At a function exit: events this function recorded after its own side-stream work that this path
        never names again, the stream otherwise unjoined (candidates: kept if another path uses the event)."""
        if self.cfg.mode not in ("eager", "cuda") or self.depth != 0:
            return
        know = st.know(MAIN)
        params = set(self.fn.all_params)
        for (key, stream, time), (node, label) in self.record_sites.items():
            # (an event in a field of self or of an object handed in is kept on an object that outlives the call:
            # a later method or the caller waits it there, `slot.ready.record(s)` then `_finish(slot)` waiting it)
            if stream == MAIN or "." in key and key.split(".", 1)[0] in params | {"self"} \
                    or key in st.used_events or key in self.timing_events \
                    or st.events.get(key, {}).get(stream) != time:
                continue
            work = st.work.get(stream, -1)
            covered = min(work, time)
            if work <= 0 or know.get(stream, -1) >= covered \
                    or any(st.events.get(k, {}).get(stream, -1) >= covered for k in st.used_events):
                continue  # no work of this path on the stream; joined otherwise; covered by an event it uses
            site = next((n for t, n in self.op_sites.get(stream, ()) if t <= time), None)
            if id(node) not in self.dropped:
                self.dropped[id(node)] = (key, HostRead(node, label, stream, site, "the event dropped",
                                                        self.cfg.mode, "dropped"))

    def resolve_dropped(self) -> None:
        """Keep the dropped records whose event some other path of the function waits on, synchronises or
        hands on: the event is the work's join handle, and the dropping path has none."""
        for ident, (key, found) in self.dropped.items():
            if (key in self.waited_events or key in self.handed_events) and ident not in self.host_reads:
                self.host_reads[ident] = found


def signal_name(recv: cst.BaseExpression) -> str | None:
    """The name a signal's channel is known by in other code: ``self.done_queue`` -> ``done_queue``."""
    if isinstance(recv, cst.Attribute):
        return recv.attr.value
    return recv.value if isinstance(recv, cst.Name) else None


def receivers_continue(project, channel: str | None, stream: str) -> bool | None:
    """Does a receiver of the signal channel ``channel`` (a function of the project that waits on it:
    ``channel.wait()``, ``channel.get()``) go on with the signalled stream ``stream`` itself (runs work in a
    ``stream(...)`` scope of it, joins or synchronises it)? Then that side's work is ordered after the signalled
    work on the same stream (a worker thread handed the stream). None when no receiver is found (unknown: the
    silent answer for the caller), False when every receiver found ignores the stream: it reads what the work
    produced on its own stream."""
    if channel is None:
        return None
    memo = derived(project, "signal_receivers_continue")
    key = (channel, stream)
    if key in memo:
        return memo[key]
    memo[key] = None
    paths = project.paths_containing((channel.encode(),))
    if len(paths) > MAX_CALLER_FILES:
        return None
    found = False
    for model in filter(None, map(project.file, paths)):
        for fn in model.iter_functions():
            if not any(site.method in HOST_SIGNAL_RECEIVE_METHODS and isinstance(site.node.func, cst.Attribute)
                       and names_stream(site.node.func.value, channel) for site in fn.calls):
                continue
            found = True
            for site in fn.calls:
                func = site.node.func
                if site.method != "stream" and site.method not in JOIN_METHODS:
                    continue
                if isinstance(func, cst.Attribute) and site.method in JOIN_METHODS \
                        and names_stream(func.value, stream) \
                        or any(names_stream(a.value, stream) for a in site.node.args):
                    memo[key] = True
                    return True
    memo[key] = False if found else None
    return memo[key]
