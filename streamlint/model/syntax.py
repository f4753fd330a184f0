"""Small read-only queries over LibCST nodes shared by the model modules."""

from __future__ import annotations

from collections.abc import Iterator

from streamlint._lazy import cst
from streamlint.model.walk import children



def contains(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """True when ``inner`` is ``outer`` or one of its descendants (nested definitions included)."""
    stack = [outer]
    while stack:
        node = stack.pop()
        if node is inner:
            return True
        stack.extend(children(node))
    return False


def local_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and its descendants in lexical pre-order, without entering nested functions, classes
    or lambdas (the nested definition itself is yielded, its body is not)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and current is not node:
            continue
        stack.extend(reversed(children(current)))


__all__ = ["contains", "local_nodes"]
