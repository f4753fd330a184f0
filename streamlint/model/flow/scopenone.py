"""A stream tested against None after the flow entered its scope (issue 16, [caller-protocol-wait],
[event-sync-elsewhere]).

Runtimes whose side stream is optional (``self._stream = copy_stream``, None on a device without one) run the
work in a scope that switches only to a real stream (``stream_context(None)``, like ``torch.cuda.stream(None)``,
runs the block inline) and order it only when there is a stream: ``with stream_context(self._stream): if
self._stream is not None: self._stream.wait_event(ready)``, or ``if self._compute_stream is not None:
self._compute_stream.synchronize()`` after the block. The flow follows such a scope as a switch to that stream;
on a path where it were None there would be no side stream and nothing to order. So once a path has entered a
scope of stream ``S``, it assumes ``S is None`` false (``State.assume``, the key
:meth:`~streamlint.model.flow.control.ControlFlow.test_key` gives the test): the wait or synchronisation under
``S is not None`` is on every path the race or lifetime needs. A test of another stream is not decided.

The assumption outlives the scope, until ``S`` is assigned (``ControlFlow.assign`` drops every assumption naming
it): the flow ran the scope's work on ``S``, as only a path with a stream does; on a path without one, that work
ran inline on the current stream and leaves nothing to order or join, so after the block ``if S is not None:
S.synchronize()`` (or its ``wait_stream``) is taken, and work of the scope handed back after it is joined there
(a "handed back with no join" on the None path would charge inline work to a stream that does not exist)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.values import KVal, SVal
from streamlint.model.streams import MAIN, STREAM

if TYPE_CHECKING:
    from streamlint.model.flow.values import State


class ScopedNoneTests:
    """Mixin of :class:`~streamlint.model.flow.interp.Interp` (over ``ControlFlow.stream_scope``)."""

    def scoped_truth(self, st: State, e: cst.BooleanOperation, left: object) -> bool | None:
        """``self.side or current_stream()`` on a path that entered ``self.side``'s scope: the left operand is a
        stream there (not None, and a stream object is true), so the ``or`` is ``self.side`` (an event recorded
        on it after the scope's copy covers that copy). None (unknown) otherwise."""
        if not (isinstance(left, (SVal, KVal)) and isinstance(e.operator, cst.Or)):
            return None
        key = self.render(st, e.left)  # type: ignore[attr-defined]
        if st.assume.get(f"{key} is None") is False \
                and (self.kind_of(st, left) == STREAM or key in st.vc):  # type: ignore[attr-defined]
            return True
        return None

    def stream_scope(self, node: cst.With, i: int, s: State, key: str) -> list[State]:
        if key != MAIN and not key.startswith("<"):
            s.assume[f"{key} is None"] = False
        return super().stream_scope(node, i, s, key)  # type: ignore[misc]


__all__ = ["ScopedNoneTests"]
