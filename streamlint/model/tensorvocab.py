"""The vocabulary of tensor typing (:mod:`.tensors`): which names of torch's API and of Python's are tensor
methods, views, copies, factories, metadata or host reads, which builtins, keywords and ``torch.*`` calls
never give a tensor, which receiver methods show an object is no tensor. Names only: what they mean for a
value (is it a tensor?) is answered in :mod:`.tensors`, the one module that decides it.
"""

from __future__ import annotations

from streamlint.model import apis


# Attributes of a tensor that are static metadata (never a tensor value, never a device read).
META_ATTRS = frozenset({
    "shape", "dtype", "device", "ndim", "layout", "names", "requires_grad", "is_leaf", "grad_fn",
    "itemsize", "nbytes", "is_cuda", "is_npu", "is_sparse", "is_quantized", "is_meta", "output_nr",
})


# ``t.set_(src.untyped_storage(), ...)``: metadata only, no kernel; afterwards ``t`` aliases ``src``.
STORAGE_REBIND_METHODS = frozenset({"set_"})


HOST_VALUE_METHODS = frozenset({"item", "tolist", "numpy", "__bool__", "__int__", "__float__"})


VIEW_METHODS = frozenset({"view", "view_as", "reshape", "reshape_as", "transpose", "t", "permute", "narrow",
                          "select", "squeeze", "unsqueeze", "flatten", "unflatten", "expand", "expand_as",
                          "detach", "as_strided", "diagonal", "movedim", "swapaxes", "swapdims", "unfold",
                          "view_as_real", "view_as_complex", "transpose_"})


MULTI_VIEW_METHODS = frozenset({"chunk", "split", "unbind", "tensor_split", "split_with_sizes", "hsplit", "vsplit"})


VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag"})


LIKE_FACTORIES = frozenset({"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                            "randint_like", "new_empty", "new_zeros", "new_ones", "new_full", "empty_strided"})


COPY_METHODS = frozenset({"to", "cuda", "npu", "cpu", "float", "half", "bfloat16", "double", "int", "long",
                          "contiguous", "clone", "pin_memory"})


EMPTY_FACTORIES = frozenset({"empty", "empty_like", "empty_strided", "new_empty"})


OVERWRITE_METHODS = frozenset({"copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_",
                               "exponential_", "index_copy_", "set_"})


ESCAPE_METHODS = frozenset({"append", "extend", "insert", "add", "put", "put_nowait", "appendleft", "setdefault",
                            "update", "push"})


NON_TENSOR_KWARGS = frozenset({"dim", "dtype", "device", "group", "async_op", "non_blocking", "keepdim", "src",
                               "dst", "op", "memory_format", "layout", "pin_memory", "requires_grad", "num_samples",
                               "is_causal", "bias", "inplace", "tag", "stream"})


NON_TENSOR_BUILTINS = frozenset({"len", "range", "int", "float", "bool", "str", "isinstance", "enumerate", "zip",
                                 "list", "tuple", "dict", "set", "print", "getattr", "hasattr", "setattr", "iter",
                                 "next", "id", "type", "super", "sorted", "reversed", "min", "max", "abs", "any",
                                 "all", "divmod", "round", "repr", "format", "callable", "map", "filter"})
# pytree flattening and rebuilding: the same tensors, repacked on the host (no device memory is read)
REPACKS = frozenset(f"{m}.{f}" for m in ("torch.utils._pytree", "torch.utils._cxx_pytree", "optree")
                    for f in ("tree_flatten", "tree_unflatten", "tree_leaves", "tree_flatten_with_path"))


_STREAM_OBJECT_METHODS = frozenset({"wait_stream", "wait_event", "record_event"})


_NON_OP_TORCH_MODULES = frozenset({"distributed", "serialization", "cuda", "npu", "xpu", "utils", "jit", "_dynamo", "compiler",
                               "autograd", "backends", "multiprocessing", "onnx", "profiler", "hub", "package",
                               "testing", "fx", "export", "_C", "library", "overrides", "random", "Stream", "Event",
                               "device", "dtype", "Size", "no_grad", "enable_grad", "inference_mode", "is_tensor",
                               "is_grad_enabled", "get_default_dtype", "manual_seed", "set_grad_enabled",
                               "save", "load", "compile", "is_floating_point", "numel"})


_TENSOR_METHODS = frozenset({
    "abs", "add", "addmm", "all", "amax", "amin", "any", "argmax", "argmin", "argsort", "bmm", "clamp", "clip",
    "cos", "cumsum", "div", "eq", "exp", "expm1", "fill", "flip", "gather", "ge", "gt", "index_select",
    "isinf", "isnan", "le", "log", "log_softmax", "logsumexp", "lt", "masked_fill", "masked_select", "matmul",
    "max", "mean", "min", "mm", "mul", "ne", "neg", "nonzero", "norm", "pow", "prod", "reciprocal", "relu", "repeat",
    "repeat_interleave", "roll", "round", "rsqrt", "scatter", "scatter_add", "sigmoid", "sign", "silu", "sin",
    "softmax", "sort", "sqrt", "square", "std", "sub", "sum", "tanh", "topk", "tril", "triu", "type_as", "unique",
    "var", "where", "index_put", "index_add", "new_tensor", "bool", "byte", "char", "short", "to_dense",
    "record_stream", "numpy", "item", "tolist", "untyped_storage", "storage", "data_ptr", "element_size",
})


_CONTAINER_ANNOTATIONS = ("List", "list[", "Sequence", "Tuple", "tuple[", "Dict", "dict[", "Iterable", "Mapping",
                          "Set[", "set[")


_NON_TENSOR_RECEIVER_METHODS = frozenset({"get", "items", "keys", "values", "append", "extend", "insert", "pop", "update",
                                 "setdefault", "index", "count", "join", "format", "startswith", "endswith", "strip",
                                 "lower", "upper", "replace", "copy", "clear", "remove", "popitem", "encode",
                                 "decode", "wait", "record", "synchronize", "query", "wait_stream", "wait_event",
                                 "record_event", "elapsed_time",
                                 # locks, executors, futures, files (the channels' own methods: below)
                                 "close", "fileno", "acquire", "release", "submit", "done", "cancel",
                                 "add_done_callback",
                                 # nn.Module methods: the receiver is a module (a host object), not a tensor
                                 "parameters", "named_parameters", "buffers", "named_buffers", "modules",
                                 "named_modules", "children", "named_children", "state_dict", "load_state_dict",
                                 "train", "eval", "register_forward_hook", "register_forward_pre_hook"}) \
    | (apis.HOST_SIGNAL_METHODS - {"put"}) | apis.HOST_SIGNAL_BARE_METHODS | apis.HOST_SIGNAL_RECEIVE_METHODS
# (pipes, queues, sockets, host flags: the API table's host signal methods; ``Tensor.put`` is a tensor method)


# torch calls whose later positionals are sizes, counts or fill values, never tensors: how many leading
# positionals may be tensors (``torch.split(x, split_sizes)``: ``split_sizes`` is a list of ints or an int;
# ``torch.empty(n, d)``: sizes). ``torch.tensor_split`` may take an index tensor: not listed.
_TENSOR_POSITIONALS = {"torch.split": 1, "torch.chunk": 1, "torch.narrow": 1, "torch.empty": 0, "torch.zeros": 0,
                       "torch.ones": 0, "torch.full": 0, "torch.rand": 0, "torch.randn": 0, "torch.randint": 0,
                       "torch.randperm": 0, "torch.arange": 0, "torch.empty_strided": 0, "torch.eye": 0}


_EVENT_USE_METHODS = ("record", "wait", "query", "elapsed_time")  # on a receiver: an event (param_kinds)


_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "grad", "real", "imag"})


_NON_TENSOR_METHODS = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "element_size", "item", "tolist", "equal", "allclose",
    "data_ptr", "storage_offset", "stride", "get_device", "type", "untyped_storage", "storage", "numpy",
    "dim_order", "__len__", "record_stream", "wait", "record", "synchronize", "query",
})


_NON_TENSOR_TORCH = frozenset({
    "torch.is_tensor", "torch.is_floating_point", "torch.is_complex", "torch.is_nonzero", "torch.numel",
    "torch.get_default_dtype", "torch.device", "torch.dtype", "torch.Size", "torch.is_grad_enabled",
    "torch.no_grad", "torch.inference_mode", "torch.manual_seed", "torch.set_grad_enabled", "torch.finfo",
    "torch.iinfo", "torch.equal", "torch.allclose", "torch.is_inference_mode_enabled", "torch.get_num_threads",
    "torch.typename", "torch.result_type", "torch.promote_types", "torch.can_cast", "torch.broadcast_shapes",
    "torch.save", "torch.load", "torch.set_default_dtype", "torch.is_storage",
    # runtime objects: the device module (``torch.get_device_module(d).graph_pool_handle()`` is no tensor op)
    "torch.get_device_module", "torch.get_default_device", "torch.set_default_device",
})


_NON_TENSOR_TORCH_PREFIXES = (
    "torch.npu.", "torch.cuda.", "torch._dynamo.", "torch.compiler.", "torch.distributed.", "torch.jit.",
    "torch.backends.", "torch.utils.", "torch.testing.", "torch.profiler.", "torch.autograd.", "torch.fx.",
    "torch.library.", "torch.onnx.", "torch.multiprocessing.", "torch_npu.npu.", "torch_npu.profiler.",
    "torch_npu.dynamo.", "torch.accelerator.", "torch.xpu.", "torch.mps.", "torch.cpu.",
)


_TENSOR_CLASSES = frozenset({"Tensor", "Parameter", "Buffer", "BoolTensor", "FloatTensor", "LongTensor",
                             "IntTensor", "HalfTensor", "BFloat16Tensor"})


_NOT_BUILTIN_TENSORS = frozenset({"len", "isinstance", "int", "float", "bool", "str", "range", "type",
                                  "hasattr", "getattr", "callable", "id", "tuple", "list", "dict", "set"})


_UNDERSCORE = frozenset({"_"})
