"""Tensors kept alive by a work record handed back to the caller until its method joins their stream (issue 16).

``gathered.record_stream(torch.cuda.current_stream())`` before ``with torch.cuda.stream(side): gather(q, out=gathered)``
records the stream the memory already belongs to: a no-op (SL301 reports it, flow/records.py). But when the function
hands ``gathered`` back inside a record of a project class built with ``side`` whose method makes the current stream
wait for it (``return GatherWork(out=gathered, stream=side)``, flow/recordjoins.py), the record holds the tensor until
its ``wait()`` joins ``side``: the caller cannot free it while ``side`` still uses it, so no record is needed at all. A
parameter (the caller's tensor) is the caller's to keep, as with no record (flow/callerfrees.py takes the callers'
drops). The same holds one level up: ``return handle, buf, side`` unpacked by every seen caller
(``h, b, s = self._launch(...)``) that hands ``b`` (or the argument it passed) and ``s`` back in such a record.

Not kept: a caller that drops the result (``launch(x)`` as a statement, a name bound to it and never read again) or
binds it to nothing the analysis can follow;
a record whose methods never join the stream. With no caller seen the record is the only evidence of the protocol:
:func:`record_keeps` answers ``"unseen"`` (the finding is kept, low)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.escapes import handed_value
from streamlint.model.flow.recordjoins import record_joins
from streamlint.model.freeing import bound_arguments
from streamlint.model.waits import loads_after, result_discarded, statement_of


def _fields(value: cst.BaseExpression | None, fn) -> set[str]:
    """The names handed to the record construction ``value`` is (itself, or every binding of the local it names), as
    arguments or items of a tuple / list argument (``work=(handle, packed)``)."""
    calls = [value] if isinstance(value, cst.Call) else list(fn.name_assigns.get(value.value, ())) \
        if isinstance(value, cst.Name) else []
    values = [a.value for c in calls if isinstance(c, cst.Call) for a in c.args]
    values += [e.value for v in values if isinstance(v, (cst.Tuple, cst.List)) for e in v.elements]
    return {v.value for v in values if isinstance(v, cst.Name)}


def _returns(file, fn, after: int) -> list[cst.Return]:
    """``fn``'s ``return`` statements with a value past line ``after`` (those the use can reach)."""
    return [r for r in fn.returns if r.value is not None and file.span(r).start_line > after]


def _joined_back(project, file, fn, name: str | None, stream: str, after: int = 0) -> bool:
    """Does every ``return`` of ``fn`` with a value (past line ``after``) hand back a join record
    (recordjoins.record_joins) of ``stream`` that holds ``name`` (None: any, the caller's own tensor)?"""
    rets = _returns(file, fn, after)
    return bool(rets) and all(record_joins(project, file, fn, r, stream)
                              and (name is None or name in _fields(handed_value(r), fn)) for r in rets)


def _position(file, value: cst.BaseExpression | None, name: str) -> int | None:
    """The one position of the tuple ``value`` holding the expression ``name`` (its text: ``buf``, ``self.side``)."""
    if isinstance(value, cst.Tuple):
        hits = [i for i, e in enumerate(value.elements) if file.code(e.value) == name]
        return hits[0] if len(hits) == 1 else None
    return None


def _unpacked_by(caller, call: cst.Call) -> list[str | None] | None:
    """The names ``h, b, s = call`` binds in ``caller`` (None for a non-name target), or None when the call's result
    is bound otherwise (dropped, returned, an argument...)."""
    stmt = statement_of(caller, call)
    if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0].target, (cst.Tuple, cst.List)):
        return [e.value.value if isinstance(e.value, cst.Name) else None for e in stmt.targets[0].target.elements]
    return None


def _dropped(model, caller, call: cst.Call) -> bool:
    """Does ``caller`` drop the result of ``call``: a statement of its own (``launch(x)``), or bound to a name it
    never reads after the call (``_ = launch(x)``, ``work = launch(x)`` with no ``work.wait()``, return, or
    hand-on: :func:`~streamlint.model.waits.loads_after`)?"""
    if result_discarded(caller, call):
        return True
    stmt = statement_of(caller, call)
    if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0].target, cst.Name):
        return not loads_after(model, caller, stmt.targets[0].target.value, call)
    return False


def record_keeps(project, file, fn, name: str, stream: str, param: bool, after: int) -> str | None:
    """Is tensor ``name`` (``param``: a parameter of ``fn``) kept alive until a join of ``stream`` (its text in
    ``fn``) by a work record handed back to the caller? ``"kept"``: by ``fn``'s own returns, or by every seen caller's
    returns of the tuple ``fn`` hands back; ``"unseen"``: ``fn`` returns the record but no caller is seen; None: not
    shown (a caller dropping the record, a plain tuple no caller re-wraps). Only the returns past line ``after`` (the
    use) count."""
    if not stream or stream.startswith("<") or not fn.returns:
        return None
    own = None if param else name
    direct = _joined_back(project, file, fn, own, stream, after)
    tuples = [] if direct else [handed_value(r) for r in _returns(file, fn, after)]
    shapes = {(_position(file, t, stream), None if param else _position(file, t, name)) for t in tuples}
    if not direct and (len(shapes) != 1 or None in next(iter(shapes))[:1 if param else 2]):
        return None
    sites = callers_of(project, file, fn)
    if not sites:
        return "unseen" if direct else None
    for model, site in sites:
        caller = site.function
        if caller is None:
            return None
        if direct:  # the record itself: the caller must keep it (bound and used, returned, handed on), not drop it
            if _dropped(model, caller, site.node):
                return None
            continue
        names = _unpacked_by(caller, site.node)
        if names is None:
            return None
        at = _position(file, tuples[0], stream)
        s = names[at] if at is not None and at < len(names) else None
        if param:
            arg = bound_arguments(fn, site.node).get(name)
            held = arg.value if isinstance(arg, cst.Name) else None
        else:
            i = _position(file, tuples[0], name)
            held = names[i] if i is not None and i < len(names) else None
        if s is None or held is None or not _joined_back(project, model, caller, held, s,
                                                                 model.span(site.node).end_line):
            return None
    return "kept"


__all__ = ["record_keeps"]
