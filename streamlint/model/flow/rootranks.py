"""Rooted collectives on their root rank: ``broadcast(t, src=s)`` only reads ``t`` on rank ``s``.

The collective table (:data:`~streamlint.model.apis.COLLECTIVES`) counts a broadcast's tensor as written: on
every rank but the source it receives the data. Code that runs only on the source rank (a sender half of a
send / receive pair: ``assert self.is_last_rank`` ... ``broadcast(drafts, src=self.last_rank)``, or ``if rank ==
src:``) queues no write there, so nothing is produced on the collective's stream for the caller to join.

The evidence is a condition that holds at the call and names the source expression itself: an enclosing
``if`` (true branch) or a preceding top-level ``assert`` / ``if not ...: return`` of the function, whose test is
``<x> == <src>`` / ``<src> == <x>`` or the predicate ``is_<src name>`` of the same object (``self.is_last_rank``
for ``src=self.last_rank``). Anything else (no such condition, a negated one) keeps the write.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo, Guard
from streamlint.model.syntax import contains

# Rooted collectives whose one tensor the root only reads: the keyword of the root, its position
ROOTED_READS = {"broadcast": ("src", 1)}


def root_expression(call: cst.Call, collective: str) -> cst.BaseExpression | None:
    """The root-rank argument of a rooted collective call (``src=`` or its position), or None."""
    spec = ROOTED_READS.get(collective)
    if spec is None:
        return None
    keyword, position = spec
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in (keyword, f"group_{keyword}"):
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position].value if len(positional) > position else None


def on_root_rank(file: FileModel, fn: FunctionInfo | None, call: cst.Call, root: cst.BaseExpression) -> bool:
    """Does a condition holding at ``call`` say this rank is ``root`` (module doc)?"""
    text = _norm(file.code(root))
    if not text:
        return False
    site = file.call_site(call)
    conditions = [(t, neg) for g in (site.guards if site is not None else ()) for t, neg in g.conditions()]
    if fn is not None:
        conditions += _entry_conditions(fn, call)
    return any(_names_root(file, test, text, negated) for test, negated in conditions)


def _norm(code: str) -> str:
    return code.replace(" ", "")


def _names_root(file: FileModel, test: cst.BaseExpression, root: str, negated: bool) -> bool:
    """Does ``test`` (holding, or failing when ``negated``) say this rank is ``root``?"""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op = test.comparisons[0].operator
        if not (isinstance(op, (cst.Equal, cst.Is)) and not negated
                or isinstance(op, (cst.NotEqual, cst.IsNot)) and negated):
            return False
        sides = (_norm(file.code(test.left)), _norm(file.code(test.comparisons[0].comparator)))
        # the other side must be this process's rank (`rank == src`), not any value equal to it (`step == 0`)
        return root in sides and sides[0] != sides[1] and _ranks(sides[1] if sides[0] == root else sides[0])
    if isinstance(test, (cst.Name, cst.Attribute)) and not negated:
        owner, _, name = root.rpartition(".")
        if not _ranks(name):
            return False
        predicate = f"{owner}.is_{name}" if owner else f"is_{name}"
        return _norm(file.code(test)) == predicate
    return False


def _ranks(text: str) -> bool:
    """Does an expression's text stand for a rank (``rank``, ``self.pp_rank``, ``dist.get_rank()``)?"""
    return "rank" in text.lower()


def _entry_conditions(fn: FunctionInfo, call: cst.Call) -> list[tuple[cst.BaseExpression, bool]]:
    """Conditions the function's top-level statements before the one holding ``call`` establish: ``assert
    c`` (c holds), ``if c: return`` / ``raise`` (c does not hold)."""
    out: list[tuple[cst.BaseExpression, bool]] = []
    for stmt in fn.node.body.body:
        if contains(stmt, call):
            break
        if isinstance(stmt, cst.SimpleStatementLine):
            out += [c for s in stmt.body if isinstance(s, cst.Assert) for c in Guard(s.test, False).conditions()]
        elif isinstance(stmt, cst.If) and stmt.orelse is None and _leaves(stmt.body):
            out += Guard(stmt.test, True).conditions()  # what holds past it (``not`` pushed inwards)
    return out


def _leaves(block: cst.BaseSuite) -> bool:
    stmts = block.body if isinstance(block, cst.IndentedBlock) else [block]
    last = stmts[-1] if stmts else None
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)
