"""Module parameters stored by reference (issue 16 §3, "Only device data races").

A layer prefetcher or an offloader keeps, per block, the tensors of a module's parameters: ``for name, p in
block.named_parameters(): state[name] = p.data`` then ``self.cpu_params[i] = state``. Such a store rebinds a
slot of a Python container to tensors that already exist (the module's weights and buffers, long-lived for the
stream rules): no kernel writes any memory, so the field is not rewritten by the step (model/stepstate.py).

:func:`parameter_reference` answers for the value stored: a local every binding of which is an empty container
display (``{}``, ``[]``, ``dict()``, ``list()``) and every store into which (``local[k] = v``, ``local.append(v)``)
is a parameter / buffer loop variable of the method (the element, or the element of a ``(name, tensor)`` pair, of
``.parameters()`` / ``.named_parameters()`` / ``.buffers()`` / ``.named_buffers()``) or its ``.data``. Syntax
only, within one function body."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.syntax import local_nodes

_PARAMETER_LISTS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers"})


def _loop_references(body: cst.CSTNode) -> set[str]:
    """Names a ``for`` of ``body`` binds to a module's parameters / buffers."""
    out: set[str] = set()
    for node in local_nodes(body):
        if not (isinstance(node, cst.For) and isinstance(node.iter, cst.Call)
                and isinstance(node.iter.func, cst.Attribute) and node.iter.func.attr.value in _PARAMETER_LISTS):
            continue
        named = node.iter.func.attr.value.startswith("named_")
        target = node.target
        if named and isinstance(target, cst.Tuple) and len(target.elements) == 2:
            target = target.elements[1].value
        if isinstance(target, cst.Name) and (named or not isinstance(node.target, cst.Tuple)):
            out.add(target.value)
    return out


def _reference(v: cst.BaseExpression, refs: set[str]) -> bool:
    if isinstance(v, cst.Attribute) and v.attr.value == "data":
        v = v.value
    return isinstance(v, cst.Name) and v.value in refs


def _empty_display(v: cst.BaseExpression) -> bool:
    return isinstance(v, (cst.Dict, cst.List)) and not v.elements or isinstance(v, cst.Call) and not v.args \
        and (dotted(v.func) or "") in ("dict", "list")


def parameter_reference(body: cst.CSTNode, value: cst.BaseExpression) -> bool:
    """Is ``value``, stored in ``body`` into a slot of a field, a local container of module parameters held by
    reference? (A bare parameter stored into a slot may be copied into a tensor field's memory: not one.)"""
    refs = _loop_references(body)
    if not refs:
        return False
    if not isinstance(value, cst.Name):
        return False
    name, bound, stored = value.value, [], []
    for node in local_nodes(body):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                if isinstance(t.target, cst.Name) and t.target.value == name:
                    bound.append(node.value)
                elif isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name) \
                        and t.target.value.value == name:
                    stored.append(node.value)
                elif name in {n.value for n in local_nodes(t.target) if isinstance(n, cst.Name)}:
                    return False  # (unpacked into, or another use as a target: not followed)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name) \
                and node.target.value == name:
            return False
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and isinstance(node.func.value, cst.Name) and node.func.value.value == name:
            if node.func.attr.value != "append" or len(node.args) != 1:
                return False  # (`update`, `extend`, `setdefault`: not followed)
            stored.append(node.args[0].value)
    return bool(bound) and all(_empty_display(v) for v in bound) and bool(stored) \
        and all(_reference(v, refs) for v in stored)
