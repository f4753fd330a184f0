"""Streams that exist only under a condition: ``s = torch.cuda.Stream() if flag else nullcontext()``.

``with s:`` switches streams only when ``flag`` holds, and the code guards its joins with the same condition
(``if flag: main.wait_stream(s)``) or with a type test of the value (``if isinstance(s, torch.cuda.Stream):``).
Both are the one test of the binding: :func:`null_context_choice` names it, so the interpreter branches the
``with`` on it and reads ``isinstance(s, …Stream)`` as that test (correlated guards, issue 16).
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.syntax import local_nodes


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
