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
The absent token speaks of the record's data only, not of tensors the caller handed in: the wait on the other arm
also orders the caller's pending work on them (an event recorded before entry), the None arm does not. So when a
parameter is used as a tensor after the test (``dst.copy_(rec.host)``, ``dst[i]``), the arm keeps its own ordering
(``def upload(self, dst): if self.ev is not None: side.wait_event(self.ev)`` then ``dst.copy_`` on ``side``: the
caller's ``dst`` still races on that arm). Nor does it speak of the memory the current stream still uses: a block
the waiting stream allocates on that arm is not taken for one allocated after a fork from the current stream
(``absent_waited``, asked by ``Consumers.new_storage``: SL301 judges the arm as if nothing was waited).
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.values import State
from streamlint.model.streams import MAIN
from streamlint.model.syntax import local_nodes

_WAITS = frozenset({"wait_event", "wait"})


class AbsentEvents:
    """The None arm of a record's event test (mixin of the interpreter). It asks exprs (ev) and orderings
    (render); it leaves ``absent_waited`` (the streams such an arm ordered) for ``Consumers.new_storage``."""

    def absent_event_waits(self, st: State, node: cst.If) -> None:
        """``if rec.ev is not None: s.wait_event(rec.ev)`` (or ``if rec.ev:``), on the arm where the test fails:
        the waits the other arm makes on that token, made on this arm too (see the module docstring)."""
        field = _tested_field(node.test)
        if field is None or node.orelse is not None:
            return
        key = self.render(st, field)
        if key in st.events:
            return  # recorded (or set) in this function: its own protocol
        if _caller_tensor_after(self.cfile, self.cfn, node, field):
            return  # the caller's data, which the absent token says nothing of (see the module docstring)
        text = self.cfile.code(field)
        for line in node.body.body:
            if not isinstance(line, cst.SimpleStatementLine):
                continue
            for small in line.body:
                call = small.value if isinstance(small, cst.Expr) else None
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                        and call.func.attr.value in _WAITS and _waits_on(self.cfile, call, text):
                    before = {s: st.know(s).get(MAIN, -1) for s in st.vc}
                    self.ev(st, call)
                    self.__dict__.setdefault("absent_waited", set()).update(
                        s for s in st.vc if st.know(s).get(MAIN, -1) > before.get(s, -1))


def _tested_field(test: cst.BaseExpression) -> cst.Attribute | None:
    """``rec.ev`` of ``rec.ev is not None`` / ``rec.ev``: a field of an object, not a bare name."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, cst.IsNot) \
            and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
        test = test.left
    return test if isinstance(test, cst.Attribute) else None


def _caller_tensor_after(file, fn, node: cst.If, field: cst.Attribute) -> bool:
    """Is a parameter of ``fn`` (not ``self`` / ``cls`` / the record's own root) used as a tensor after the test:
    the object of an attribute or a subscript (``dst.copy_(...)``, ``out[i]``), or the argument of a ``copy_``?
    A parameter passed as a plain argument (``torch.empty(shape, ...)``) is not."""
    root = field
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        root = root.value
    params = set(fn.all_params) - {"self", "cls", root.value if isinstance(root, cst.Name) else ""}
    if not params:
        return False
    order = file.lexical_index(fn.node)
    end = order.get(id(node), (0, 0))[1]
    for n in local_nodes(fn.node):
        if order.get(id(n), (0, 0))[0] <= end:
            continue
        if isinstance(n, (cst.Attribute, cst.Subscript)) and isinstance(n.value, cst.Name) and n.value.value in params:
            return True
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "copy_" \
                and any(isinstance(a.value, cst.Name) and a.value.value in params for a in n.args):
            return True
    return False


def _waits_on(file, call: cst.Call, text: str) -> bool:
    """``s.wait_event(<text>)`` or ``<text>.wait(...)``."""
    if call.func.attr.value == "wait_event":
        return len(call.args) == 1 and file.code(call.args[0].value) == text
    return file.code(call.func.value) == text


__all__ = ["AbsentEvents"]
