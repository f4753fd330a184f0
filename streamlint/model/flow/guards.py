"""Streams that exist only under a condition: ``s = torch.cuda.Stream() if flag else nullcontext()``.

``with s:`` switches streams only when ``flag`` holds, and the code guards its joins with the same condition
(``if flag: main.wait_stream(s)``) or with a type test of the value (``if isinstance(s, torch.cuda.Stream):``).
Both are the one test of the binding: :func:`null_context_choice` names it, so the interpreter branches the
``with`` on it and reads ``isinstance(s, …Stream)`` as that test (correlated guards, issue 16).
Likewise ``torch.cuda.stream(s)`` with a stream that may be None switches only where ``s`` is not None: a path
that tested it None runs the scope on the current stream (:func:`known_none`).
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import dotted
from streamlint.model.syntax import is_none, local_nodes


def _null(expr: cst.BaseExpression) -> bool:
    """``nullcontext()`` / ``contextlib.nullcontext()`` / ``None``: a value that switches nothing."""
    if isinstance(expr, cst.Name) and expr.value == "None":
        return True
    return isinstance(expr, cst.Call) and (dotted(expr.func) or "").rsplit(".", 1)[-1] == "nullcontext"


def null_context_choice(body: cst.CSTNode, name: str) -> tuple[cst.BaseExpression, bool] | None:
    """(test, the outcome under which ``name`` is a stream) when ``name``'s only binding in ``body`` is a
    conditional expression with a null-context arm; None otherwise."""
    found: list[cst.BaseExpression] = []
    for node in local_nodes(body):
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                found.append(node.value)
    if len(found) != 1 or not isinstance(found[0], cst.IfExp):
        return None
    choice = found[0]
    if _null(choice.orelse) and not _null(choice.body):
        return choice.test, True
    if _null(choice.body) and not _null(choice.orelse):
        return choice.test, False
    return None


def known_none(interp, st, expr: cst.BaseExpression | None) -> bool:
    """``None``, or a stream expression the path has tested to be None (``if s is not None: s.wait_stream(cur)``
    false, ``if not self.side: return`` true): ``torch.cuda.stream(expr)`` then switches nothing, so the fork
    guarded by that test covers every path on which the scope really runs on the stream (correlated guards)."""
    if is_none(expr):
        return True
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return False
    key, positive = interp.test_key(st, expr)
    if key is None:
        return False
    if st.assume.get(f"{key} is None") is True:
        return True
    return positive and st.assume.get(key) is False  # a stream object is truthy: a falsy one is None


def stream_type_test(test: cst.BaseExpression) -> str | None:
    """``isinstance(s, torch.cuda.Stream)``: the name whose stream-ness is tested."""
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance" \
            and len(test.args) == 2 and isinstance(test.args[0].value, cst.Name) \
            and (dotted(test.args[1].value) or "").endswith("Stream"):
        return test.args[0].value.value
    return None


def same_operator_operands(test: cst.BooleanOperation) -> list[cst.BaseExpression]:
    """The operands of a chain of one boolean operator: ``a and b and c`` (parsed ``(a and b) and c``) gives
    ``[a, b, c]``; an operand joined by the other operator (``a and (b or c)``) stays whole."""
    out: list[cst.BaseExpression] = []
    for operand in (test.left, test.right):
        if isinstance(operand, cst.BooleanOperation) and type(operand.operator) is type(test.operator) \
                and not operand.lpar:
            out.extend(same_operator_operands(operand))
        else:
            out.append(operand)
    return out


def ordering_query(test: cst.BaseExpression) -> bool | None:
    """The value of a test decided by a device-ordering query (``acc.resolves_data_dependency()``,
    apis.STREAM_ORDERING_DEVICE_QUERIES), negated or combined with ``and`` / ``or``: false, as on a device that
    does not order its streams' data (on the others no stream hazard exists); None when the test depends on
    anything else."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = ordering_query(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = ordering_query(test.left), ordering_query(test.right)
        absorbing = isinstance(test.operator, cst.Or)  # True absorbs `or`, False absorbs `and`
        if absorbing in (left, right):
            return absorbing
        return left if left is not None and right is not None else None
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) \
            and test.func.attr.value in apis.STREAM_ORDERING_DEVICE_QUERIES:
        return False
    return None
