"""Two elements of one stream collection that may be one stream (issue 16, precision of SL201: "a container
roundtrip").

Multi-device code keeps one stream per device in a dict or list (``reduce[g] = torch.cuda.Stream(device=d)``)
and names them by different index expressions in different places: ``reduce[primary]`` where it seeds the first
device, ``reduce[g]`` in the loop over devices. The flow keys streams by their text (or, for a stream it saw
created at an element store, by the creation), so ``reduce[primary]`` and ``reduce[g]`` are two streams to it, and
a consumer that waited on an event recorded on ``reduce[g]`` after a producer on ``reduce[primary]`` looks
unordered, although on the loop's turn where ``g == primary`` the wait covers it.

:func:`collection_wait` finds that case: at the use, the using stream knows, from a time after the producer, a
stream of the same collection as the producer's (:func:`~streamlint.model.entries.may_alias` of their families,
a created stream's family being the element its creation was stored to) under another key. The race stays, at
medium confidence, saying it assumes the two elements differ (not low: amd-aorta 0.3.0 grad_accum.py:193, a bug, is in this class). A wait on a stream of another collection, on the
same element before the producer, or on an element of another literal index (``s[2]`` or ``s[-1]`` after a producer on ``s[1]``)
keeps the finding as it was.

:func:`same_turn` settles one shape of it: the tensor read is the producer's only on the turn where the two
elements are one. Replicating a tensor to every device, the code stores the primary's own tensor in the primary's
slot and a copy in the others' (``if g == primary: cents[g] = centroids`` / ``else: cents[g] = copy``); a consumer
of ``cents[g]`` on a stream that waited on ``reduce[g]`` reads ``centroids`` (produced on ``reduce[primary]``)
only where ``g == primary``, where the wait is on ``reduce[primary]`` itself. The slot's every store of that
tensor must sit under that equality test (:func:`guarded_put` records them, in ``slots.slot_put``), and the read
must be of that slot by the joined element's index; the copies are checked on their own.
"""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.entries import may_alias, stream_family
from streamlint.model.flow.values import TVal
from streamlint.model.syntax import ancestry, node_code


def _family(interp, key: str) -> tuple[str, str] | None:
    """The collection family of a stream key: its text's (``reduce[]``), or, for a stream created at an element
    store (``reduce[g] = torch.cuda.Stream()``), that element's; None for a stream of no collection."""
    if key.startswith("<"):
        node = interp.__dict__.get("anonymous_nodes", {}).get(key)
        path = ancestry(interp.fn.node, node) if node is not None else None
        store = next((n for n in reversed(path or ()) if isinstance(n, cst.Assign)), None)
        if store is None or len(store.targets) != 1 or not isinstance(store.targets[0].target, cst.Subscript):
            return None
        key = node_code(store.targets[0].target)
    return (stream_family(key), key) if "[" in key else None


_LITERAL_INDEX = re.compile(r"\[(-?\d+)\]$")


def _distinct(a: str, b: str) -> bool:
    """Two element texts whose last indices are different integer literals (``s[1]``, ``s[2]``; ``s[1]`` and
    ``s[-1]``, the element a join loop's last turn names): two elements the flow tells apart, not two names
    for one element that the code's own index expressions (``reduce[g]``, ``reduce[primary]``) may be."""
    ma, mb = _LITERAL_INDEX.search(a), _LITERAL_INDEX.search(b)
    return bool(ma and mb) and a[:ma.start()] == b[:mb.start()] and ma.group(1) != mb.group(1)


def collection_wait(interp, know: dict[str, int], producer: str, time: int) -> str | None:
    """The element (its text) of ``producer``'s stream collection that the using stream (knowing ``know``)
    joined after ``time`` under another key, else None."""
    mine = _family(interp, producer)
    if mine is None:
        return None
    for key, seen in know.items():
        if key != producer and seen >= time and (other := _family(interp, key)) is not None \
                and other[1] != mine[1] and may_alias(mine[0], other[0]) and not _distinct(mine[1], other[1]):
            return other[1]
    return None


def created_at(interp, key: str, node: cst.CSTNode) -> None:
    """Remember where an unnamed stream was created (for :func:`_family`)."""
    interp.__dict__.setdefault("anonymous_nodes", {})[key] = node


def _equated(interp, index: cst.BaseExpression, target: cst.CSTNode) -> tuple[str, str] | None:
    """(index name, the expression it equals) when ``target`` sits in the body of an ``if index == other:``
    (or ``other == index``), or in the ``else`` of an ``if index != other:``, of the function, else None."""
    if not isinstance(index, cst.Name):
        return None
    path = ancestry(interp.fn.node, target) or []
    for parent, child in zip(path, path[1:]):
        if not isinstance(parent, cst.If) or not isinstance(parent.test, cst.Comparison) \
                or len(parent.test.comparisons) != 1:
            continue
        op = parent.test.comparisons[0].operator
        if child is parent.body and isinstance(op, cst.Equal) \
                or isinstance(parent.orelse, cst.Else) and child is parent.orelse and isinstance(op, cst.NotEqual):
            left, right = parent.test.left, parent.test.comparisons[0].comparator
            for a, b in ((left, right), (right, left)):
                if isinstance(a, cst.Name) and a.value == index.value:
                    return index.value, node_code(b)
    return None


def guarded_put(interp, key: str, index: cst.BaseExpression, target: cst.Subscript, v: object) -> None:
    """Remember the equality test (or None: none) under which the tensor ``v`` was stored in slot ``key``."""
    if isinstance(v, TVal):
        interp.__dict__.setdefault("guarded_puts", {}).setdefault((key, v.sid), set()).add(
            _equated(interp, index, target))


def _index_text(element: str) -> str:
    return element[element.rindex("[") + 1:-1] if element.endswith("]") and "[" in element else ""


def same_turn(interp, sid: int, producer: str, element: str) -> bool:
    """Does the read at hand take storage ``sid`` from a slot indexed like ``element`` (``cents[g]``, joined
    ``reduce[g]``) whose every store of it was under ``g == p``, ``p`` the producer element's index
    (``reduce[p]``)? Then it reads that tensor only on the turn where the joined element is the producer's."""
    mine = _family(interp, producer)
    joined, own = _index_text(element), _index_text(mine[1]) if mine else ""
    if not joined or not own or interp.anchor is None:
        return False
    code = interp.file.code(interp.anchor)
    return any(s == sid and key.endswith(f"[{joined}]") and conds == {(joined, own)}
               and re.search(rf"(?<![\w.]){re.escape(key)}", code)
               for (key, s), conds in interp.__dict__.get("guarded_puts", {}).items())
