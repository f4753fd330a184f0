"""Comparisons, and membership tests on hashed containers (mixin of :class:`~streamlint.model.flow.interp.Interp`).

A comparison with a tensor operand is a tensor op (``x == y``, ``t > 0``: a read of both on the current
stream); ``is`` / ``is not`` compare identities and read nothing. ``key in container`` asks the container:
a dict, a set (or a dict's ``keys()``) hashes the key and compares it with the stored keys, never with the
stored values, and a tensor hashes by identity, so the test reads no tensor memory. It is host work even
when the dict holds tensors written on a side stream (``if step in self.checkpoints:``). The container must
evidently be one: a dict / set display or comprehension, ``dict()`` / ``set()`` / ``frozenset()`` /
``defaultdict`` / ``OrderedDict`` / ``Counter`` / ``d.keys()``, or a local / ``self.*`` field that every
assignment in the function / class (``None`` aside, one at least) sets to such a builder, or that is annotated
as a mapping or set (``self.ckpts: Dict[int, torch.Tensor] = {}``). A list or tuple of tensors compares its
elements with ``==`` (``t in [a, b]`` reads them): it stays a read, as does anything of unknown kind."""

from __future__ import annotations

import os

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.flow.values import State
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes

_BUILDERS = frozenset({"dict", "set", "frozenset", "defaultdict", "OrderedDict", "Counter"})
_ANNOTATIONS = frozenset({"Dict", "dict", "Mapping", "MutableMapping", "Set", "set", "FrozenSet", "frozenset",
                          "AbstractSet", "MutableSet", "DefaultDict", "OrderedDict", "Counter"})


def hashed_builder(v: cst.BaseExpression | None) -> bool:
    """Is ``v`` a dict / set display, comprehension or constructor call (``d.keys()`` too)?"""
    if isinstance(v, (cst.Dict, cst.Set, cst.DictComp, cst.SetComp)):
        return True
    if isinstance(v, cst.Call):
        name = (dotted(v.func) or "").rsplit(".", 1)[-1]
        if name in _BUILDERS and not isinstance(v.func, cst.Attribute) or name in _BUILDERS and (
                dotted(v.func) or "").split(".", 1)[0] in ("collections", "typing"):
            return True
        return isinstance(v.func, cst.Attribute) and v.func.attr.value == "keys" and not v.args
    return False


def _none(v: cst.BaseExpression) -> bool:
    return isinstance(v, cst.Name) and v.value == "None"


def _hashed_annotation(ann: cst.BaseExpression | None) -> bool:
    if ann is None:
        return False
    if isinstance(ann, cst.Subscript):
        if (dotted(ann.value) or "").rsplit(".", 1)[-1] == "Optional" and len(ann.slice) == 1 \
                and isinstance(ann.slice[0].slice, cst.Index):
            return _hashed_annotation(ann.slice[0].slice.value)
        ann = ann.value
    return (dotted(ann) or "").rsplit(".", 1)[-1] in _ANNOTATIONS


def _declared(fns, target: str) -> bool:
    """Is ``target`` annotated as a mapping / set in one of ``fns`` (and nowhere as something else)?"""
    found = []
    for fn in fns:
        for node in local_nodes(fn.node.body):
            if isinstance(node, cst.AnnAssign) and dotted(node.target) == target:
                found.append(_hashed_annotation(node.annotation.annotation))
    return bool(found) and all(found)


class Membership:
    """Comparisons (mixin of the interpreter). Interp state it uses: ``cfn``, ``frames``. It asks exprs (ev)
    and storage (op, tensors)."""

    def comparison(self, st: State, e: cst.Comparison) -> object:
        if all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in e.comparisons):
            return None
        vals = [self.ev(st, e.left)] + [self.ev(st, c.comparator) for c in e.comparisons]
        if all(isinstance(c.operator, (cst.In, cst.NotIn)) and self.hashed_container(c.comparator)
               for c in e.comparisons):
            return None  # a hash lookup: no tensor memory read
        return self.op(st, e, vals) if any(self.tensors(st, v) for v in vals) else None

    def hashed_container(self, e: cst.BaseExpression) -> bool:
        """Is ``e`` evidently a dict or a set (see the module docstring)?"""
        if hashed_builder(e):
            return True
        if isinstance(e, cst.Name):
            params = self.cfn.node.params
            if any(p.name.value == e.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)):
                return False
            values = [v for v in self.cfn.name_assigns.get(e.value, ()) if not _none(v)]
            return bool(values) and all(hashed_builder(v) for v in values) or _declared([self.cfn], e.value) \
                and all(hashed_builder(v) or _none(v) for v in self.cfn.name_assigns.get(e.value, ()))
        if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self":
            file, fn = next(((f, fn) for f, fn in reversed(self.frames) if fn.class_name), (None, None))
            cls = file.classes.get(fn.class_name or "") if file is not None else None
            if cls is None:
                return False
            target = f"self.{e.attr.value}"
            memo = derived(self.project, "hashed_fields")  # per class and field: every method is walked once
            key = (os.path.realpath(file.path), cls.name, target)
            if key not in memo:
                values = [a.value for m in cls.methods.values() for a in m.assigns if a.target == target]
                memo[key] = all(hashed_builder(v) or _none(v) for v in values) and (
                    any(not _none(v) for v in values) or _declared(cls.methods.values(), target))
            return memo[key]
        return False


__all__ = ["Membership", "hashed_builder"]
