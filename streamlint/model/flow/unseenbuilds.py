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
from streamlint.model.devobjects import names_tensor_type, param_annotation
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


def unseen_build(fn, v: cst.BaseExpression, leaf: Callable[..., bool]) -> str | None:
    """The kind of ``v`` (an expression of ``fn``'s body, module docstring); ``leaf(e, handed=False)`` says whether the
    call or attribute ``e`` hands back what code not seen gives (``handed``: even when it is handed the helper's
    tensor parameter, as for the records a loop unpacks)."""
    return _Kinds(fn, leaf).kind(v, {}, 0)


_DISPLAYS = (cst.Tuple, cst.List, cst.Dict, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)

# how a binding gives a local its value: plain (``x = v``, ``x += v``, ``x: T = v``, ``(x := v)``), an element of an
# unpacked value (``a, b = v``), a fill of a local container (``xs.append(v)``, ``d[k] = v``), an element of what a loop
# iterates (``for x in v``), the same with each element unpacked into several names (``for a, b, c in v``: records)
PLAIN, PART, FILL, ITER, RECORDS = "plain", "part", "fill", "iter", "records"


def built(fn, v: cst.BaseExpression) -> bool:
    """Is ``v`` (a ``return`` value of ``fn``) a value the helper assembles rather than one it passes on: a display
    or a comprehension (``return found, total``), or a local it fills (``found = []``, ``found.append(...)``)?"""
    if isinstance(v, _DISPLAYS):
        return True
    return isinstance(v, cst.Name) and v.value not in fn.all_params \
        and any(how == FILL or isinstance(b, _DISPLAYS) for b, how in _bindings(fn).get(v.value, ()))


def hands_parameter(fn, call: cst.Call) -> bool:
    """Is ``call`` handed a parameter of ``fn`` as is, one that may be a tensor (unannotated, or annotated with a
    tensor type; not ``self``)? What such a call gives is computed on the caller's data, for all the helper shows."""
    for arg in call.args:
        v = arg.value
        if isinstance(v, cst.Name) and v.value in fn.all_params and v.value not in ("self", "cls"):
            ann = param_annotation(fn, v.value)
            if ann is None or names_tensor_type(ann):
                return True
    return False


class _Kinds:
    def __init__(self, fn, leaf) -> None:
        self.fn, self.leaf = fn, leaf
        self.seen: set[str] = set()
        self.bindings = _bindings(fn)

    def kind(self, e: cst.BaseExpression, comp: dict[str, str | None], depth: int, strict: bool = False) -> str | None:
        """``strict``: ``e`` is put in something the helper assembles (an element of a display, a fill of a list, an
        element of a loop): an unseen call there handed the helper's parameter computes on the caller's data."""
        if depth > _MAX_DEPTH:
            return None
        d = depth + 1
        if isinstance(e, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
                          cst.FormattedString, cst.Comparison)):
            return HOST
        if isinstance(e, cst.UnaryOperation):
            return self.kind(e.expression, comp, d, strict)
        if isinstance(e, cst.Name):
            return self.name(e.value, comp, d)
        if isinstance(e, (cst.Tuple, cst.List, cst.Set)):
            return combine(self.kind(el.value, comp, d, True) for el in e.elements)
        if isinstance(e, cst.Dict):
            return combine(k for el in e.elements for k in (
                (self.kind(el.key, comp, d, True), self.kind(el.value, comp, d, True)) if isinstance(el, cst.DictElement)
                else (self.kind(el.value, comp, d, True),)))
        if isinstance(e, cst.IfExp):
            return combine((self.kind(e.body, comp, d, strict), self.kind(e.orelse, comp, d, strict)))
        if isinstance(e, cst.BinaryOperation):
            return combine((self.kind(e.left, comp, d, strict), self.kind(e.right, comp, d, strict)))
        if isinstance(e, cst.Subscript):
            return self.kind(e.value, comp, d, strict)  # an element of it
        if isinstance(e, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            return self.comprehension(e, comp, d)
        if isinstance(e, cst.Call):
            return self.call(e, comp, d, strict)
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
            return combine(self.binding(b, how, comp, depth) for b, how in bound)
        finally:
            self.seen.discard(name)

    def binding(self, b, how: str, comp, depth: int) -> str | None:
        if b is None:
            return None
        if how == RECORDS and isinstance(b, cst.Call) and self.leaf(b, True):
            return UNSEEN  # (each element unpacked into fields: records an unseen call yields, not its computed tensor)
        return self.kind(b, comp, depth, how != PLAIN)

    def comprehension(self, e, comp: dict[str, str | None], depth: int) -> str | None:
        inner = dict(comp)  # (what it iterates weighs only through the names its elements use)
        kinds = []
        f = e.for_in
        while f is not None:
            it = self.binding(f.iter, RECORDS if isinstance(f.target, (cst.Tuple, cst.List)) else ITER, inner, depth)
            for n in target_names(f.target):
                inner[n] = it  # (an element of what it iterates)
            f = f.inner_for_in
        if isinstance(e, cst.DictComp):
            kinds += [self.kind(e.key, inner, depth, True), self.kind(e.value, inner, depth, True)]
        else:
            kinds.append(self.kind(e.elt, inner, depth, True))
        return combine(kinds)

    def call(self, e: cst.Call, comp: dict[str, str | None], depth: int, strict: bool) -> str | None:
        func = e.func
        if isinstance(func, cst.Name) and func.value in _HOST_BUILTINS and func.value not in self.bindings:
            return HOST
        if isinstance(func, cst.Name) and func.value in _ELEMENT_BUILTINS and func.value not in self.bindings:
            args = [a.value for a in e.args if a.keyword is None]
            return combine(self.kind(a, comp, depth, strict) for a in args) if args else HOST
        if isinstance(func, cst.Attribute) and func.attr.value in _ELEMENT_METHODS:
            recv = self.kind(func.value, comp, depth, strict)
            if recv is not None:
                return combine([recv] + [self.kind(a.value, comp, depth, strict) for a in e.args[1:]])
        if strict and hands_parameter(self.fn, e):
            return None
        return UNSEEN if self.leaf(e) else None


def _bindings(fn) -> dict[str, list[tuple[cst.BaseExpression | None, str]]]:
    """Every value the helper binds to each local and how (:data:`PLAIN` ...; None: a binding not classifiable, a
    ``with`` target or an exception name), and what it puts in a local container (``c.append(v)``, ``c[k] = v``)."""
    memo = fn.__dict__.get("_unseen_bindings")
    if memo is not None:
        return memo
    found: dict[str, list] = {}

    def put(target, value, how) -> None:
        if isinstance(target, cst.StarredElement):
            target = target.value
        if not isinstance(target, cst.Name):
            how = RECORDS if how == ITER else PART if how == PLAIN else how
        for n in target_names(target):
            found.setdefault(n, []).append((value, how))

    for node in local_nodes(fn.node.body):
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for t in targets if node.value is not None else ():
                if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name):
                    found.setdefault(t.value.value, []).append((node.value, FILL))  # `c[k] = v`
                else:
                    put(t, node.value, PLAIN)
        elif isinstance(node, cst.For):
            put(node.target, node.iter, ITER)
        elif isinstance(node, cst.NamedExpr):
            put(node.target, node.value, PLAIN)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            put(node.asname.name, None, PLAIN)
        elif isinstance(node, cst.ExceptHandler) and node.name is not None:
            put(node.name.name, None, PLAIN)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and isinstance(node.func.value, cst.Name) and node.func.attr.value in _FILLS and node.args:
            found.setdefault(node.func.value.value, []).append((node.args[-1].value, FILL))
    fn.__dict__["_unseen_bindings"] = found
    return found


__all__ = ["HOST", "UNSEEN", "built", "combine", "hands_parameter", "unseen_build"]
