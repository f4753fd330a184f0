"""Two sides of a race that run in two different phases of one batch (issue 16, [correlated-guard]).

Serving code runs each step on a batch that is in one phase: a prefill (extend) batch or a decode batch
(``ForwardMode``, ``is_prefill()``, ``phase == Phase.DECODE``). A dual-stream layer re-produces a value on its
current stream only on its prefill path (``if batch.phase.is_prefill() and batch.shards is not None:`` a gather)
while its side-stream reader runs only for decode batches (``if overlap and batch.mode.is_decode():``).
:mod:`~streamlint.model.flow.batchguards` already sees that the producer and the reader sit under two different
tests of the one batch and reports the race medium; when the two sides also each need a different phase of the
batch, the race needs one batch to be prefill and decode at once: a protocol of the batch the analysis does not
see, and one serving code keeps by construction. Such a race is reported low.

:func:`exclusive_phases` reads, for each side, the ``if`` statements of its own function whose body (not its
``else``) holds it, and each conjunct of their tests (``a and b``) that is a MODE TEST: a call taking no argument
named ``is_`` + phase words only (``is_decode()``, ``is_extend()``, ``is_decode_or_idle()``; ``prefill`` / ``extend``
-> prefill, ``decode`` -> decode, ``mixed`` -> both), an ``==`` / ``is`` / ``in`` comparison with a constant made of
phase words only (``Phase.PREFILL``, ``("decode", "idle")``), a disjunction all of whose parts are mode tests, or a
call of a project function whose leading guards (``if mode is None or not mode.is_extend(): return False``, before
any other statement that may return) need one. Nothing else names a phase: a conjunct that may be negated (``not``,
``!=``, ``not in``, ``is None``, ``is not`` anything but None) holds where the phase does not; a flag, a property or
a stream whose name carries a phase word (``self.chunked_prefill``, ``req.prefill_done``, ``is_prefill_finished()``,
``self.decode_stream``) is no phase of the batch; a test of the parts a batch carries (``meta.decode_rows is not
None``) holds for a mixed batch beside ``is_extend()``. The sides are exclusive when each needs a phase and no phase
is needed by both; a side under no mode test, or under one naming both phases (a mixed batch), races on every
batch, and keeps its confidence; so does a race whose two sides share a loop of the reader's function (the batch
may change phase between two passes: a generation loop whose first pass is the prefill). (Review of prec36b: a lexical reading of every name lowered true races).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.syntax import contains, local_nodes, node_memo

if TYPE_CHECKING:
    from streamlint.model.project import Project

_WORDS = {"prefill": frozenset({"prefill"}), "extend": frozenset({"prefill"}), "decode": frozenset({"decode"}),
          "decoding": frozenset({"decode"}), "mixed": frozenset({"prefill", "decode"})}
_FILLERS = frozenset({"or", "idle"})  # (``is_decode_or_idle()``: an idle batch is in no phase)
_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The parts of ``a and b and c`` (the test itself when it is no conjunction)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _disjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _disjuncts(test.left) + _disjuncts(test.right)
    return [test]


def _negating(node: cst.CSTNode) -> bool:
    """May ``node`` hold where what it names does not: a ``not``, ``!=``, ``not in``, ``is not X`` (X not None),
    ``is None`` (``batch.prefill_meta is None`` holds for decode batches)?"""
    for n in local_nodes(node):
        if isinstance(n, cst.UnaryOperation) and isinstance(n.operator, cst.Not):
            return True
        if isinstance(n, cst.ComparisonTarget) and (
                isinstance(n.operator, (cst.NotEqual, cst.NotIn))
                or isinstance(n.operator, cst.Is) and isinstance(n.comparator, cst.Name)
                and n.comparator.value == "None"
                or isinstance(n.operator, cst.IsNot) and not (isinstance(n.comparator, cst.Name)
                                                             and n.comparator.value == "None")):
            return True
    return False


def _words(text: str) -> list[str]:
    return [w.lower() for w in _SPLIT.split(text) if w]


def _phase_name(text: str, prefix: str | None) -> frozenset:
    """The phases an identifier or string names when it is nothing but phase words (``DECODE``, ``"extend"``,
    ``is_decode_or_idle`` with ``prefix`` ``is``): ``prefill_done``, ``decode_stream``, ``chunked_prefill`` or
    ``is_prefill_finished`` name a property, a stream or a feature, not the phase a batch is in."""
    words = _words(text)
    if prefix is not None:
        if words[:1] != [prefix]:
            return frozenset()
        words = words[1:]
    found = frozenset().union(*(_WORDS.get(w, frozenset()) for w in words)) if words else frozenset()
    return found if found and all(w in _WORDS or w in _FILLERS for w in words) else frozenset()


def _constant_phases(node: cst.BaseExpression) -> frozenset:
    """The phases a compared constant names: ``Phase.PREFILL``, ``"decode"``, a tuple of those (all must name one)."""
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        parts = [_constant_phases(e.value) for e in node.elements]
        return frozenset().union(*parts) if parts and all(parts) else frozenset()
    if isinstance(node, cst.Attribute):
        return _phase_name(node.attr.value, None)
    if isinstance(node, cst.SimpleString):
        return _phase_name(node.value.strip("'\""), None)
    return frozenset()


def _callee_phases(project: Project, model, call: cst.Call, depth: int) -> frozenset:
    """The phases a project function called as a test needs to return a true value: the mode tests its leading
    guards ``if A or not B: return False`` (``return None``, ``return``) need (``if mode is None or not
    mode.is_extend(): return False`` needs ``mode.is_extend()``). Only the guards of its own body before any other
    statement that may return count: a guard nested in another test, or after an early ``return True``, does not
    hold on every path that returns a true value."""
    if depth > 1 or model is None:
        return frozenset()
    try:
        found = project.function(model.resolve(call.func, None), model)
    except Exception:  # (a shape the resolver does not expect: no callee)
        return frozenset()
    if found is None:
        return frozenset()
    fn, home = found
    out: set[str] = set()
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else ()
    for node in body:
        stmt = node.body.body[0] if isinstance(node, cst.If) and node.orelse is None \
            and isinstance(node.body, cst.IndentedBlock) and len(node.body.body) == 1 else None
        ret = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if isinstance(ret, cst.Return) and (
                ret.value is None or isinstance(ret.value, cst.Name) and ret.value.value in ("False", "None")):
            for part in _disjuncts(node.test):  # (each part is false where the function goes on)
                if isinstance(part, cst.UnaryOperation) and isinstance(part.operator, cst.Not) \
                        and not _negating(part.expression):
                    out |= _conjunct_phases(project, home, part.expression, depth + 1)
            continue
        if any(isinstance(n, (cst.Return, cst.Raise, cst.Yield)) for n in local_nodes(node)):
            break
    return frozenset(out)


def _conjunct_phases(project: Project, model, conj: cst.BaseExpression, depth: int = 0) -> frozenset:
    """The phases one conjunct of a test needs the batch to be in: a mode test (``mode.is_decode()``,
    ``step.phase == Phase.PREFILL``, ``stage in ("decode", "idle")``), a disjunction of mode tests, or a call of a
    project function that needs one (:func:`_callee_phases`). A test of what a batch carries (``meta.decode_rows
    is not None``: a mixed batch carries both parts), of a flag or a stream whose name holds a phase word
    (``self.chunked_prefill``, ``req.prefill_done``, ``self.decode_stream``), or a negated one, needs none."""
    if _negating(conj):
        return frozenset()
    if isinstance(conj, cst.BooleanOperation) and isinstance(conj.operator, cst.Or):
        parts = [_conjunct_phases(project, model, d, depth) for d in _disjuncts(conj)]
        return frozenset().union(*parts) if all(parts) else frozenset()
    if isinstance(conj, cst.Call) and not conj.args:
        name = conj.func.attr.value if isinstance(conj.func, cst.Attribute) else ""
        found = _phase_name(name, "is")
        if found:
            return found
    if isinstance(conj, cst.Comparison) and len(conj.comparisons) == 1 \
            and isinstance(conj.comparisons[0].operator, (cst.Equal, cst.Is, cst.In)):
        return _constant_phases(conj.comparisons[0].comparator)
    if isinstance(conj, cst.Call):
        return _callee_phases(project, model, conj, depth)
    return frozenset()


def _phases(project: Project, model, fn: cst.FunctionDef, node: cst.CSTNode) -> frozenset:
    """The phases the ``if`` tests of ``fn`` whose body holds ``node`` need (module docstring)."""
    ifs = node_memo("phaseguards_ifs", fn, lambda f: tuple(n for n in local_nodes(f) if isinstance(n, cst.If)))
    found: set[str] = set()
    for n in ifs:
        if contains(n.body, node):
            for conj in _conjuncts(n.test):
                found |= _conjunct_phases(project, model, conj)
    return frozenset(found)


def _loop_carried(fn: cst.FunctionDef, site: cst.CSTNode | None, node: cst.CSTNode) -> bool:
    """Do ``site`` (the producer, or the statement of ``fn`` that reached it in a helper) and ``node`` sit in one
    loop of ``fn``: a value made in one pass may be read in the next, once the batch has moved on to another phase
    (``for _ in range(n): ... sched.advance()``)?"""
    loops = node_memo("phaseguards_loops", fn, lambda f: tuple(
        n for n in local_nodes(f) if isinstance(n, (cst.For, cst.While))))
    return site is None or any(contains(n, node) and contains(n, site) for n in loops)


def exclusive_phases(project: Project, producer: tuple, reader: tuple, site: cst.CSTNode | None) -> bool:
    """Do the two sides, each (file model, function node, node), run in two different phases of the batch: each
    under a mode test naming a phase, none named by both, and no loop of the reader's function holding both the
    reader and ``site`` (the producer's statement there)?"""
    mine, theirs = (_phases(project, *side) for side in (producer, reader))
    return bool(mine) and bool(theirs) and not mine & theirs and not _loop_carried(reader[1], site, reader[2])


__all__ = ["exclusive_phases"]
