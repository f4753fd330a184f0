"""Return annotations that name a project record of tensors (issue 16, [caller-consumer]).

``host_annotation`` reads a class name in a return annotation as a host value (``-> List[Detections]``,
``-> Optional[Meta]`` in a container): without the project it cannot tell a record of tensors from a config.
A detection post-process that builds its boxes and masks on a side stream declares exactly that::

    @dataclass
    class Detections:
        xyxy: torch.Tensor
        scores: torch.Tensor

    def decode(raw, meta) -> List[Detections]: ...

Taking such a helper's result for a host value loses the device work it carries (the hand-back of
``decode(...)`` made under a post-process stream). :func:`declares_tensor_record` asks the project: the
annotation names a class of the project (through the module's imports) one of whose fields is annotated with a
tensor type (a class-level ``x: torch.Tensor`` / ``Optional[Tensor]`` / ``list[Tensor]``, or an ``__init__``
parameter so annotated: :func:`~streamlint.model.hostobjects.declares_tensors`, the question the parameter
kinds ask of a record annotation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.filefacts import ClassInfo
from streamlint.model.hostobjects import declares_tensors
from streamlint.model.streams import derived
from streamlint.model.tensors import return_kind

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project


def declared_host(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """``fn`` declares a host result (``tensors.return_kind``: ``-> int``, ``-> tuple[int, Group]``) and names no
    project record of tensors in it."""
    return return_kind(file, fn) == "other" and not declares_tensor_record(project, file, fn)


def declares_tensor_record(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does ``fn``'s return annotation name a project class whose fields hold tensors?"""
    returns = fn.node.returns
    if returns is None:
        return False
    memo = derived(project, "tensor_record_returns")
    found = memo.get(id(fn))
    if found is None or found[0] is not fn:
        found = memo[id(fn)] = (fn, any(_tensor_class(project, file, fn, name)
                                        for name in _class_names(returns.annotation)))
    return found[1]


def _class_names(ann: cst.BaseExpression) -> list[cst.BaseExpression]:
    out, stack = [], [ann]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.Name, cst.Attribute)):
            name = dotted(n)
            if name is not None and name.rsplit(".", 1)[-1][:1].isupper():
                out.append(n)
            continue
        stack.extend(n.children)
    return out


def _tensor_class(project: Project, file: FileModel, fn: FunctionInfo, name: cst.BaseExpression) -> bool:
    qual = file.resolve(name, fn.parent)
    sym = project.symbol(qual, file) if qual is not None else None
    return sym is not None and isinstance(sym[0], ClassInfo) and declares_tensors(sym[0])
