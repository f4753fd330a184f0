"""Stream and event methods in the dataflow: ``wait_stream``, ``wait_event``, ``record_event``,
``event.record()/wait()/synchronize()/query()``, ``stream.synchronize()``, ``elapsed_time`` (timing events),
hand-offs that escape (``ESCAPE_METHODS``), ``graph.replay()`` and ``record_stream`` on values whose storage is
not tracked. A mixin of the interpreter (see interp.Interp), split from exprs.py."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.values import EVal, State, TVal, merge_clock
from streamlint.model.streams import EVENT, MAIN, STREAM
from streamlint.model.tensors import ESCAPE_METHODS


class SyncMethods:
    def sync_method(self, st: State, e: cst.Call, recv: object, name: str, kind: str | None,
                    arg0: cst.BaseExpression | None) -> tuple[bool, object]:
        """(handled, result) of a method call on a stream / event / graph / opaque value."""
        if name == "wait_stream" and arg0 is not None:
            waiter = self.stream_key(st, recv, e.func.value)
            producer = self.stream_key(st, self.ev(st, arg0), arg0)
            self.wait_stream(st, waiter, producer)
            return True, None
        if name == "wait_event" and arg0 is not None:
            self.wait_event(st, self.stream_key(st, recv, e.func.value), self.event_key(st, self.ev(st, arg0), arg0))
            return True, None
        if name == "record_event":
            stream = self.stream_key(st, recv, e.func.value)
            key = self.event_key(st, self.ev(st, arg0), arg0) if arg0 is not None else self.anonymous_key("event", e)
            self.record(st, stream, key, site=arg0 if arg0 is not None else e)
            return True, EVal(key)
        if name == "elapsed_time" and not isinstance(recv, TVal) and arg0 is not None:
            self.timing_events.update((self.event_key(st, recv, e.func.value),
                                       self.event_key(st, self.ev(st, arg0), arg0)))
        if (not isinstance(recv, TVal) or name == "record") and kind != STREAM \
                and name in ("record", "wait", "synchronize", "query"):  # a tensor has no record(): a mistyped event
            key = self.event_key(st, recv, e.func.value)
            known = key in st.events or kind == EVENT
            stream = self.stream_key(st, self.ev(st, arg0), arg0) if arg0 is not None else st.cur
            if name == "record":
                self.record(st, stream, key, site=e.func.value)  # tensors have no record(): this is an event
            elif name == "wait":
                if known:
                    self.wait_event(st, stream, key)
                else:
                    self.wait_everything(st, stream)  # a collective's work handle, or an event recorded elsewhere
            elif known:  # synchronize() / query(): the host has seen the event complete
                self.waited_events.add(key)
                merge_clock(st.host, st.events.get(key, {MAIN: 0}))
            else:  # an event recorded elsewhere (e.g. a field inherited from a library class): as for a
                self.sync_all(st)  # known event, a query()/synchronize() the code goes on after is a host sync
            return True, None
        if kind == STREAM and name in ("synchronize", "query"):
            if name == "synchronize":
                self.sync_stream(st, self.stream_key(st, recv, e.func.value))
            return True, None
        if name in ESCAPE_METHODS and not isinstance(recv, TVal):
            for arg in e.args:
                self.escape(st, self.ev(st, arg.value), into=e.func.value)
            return True, None
        if name == "replay" and not e.args and not isinstance(recv, TVal):
            self.replay(st)  # a captured graph runs on this stream, reading its static inputs
            return True, None
        if name == "record_stream" and arg0 is not None and isinstance(e.func.value, cst.Name) \
                and not self.tensors(st, recv):  # an element of a collection, an opaque result
            self.loose_record(st, e.func.value.value, self.stream_key(st, self.ev(st, arg0), arg0))
            return True, None
        return False, None
