"""Parameters whose annotation says nothing of the value (issue 16 [unknown-type]): ``kv_cache: Any``, ``x: object``,
``Optional[Any]``, a project alias of such a type (``KVCache = Any``, ``T = TypeVar("T")``). Their kind is read from the
function's own use, as for an unannotated parameter (:func:`~streamlint.model.tensors.own_param_kinds`), but only
from a use a torch tensor alone has: a list, a dict, a numpy array, an ``nn.Module``, a stream or a config has none
of them (:func:`opaque_param_use`). A project alias of ``Tensor`` (``Scores = torch.Tensor``) is a tensor annotation.

The tensor vocabulary (which torch calls give tensors, the view methods) is handed in by ``model/tensors.py``, the
one module that defines what is a tensor; this module only reads annotations and uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Collection

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import forward_reference, local_nodes

if TYPE_CHECKING:
    from streamlint.model.project import Project

Vocabulary = "tuple[Callable[[str | None], bool], Collection[str]]"

_OPAQUE_NAMES = frozenset({"Any", "object", "typing.Any", "builtins.object"})
# methods of ``torch.Tensor`` no host array, container, module or stream has (not ``to`` / ``cuda`` / ``float``:
# an ``nn.Module`` has them; not ``view`` / ``reshape`` / ``sum``: numpy has them; not ``add`` / ``split`` /
# ``gather``: sets, strings and asyncio have them; not in-place ops: the destination may be a pinned host buffer)
_TORCH_ONLY_METHODS = frozenset({
    "detach", "contiguous", "record_stream", "index_select", "masked_fill", "masked_select", "masked_scatter",
    "view_as", "reshape_as", "expand_as", "narrow", "unsqueeze", "permute", "movedim", "unflatten", "untyped_storage",
    "data_ptr", "element_size", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "type_as",
    "index_add", "index_put", "tensor_split", "split_with_sizes", "unbind", "numel", "nelement", "storage_offset",
    "is_contiguous", "to_dense", "repeat_interleave", "index_fill", "scatter_add", "bmm",
})
# (not ``is_cuda`` / ``requires_grad``: a platform object has ``is_cuda()``, a parameter spec ``requires_grad``)
_TORCH_ONLY_ATTRS = frozenset({"grad_fn", "output_nr"})
# a host value, whatever else the function does with it: ``x.is_cpu``, ``x.numpy()``, ``x.pin_memory()``
_HOST_ATTRS = frozenset({"is_cpu"})
_HOST_METHODS = frozenset({"numpy", "pin_memory", "is_pinned", "share_memory_"})
# torch functions whose positional arguments are sequences, host data or sizes, not one tensor
_NOT_ONE_TENSOR = frozenset({
    "cat", "stack", "concat", "concatenate", "hstack", "vstack", "dstack", "column_stack", "row_stack", "einsum",
    "broadcast_tensors", "block_diag", "cartesian_prod", "meshgrid", "tensor", "as_tensor", "asarray", "from_numpy",
    "frombuffer", "from_dlpack", "empty", "zeros", "ones", "full", "rand", "randn", "randint", "randperm",
    "arange", "eye", "empty_strided", "is_tensor", "numel", "save", "load", "manual_seed", "device", "Size",
    "autocast", "vmap", "cond", "while_loop", "set_printoptions", "use_deterministic_algorithms", "from_file",
})


def _tensor_op(target: str, vocab: Vocabulary) -> bool:
    """``torch.<op>``, ``torch.nn.functional.<op>``, ``torch_npu.npu_<op>``: a tensor op whose positional operands are
    tensors (not ``torch.func.functional_call(model, ...)``, ``torch.nn.utils.clip_grad_norm_(params)``, nor a tensor
    class built from host data: ``torch.LongTensor(token_ids)``, ``torch.Tensor(values)`` take lists)."""
    parts = target.split(".")
    return vocab[0](target) and parts[-1] not in _NOT_ONE_TENSOR and not parts[-1][:1].isupper() and (
        len(parts) == 2 or target.startswith("torch.nn.functional.") and len(parts) == 4)


def opaque_annotation(project: Project, file: FileModel, fn: FunctionInfo, annotation: cst.BaseExpression,
                      depth: int = 0) -> bool:
    """Does ``annotation`` say nothing of what the value is: ``Any`` / ``object`` (optionally ``Optional`` / ``| None``),
    a string of one, or a project type alias whose value is one or an unbound ``TypeVar`` (a name the project binds at
    module level to no class)? A class, a protocol, ``Callable``, a container, a ``Union`` of types are something."""
    if depth > 3:
        return False
    annotation = forward_reference(annotation)
    if annotation is None:
        return False
    if isinstance(annotation, cst.Subscript):
        head = (dotted(annotation.value) or "").replace("typing.", "")
        items = [el.slice.value for el in annotation.slice if isinstance(el.slice, cst.Index)]
        return head == "Optional" and len(items) == 1 and opaque_annotation(project, file, fn, items[0], depth + 1)
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = [s for s in (annotation.left, annotation.right) if not (isinstance(s, cst.Name) and s.value == "None")]
        return len(sides) == 1 and opaque_annotation(project, file, fn, sides[0], depth + 1)
    name = dotted(annotation)
    if name is None:
        return False
    if name in _OPAQUE_NAMES or (file.resolve(annotation, fn) or "") in ("typing.Any", "typing_extensions.Any"):
        return True
    value = _alias_value(project, file, fn, annotation)
    if value is None:
        return False
    if isinstance(value, cst.Call):  # ``T = TypeVar("T")``: anything (a bound names a type: not opaque)
        return (dotted(value.func) or "").rsplit(".", 1)[-1] == "TypeVar" and all(
            a.keyword is None or a.keyword.value != "bound" for a in value.args)
    return opaque_annotation(project, file, fn, value, depth + 1)


def _alias_value(project: Project, file: FileModel, fn: FunctionInfo, annotation: cst.BaseExpression) \
        -> cst.BaseExpression | None:
    """The value of the module-level assignment a type alias names (in this module or the project module it is
    imported from), when that name is no class or function of the project."""
    from streamlint.model.lifetimes import module_assignment
    if isinstance(annotation, cst.Name) and annotation.value not in file.classes:
        value = module_assignment(file, annotation.value)
        if value is not None:
            return value
    qualname = file.resolve(annotation, fn)
    if not qualname or "." not in qualname or qualname.split(".")[0] in ("torch", "typing", "typing_extensions"):
        return None
    modname, _, last = qualname.rpartition(".")
    mod = project.find_module(modname, file)
    return module_assignment(mod, last) if mod is not None and last not in mod.classes else None


def opaque_param_use(project: Project, file: FileModel, fn: FunctionInfo, param: str, vocab: Vocabulary) -> str | None:
    """How ``fn`` itself shows that ``param`` (of an opaque annotation, :func:`opaque_annotation`) holds a torch
    tensor: "record" when the function records it (or a view of it bound once) on a stream (``record_stream``:
    device memory an allocator hands out), "use" for another use only a tensor has (``kv.detach()``,
    ``kv.index_select(0, rows)``, ``kv.grad_fn``, ``dst.copy_(kv)``, ``torch.flatten(kv)``), None when there is
    none, when the function rebinds the name, or when it also uses it as host memory (``kv.is_cpu``,
    ``kv.numpy()``, ``kv.pin_memory()``, a numpy function taking it). ``vocab``: (does a torch call give a tensor,
    the view methods), from ``model/tensors.py``."""
    memo = derived(project, "opaque_param_use")
    key = (id(fn), param)
    if key in memo:
        return memo[key]
    memo[key] = None
    if param in fn.name_assigns:
        return None
    names = {param} | {n for n, values in fn.name_assigns.items() if len(values) == 1 and _view_of(values[0], param, vocab[1])}
    found: str | None = None
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == param:
            if node.attr.value in _HOST_ATTRS or node.attr.value in _HOST_METHODS:
                return None
            if node.attr.value in _TORCH_ONLY_ATTRS or node.attr.value in _TORCH_ONLY_METHODS \
                    and not _project_defines(project, node.attr.value):
                found = found or "use"
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        handed = any(isinstance(v, cst.Name) and v.value == param for v in positional)
        if isinstance(func, cst.Attribute) and func.attr.value == "record_stream" \
                and isinstance(func.value, cst.Name) and func.value.value in names:
            found = "record"
        elif isinstance(func, cst.Attribute) and func.attr.value == "copy_" and positional[:1] \
                and isinstance(positional[0], cst.Name) and positional[0].value == param:
            found = found or "use"  # the source of a tensor copy is a tensor
        elif handed:
            site = file.call_site(node)
            target = (site.target if site is not None else None) or ""
            if target.split(".")[0] in ("numpy", "np"):
                return None
            if _tensor_op(target, vocab):
                found = found or "use"
    memo[key] = found
    return found


def _project_defines(project: Project, method: str) -> bool:
    """Does a project class define ``method`` (``BlockTable.detach``, a tensor-like wrapper's ``numel``)? Then the
    opaque value may be one of its objects: the method is no evidence of a torch tensor (one marker search a name)."""
    memo = derived(project, "opaque_project_methods")
    if method not in memo:
        memo[method] = any(method in cls.methods for model in project.files_containing((f"def {method}(".encode(),))
                           for cls in model.classes.values())
    return memo[method]


def _view_of(value: cst.BaseExpression, param: str, views: Collection[str]) -> bool:
    """``param.detach()`` / ``param.view(-1)``: the parameter's own storage under another name (not ``param[i]``: an
    element, when the parameter is a list)."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in views:
        value = value.func.value
    return isinstance(value, cst.Name) and value.value == param


def opaque_param(project: Project, file: FileModel, fn: FunctionInfo, param: cst.Param, vocab: Vocabulary) -> str | None:
    """For a parameter annotated with no tensor, stream, event, container or callable: "tensor" when the annotation
    is a project alias of ``Tensor`` (``KVCache = torch.Tensor``), or opaque (:func:`opaque_annotation`) and the
    function uses the value as only a tensor is used (:func:`opaque_param_use`); else None (the annotation's type)."""
    ann = param.annotation.annotation if param.annotation is not None else None
    if ann is None:
        return None
    if isinstance(ann, (cst.Name, cst.Attribute)):
        value = _alias_value(project, file, fn, ann)
        if value is not None and not isinstance(value, cst.Call) and _names_tensor(file, fn, value):
            return "tensor"
    if opaque_annotation(project, file, fn, ann) and opaque_param_use(project, file, fn, param.name.value, vocab):
        return "tensor"
    return None


def guessed_params(project: Project, file: FileModel, fn: FunctionInfo, vocab: Vocabulary) -> frozenset[str]:
    """The parameters :func:`opaque_param` takes for tensors from a use that shows a torch tensor but not device
    memory (``kv.detach()``: a CPU tensor has it too; a ``record_stream`` does show device memory): findings that
    rest on their device placement are medium at most."""
    p = fn.node.params
    return frozenset(q.name.value for q in (*p.posonly_params, *p.params, *p.kwonly_params)
                     if q.annotation is not None and opaque_annotation(project, file, fn, q.annotation.annotation)
                     and opaque_param_use(project, file, fn, q.name.value, vocab) == "use")


def _names_tensor(file: FileModel, fn: FunctionInfo, value: cst.BaseExpression) -> bool:
    """``torch.Tensor`` / ``Tensor`` (imported from torch), optionally ``Optional[...]``: an alias of the tensor class."""
    if isinstance(value, cst.Subscript) and (dotted(value.value) or "").replace("typing.", "") == "Optional":
        inner = [el.slice.value for el in value.slice if isinstance(el.slice, cst.Index)]
        return len(inner) == 1 and _names_tensor(file, fn, inner[0])
    return isinstance(value, (cst.Name, cst.Attribute)) and (file.resolve(value, fn) or dotted(value)) == "torch.Tensor"


__all__ = ["guessed_params", "opaque_annotation", "opaque_param", "opaque_param_use"]
