"""Host objects: values that are instances of a class other than a tensor type.

``self.params = DecodeOptions(top_k=4)``, ``self.tokenizer = AutoTokenizer.from_pretrained(...)`` is not,
but ``self.cfg = RequestConfig(...)`` is: an object built by calling a class is no ``torch.Tensor`` unless
the class is a tensor type itself (``nn.Parameter``, a ``torch.Tensor`` subclass, a quantised-tensor
wrapper). Such a field holds host state (configuration, a client, a scheduler's bookkeeping); a copy of it
(``copy.deepcopy(self.params)``) is host memory too, and none of it is produced or read by a stream. The
tensors it may hold are reached by their own attribute chains (``self.cache.k_buf``), which stay tracked."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo

if TYPE_CHECKING:
    from streamlint.model.project import Project


_CLASS_NAME = re.compile(r"^_?[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$")  # `SamplingParams`, not `HEAD_DIM`
# names of tensor types (and tensor-like wrappers) whose instances are device data
_TENSOR_TYPE = re.compile(r"Tensor|Parameter|Variable|Buffer|Storage|Stream|Event|Graph|Pool", re.I)
_TENSOR_MODULES = ("torch", "torch_npu", "numpy", "triton", "jax", "cupy")


def constructed_host_object(project: Project, file: FileModel, fn: FunctionInfo, v: cst.BaseExpression,
                            depth: int = 0) -> bool:
    """Is ``v`` a call constructing an instance of a class that is evidently no tensor type?"""
    if not isinstance(v, cst.Call) or depth > 3:
        return False
    name = dotted(v.func)
    if name is None or name.split(".", 1)[0] == "self":
        return False
    last = name.rsplit(".", 1)[-1]
    if not _CLASS_NAME.match(last) or _TENSOR_TYPE.search(last):
        return False
    target = file.resolve_dotted(name, fn) or name
    if target.split(".", 1)[0] in _TENSOR_MODULES:
        return False
    sym = project.symbol(target, file)
    if sym is None:
        return True  # an external class (a library's config / client object)
    if not isinstance(sym[0], ClassInfo):
        return False  # a project function spelt like a class: unknown result
    return not _tensor_subclass(project, sym[0], sym[1], depth)


def _tensor_subclass(project: Project, cls: ClassInfo, file: FileModel, depth: int) -> bool:
    for base in cls.bases:
        last = base.rsplit(".", 1)[-1]
        if _TENSOR_TYPE.search(last):
            return True
        sym = project.symbol(base, file)
        if sym is not None and isinstance(sym[0], ClassInfo) and depth < 3 \
                and _tensor_subclass(project, sym[0], sym[1], depth + 1):
            return True
    return False
