"""The contents of a parameter: collections a function walks that are the caller's, reached through the
parameter's attributes and items (syntax only; used by :meth:`~streamlint.model.flow.elements.Elements.argument_elements`).

A scheduler hands a whole request and the function walks one of its lists::

    def park(self, rid, req, dev):
        self.parked[rid] = list(req.blocks[self.tier])
        with torch.cuda.stream(dev.swap_stream):
            for j, blk in enumerate(self.parked[rid]):
                if isinstance(blk, torch.Tensor):
                    self.parked[rid][j] = blk.to("cpu", non_blocking=True)

:func:`param_root` follows the walked collection back to the parameter whose contents it holds: an attribute /
item chain on the parameter (``req.blocks[self.tier]``), a shallow copy of one (``copy.copy`` / ``list`` /
``tuple``), or a name or ``self.*`` place the function binds exactly once, before the loop, to such a value.
:func:`tensor_narrowed` says the loop body treats the element as a tensor by an ``isinstance(item,
torch.Tensor)`` test (alone, or in a conjunction, guarding the body's uses): the caller's device data when it
is not also tested to be on the host (the flow's own guards judge ``.device`` tests)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.hostguards import host_test
from streamlint.model.syntax import local_nodes, node_code

_COPIES = frozenset({"copy.copy", "list", "tuple", "copy"})
_TENSOR_TYPES = frozenset({"torch.Tensor", "Tensor", "torch.nn.Parameter", "nn.Parameter"})


def param_root(fn: FunctionInfo, coll: cst.BaseExpression, before: cst.CSTNode, depth: int = 0) -> str | None:
    """The parameter whose contents ``coll`` holds (see the module docstring), never rebound in ``fn``; None
    when unknown. ``before``: the loop, which the one binding of a name / ``self.*`` place must precede."""
    if depth > 3:
        return None
    if _self_place(coll) or isinstance(coll, cst.Name) and coll.value not in fn.all_params:
        value = _single_binding(fn, coll, before)
        return param_root(fn, value, before, depth + 1) if value is not None else None
    e, chained = coll, False
    while True:
        if isinstance(e, cst.Call) and dotted(e.func) in _COPIES and len(e.args) == 1 and not e.args[0].keyword \
                and not e.args[0].star:
            e = e.args[0].value
        elif isinstance(e, (cst.Subscript, cst.Attribute)):
            e, chained = e.value, True
        else:
            break
    if isinstance(e, cst.Name) and e.value in fn.all_params and e.value != "self" \
            and e.value not in fn.name_assigns and (chained or depth > 0):
        return e.value
    return None


def _self_place(e: cst.BaseExpression) -> bool:
    """``self.f`` or ``self.f[k]`` with ``k`` a plain name or constant."""
    if isinstance(e, cst.Subscript):
        return len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) \
            and isinstance(e.slice[0].slice.value, (cst.Name, cst.Integer, cst.SimpleString)) and _self_place(e.value)
    return isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self"


def _single_binding(fn: FunctionInfo, target: cst.BaseExpression, before: cst.CSTNode) -> cst.BaseExpression | None:
    """The value of the one plain assignment of ``target`` (same text) in ``fn``, made before ``before``;
    None when it is bound in any other way too (a loop target, an augmented assignment, a second binding)."""
    text = node_code(target)
    found: list[cst.BaseExpression] = []
    seen_loop = False
    for node in local_nodes(fn.node):
        if node is before:
            seen_loop = True
        if isinstance(node, cst.Assign):
            if any(node_code(t.target) == text for t in node.targets):
                if seen_loop or len(node.targets) != 1:
                    return None
                found.append(node.value)
            elif any(text in node_code(t.target) for t in node.targets if isinstance(t.target, (cst.Tuple, cst.List))):
                return None
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and node_code(node.target) == text:
            return None
        elif isinstance(node, (cst.For, cst.CompFor)) and text in _names(node.target):
            return None
        elif isinstance(node, cst.WithItem) and node.asname is not None and text in _names(node.asname.name):
            return None
    return found[0] if len(found) == 1 else None


def _names(target: cst.CSTNode) -> set[str]:
    return {node_code(n) for n in local_nodes(target) if isinstance(n, (cst.Name, cst.Attribute, cst.Subscript))}


def tensor_narrowed(body: cst.CSTNode, name: str) -> bool:
    """Does ``body`` test ``isinstance(name, torch.Tensor)`` (or a tuple of tensor types only) in an ``if``
    whose branch then uses ``name``, and nothing in the body saying it is a host tensor (``and item.is_cpu``, a
    nested ``if item.device.type == "cpu":``, ``item.pin_memory()``, ``item.numpy()``: no stream of the caller
    made those)?"""
    nodes = list(local_nodes(body))
    ifs = [node for node in nodes if isinstance(node, cst.If)]
    if any(host_test(node.test, name) for node in ifs) or any(
            isinstance(n, cst.Call) and dotted(n.func) in (f"{name}.pin_memory", f"{name}.numpy") for n in nodes):
        return False  # (also a nested ``if item.is_cpu:``, ``item.pin_memory()``: the loop expects host tensors)
    return any(_narrows(node.test, name) for node in ifs)


def _narrows(test: cst.BaseExpression, name: str) -> bool:
    """The test (or one operand of an ``and``) holds only for a tensor: ``isinstance(name, <tensor types only>)``."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _narrows(test.left, name) or _narrows(test.right, name)
    kinds = _isinstance_kinds(test, name)
    return bool(kinds) and all(k in _TENSOR_TYPES for k in kinds)


def tensor_test(test: cst.BaseExpression, name: str) -> bool:
    """``isinstance(name, torch.Tensor)`` (or ``Tensor``, or a tuple of classes naming it), alone: its ``else``
    arm holds only for what is no tensor at all."""
    return any(k in ("torch.Tensor", "Tensor") for k in _isinstance_kinds(test, name))


def _isinstance_kinds(test: cst.BaseExpression, name: str) -> list[str]:
    """The dotted classes of ``isinstance(name, C)`` / ``isinstance(name, (C1, C2))``; [] for any other test."""
    if not (isinstance(test, cst.Call) and dotted(test.func) == "isinstance" and len(test.args) == 2):
        return []
    subject, kind = test.args[0].value, test.args[1].value
    if not (isinstance(subject, cst.Name) and subject.value == name):
        return []
    return [dotted(k) or "" for k in (el.value for el in kind.elements)] if isinstance(kind, cst.Tuple) \
        else [dotted(kind) or ""]
