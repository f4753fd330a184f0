"""Waits on an element of a local collection of events whose index the analysis cannot resolve.

Multi-device and multi-block code keeps its events in local collections indexed by loop variables
(``done[g][i].record(ws)`` in the block loop, then ``ws.wait_event(done[g][i - 1])`` for the chain between
blocks, ``side.wait_event(done[g][n_blocks[g] - 1])`` or ``done[g][-1]`` after the loop). Records by a loop
variable get the keys of representative elements (``done[...][0]`` ..., :mod:`~streamlint.model.flow.elements`),
but a computed index (``i - 1``, ``n_blocks[g] - 1``, another loop's variable) names an element whose relation
to the recorded ones is not visible: its key matches no record, and the wait would be read as one on an event
recorded before the function (covering nothing of its own work): a false race at every later consumer.

Here such a wait is read as one on every element of the same collection recorded so far on this path (what
they cover, joined): the previous block's record for the chain inside the loop (``i - 1`` in iteration ``i``),
the last block's record after it -- the usual intent, and the reading that stays silent when the relation is
unknown (a guess in the other direction would report a race that hangs on an index equality nobody can see).
Work queued after the last record of the collection is still not covered: a record placed before the work it
should mark (``done[i].record(s)`` ahead of the block's kernels) leaves the last block's work unordered. An index that resolves
(a literal, a representative position) keeps its exact key: only unresolved indices take this reading. The outer
indices of the collection are not compared (``done[g]`` in one loop, ``done[I[*]]`` where another loop's variable
walks an index collection, flow/indexsets.py): which device's list is meant is no more visible than which
block, and the reading stays the silent one. A host ``synchronize()`` of such an element sees what that record
covers (flow/syncops.py)."""

from __future__ import annotations

import re

from streamlint.model.flow.values import merge_clock

_RESOLVED = re.compile(r"-?\d+|'[^']*'|\"[^\"]*\"")


def _last_subscript(key: str) -> int | None:
    """The position of the ``[`` opening the trailing subscript of ``key`` (``xs[a][b]`` -> the one of ``[b]``)."""
    if not key.endswith("]"):
        return None
    depth = 0
    for i in range(len(key) - 1, -1, -1):
        ch = key[i]
        depth += (ch in "])") - (ch in "[(")
        if depth == 0:
            return i if ch == "[" and i > 0 else None
    return None


def unresolved_element(key: str) -> str | None:
    """The collection part of an element key whose trailing index is not resolved (``done[g][i - 1]`` ->
    ``done[g]``), else None."""
    at = _last_subscript(key)
    if at is None or _RESOLVED.fullmatch(key[at + 1:-1].strip()):
        return None
    return key[:at]


def _shape(prefix: str) -> str:
    """``done[active_gpus[*]]`` / ``done[g]`` -> ``done[?]``: the collection, whatever the outer indices (a loop over
    the devices may give them a family key in one loop and the plain variable in another)."""
    out, depth = [], 0
    for ch in prefix:
        if ch == "[":
            depth += 1
            if depth == 1:
                out.append("[?")
            continue
        if ch == "]":
            depth -= 1
            if depth == 0:
                out.append("]")
            continue
        if depth == 0:
            out.append(ch)
    return "".join(out)


def sibling_record(events: dict[str, dict[str, int]], key: str) -> dict[str, int] | None:
    """What a wait on ``key`` (an element of a collection by an unresolved index, recorded nowhere on this
    path) covers: what the collection's elements recorded on this path cover, joined; None when none was."""
    if key in events:
        return None
    prefix = unresolved_element(key)
    if prefix is None:
        return None
    shape, joined = _shape(prefix), None
    for other, snap in events.items():
        at = _last_subscript(other)
        if at is not None and snap and _shape(other[:at]) == shape:
            if joined is None:
                joined = dict(snap)
            else:
                merge_clock(joined, snap)
    return joined


__all__ = ["sibling_record", "unresolved_element"]
