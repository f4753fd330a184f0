"""An event field of a record tested before its wait: on the arm where it is None, nothing was recorded to join.

A record object carries the join token of the work that filled it: ``packet.ready`` is set to an event recorded after
the copy that wrote ``packet``'s buffers, and ``None`` while no such work was queued (the record filled on the host,
or not sent through a stream at all). The reader guards its wait on the token::

    with torch.cuda.stream(loader):
        if packet.ready is not None:
            loader.wait_event(packet.ready)
        dev.copy_(packet.host_buf, non_blocking=True)

On the arm that waits, the event's origin is not seen: it covers what was queued before the function ran (the
interpreter's wait on an event recorded before entry, ``Orderings.wait_event``). On the arm where the token is None
the record says no work of a stream is pending on it: the data is as settled as on the waiting arm, so that arm is
given the same ordering, no more. Only for a token of unknown origin (not recorded in this function, whose own
records order what they order): a record made here and left None on a path is this function's own protocol, read
as it is. A test of a local name is not a record's field (``if ev is not None:`` after ``ev = None`` on a path).
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.values import State

_WAITS = frozenset({"wait_event", "wait"})


class AbsentEvents:
    """The None arm of a record's event test (mixin of the interpreter). It asks exprs (ev) and orderings
    (render)."""

    def absent_event_waits(self, st: State, node: cst.If) -> None:
        """``if rec.ev is not None: s.wait_event(rec.ev)`` (or ``if rec.ev:``), on the arm where the test fails:
        the waits the other arm makes on that token, made on this arm too (see the module docstring)."""
        field = _tested_field(node.test)
        if field is None or node.orelse is not None:
            return
        key = self.render(st, field)
        if key in st.events:
            return  # recorded (or set) in this function: its own protocol
        text = self.cfile.code(field)
        for line in node.body.body:
            if not isinstance(line, cst.SimpleStatementLine):
                continue
            for small in line.body:
                call = small.value if isinstance(small, cst.Expr) else None
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                        and call.func.attr.value in _WAITS and _waits_on(self.cfile, call, text):
                    self.ev(st, call)


def _tested_field(test: cst.BaseExpression) -> cst.Attribute | None:
    """``rec.ev`` of ``rec.ev is not None`` / ``rec.ev``: a field of an object, not a bare name."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, cst.IsNot) \
            and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
        test = test.left
    return test if isinstance(test, cst.Attribute) else None


def _waits_on(file, call: cst.Call, text: str) -> bool:
    """``s.wait_event(<text>)`` or ``<text>.wait(...)``."""
    if call.func.attr.value == "wait_event":
        return len(call.args) == 1 and file.code(call.args[0].value) == text
    return file.code(call.func.value) == text


__all__ = ["AbsentEvents"]
