"""Which project class the elements of a container hold, by the container's annotation (typed loop variables).

Runtimes keep their records in containers and take them back out elsewhere: ``self.pending: dict[tuple[int, str],
list[SavedActivation]] = defaultdict(list)`` filled by ``register()``, walked by ``prefetch()`` as ``for cand in
reversed(self.pending.get(key, ())):``. The loop variable holds a ``SavedActivation`` because the container's
annotation says every element is one: :func:`element_class` answers for a name of a function bound only by ``for``
loops over such containers, reached through the usual ways of taking elements back (``.get(k, default)``,
``[k]``, ``.values()``, ``reversed()`` / ``list()`` / ``sorted()`` / ``tuple()``, a local bound once to one of
those). The container is a field of the function's own class (its annotation in the class body or at a ``self.F:
T = ...`` of a method), a parameter or an annotated local; its annotation's innermost element type (``list[C]``,
``dict[K, list[C]]``, ``Sequence[C]``, ``deque[C]``, ``Optional`` of either) must be one project class.

Like every annotation this is the code's claim, not a binding the analysis sees: what rests on it stays at medium
at most (its reader is :func:`~.protocols.record_writers`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.devobjects import annotation_alternatives
from streamlint.model.file import dotted
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, string_annotation

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import ClassInfo, FunctionInfo
    from streamlint.model.project import Project

_SEQUENCES = {"list", "List", "Sequence", "MutableSequence", "Iterable", "deque", "Deque", "tuple", "Tuple",
              "set", "Set", "frozenset", "Collection"}
_MAPPINGS = {"dict", "Dict", "Mapping", "MutableMapping", "defaultdict", "DefaultDict", "OrderedDict"}
_WRAPPERS = {"reversed", "list", "sorted", "tuple", "iter"}
_TAKES = {"get", "values", "pop", "setdefault"}  # (a mapping's: each hands back values)


def element_class(project: Project, file: FileModel, fn: FunctionInfo, name: str) \
        -> tuple[ClassInfo, FileModel] | None:
    """The one project class the loop variable ``name`` of ``fn`` holds: every ``for name in E`` takes elements
    of a container whose annotation names that class as its element type; None when ``name`` is also a parameter
    or assigned in ``fn``, or a loop walks something else."""
    memo = derived(project, "element_classes")
    key = (id(fn), name)
    held = memo.get(key)
    if held is not None and held[0] is fn:
        return held[1]
    found = _element_class(project, file, fn, name)
    memo[key] = (fn, found)
    return found


def loop_holders(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[str, ClassInfo, FileModel]]:
    """The loop variables of ``fn`` :func:`element_class` types, in the order of their first loop."""
    names = dict.fromkeys(n.target.value for n in local_nodes(fn.node.body)
                          if isinstance(n, cst.For) and isinstance(n.target, cst.Name))
    return [(n, *found) for n in names if (found := element_class(project, file, fn, n)) is not None]


def _element_class(project: Project, file: FileModel, fn: FunctionInfo, name: str) \
        -> tuple[ClassInfo, FileModel] | None:
    from streamlint.model.flow.typedholders import annotation_class

    if name in fn.all_params or name in fn.name_assigns:
        return None
    loops = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.For) and isinstance(n.target, cst.Name)
             and n.target.value == name]
    classes = []
    for loop in loops:
        item = _level(_holds(file, fn, loop.iter, 0), _SEQUENCES)  # (iterating a mapping walks its keys)
        classes.append(annotation_class(project, file, fn, item) if item is not None else None)
    if not classes or any(c is None for c in classes) or len({(id(c[0]), c[1].path) for c in classes}) != 1:
        return None
    return classes[0]


def _holds(file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression, depth: int) -> cst.BaseExpression | None:
    """The annotation of what ``expr`` holds: a container named by a field of ``fn``'s class, a parameter or
    an annotated local, or an entry taken out of one (``.get(k, d)``, ``[k]``, ``.pop(k)``, ``.values()``, a
    local bound once to such a take); None when the code does not say."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Name) and func.value in _WRAPPERS and expr.args:
            inner = _holds(file, fn, expr.args[0].value, depth + 1)  # (the same items, in another order)
            return inner if _level(inner, _SEQUENCES) is not None else None
        if isinstance(func, cst.Attribute) and func.attr.value in _TAKES:
            value = _level(_holds(file, fn, func.value, depth + 1), _MAPPINGS)
            if value is None or func.attr.value != "values":
                return value
            return cst.Subscript(cst.Name("list"), [cst.SubscriptElement(cst.Index(value))])  # (its values)
        return None
    if isinstance(expr, cst.Subscript):  # `self.pending[key]`: one entry of a mapping, one item of a list
        base = _holds(file, fn, expr.value, depth + 1)
        if len(expr.slice) != 1 or isinstance(expr.slice[0].slice, cst.Slice):
            return None
        return _level(base, _MAPPINGS) or _level(base, _SEQUENCES - {"set", "Set", "frozenset", "Iterable"})
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self" \
            and fn.class_name is not None:
        cls = file.classes.get(fn.class_name)
        return _field_annotation(cls, expr.attr.value) if cls is not None else None
    if not isinstance(expr, cst.Name):
        return None
    name = expr.value
    if name in fn.all_params:
        param = next((p for p in (*fn.node.params.posonly_params, *fn.node.params.params,
                                  *fn.node.params.kwonly_params) if p.name.value == name), None)
        return param.annotation.annotation if param is not None and param.annotation is not None \
            and name not in fn.name_assigns else None
    values = fn.name_assigns.get(name, ())
    annotated = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.AnnAssign)
                 and isinstance(n.target, cst.Name) and n.target.value == name]
    if len(annotated) == 1 and len(values) <= 1:
        return annotated[0].annotation.annotation
    if len(values) == 1 and not annotated:  # `candidates = self.pending.get(key, ())`
        return _holds(file, fn, values[0], depth + 1)
    return None


def _field_annotation(cls: ClassInfo, attr: str) -> cst.BaseExpression | None:
    """The one annotation of the field ``attr`` of ``cls`` (class body, or ``self.attr: T = ...`` in a method)."""
    from streamlint.model.flow.typedholders import field_annotations

    found = field_annotations(cls, attr)
    return found[0] if len(found) == 1 else None


def _level(node: cst.BaseExpression | None, heads: set[str]) -> cst.BaseExpression | None:
    """One level into the container annotation ``node`` when its kind is one of ``heads``: a sequence's item
    type, a mapping's value type (``Optional`` of either too); else None."""
    if node is None:
        return None
    parts = annotation_alternatives(node)
    if parts is None or len(parts) != 1:
        return None
    node = string_annotation(parts[0])
    if not isinstance(node, cst.Subscript):
        return None
    head = (dotted(node.value) or "").rsplit(".", 1)[-1]
    if head not in heads:
        return None
    items = [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
    if head in _MAPPINGS:
        return items[1] if len(items) == 2 else None
    if head in ("tuple", "Tuple"):  # only a homogeneous tuple (`tuple[C, ...]`) is a collection of one type
        return items[0] if len(items) == 2 and isinstance(items[1], cst.Ellipsis) else None
    return items[0] if len(items) == 1 else None


__all__ = ["element_class", "loop_holders"]
