"""Two sides of a race that run in two different phases of one batch (issue 16, [correlated-guard]).

Serving code runs each step on a batch that is in one phase: a prefill (extend) batch or a decode batch
(``ForwardMode``, ``is_prefill``, ``attn_metadata.decode_meta``). A dual-stream layer re-produces a value on its
current stream only on its prefill path (a context-parallel gather of the keys, guarded by ``batch.cp_meta is not
None and self.enable_prefill_cp``) while its side-stream reader runs only for decode batches
(``if overlap and batch.mode.is_decode():``). :mod:`~streamlint.model.flow.batchguards` already sees that the
producer and the reader sit under two different tests of the one batch and reports the race medium; when the two
tests also name two different phases, the race needs one batch to be prefill and decode at once: a protocol of
the batch the analysis does not see, and one serving code keeps by construction. Such a race is reported low.

:func:`exclusive_phases` reads, for each side, the ``if`` statements of its own function whose body (not its
``else``) holds it: each conjunct of the test (``a and b``) that the body needs to hold names the phases whose words
its identifiers and strings carry (``prefill`` / ``extend`` -> prefill, ``decode`` -> decode, ``mixed`` -> both).
A conjunct that may be negated (``not``, ``!=``, ``not in``, ``is not`` anything but None) names none: the body
runs where it fails. One side at least must ask which phase the batch IS in (a mode test: ``mode.is_decode()``,
``phase == Phase.PREFILL``): tests of the parts a batch carries (``meta.prefill_rows is not None`` beside
``meta.decode_rows is not None``) both hold for a mixed batch, which carries prefill and decode rows at once. A conjunct calling a project function (``cp_active(batch)``) names the phases that function
needs to return at all: the negated conditions of its early ``return False`` (``if mode is None or not
mode.is_prefill_cp(): return False``: the condition follows the call). The sides are exclusive when each names a
phase and no phase is named by both; a side under no phase test, or under a test naming both phases (a mixed
batch), races on every batch, and keeps its confidence.
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
    """May ``node`` hold where what it names does not: a ``not``, ``!=``, ``not in``, ``is not X`` (X not None)?"""
    for n in local_nodes(node):
        if isinstance(n, cst.UnaryOperation) and isinstance(n.operator, cst.Not):
            return True
        if isinstance(n, cst.ComparisonTarget) and (
                isinstance(n.operator, (cst.NotEqual, cst.NotIn))
                or isinstance(n.operator, cst.IsNot) and not (isinstance(n.comparator, cst.Name)
                                                             and n.comparator.value == "None")):
            return True
    return False


def _named(node: cst.CSTNode) -> frozenset:
    """The phases the identifiers and strings of ``node`` name."""
    found: set[str] = set()
    for n in local_nodes(node):
        text = n.value if isinstance(n, (cst.Name, cst.SimpleString)) else None
        for word in _SPLIT.split(text or ""):
            found |= _WORDS.get(word.lower(), frozenset())
    return frozenset(found)


def _mode_test(conj: cst.BaseExpression) -> bool:
    """Does ``conj`` ask which phase the batch is in (``mode.is_decode()``, ``step.phase == Phase.PREFILL``,
    ``stage in ("decode", "idle")``), not whether it carries a part of one (``meta.prefill_rows is not None``: a mixed
    batch carries both)?"""
    if isinstance(conj, cst.Call):
        name = conj.func.attr.value if isinstance(conj.func, cst.Attribute) else \
            conj.func.value if isinstance(conj.func, cst.Name) else ""
        return name.startswith("is_") and bool(_named(conj.func))
    if isinstance(conj, cst.Comparison) and len(conj.comparisons) == 1 \
            and isinstance(conj.comparisons[0].operator, (cst.Equal, cst.Is, cst.In)):
        return bool(_named(conj.comparisons[0].comparator)) or bool(_named(conj.left))
    return False


def _callee_phases(project: Project, model, call: cst.Call, depth: int) -> tuple[frozenset, bool]:
    """The phases a project function called in a test needs to return a true value, and whether one of them is
    a mode test: the conditions its early ``return False`` / ``return None`` statements leave out (``if mode is
    None or not mode.is_extend(): return False`` needs ``mode.is_extend()``)."""
    if depth > 1 or model is None:
        return frozenset(), False
    try:
        found = project.function(model.resolve(call.func, None), model)
    except Exception:  # (a shape the resolver does not expect: no callee)
        return frozenset(), False
    if found is None:
        return frozenset(), False
    fn, home = found
    out: set[str] = set()
    mode = False
    for node in local_nodes(fn.node):
        if not isinstance(node, cst.If) or node.orelse is not None or len(node.body.body) != 1:
            continue
        stmt = node.body.body[0]
        ret = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not isinstance(ret, cst.Return) or not (
                ret.value is None or isinstance(ret.value, cst.Name) and ret.value.value in ("False", "None")):
            continue
        for part in _disjuncts(node.test):  # (each part is false where the function goes on)
            if isinstance(part, cst.UnaryOperation) and isinstance(part.operator, cst.Not) \
                    and not _negating(part.expression):
                phases, is_mode = _conjunct_phases(project, home, part.expression, depth + 1)
                out |= phases
                mode = mode or is_mode and bool(phases)
    return frozenset(out), mode


def _conjunct_phases(project: Project, model, conj: cst.BaseExpression, depth: int = 0) -> tuple[frozenset, bool]:
    """The phases one conjunct of a test names, and whether it is a mode test naming one (:func:`_mode_test`)."""
    if _negating(conj):
        return frozenset(), False
    found = set(_named(conj))
    mode = _mode_test(conj)
    for n in local_nodes(conj):
        if isinstance(n, cst.Call):
            phases, is_mode = _callee_phases(project, model, n, depth)
            found |= phases
            mode = mode or is_mode
    return frozenset(found), mode


def _phases(project: Project, model, fn: cst.FunctionDef, node: cst.CSTNode) -> tuple[frozenset, bool]:
    """The phases the ``if`` tests of ``fn`` whose body holds ``node`` need, and whether one is a mode test
    (module docstring)."""
    ifs = node_memo("phaseguards_ifs", fn, lambda f: tuple(n for n in local_nodes(f) if isinstance(n, cst.If)))
    found: set[str] = set()
    mode = False
    for n in ifs:
        if contains(n.body, node):
            for conj in _conjuncts(n.test):
                phases, is_mode = _conjunct_phases(project, model, conj)
                found |= phases
                mode = mode or is_mode
    return frozenset(found), mode


def exclusive_phases(project: Project, producer: tuple, reader: tuple) -> bool:
    """Do the two sides, each (file model, function node, node), run in two different phases of the batch: each
    under a test naming a phase, none named by both, one side's a test of the batch's mode?"""
    (mine, mode_a), (theirs, mode_b) = (_phases(project, *side) for side in (producer, reader))
    return bool(mine) and bool(theirs) and not mine & theirs and (mode_a or mode_b)


__all__ = ["exclusive_phases"]
