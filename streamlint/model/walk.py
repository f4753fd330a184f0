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


_IS_NODE: dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    """``issubclass(kind, CSTNode)``, cached: ``isinstance`` against the CSTNode ABC is slow."""
    found = _IS_NODE.get(kind)
    if found is None:
        found = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return found


_SEQUENCES = (list, tuple)


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a visitor that only reads (its return values are ignored)."""
    visit, leave = _dispatch(visitor, node)
    if visit is None or visit(visitor, node) is not False:
        for name in _order(node):
            value = getattr(node, name)
            kind = type(value)
            if kind in _SEQUENCES:
                for item in value:
                    if _IS_NODE.get(type(item)) or _is_node(type(item)):
                        walk(item, visitor)
            elif _IS_NODE.get(kind) or _is_node(kind):
                walk(value, visitor)
    if leave is not None:
        leave(visitor, node)


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` without its cost: LibCST computes that property by running a visitor that
    rebuilds the node; this reads the fields in the same lexical order."""
    found: list[cst.CSTNode] = []
    for name in _order(node):
        value = getattr(node, name)
        kind = type(value)
        if kind in _SEQUENCES:
            found.extend(item for item in value if _IS_NODE.get(type(item)) or _is_node(type(item)))
        elif _IS_NODE.get(kind) or _is_node(kind):
            found.append(value)
    return found
