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
"""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.entries import may_alias, stream_family
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
