"""Values a project helper builds only from what code not seen gives (issue 16 §3, [host-object-not-tensor]).

A storage manager's lookup helper hands back the chunks it found: ``chunks = []``, a loop over what a token database
(an object of unknown class) yields for the tokens, a batch of memory objects a storage manager hands out for their
keys, ``chunks.append((key, obj, start, end))``, then ``return chunks, total_size``. Nothing in that code makes a tensor:
no kernel, no device copy, no device factory; whether the memory objects are device data, and which stream wrote them,
rests only on the unseen objects that hand them out. :func:`~streamlint.model.flow.hosthelpers.opaque_returns` asks
:func:`unseen_build` of each ``return`` of a helper, which classifies an expression of the helper's body as

- ``HOST``: a literal, an empty display (a container the helper fills), ``len(...)``, a comparison, a display or a
  local of those only: no device data at all;
- ``UNSEEN``: what code not seen gives (``leaf``: a method of an object of unknown class not handed the helper's
  tensor, a field read, another such helper's result), an element of it (a subscript, a ``for`` target over it,
  ``zip`` / ``enumerate`` / ``iter`` / ``next`` / ``list`` of it, ``.items()`` / ``.values()`` / ``.get(k)`` of it), a
  display, comprehension or arithmetic of such values and host ones, a local every binding of which (plain,
  annotated, augmented, unpacked, a loop target, a fill of a local container: ``.append`` / ``.extend`` /
  ``.insert`` / ``.add`` / ``.update`` / ``c[k] = v``) is one of those, at least one of them unseen;
- None: anything else (a parameter, the caller's value; a torch op, a tensor method: a kernel the helper queues
  itself; a ``with`` target; a name bound nowhere in the helper).

Arithmetic of unseen values is itself unseen: if they were device tensors the helper's own kernel would make the
result, but that they are device tensors rests on the same unseen code (a sum of sizes, ``total += obj.get_size()``).
"""

from __future__ import annotations

from typing import Callable

from streamlint._lazy import cst
from streamlint.model.syntax import local_nodes, target_names

HOST = "host"
UNSEEN = "unseen"

# builtins whose result is (an iterator over / a collection of) the elements of their arguments
_ELEMENT_BUILTINS = frozenset({"zip", "enumerate", "iter", "next", "list", "tuple", "sorted", "reversed", "set",
                               "dict", "filter"})
# builtins giving a Python scalar, whatever they are handed
_HOST_BUILTINS = frozenset({"len", "isinstance", "bool", "str", "repr", "hash", "id", "range", "type", "callable",
                            "hasattr"})
# container methods handing out what the container holds
_ELEMENT_METHODS = frozenset({"items", "values", "keys", "get", "pop", "popitem", "copy", "popleft"})
# container methods putting their (last) argument in the receiver
_FILLS = frozenset({"append", "extend", "insert", "add", "update", "appendleft"})
_MAX_DEPTH = 6


def combine(kinds) -> str | None:
    """None when any is None; UNSEEN when any is; else HOST."""
    kinds = list(kinds)
    if any(k is None for k in kinds):
        return None
    return UNSEEN if UNSEEN in kinds else HOST


def unseen_build(fn, v: cst.BaseExpression, leaf: Callable[[cst.BaseExpression], bool]) -> str | None:
    """The kind of ``v`` (an expression of ``fn``'s body, module docstring); ``leaf(e)`` says whether the call or
    attribute ``e`` hands back what code not seen gives."""
    return _Kinds(fn, leaf).kind(v, {}, 0)


_DISPLAYS = (cst.Tuple, cst.List, cst.Dict, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def built(fn, v: cst.BaseExpression) -> bool:
    """Is ``v`` (a ``return`` value of ``fn``) a value the helper assembles rather than one it passes on: a display
    or a comprehension (``return found, total``), or a local it fills (``found = []``, ``found.append(...)``)?"""
    if isinstance(v, _DISPLAYS):
        return True
    return isinstance(v, cst.Name) and v.value not in fn.all_params \
        and any(isinstance(b, _DISPLAYS) for b in _bindings(fn).get(v.value, ()))


class _Kinds:
    def __init__(self, fn, leaf) -> None:
        self.fn, self.leaf = fn, leaf
        self.seen: set[str] = set()
        self.bindings = _bindings(fn)

    def kind(self, e: cst.BaseExpression, comp: dict[str, str | None], depth: int) -> str | None:
        if depth > _MAX_DEPTH:
            return None
        d = depth + 1
        if isinstance(e, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
                          cst.FormattedString, cst.Comparison)):
            return HOST
        if isinstance(e, cst.UnaryOperation):
            return self.kind(e.expression, comp, d)
        if isinstance(e, cst.Name):
            return self.name(e.value, comp, d)
        if isinstance(e, (cst.Tuple, cst.List, cst.Set)):
            return combine(self.kind(el.value, comp, d) for el in e.elements)
        if isinstance(e, cst.Dict):
            return combine(k for el in e.elements for k in (
                (self.kind(el.key, comp, d), self.kind(el.value, comp, d)) if isinstance(el, cst.DictElement)
                else (self.kind(el.value, comp, d),)))
        if isinstance(e, cst.IfExp):
            return combine((self.kind(e.body, comp, d), self.kind(e.orelse, comp, d)))
        if isinstance(e, cst.BinaryOperation):
            return combine((self.kind(e.left, comp, d), self.kind(e.right, comp, d)))
        if isinstance(e, cst.Subscript):
            return self.kind(e.value, comp, d)  # an element of it
        if isinstance(e, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            return self.comprehension(e, comp, d)
        if isinstance(e, cst.Call):
            return self.call(e, comp, d)
        if isinstance(e, cst.Attribute):
            return UNSEEN if self.leaf(e) else None
        return None

    def name(self, name: str, comp: dict[str, str | None], depth: int) -> str | None:
        if name in comp:
            return comp[name]
        if name in ("True", "False", "None"):
            return HOST
        if name in self.fn.all_params:
            return None  # (the caller's value)
        bound = self.bindings.get(name)
        if not bound:
            return None
        if name in self.seen:
            return HOST  # (the same local again: its other bindings decide)
        self.seen.add(name)
        try:
            return combine(self.kind(b, comp, depth) if b is not None else None for b in bound)
        finally:
            self.seen.discard(name)

    def comprehension(self, e, comp: dict[str, str | None], depth: int) -> str | None:
        inner = dict(comp)
        kinds = []
        f = e.for_in
        while f is not None:
            it = self.kind(f.iter, inner, depth)
            kinds.append(it)
            for n in target_names(f.target):
                inner[n] = it  # (an element of what it iterates)
            f = f.inner_for_in
        if isinstance(e, cst.DictComp):
            kinds += [self.kind(e.key, inner, depth), self.kind(e.value, inner, depth)]
        else:
            kinds.append(self.kind(e.elt, inner, depth))
        return combine(kinds)

    def call(self, e: cst.Call, comp: dict[str, str | None], depth: int) -> str | None:
        func = e.func
        if isinstance(func, cst.Name) and func.value in _HOST_BUILTINS and func.value not in self.bindings:
            return HOST
        if isinstance(func, cst.Name) and func.value in _ELEMENT_BUILTINS and func.value not in self.bindings:
            args = [a.value for a in e.args if a.keyword is None]
            return combine(self.kind(a, comp, depth) for a in args) if args else HOST
        if isinstance(func, cst.Attribute) and func.attr.value in _ELEMENT_METHODS:
            recv = self.kind(func.value, comp, depth)
            if recv is not None:
                return combine([recv] + [self.kind(a.value, comp, depth) for a in e.args[1:]])
        return UNSEEN if self.leaf(e) else None


def _bindings(fn) -> dict[str, list[cst.BaseExpression | None]]:
    """Every value the helper binds to each local, by any binding (None: one not classifiable, a ``with`` target or
    an exception name), and what it puts in a local container (``c.append(v)``, ``c[k] = v``)."""
    memo = fn.__dict__.get("_unseen_bindings")
    if memo is not None:
        return memo
    found: dict[str, list] = {}

    def put(target, value) -> None:
        for n in target_names(target.value if isinstance(target, cst.StarredElement) else target):
            found.setdefault(n, []).append(value)

    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                if isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name):
                    found.setdefault(t.target.value.value, []).append(node.value)  # `c[k] = v`
                else:
                    put(t.target, node.value)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            if node.value is not None:
                if isinstance(node.target, cst.Subscript) and isinstance(node.target.value, cst.Name):
                    found.setdefault(node.target.value.value, []).append(node.value)
                else:
                    put(node.target, node.value)
        elif isinstance(node, cst.For):
            put(node.target, node.iter)  # (an element of it: its kind)
        elif isinstance(node, cst.NamedExpr):
            put(node.target, node.value)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            put(node.asname.name, None)
        elif isinstance(node, cst.ExceptHandler) and node.name is not None:
            put(node.name.name, None)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and isinstance(node.func.value, cst.Name) and node.func.attr.value in _FILLS and node.args:
            found.setdefault(node.func.value.value, []).append(node.args[-1].value)
    fn.__dict__["_unseen_bindings"] = found
    return found


__all__ = ["HOST", "UNSEEN", "built", "combine", "unseen_build"]
