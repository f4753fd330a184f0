"""Evidence that a value the dataflow does not track yet is a tensor, from how the function uses it: loop
elements of a collection handed in (``for x in xs: x.copy_(...)``, ``Sequence[torch.Tensor]``), places
(``bucket.grad_data``) used by tensor-only methods, collectives or torch ops. Precision first: metadata,
host conversions and dtype / device casts are no evidence (other objects have them too)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import forward_reference, node_code
from streamlint.model.tensors import torch_returns_tensor
from streamlint.model.tensorvocab import _TENSOR_METHODS, MULTI_VIEW_METHODS, VIEW_METHODS

if TYPE_CHECKING:
    from streamlint.model.project import Project


def tensor_only_method(name: str) -> bool:
    """A method only a tensor has (an in-place op, a view, a tensor op): evidence that its receiver is
    one. Not metadata, host conversions or dtype / device casts (``size``, ``item``, ``to``, ``float``)."""
    return name in _TENSOR_METHODS or name in VIEW_METHODS or name in MULTI_VIEW_METHODS or name == "record_stream" \
        or (name.endswith("_") and not name.startswith("_"))


def element_tensor_annotation(annotation: cst.BaseExpression | None) -> bool:
    """``Sequence[torch.Tensor]`` / ``list[Tensor]`` / ``Tuple[Tensor, ...]``: a sequence whose elements
    are tensors (not a mapping: iterating it gives its keys)."""
    if annotation is None:
        return False
    code = node_code(annotation).replace("typing.", "")
    head, _, inner = code.partition("[")
    return head.rsplit(".", 1)[-1] in ("List", "list", "Sequence", "Tuple", "tuple", "Iterable") \
        and inner.rstrip("]").replace("torch.", "").replace(" ", "").split(",")[0] == "Tensor"


_TENSOR_WRAPPERS = frozenset({"Optional", "Union", "Sequence", "List", "list", "Tuple", "tuple", "Iterable"})


def tensor_annotation(annotation: cst.BaseExpression | None) -> bool:
    """Does an annotation name a tensor: ``Tensor`` / ``torch.Tensor``, optionally inside ``Optional`` /
    ``Union`` / ``X | None`` / ``Sequence`` / ``List`` / ``Tuple`` (a forward reference read from its text, never
    evaluated)? Not a class whose name merely contains the word (``TensorSpec``, ``TensorDict``)."""
    annotation = forward_reference(annotation)
    if isinstance(annotation, cst.Subscript):
        head = (dotted(annotation.value) or "").replace("typing.", "")
        return head in _TENSOR_WRAPPERS and any(
            isinstance(el.slice, cst.Index) and tensor_annotation(el.slice.value) for el in annotation.slice)
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return tensor_annotation(annotation.left) or tensor_annotation(annotation.right)
    return annotation is not None and dotted(annotation) in ("Tensor", "torch.Tensor")


def tensor_places(project: Project, file: FileModel, fn: FunctionInfo) -> frozenset[str]:
    """The attribute chains (``bucket.grad_data``, ``self.buf``) ``fn`` evidently uses as tensors somewhere:
    the receiver of a tensor-only method, a tensor argument of a ``torch.distributed`` collective or of a
    torch op. An augmented assignment to one (``bucket.grad_data *= scale``) is then a tensor kernel
    writing it in place, even where nothing before it says what the place holds."""
    memo = derived(project, "tensor_places")
    if id(fn) in memo:
        return memo[id(fn)]
    found: set[str] = set()
    for site in fn.calls:
        call, func = site.node, site.node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute) \
                and tensor_only_method(func.attr.value):
            found.add(file.code(func.value))
        target = site.target or ""
        last = target.rsplit(".", 1)[-1]
        positions: tuple[int, ...] = ()
        if target.startswith("torch.distributed.") and last in apis.COLLECTIVES:
            positions = tuple(set(apis.COLLECTIVES[last][0]) | set(apis.COLLECTIVES[last][1]))
        elif torch_returns_tensor(target):
            positions = tuple(range(len(call.args)))
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        found |= {file.code(positional[i]) for i in positions
                  if i < len(positional) and isinstance(positional[i], cst.Attribute)}
        if target.startswith("torch.distributed.") and last in apis.COLLECTIVE_PARAMS:
            found |= {file.code(a.value) for a in call.args if a.keyword is not None
                      and isinstance(a.value, cst.Attribute) and a.keyword.value in apis.COLLECTIVE_PARAMS[last]}
    memo[id(fn)] = frozenset(found)
    return memo[id(fn)]
