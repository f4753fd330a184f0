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


def _ends(branch: object) -> bool:
    body = branch.body if isinstance(branch, (cst.Else, cst.If)) else branch
    stmts = getattr(body, "body", None)
    if isinstance(branch, cst.If) or not isinstance(stmts, (list, tuple)) or not stmts:
        return False
    last = stmts[-1]
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)


def branch_ends(runner, raises: bool = False) -> bool:
    """Does a branch runner's block (its ``node``) end in a ``return`` (with ``raises``: a ``raise``)?"""
    blk = b.body if isinstance(b := getattr(runner, "node", None), cst.Else) else b
    last = blk.body[-1] if isinstance(blk, cst.IndentedBlock) and blk.body else None
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, (cst.Return, cst.Raise)[raises])
                                                             for s in last.body)


def coarse_choice(todo: list) -> tuple:
    """The one outcome a coarse run takes at a branch that mentions no ordering."""
    for outcome, runner in todo:
        if not _ends(getattr(runner, "node", None)):
            return outcome, runner
    return todo[0]


__all__ = ["coarse_choice"]
