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
from streamlint.model.syntax import local_nodes as _local
from streamlint.model.tensornames import TENSOR_NAMES

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


def foreign_method(attr: str) -> bool:
    """Is ``attr`` a public method name no ``torch.Tensor`` (nor a tensor subclass model code handles as one) has
    (``next_stream``, ``memcpy_async``, ``put_signal``)? Its receiver is a host object (a copy engine, a client, a
    handle), not a tensor. Private and ``npu_*`` names (torch_npu's tensor methods) are no evidence either way."""
    return not attr.startswith(("_", "npu")) and attr not in TENSOR_NAMES


def foreign_receivers(fn: FunctionInfo) -> frozenset[str]:
    """Unannotated parameters of ``fn`` whose only tensor evidence is being the receiver of methods no tensor has
    (``engine.next_stream()``, ``scales.pad_to(n)``): every use of the name is such a call or a plain argument of
    a call (handed on). Taking one for a tensor is a guess (a copy engine, a stream pool, a record object): a race
    on it as the caller's argument is reported low."""
    cached = fn.__dict__.get("_foreign_receivers")
    if cached is not None:
        return cached
    params = {p.name.value for p in (*fn.node.params.params, *fn.node.params.kwonly_params)
              if p.annotation is None and p.name.value not in ("self", "cls")}
    foreign: set[str] = set()
    other: set[str] = set()
    ok: set[int] = set()  # ids of the Name nodes used as a foreign receiver or a plain argument
    for node in _local(fn.node.body):
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in params:
                if foreign_method(func.attr.value):
                    foreign.add(func.value.value)
                    ok.add(id(func.value))
            for a in node.args:
                if isinstance(a.value, cst.Name) and not a.star:
                    ok.add(id(a.value))
    for node in _local(fn.node.body):
        if isinstance(node, cst.Name) and node.value in params and id(node) not in ok:
            other.add(node.value)
    cached = fn.__dict__["_foreign_receivers"] = frozenset(foreign - other)
    return cached


# methods only a tensor (or a class standing in for one) defines: a project class with one is tensor-like
_TENSOR_FIELD = re.compile(r"\b(Tensor|Parameter)\b")  # `torch.Tensor`, `list[Tensor]`, `nn.Parameter`
_TENSOR_LIKE_METHODS = frozenset({"__torch_function__", "__torch_dispatch__", "__tensor_flatten__", "record_stream",
                                  "data_ptr", "untyped_storage", "copy_", "to", "cuda", "npu", "view", "contiguous"})


def record_annotation(project: Project, file: FileModel, fn: FunctionInfo | None, ann: cst.BaseExpression) -> bool:
    """Does ``ann`` (a parameter annotation whose text mentions ``Tensor``) name a tensor only through the name of a
    project class that is no tensor type (``_TensorBinding``, ``Optional[TensorMeta]``)? Each name in it spelling
    ``tensor`` must resolve to a project class that neither derives from a tensor type nor is tensor-like
    (:data:`_TENSOR_LIKE_METHODS`); ``torch.Tensor``, an unresolved name, a string annotation: no."""
    names = [n for n in _annotation_names(ann) if "tensor" in n.lower()]
    for name in names:
        target = file.resolve_dotted(name, fn) or name
        sym = project.symbol(target, file) if target.split(".", 1)[0] not in _TENSOR_MODULES else None
        if sym is None or not isinstance(sym[0], ClassInfo) or _tensor_subclass(project, sym[0], sym[1], 0) \
                or _TENSOR_LIKE_METHODS & set(sym[0].methods) or declares_tensors(sym[0]) or not _described(sym[0]):
            return False
    return bool(names)


def declares_tensors(cls: ClassInfo) -> bool:
    """Does the class declare a field, or take a constructor argument, annotated with a tensor type (``tensors:
    dict[str, torch.Tensor]``, ``def __init__(self, hidden: Tensor)``)? Such a record carries device tensors the
    analysis follows through the parameter as one: it stays a tensor parameter."""
    anns = [small.annotation.annotation for stmt in cls.node.body.body
            for small in (stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ())
            if isinstance(small, cst.AnnAssign)]
    init = cls.methods.get("__init__")
    if init is not None:
        anns += [p.annotation.annotation for p in (*init.node.params.params, *init.node.params.kwonly_params)
                 if p.annotation is not None]
    return any(_TENSOR_FIELD.search(cst.Module([]).code_for_node(a)) for a in anns)


def _described(cls: ClassInfo) -> bool:
    """Does the class say what it holds: annotated fields in its body (a dataclass, a NamedTuple), or an ``__init__``
    every parameter of which is annotated? A class taking unannotated data (``QuantTensor(qdata, scale)``,
    ``**parts`` set with ``setattr``) may well carry device tensors: not known to be a host record."""
    init = cls.methods.get("__init__")
    if init is not None:
        params = init.node.params
        if isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None:
            return False
        return all(p.annotation is not None for p in (*params.params[1:], *params.kwonly_params))
    return any(isinstance(small, cst.AnnAssign) for stmt in cls.node.body.body
               for small in (stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()))


def _annotation_names(ann: cst.BaseExpression) -> list[str]:
    """The dotted names an annotation is made of (``Optional[a.B]`` gives ``Optional``, ``a.B``)."""
    name = dotted(ann) if isinstance(ann, (cst.Name, cst.Attribute)) else None
    if name is not None:
        return [name]
    if isinstance(ann, cst.Subscript):
        return _annotation_names(ann.value) + [n for el in ann.slice if isinstance(el.slice, cst.Index)
                                               for n in _annotation_names(el.slice.value)]
    if isinstance(ann, cst.BinaryOperation):
        return _annotation_names(ann.left) + _annotation_names(ann.right)
    return ["?tensor"] if isinstance(ann, cst.SimpleString) else []  # (a string: not read here, never a record)


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
