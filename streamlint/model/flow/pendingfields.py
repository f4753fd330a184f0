"""Pinned host fields a non-blocking copy leaves pending for another method: the event they are fenced by, recorded
too early (issue 16, [pinned-host] [cross-method] record-event-early).

A read-back object keeps a page-locked field, an event field, and two halves of one protocol in two methods: one
queues ``self.host.copy_(self.dev, non_blocking=True)`` and records ``self.ready``; another (``resolve()``,
``_fill_decode()``) synchronises ``self.ready`` on the host and then reads the field (``float(self.host[0])``,
``self.host[:n].tolist()``). The copy is pending host memory when the first method returns (``pending_exit``): the
host wait of the second method is its only completion. When that method recorded the event on the copy's stream
*before* the copy and never after it, the host wait covers only what came before: the reader reads bytes the device
has not written yet::

    def _copy_to_host(self):
        self.ready.record()                                   # SL201 (medium): recorded before the copy
        self.host.copy_(self.dev, non_blocking=True)

    def resolve(self):
        self.ready.synchronize()
        return float(self.host[0])

The finding is at the record (the root cause), medium: the waiter and the reader are another method, which may
also reach the field through a path the flow does not follow. Left alone: an event recorded after the copy (any
event: its holder's protocol), a function that synchronises the stream itself, a timing event, an event no other
method synchronises on the host, or a field no other method reads on the host after that synchronisation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.apis import HOST_CONSUMER_FUNCTIONS
from streamlint.model.flow.results import EarlyRecord
from streamlint.model.syntax import local_nodes

if TYPE_CHECKING:
    from streamlint.model.flow.values import Access, State

# methods by which the host reads a tensor's bytes (or hands a view of them to a host library)
_HOST_READ_METHODS = frozenset({"tolist", "item", "numpy", "tobytes"})
# the Python conversions among the host consumers (``float(self.host[0])``)
_CONVERSIONS = frozenset(f for f in HOST_CONSUMER_FUNCTIONS if "." not in f)


class PendingFields:
    """An event field recorded before a pending pinned field's copy, waited by the host in another method before it
    reads the field (mixin of the interpreter; called from ``HostReads.pending_exit``).

    Interp state it uses: ``cfile``, ``cfg``, ``early_records``, ``fn``, ``record_sites``, ``timing_events``."""

    def early_field_record(self, st: State, field: str, copy: Access) -> bool:
        """Is ``field`` (``self.<attr>``, the pinned destination of ``copy``, pending at the exit) fenced only by an
        event field recorded on the copy's stream before the copy, which another method synchronises on the host
        before it reads the field there? Notes the early record (the finding) and says so."""
        cls = self.cfile.classes.get(self.fn.class_name or "") if self.fn.class_name else None
        base = field.split("[", 1)[0]
        if cls is None or not base.startswith("self."):
            return False
        for key, snap in st.events.items():
            recorded = snap.get(copy.stream, -1)
            site = self.record_sites.get((key, copy.stream, recorded))
            if site is None or not key.startswith("self.") or recorded >= copy.time or key in self.timing_events:
                continue
            reader = self._host_waiter_reading(cls, key.split("[", 1)[0], base)
            if reader is None:
                continue
            node, label = site
            if id(node) not in self.early_records:
                self.early_records[id(node)] = EarlyRecord(node, label, copy.stream, copy.node, self.cfg.mode, False,
                                                           host_reader=reader)
            return True
        return False

    def _host_waiter_reading(self, cls, event: str, field: str) -> str | None:
        """The other method of the class that synchronises ``event`` on the host (``synchronize()`` / ``query()``)
        and later reads ``field`` on the host (a conversion, ``.tolist()``, ``.item()``, ``.numpy()``, a host consumer
        of the API table such as ``torch.save``), if any."""
        for m in cls.methods.values():
            if m is self.fn:
                continue
            waits = [self.cfile.span(s.node).start_line for s in m.calls if s.method in ("synchronize", "query")
                     and s.receiver is not None and self.cfile.code(s.receiver) == event]
            if not waits:
                continue
            first = min(waits)
            for s in m.calls:
                if self.cfile.span(s.node).start_line <= first:
                    continue
                if s.method in _HOST_READ_METHODS and isinstance(s.node.func, cst.Attribute):
                    read = [s.node.func.value]
                elif isinstance(s.node.func, cst.Name) and s.node.func.value in _CONVERSIONS \
                        or s.target in HOST_CONSUMER_FUNCTIONS:  # (``torch.save(self.host, f)`` too)
                    read = [a.value for a in s.node.args]
                else:
                    continue
                if any(isinstance(n, cst.Attribute) and self.cfile.code(n) == field for x in read
                       for n in local_nodes(x)):
                    return m.qualname
        return None


__all__ = ["PendingFields"]
