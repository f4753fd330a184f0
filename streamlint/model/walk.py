"""A read-only traversal of a LibCST tree, several times cheaper than ``node.visit(visitor)``.

``CSTNode.visit`` rebuilds every node it passes (``_visit_and_replace_children`` constructs and
validates a new node even for a visitor that changes nothing), which makes a plain visitor cost about as
much as the parse itself. :func:`walk` calls the same ``visit_<Type>`` / ``leave_<Type>`` methods of a
``CSTVisitor`` in the same order (children in lexical order; no children when ``visit_<Type>`` returns
False; ``leave_<Type>`` always) but only reads the fields.

The lexical field order of each node type is learned once from LibCST itself: one call of
``_visit_and_replace_children`` with a visitor that records ``on_visit_attribute`` and does not descend.
Attribute hooks (``visit_<Type>_<field>``) are not supported: visitors that define them must use
``node.visit``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from streamlint._lazy import cst

_ORDER: dict[object, tuple[str, ...]] = {}
_NULLABLE: dict[type, tuple[str, ...]] = {}
_DISPATCH: dict[tuple[type, type], tuple[Callable[..., Any] | None, Callable[..., Any] | None]] = {}


_RECORDER: list[type] = []


def _field_recorder() -> "cst.CSTVisitor":
    """A visitor that records which fields LibCST visits, in order, without descending (the class is
    made on first use: its base is LibCST's, which is imported lazily)."""
    if not _RECORDER:
        class _FieldRecorder(cst.CSTVisitor):
            def __init__(self) -> None:
                self.fields: list[str] = []

            def on_visit(self, node: cst.CSTNode) -> bool:
                return False

            def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
                if attribute not in self.fields:
                    self.fields.append(attribute)

        _RECORDER.append(_FieldRecorder)
    return _RECORDER[0]()


def _nullable(kind: type) -> tuple[str, ...]:
    found = _NULLABLE.get(kind)
    if found is None:
        found = _NULLABLE[kind] = tuple(f.name for f in dataclasses.fields(kind) if f.default is None)
    return found


def _order(node: cst.CSTNode) -> tuple[str, ...]:
    """The fields of ``node`` in lexical order (LibCST skips some optional fields when they are None).

    Once a node of a type has been seen with every optional field present, that order serves every node
    of the type (LibCST visits the fields in one fixed sequence; an absent field is None, not a node, and
    is skipped by the callers)."""
    kind = type(node)
    order = _ORDER.get(kind)
    if order is not None:
        return order
    nullable = _NULLABLE.get(kind)
    if nullable is None:
        nullable = _nullable(kind)
    absent = tuple(getattr(node, name) is None for name in nullable)
    key = (kind, absent)
    order = _ORDER.get(key)
    if order is None:
        recorder = _field_recorder()
        node._visit_and_replace_children(recorder)
        order = _ORDER[key] = tuple(recorder.fields)
        if not any(absent):
            _ORDER[kind] = order  # complete: the order of every node of this type from now on
    return order


def _dispatch(visitor: cst.CSTVisitor, node: cst.CSTNode):
    key = (type(visitor), type(node))
    found = _DISPATCH.get(key)
    if found is None:
        name = type(node).__name__
        visit = getattr(type(visitor), f"visit_{name}", None)
        leave = getattr(type(visitor), f"leave_{name}", None)
        found = _DISPATCH[key] = (visit, leave)
    return found


_IS_NODE: dict[type, bool] = {}  # every CSTNode type -> True
_SUBSTANTIVE: dict[type, bool] = {}  # CSTNode types that are not trivia -> True

# Trivia: whitespace, comments, punctuation and operator tokens. Their subtrees hold only more trivia,
# and they are about 60% of a module's nodes. children() leaves them out; walk() does too for a visitor
# with no visit_/leave_ method for any of them (LibCST's own CSTVisitor has them all: nothing is skipped
# for it). Operators stay reachable through their parents' fields (``BinaryOperation.operator``).
_TRIVIA_NAMES = (
    "SimpleWhitespace", "ParenthesizedWhitespace", "TrailingWhitespace", "EmptyLine", "Newline", "Comment",
    "Comma", "Dot", "Colon", "Semicolon", "AssignEqual", "ImportStar", "Asynchronous", "LeftParen",
    "RightParen", "LeftSquareBracket", "RightSquareBracket", "LeftCurlyBrace", "RightCurlyBrace",
)
_TRIVIA_BASES = ("BaseBinaryOp", "BaseUnaryOp", "BaseBooleanOp", "BaseCompOp", "BaseAugOp")
_TRIVIA: list[frozenset[type]] = []
_PRUNES: dict[type, bool] = {}  # visitor type -> may skip trivia


def trivia_types() -> frozenset[type]:
    if not _TRIVIA:
        found: set[type] = {getattr(cst, name) for name in _TRIVIA_NAMES if hasattr(cst, name)}
        stack = [getattr(cst, name) for name in _TRIVIA_BASES if hasattr(cst, name)]
        while stack:
            kind = stack.pop()
            found.add(kind)
            stack.extend(kind.__subclasses__())
        _TRIVIA.append(frozenset(found))
    return _TRIVIA[0]


def _is_node(kind: type) -> bool:
    """``issubclass(kind, CSTNode)``, cached: ``isinstance`` against the CSTNode ABC is slow."""
    found = _IS_NODE.get(kind)
    if found is None:
        found = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return found


def _is_substantive(kind: type) -> bool:
    found = _SUBSTANTIVE.get(kind)
    if found is None:
        found = _SUBSTANTIVE[kind] = _is_node(kind) and kind not in trivia_types()
    return found


def _prunes(visitor_type: type) -> bool:
    found = _PRUNES.get(visitor_type)
    if found is None:
        found = _PRUNES[visitor_type] = not any(
            hasattr(visitor_type, f"{hook}_{kind.__name__}") for kind in trivia_types() for hook in ("visit", "leave"))
    return found


_SEQUENCES = (list, tuple)


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a visitor that only reads (its return values are ignored)."""
    if _prunes(type(visitor)):
        _walk(node, visitor, _SUBSTANTIVE, _is_substantive)
    else:
        _walk(node, visitor, _IS_NODE, _is_node)


def _walk(node: cst.CSTNode, visitor: cst.CSTVisitor, keep: dict[type, bool], classify: Callable[[type], bool]) -> None:
    visit, leave = _dispatch(visitor, node)
    if visit is None or visit(visitor, node) is not False:
        for name in _ORDER.get(type(node)) or _order(node):
            value = getattr(node, name)
            kind = type(value)
            if kind is list or kind is tuple:
                for item in value:
                    item_kind = type(item)
                    wanted = keep.get(item_kind)
                    if wanted is None:
                        wanted = classify(item_kind)
                    if wanted:
                        _walk(item, visitor, keep, classify)
            else:
                wanted = keep.get(kind)
                if wanted is None:
                    wanted = classify(kind)
                if wanted:
                    _walk(value, visitor, keep, classify)
    if leave is not None:
        leave(visitor, node)


# children() answers by id(node), each with the node it was computed for (held, so its id is not reused while the
# entry lives): the analyses walk the same statements again and again (on torch-npu's ``_graph_tree.py`` 73,120
# calls for 11,583 nodes). Nodes are immutable, so an answer never goes stale; the entries go at the end of each
# file's analysis and when the models are released (forget_children), and all at once past _CHILDREN_KEPT, so what
# this keeps alive is bounded (~250 bytes an entry) and never a released tree.
_CHILDREN: dict[int, tuple[object, tuple]] = {}
_CHILDREN_KEPT = 32_768


def forget_children() -> None:
    _CHILDREN.clear()


def children(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """``node.children`` without its cost (LibCST computes that property by running a visitor that
    rebuilds the node) and without trivia (whitespace, comments, punctuation, operator tokens): the
    children in lexical order."""
    known = _CHILDREN.get(id(node))
    if known is not None:
        return known[1]
    answer = _children(node)
    if len(_CHILDREN) >= _CHILDREN_KEPT:
        _CHILDREN.clear()
    _CHILDREN[id(node)] = (node, answer)
    return answer


def _children(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    found: list[cst.CSTNode] = []
    add = found.append
    keep = _SUBSTANTIVE
    for name in _ORDER.get(type(node)) or _order(node):  # (the complete order of the type, once known)
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            for item in value:
                item_kind = type(item)
                wanted = keep.get(item_kind)
                if wanted is None:
                    wanted = _is_substantive(item_kind)
                if wanted:
                    add(item)
        else:
            wanted = keep.get(kind)
            if wanted is None:
                wanted = _is_substantive(kind)
            if wanted:
                add(value)
    return tuple(found)

def descendants(node: cst.CSTNode, in_order: bool = False):
    """``node`` and every node under it (depth first, no trivia: :func:`children`); for "is there any"
    and "collect all" questions, where the order does not matter. ``in_order``: in lexical pre-order, for
    a walk where what a node means depends on the nodes before it (a local bound earlier, then used)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)) if in_order else children(n))

