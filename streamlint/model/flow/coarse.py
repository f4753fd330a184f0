"""The coarse run of a function too large for the path-sensitive one (its branches multiply the paths past
the statement budget: a micro-batch pipeline, an FSDP all-gather planner, a context-parallel backward).

The coarse run is the same interpretation on fewer paths: a branch whose outcomes mention no ordering (no
wait, record, synchronize, stream or event: ``if self.tp_size > 1:``, ``if x.dim() == 3:``) runs only one
outcome -- the first that does not end the path (a ``return`` / ``raise`` there would hide the rest of the
function) --, while a branch that does mention one forks as before, and every test it assumes stays
correlated. Every path it explores is a path of the full run, so each hazard it finds is one the full run
would have reported; it only misses those of the outcomes it skipped. Its races, unjoined streams and early
records are reported; its lifetimes (SL301) are not: whether a free is covered depends on the joins of
every later path (the next step's event wait of an alternating-streams loop may sit in a skipped
outcome), so precision first."""

from __future__ import annotations

from streamlint._lazy import cst


def ends_in(block: object, *kinds: type) -> bool:
    """Does a branch's block (an ``IndentedBlock``, or an ``Else``'s) end in a statement of one of ``kinds``
    (``cst.Return``, ``cst.Raise``)?"""
    blk = block.body if isinstance(block, cst.Else) else block
    last = blk.body[-1] if isinstance(blk, cst.IndentedBlock) and blk.body else None
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, kinds) for s in last.body)


def branch_ends(runner, raises: bool = False) -> bool:
    """Does a branch runner's block (its ``node``) end in a ``return`` (with ``raises``: a ``raise``)?"""
    return ends_in(getattr(runner, "node", None), cst.Raise if raises else cst.Return)


def coarse_choice(todo: list) -> tuple:
    """The one outcome a coarse run takes at a branch that mentions no ordering."""
    for outcome, runner in todo:
        if not ends_in(getattr(runner, "node", None), cst.Return, cst.Raise):
            return outcome, runner
    return todo[0]


__all__ = ["coarse_choice"]
