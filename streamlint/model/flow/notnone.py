"""Names bound to a value that cannot be None, for the tests the flow reads later (issue 16, [correlated-guard]).

A loop that overlaps communication with compute keeps the pending work's handles in a name that is None until the
first send: ``work = None`` before the loop; in a round, ``if work is not None: for w in work: w.wait(); ...`` and
later ``work = works_k + works_v`` when this round sends. The flow does not track the handles (an opaque list), so
``work is not None`` in the next round was an open test, and the path skipping the wait although the previous
round sent was walked too: the buffer the send still reads rewritten with no wait (a false race).

The value of some expressions is never None, whatever their operands are: arithmetic and concatenation
(``a + b``, ``n * k``: ``__add__`` returns a value), a list / tuple / dict / set display, a comprehension, a
lambda, a literal, an f-string. A name bound to one has ``name is None`` false on that path (``State.assume``,
the key :meth:`~streamlint.model.flow.control.ControlFlow.test_key` gives the test), until it is bound again
(``Storages.bind`` drops every assumption naming it). Truth tests (``if work:``) are not decided: a concatenation
may be empty."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.values import NONE, State


def never_none(node: cst.BaseExpression | None) -> bool:
    """Is ``node`` an expression whose value is never None?"""
    return isinstance(node, (cst.BinaryOperation, cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp,
                             cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Lambda, cst.Integer, cst.Float,
                             cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))


class NotNone:
    """The ``is None`` test of a name bound to a never-None value (mixin of the interpreter). It asks orderings
    (render)."""

    def note_not_none(self, st: State, name: cst.Name, v: object, value_node: cst.BaseExpression | None) -> None:
        """``name`` was just bound to ``value_node``: when that is never None, ``name is None`` is false on this
        path (whatever value the flow keeps for it: none, a tuple of its items, a tensor)."""
        if v is not NONE and never_none(value_node):
            st.assume[f"{self.render(st, name)} is None"] = False


__all__ = ["NotNone", "never_none"]
