"""Block reuse across loop rounds: a block freed inside a loop body goes back to its allocating stream's
pool, and the next round runs the freeing statement again (a rebinding allocates a new value on that stream)
before anything after the loop. The interpreter unrolls a loop a bounded number of times, so the round that
would take the block back may never be run: the free is settled at the back edge instead -- when the round
allocates or queues work on the allocating stream. A round whose work all runs on other streams (a warm-up
loop inside a side-stream scope rebinding a tensor the current stream made) takes nothing from that pool: the
free stays pending until the allocating stream's next allocation or the function's end, where a join after
the loop covers it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.syntax import contains

if TYPE_CHECKING:
    from streamlint.model.flow.values import State


def round_streams(states: list[State], first_id: int, first_clock: int) -> frozenset[str]:
    """The streams a loop round allocated on or queued work on, on any of its paths (``states`` at the round's
    end; ids and clock ticks after ``first_id`` / ``first_clock`` are the round's): the next round does it
    again, so a block freed into one of their pools can be handed out before anything after the loop."""
    out: set[str] = set()
    for st in states:
        out.update(S.alloc for sid, S in st.stores.items() if sid > first_id and S.kind in ("local", "pool"))
        out.update(s for s, t in st.last_op.items() if t > first_clock)
    return frozenset(out)


def settle_loop_frees(interp, st: State, loop: cst.CSTNode, busy: frozenset[str] | None = None) -> None:
    """At the end of a round of ``loop`` that may run again: each deferred free made inside the loop (not one
    covered by the allocating stream's entry discipline) whose use on another stream its allocating stream has
    not joined yet is reported, when the round allocates or works on that stream (``busy``, None: assume so);
    one joined by now is covered for good."""
    keep = []
    for entry in st.pending:
        sid, uses, how, node, covers = entry
        S = st.stores.get(sid)
        if covers or S is None or node is None or not contains(loop, node) \
                or busy is not None and S.alloc not in busy:
            keep.append(entry)
            continue
        know = st.know(S.alloc)
        late = next((u for u in uses if know.get(u.stream, -1) < u.time), None)
        if late is not None:
            interp.report_lifetime(st, S, late, how, node)
    st.pending = keep
