"""Block reuse across loop rounds: a block freed inside a loop body goes back to its allocating stream's
pool, and the next round runs the freeing statement again (a rebinding allocates a new value on that stream)
before anything after the loop. The interpreter unrolls a loop a bounded number of times, so the round that
would take the block back may never be run: the free is settled at the back edge instead."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.syntax import contains

if TYPE_CHECKING:
    from streamlint.model.flow.values import State


def settle_loop_frees(interp, st: State, loop: cst.CSTNode) -> None:
    """At the end of a round of ``loop`` that may run again: each deferred free made inside the loop (not one
    covered by the allocating stream's entry discipline) whose use on another stream its allocating stream has
    not joined yet is reported; one joined by now is covered for good."""
    keep = []
    for entry in st.pending:
        sid, uses, how, node, covers = entry
        S = st.stores.get(sid)
        if covers or S is None or node is None or not contains(loop, node):
            keep.append(entry)
            continue
        know = st.know(S.alloc)
        late = next((u for u in uses if know.get(u.stream, -1) < u.time), None)
        if late is not None:
            interp.report_lifetime(st, S, late, how, node)
    st.pending = keep
