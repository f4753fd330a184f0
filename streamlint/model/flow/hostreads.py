"""The host as the consumer of an event: an asynchronous device-to-host copy read after an event sync.

``x.to("cpu", non_blocking=True)`` queues the copy on the current stream and returns at once; the host may
read the result only once the stream has run the copy (``event.synchronize()`` on an event recorded after
it, ``stream.synchronize()``). When the host synchronises an event recorded on that stream *before* the copy
and then reads the copy's result (an ``assert``, an f-string, ``.tolist()`` / ``.item()``), the event was
recorded too early: it is the promise the host relied on, and it does not cover the copy. Reported at the
record as an early record (model: ``Orderings.uncovered_records`` for device waiters). A host read with no
event synchronised at all is not reported here.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.results import EarlyRecord
from streamlint.model.flow.values import Access, State, TVal
from streamlint.model.syntax import local_nodes


class HostReads:
    """Asynchronous device-to-host copies and the host reads of their results (mixin of the interpreter).

    Interp state it uses: ``anchor``, ``cfg``, ``clock``, ``depth``, ``early_records``, ``record_sites``,
    ``waited_events``."""

    def async_host_copy(self, st: State, out: TVal) -> TVal:
        """``out`` (a host tensor) is filled by a copy just queued on the current stream."""
        S = st.stores.get(out.sid)
        if S is not None and self.depth == 0 and self.anchor is not None:
            S.d2h = Access(st.cur, self.clock, self.anchor, {})
        return out

    def host_read(self, st: State, expr: cst.CSTNode) -> None:
        """The host reads the tensors named in ``expr``."""
        if self.depth or self.cfg.mode not in ("eager", "cuda"):
            return
        for node in local_nodes(expr):
            v = st.env.get(node.value) if isinstance(node, cst.Name) else None
            S = st.stores.get(v.sid) if isinstance(v, TVal) else None
            if S is not None and S.d2h is not None:
                self._early_for_host(st, S.d2h)

    def _early_for_host(self, st: State, copy: Access) -> None:
        stream, time = copy.stream, copy.time
        if st.host.get(stream, -1) >= time:
            return  # a synchronisation after the copy
        for key, snap in st.events.items():
            recorded = snap.get(stream, -1)
            site = self.record_sites.get((key, stream, recorded))
            if site is None or recorded >= time or key not in self.waited_events or key in self.timing_events \
                    or st.host.get(stream, -1) < recorded:
                continue  # not recorded here before the copy, or the host never synchronised it
            node, label = site
            if id(node) not in self.early_records:
                self.early_records[id(node)] = EarlyRecord(node, label, stream, copy.node, self.cfg.mode, False)
