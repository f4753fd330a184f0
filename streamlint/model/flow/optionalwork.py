"""Work after an event's record that runs only when the caller asks for it (issue 16, precision of SL201's
early records).

An event recorded on a side stream marks what that stream queued before the record. When the work queued
there after it sits, whole, under a test of one of the function's own parameters (``def drain(self,
fold=False): ... self.done.record(); if fold: acc.add_(part)``) while the record does not, the caller chooses
whether that work exists at all: on the calls that leave the flag off, the event covers everything the stream
did, so the event's waiters elsewhere cannot rely on it for the optional work either way. The event then
plausibly marks the earlier result by design (the optional work's readers join otherwise), and the analysis,
which does not follow what every waiter reads, cannot tell that from a record placed too early.

:func:`optional_flag` names that parameter; the early-record finding stays, at low confidence, saying what
it assumes. A record under the same test as the work (both optional together), work on every path, or work
under a test of anything but a parameter (a field, a local) is not this case: the finding keeps its confidence.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.syntax import ancestry, strip_not


def _param_names(fn: cst.FunctionDef) -> set[str]:
    params = fn.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return {p.name.value for p in every} - {"self", "cls"}


def _flag_of(test: cst.BaseExpression, params: set[str]) -> str | None:
    """The parameter a test reads when it is that parameter alone (``if fold:``, ``if not fold:``)."""
    inner, _negated = strip_not(test)
    return inner.value if isinstance(inner, cst.Name) and inner.value in params else None


def optional_flag(fn: cst.FunctionDef, record: cst.CSTNode, work: list[cst.CSTNode]) -> str | None:
    """The parameter under whose test every statement of ``work`` runs while ``record`` does not (the same
    parameter for all), or None. A statement not found in ``fn`` (an inlined helper's) counts as unconditional."""
    params = _param_names(fn)
    if not params or not work:
        return None
    above = ancestry(fn, record)
    if above is None:
        return None
    around = {id(n) for n in above}
    flags: set[str] = set()
    for node in work:
        path = ancestry(fn, node)
        if path is None:
            return None
        found = None
        for parent, child in zip(path, path[1:]):
            if isinstance(parent, cst.If) and id(parent) not in around and child is parent.body:
                found = _flag_of(parent.test, params) or found
        if found is None:
            return None
        flags.add(found)
    return flags.pop() if len(flags) == 1 else None
