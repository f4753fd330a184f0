"""An event kept on the same object as the tensor it guards (issue 16, precision of SL201: "an event or tensor
held in an object whose other methods it does not follow").

Buffer rings often pair each buffer with the event of its last use: a staging object ``slot`` holds ``slot.data``
and ``slot.done``, and a refill first waits for the event (``slot.done.synchronize()``) before it overwrites
``slot.data``. Who records ``slot.done``, and on which stream, is decided wherever the object went in between (a
consumer's release method, a queue): when the function analysed neither records that event nor was told where it
was recorded, the wait orders nothing the analysis can see, and a race on ``slot.data`` across it may well be
covered by it.

:func:`sibling_wait` finds such a wait: a ``.synchronize()`` / ``.wait()`` / ``.query()`` of ``B.f`` or a
``wait_event(B.f)``, where the raced tensor is ``B.g`` (the same base object, a plain name, not ``self``, another field), the function records
no ``B.f`` itself, and the wait lies between the two accesses (lexically after the earlier one and before the
later one; for a race carried round a loop, before the later one inside the loop holding both). The race stays,
at low confidence, saying it assumes that event was not recorded after the earlier access.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.syntax import ancestry, lexical_index, local_nodes, node_code, node_memo

_WAITS = frozenset({"synchronize", "wait", "query"})


def _waited_event(call: cst.Call) -> cst.BaseExpression | None:
    """The event a call waits for or synchronises (``e.synchronize()``, ``e.wait()``, ``s.wait_event(e)``)."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    if func.attr.value in _WAITS:
        return func.value
    if func.attr.value == "wait_event" and call.args:
        return call.args[0].value
    return None


def sibling_wait(fn: cst.FunctionDef, anchor: cst.CSTNode, earlier: cst.CSTNode | None, name: str) -> str | None:
    """The event field of the raced tensor's object (``name`` is ``B.g``) waited between the two accesses, which
    ``fn`` does not record itself (see the module docstring), else None."""
    if earlier is None:
        return None
    bases = {n.value.value for n in local_nodes(anchor) if isinstance(n, cst.Attribute)
             and isinstance(n.value, cst.Name) and n.value.value != "self"}  # (`page.data.copy_(x)`: `page`)
    if "." in name and not any(c in name for c in "[(") and not name.startswith("self."):
        bases.add(name.rsplit(".", 1)[0])
    if not bases:
        return None
    index: dict = node_memo("lexical_index", fn, lexical_index)  # type: ignore[assignment]
    if id(anchor) not in index or id(earlier) not in index:
        return None
    at, before = index[id(anchor)][0], index[id(earlier)][1]
    loop = None
    if before >= at:  # (carried round a loop: the wait must come first in the loop holding both)
        path = ancestry(fn, anchor) or []
        loop = next((n for n in reversed(path) if isinstance(n, (cst.For, cst.While))
                     and id(earlier) in _ids(n)), None)
        if loop is None:
            return None
    waited: set[str] = set()
    recorded: set[str] = set()
    for n in local_nodes(fn):
        if not isinstance(n, cst.Call) or not isinstance(n.func, cst.Attribute):
            continue
        if n.func.attr.value in ("record", "record_event"):
            recorded.add(node_code(n.func.value))
            continue
        event = _waited_event(n)
        if event is None or not isinstance(event, cst.Attribute):
            continue
        text = node_code(event)
        if not isinstance(event.value, cst.Name) or event.value.value not in bases or text == name \
                or _mentioned(anchor, text):
            continue
        start = index[id(n)][0]
        inside = start < at and (start > before if loop is None else id(n) in _ids(loop))
        if inside:
            waited.add(text)
    left = sorted(waited - recorded)
    return left[0] if left else None


def _mentioned(node: cst.CSTNode, text: str) -> bool:
    return any(isinstance(n, cst.Attribute) and node_code(n) == text for n in local_nodes(node))


def _ids(node: cst.CSTNode) -> set[int]:
    return {id(n) for n in local_nodes(node)}
