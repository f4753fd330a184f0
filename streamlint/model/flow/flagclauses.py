"""What a path knows of the flags a function computes from other flags (issue 16, [coarse-correlated-join]).

A fused MoE runner decides its plan once, in boolean locals, and tests them again and again: ``factored =
shared or prefill``, ``fused_tail = factored and not prefill and fits``, ``staged = two_stream and (factored or
post_reduce)``. The side stream is forked under ``if staged:``, and joined under every arm of the later plan
(``if fused_tail: ... wait``, ``if factored and not fused_tail: ... wait``, ``elif post_reduce and not factored:
... wait``): a path that took the fork takes one of the joins, because ``staged`` holds only where ``factored`` or
``post_reduce`` does. Walking the tests as independent, the flow took a path no run takes (forked, then none of
the joins) and reported the free of what the side stream read, or the event recorded there as dropped.

A flag bound to a boolean operation says, where it holds, that each operand of an ``and`` holds, and that one
operand of an ``or`` does (clauses ``not flag or operand``, ``not flag or a or b`` for an ``or`` operand of an
``and``); where it does not hold, that some operand of an ``and`` fails and every operand of an ``or`` does. The
tests a path took add clauses too (``ControlFlow.constrain``: ``a and b`` false, one of them false). Each time a
path learns an outcome, :meth:`FlagClauses.propagate` draws what the clauses then force (unit propagation: a
clause all of whose literals but one are false makes that one true), so the later test ``post_reduce and not
factored`` is decided on the path that forked and skipped the first two arms. A fact drawn is about the values at
that point, and goes when a name it mentions is bound again (``Storages.invalidate``), as a test's own does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst

if TYPE_CHECKING:
    from streamlint.model.flow.values import State

_MAX_ROUNDS = 8  # propagation rounds per learnt outcome (each round settles at least one literal or stops)


def _operands(e: cst.BaseExpression, kind: type) -> list[cst.BaseExpression]:
    """The operands of a chain of one boolean operator (``a and b and c``: the three of them)."""
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if isinstance(x, cst.BooleanOperation) and isinstance(x.operator, kind):
            stack += [x.right, x.left]
        else:
            out.append(x)
    return out


class FlagClauses:
    """Mixin of :class:`~streamlint.model.flow.interp.Interp` (over ``ControlFlow.assign`` / ``branch``)."""

    def conjunction_flag(self, st: State, target: cst.Name, value: cst.BooleanOperation) -> None:
        """``overlap = enabled and run_lora and layer.shared_loras``: where the flag holds, so does each
        operand (clauses ``not overlap or operand``), so a later ``if run_lora:`` is decided on the paths
        that took ``if overlap:``; an operand that is itself an ``or`` (``two_stream and (factored or
        post_reduce)``) gives ``not flag or factored or post_reduce``. ``factored = shared or prefill``: where it
        holds one of them does, where it does not, neither does (``flag or not shared``)."""
        flag, positive = self.test_key(st, target)  # type: ignore[attr-defined]
        single = self.single  # type: ignore[attr-defined]  # (an inlined helper's flags: its conjunctions only)
        if flag is None or single and isinstance(value.operator, cst.Or):
            return
        if isinstance(value.operator, cst.Or):
            literals = [self.test_key(st, o) for o in _operands(value, cst.Or)]  # type: ignore[attr-defined]
            if any(k is None or k == flag for k, _ in literals):
                return
            st.clauses.append(((flag, not positive), *literals))
            st.clauses.extend(((flag, positive), (k, not p)) for k, p in literals)
        else:
            for operand in _operands(value, cst.And):
                if isinstance(operand, cst.BooleanOperation) and isinstance(operand.operator, cst.Or) and not single:
                    literals = [self.test_key(st, o) for o in _operands(operand, cst.Or)]  # type: ignore[attr-defined]
                    if all(k is not None and k != flag for k, _ in literals):
                        st.clauses.append(((flag, not positive), *literals))
                        continue
                key, sign = self.test_key(st, operand)  # type: ignore[attr-defined]
                if key is not None and key != flag:
                    st.clauses.append(((flag, not positive), (key, sign)))
        if not single:
            self.propagate(st)

    def propagate(self, st: State) -> None:
        """Settle every literal the path's clauses force given what it assumes (unit propagation); a literal
        already assumed either way is left as it is."""
        if not st.clauses or not st.assume:
            return
        for _ in range(_MAX_ROUNDS):
            learnt = False
            for clause in st.clauses:
                open_ = [(k, p) for k, p in clause if k not in st.assume]
                if len(open_) != 1 or any(st.assume[k] == p for k, p in clause if k in st.assume):
                    continue
                key, p = open_[0]
                st.assume[key] = p
                learnt = True
            if not learnt:
                return


__all__ = ["FlagClauses"]
