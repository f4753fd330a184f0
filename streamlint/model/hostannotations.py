"""Does a parameter's or a return annotation declare a host value (a scalar, a dtype, a device, a container of
them): a value that holds no tensor.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import dotted


def host_param(p: cst.Param) -> bool:
    """A parameter annotated with a host scalar, a dtype or a device (``Optional[...]`` of one): no tensor."""
    ann = p.annotation.annotation if p.annotation is not None else None
    if isinstance(ann, cst.Subscript) and dotted(ann.value) in ("Optional", "typing.Optional") and ann.slice:
        ann = ann.slice[0].slice.value if isinstance(ann.slice[0].slice, cst.Index) else None
    return ann is not None and (dotted(ann) or "").rsplit(".", 1)[-1] in (
        "int", "float", "bool", "str", "bytes", "dtype", "device")


_HOST_NAMES = frozenset({"int", "float", "bool", "str", "bytes", "None", "dtype", "device", "dict", "list", "tuple",
                         "set", "frozenset", "Dict", "List", "Tuple", "Set", "FrozenSet"})
_HOST_WRAPPERS = frozenset({"Optional", "Union", "tuple", "Tuple", "list", "List", "dict", "Dict", "set", "Set",
                            "frozenset", "FrozenSet", "Sequence", "Iterable", "Mapping"})


def host_annotation(ann: cst.BaseExpression, bare_class: bool = True, scalars_only: bool = False) -> bool:
    """Does a (return) annotation declare a value holding no tensor? A host scalar, a dtype or a device,
    ``None``, a class not named like a tensor, or a builtin container / ``Optional`` / union whose every
    element type is one (``tuple[int, int]``, ``Optional[Tuple[Group, int]]``); not ``tuple[Tensor, Tensor]``
    nor ``Any`` / ``object`` (nor a string annotation). ``bare_class=False``: a class alone is not one.
    ``scalars_only``: host scalars and generics of them only (no bare ``list`` / ``dict``, no class anywhere)."""
    if isinstance(ann, cst.BinaryOperation) and isinstance(ann.operator, cst.BitOr):  # `int | None`
        return host_annotation(ann.left, bare_class, scalars_only) \
            and host_annotation(ann.right, bare_class, scalars_only)
    if isinstance(ann, cst.Subscript):
        wrapper = (dotted(ann.value) or "").rsplit(".", 1)[-1]
        inner = bare_class if wrapper in ("Optional", "Union") else True  # `Optional[Meta]` is a bare class
        return wrapper in _HOST_WRAPPERS and all(isinstance(el.slice, cst.Index) and (isinstance(
            el.slice.value, cst.Ellipsis) or host_annotation(el.slice.value, inner and not scalars_only, scalars_only))
            for el in ann.slice)
    name = dotted(ann) if isinstance(ann, (cst.Name, cst.Attribute)) else None
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    if scalars_only:
        return last in _HOST_NAMES and last not in _HOST_WRAPPERS
    return last in _HOST_NAMES or (bare_class and "Tensor" not in last and last not in ("Any", "object", "Parameter")
                                   and last[:1].isupper())
