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
outcome), so precision first -- except a plain free of a local outside any loop (at the return, a ``del``, a
rebinding): its cover lies between use and free, on paths the run forks, so it is reported at medium
(``dataflow._straight_free``). A branch whose test is also the test of a branch mentioning an ordering forks too
(:func:`ordering_test`): which outcome ran decides which ordering follows."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.syntax import local_nodes


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


def ordering_test(interp, test: cst.BaseExpression) -> bool:
    """Is ``test`` (by its code) also the test of another ``if`` of the interpreted function whose outcomes mention
    an ordering? An ordering-free branch on it still decides which ordering runs later (the paths
    correlate on the test: ``if store.grouped is None:`` flattening one way or the other, then recording the
    flattened buffers under the same test): the coarse run takes both of its outcomes."""
    code, mentions = interp.cfile.code(test), interp.mentions_ordering
    return any(isinstance(n, cst.If) and n.test is not test and interp.cfile.code(n.test) == code
               and (mentions(n.body) or n.orelse is not None and mentions(n.orelse)) for n in local_nodes(interp.cfn.node))


__all__ = ["coarse_choice", "ordering_test"]
