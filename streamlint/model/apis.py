"""The API table: every stream-related name streamlint knows, mapped to its role.

This is the one place where knowledge about TorchAir / torch_npu / npugraph_ex / CUDA / XPU spellings lives
(domain.md §1.15). Rules ask the model for roles, never for spellings.
"""

from __future__ import annotations

import re

import enum
from dataclasses import dataclass


class Role(enum.Enum):
    STREAM_SWITCH = "stream switch"  # torchair.scope.npu_stream_switch (tag-based)
    NATIVE_STREAM_CONTEXT = "native stream context"  # torch.npu.stream(s) / torch.cuda.stream(s)
    WAIT_TENSOR = "npu_wait_tensor"
    OPS_RECORD = "torchair.ops.record"
    OPS_WAIT = "torchair.ops.wait"
    TAGGED_EVENT_CREATE = "npu_create_tagged_event"
    TAGGED_EVENT_RECORD = "npu_tagged_event_record"
    TAGGED_EVENT_WAIT = "npu_tagged_event_wait"
    RECORD_TAGGED_STREAM = "npu_record_tagged_stream"
    STREAM_NEW = "Stream()"
    EVENT_NEW = "Event()"
    CURRENT_STREAM = "current_stream()"
    DEFAULT_STREAM = "default_stream()"
    SET_STREAM = "set_stream()"
    DEVICE_SYNCHRONIZE = "synchronize()"
    LIMIT_CORE_NUM = "torchair.scope.limit_core_num"
    LIMIT_CORE_NUM_NPUGRAPH_EX = "npugraph_ex.scope.limit_core_num"
    SUPER_KERNEL = "super_kernel"
    OTHER_TORCHAIR_SCOPE = "torchair scope"
    PREFETCH = "npu_prefetch"
    GET_NPU_BACKEND = "get_npu_backend"
    TORCH_COMPILE = "torch.compile"
    CACHE_COMPILE = "cache_compile"
    COMPILER_CONFIG = "CompilerConfig"
    GRAPH_CAPTURE = "graph capture"
    COMPILER_DISABLE = "compiler.disable"
    IS_COMPILING = "is_compiling"
    GRAPH_BREAK = "graph break"
    NULL_CONTEXT = "nullcontext"
    CONTEXT_MANAGER_DECORATOR = "contextmanager"
    REORDERABLE_LOGGING = "reorderable_logging_functions"
    # torch_npu graph task groups (torch_npu/npu/graphs.py): a task captured between ``graph_task_group_begin
    # (stream)`` and ``handle = graph_task_group_end(stream)`` keeps its handle; before a replay, another stream
    # rewrites the task's parameters between ``graph_task_update_begin(stream, handle)`` and
    # ``graph_task_update_end(stream)`` and records an ``ExternalEvent`` the captured task waited on at capture
    # (the replay waits for that record). The update is device work on the updating stream.
    GRAPH_TASK_GROUP_BEGIN = "graph_task_group_begin"
    GRAPH_TASK_GROUP_END = "graph_task_group_end"
    GRAPH_TASK_UPDATE_BEGIN = "graph_task_update_begin"
    GRAPH_TASK_UPDATE_END = "graph_task_update_end"


class Family(enum.Enum):
    """API families that must not be mixed in one execution path (C10)."""

    GE_SCOPE = "TorchAir GE scope"  # npu_stream_switch, npu_wait_tensor, ops.record/wait
    TAGGED_EVENT = "TorchAir tagged event"
    NATIVE_NPU = "native torch.npu stream/event"
    CUDA = "torch.cuda stream/event"
    XPU = "torch.xpu stream/event"  # Intel GPUs: the CUDA stream model under another module (torch/xpu/streams.py)


# The execution path each family's API belongs to (model/paths.py): XPU is a CUDA-like device, the same stream
# model (``torch/xpu/streams.py`` mirrors ``torch/cuda/streams.py``), native and eager.
FAMILY_MODE: dict[Family, str] = {
    Family.TAGGED_EVENT: "reduce-overhead",
    Family.GE_SCOPE: "ge",
    Family.NATIVE_NPU: "eager",
    Family.CUDA: "cuda",
    Family.XPU: "cuda",
}


@dataclass(frozen=True)
class ApiSpec:
    qualname: str
    role: Role
    family: Family | None
    params: tuple[str, ...] = ()  # positional parameter names, for argument binding


def _spec(qualname: str, role: Role, family: Family | None = None, params: tuple[str, ...] = ()) -> ApiSpec:
    return ApiSpec(qualname, role, family, params)


_GE = Family.GE_SCOPE
_TAG = Family.TAGGED_EVENT

_SPECS: list[ApiSpec] = [
    _spec("torchair.scope.npu_stream_switch", Role.STREAM_SWITCH, _GE,
          ("stream_tag", "stream_priority", "enable_inner_parallel")),
    _spec("torchair.scope.npu_wait_tensor", Role.WAIT_TENSOR, _GE, ("self", "dependency")),
    _spec("torchair.scope.limit_core_num", Role.LIMIT_CORE_NUM, _GE, ("op_aicore_num", "op_vectorcore_num")),
    _spec("torchair.scope.super_kernel", Role.SUPER_KERNEL, _GE, ("scope", "options")),
    _spec("torchair.scope.op_never_timeout", Role.OTHER_TORCHAIR_SCOPE, None, ("enable",)),
    _spec("torchair.scope.data_dump", Role.OTHER_TORCHAIR_SCOPE, None),
    _spec("torchair.ops.record", Role.OPS_RECORD, _GE),
    _spec("torchair.ops.wait", Role.OPS_WAIT, _GE, ("tensors",)),
    _spec("torchair.ops.npu_create_tagged_event", Role.TAGGED_EVENT_CREATE, _TAG, ("tag",)),
    _spec("torchair.ops.npu_tagged_event_record", Role.TAGGED_EVENT_RECORD, _TAG, ("event",)),
    _spec("torchair.ops.npu_tagged_event_wait", Role.TAGGED_EVENT_WAIT, _TAG, ("event",)),
    _spec("torchair.ops.npu_record_tagged_stream", Role.RECORD_TAGGED_STREAM, _TAG, ("input", "tagged_stream")),
    _spec("torch.npu.npugraph_ex.scope.limit_core_num", Role.LIMIT_CORE_NUM_NPUGRAPH_EX, None,
          ("op_aicore_num", "op_vectorcore_num", "stream")),
    _spec("torch_npu.npu_prefetch", Role.PREFETCH, None, ("input", "dependency", "max_size", "offset")),
    _spec("torchair.get_npu_backend", Role.GET_NPU_BACKEND, None),
    _spec("torchair.get_compiler", Role.GET_NPU_BACKEND, None),
    _spec("torchair.CompilerConfig", Role.COMPILER_CONFIG, None),
    _spec("torchair.inference.cache_compile", Role.CACHE_COMPILE, None, ("func",)),
    _spec("torch.compile", Role.TORCH_COMPILE, None, ("model",)),
    _spec("torch.compiler.disable", Role.COMPILER_DISABLE),
    _spec("torch._dynamo.disable", Role.COMPILER_DISABLE),
    _spec("torch._disable_dynamo", Role.COMPILER_DISABLE),
    _spec("torch.compiler.is_compiling", Role.IS_COMPILING),
    _spec("torch._dynamo.is_compiling", Role.IS_COMPILING),
    _spec("torch.compiler.is_dynamo_compiling", Role.IS_COMPILING),
    _spec("torch.jit.is_scripting", Role.IS_COMPILING),
    _spec("torch._dynamo.config.reorderable_logging_functions.add", Role.REORDERABLE_LOGGING),
    _spec("contextlib.nullcontext", Role.NULL_CONTEXT),
    _spec("contextlib.contextmanager", Role.CONTEXT_MANAGER_DECORATOR),
]
for _dev, _fam in (("npu", Family.NATIVE_NPU), ("cuda", Family.CUDA), ("xpu", Family.XPU)):
    _SPECS += [
        _spec(f"torch.{_dev}.stream", Role.NATIVE_STREAM_CONTEXT, _fam, ("stream",)),
        _spec(f"torch.{_dev}.Stream", Role.STREAM_NEW, _fam, ("device", "priority")),
        _spec(f"torch.{_dev}.Event", Role.EVENT_NEW, _fam, ("enable_timing", "blocking", "interprocess")),
        _spec(f"torch.{_dev}.current_stream", Role.CURRENT_STREAM, _fam, ("device",)),
        _spec(f"torch.{_dev}.default_stream", Role.DEFAULT_STREAM, _fam, ("device",)),
        _spec(f"torch.{_dev}.set_stream", Role.SET_STREAM, _fam, ("stream",)),
        _spec(f"torch.{_dev}.synchronize", Role.DEVICE_SYNCHRONIZE, _fam, ("device",)),
        _spec(f"torch.{_dev}.graph", Role.GRAPH_CAPTURE, _fam, (f"{_dev}_graph", "pool", "stream")),
    ]
# Device contexts (``with torch.cuda.device(d):``): they switch the current device, not the stream.
DEVICE_CONTEXTS = frozenset(f"torch.{_dev}.device" for _dev in ("npu", "cuda", "xpu"))
_SPECS += [
    # an event a graph capture records as an external node: it may be waited before it is recorded
    _spec("torch.npu.ExternalEvent", Role.EVENT_NEW, Family.NATIVE_NPU),
    _spec("torch.npu.graph_task_group_begin", Role.GRAPH_TASK_GROUP_BEGIN, Family.NATIVE_NPU, ("stream",)),
    _spec("torch.npu.graph_task_group_end", Role.GRAPH_TASK_GROUP_END, Family.NATIVE_NPU, ("stream",)),
    _spec("torch.npu.graph_task_update_begin", Role.GRAPH_TASK_UPDATE_BEGIN, Family.NATIVE_NPU, ("stream", "handle")),
    _spec("torch.npu.graph_task_update_end", Role.GRAPH_TASK_UPDATE_END, Family.NATIVE_NPU, ("stream",)),
]
GRAPH_TASK_ROLES = frozenset({Role.GRAPH_TASK_GROUP_BEGIN, Role.GRAPH_TASK_GROUP_END, Role.GRAPH_TASK_UPDATE_BEGIN,
                              Role.GRAPH_TASK_UPDATE_END})
# The device-generic layer (``torch.accelerator``): the same semantics on whichever device the process
# runs, so no API family of its own (C10 compares the device-specific families).
_SPECS += [
    _spec("torch.accelerator.synchronize", Role.DEVICE_SYNCHRONIZE, None, ("device",)),
    _spec("torch.accelerator.current_stream", Role.CURRENT_STREAM, None, ("device",)),
    _spec("torch.accelerator.set_stream", Role.SET_STREAM, None, ("stream",)),
    # the rest of a device module's stream API, for objects that stand for whichever device module the
    # process runs on (``torch.get_device_module()``, a framework's accelerator object: model/accelerators.py)
    _spec("torch.accelerator.Stream", Role.STREAM_NEW, None, ("device", "priority")),
    _spec("torch.accelerator.Event", Role.EVENT_NEW, None, ("enable_timing", "blocking", "interprocess")),
    _spec("torch.accelerator.stream", Role.NATIVE_STREAM_CONTEXT, None, ("stream",)),
    _spec("torch.accelerator.default_stream", Role.DEFAULT_STREAM, None, ("device",)),
]

# The device modules whose stream API the linter knows, by their canonical names (``torch_npu.npu`` is spelled so
# too): model/accelerators.py, model/devobjects.py, flow/flagjoins.py. Another device's module (``torch.mps``) is not
# one: a layer that may return it is not resolved.
STREAM_DEVICE_MODULES = frozenset({"torch.cuda", "torch.npu", "torch.xpu", "torch.accelerator"})
# Every device module a project facade may forward to by name (flow/facades.py), those of other backends included.
DEVICE_MODULE_SPELLINGS = STREAM_DEVICE_MODULES | frozenset({"torch_npu.npu", "torch.mps", "torch.musa"})

# Getters of the device module of a device type (``torch.cuda``, ``torch.npu`` ... chosen at run time): their
# result stands for the device-generic module above (model/accelerators.py, model/devobjects.py).
DEVICE_MODULE_GETTERS = frozenset({
    "torch.get_device_module",
    "torch.distributed.device_mesh._get_device_handle",  # what FSDP2 / DeviceMesh use: `handle.stream(s)`
})

# Fields of torch's own classes that hold the device module of the device they run on (FSDP's device handle:
# ``state._device_handle.stream(s)``, ``group.device_handle.Event()``); a parameter annotated with one of these
# classes reaches it by that field (model/heldhandles.py). (class, field)
DEVICE_HANDLE_FIELDS = frozenset({
    ("torch.distributed.fsdp._common_utils._FSDPState", "_device_handle"),
    ("torch.distributed.fsdp.FullyShardedDataParallel", "_device_handle"),
    ("torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel", "_device_handle"),
    ("torch.distributed.fsdp._fully_shard._fsdp_state.FSDPState", "_device_handle"),
    ("torch.distributed.fsdp._fully_shard._fsdp_param_group.FSDPParamGroup", "device_handle"),
    ("torch.distributed.fsdp._fully_shard._fsdp_param_group.FSDPCommContext", "device_handle"),
    ("torch.distributed._composable.fsdp._fsdp_state.FSDPState", "_device_handle"),
    ("torch.distributed._composable.fsdp._fsdp_param_group.FSDPParamGroup", "device_handle"),
    ("torch.distributed._composable.fsdp._fsdp_param_group.FSDPCommContext", "device_handle"),
})

# Graph breaks (domain.md §3.1/§3.2) that are plain calls of a qualified name.
GRAPH_BREAK_CALLS: dict[str, str] = {
    "print": "print()",
    "input": "input()",
    "breakpoint": "breakpoint()",
    "open": "open()",
    "torch._dynamo.graph_break": "torch._dynamo.graph_break()",
    "torch._dynamo.skip_frame": "torch._dynamo.skip_frame()",
    "warnings.warn": "warnings.warn()",
    "pdb.set_trace": "pdb.set_trace()",
    "torch.save": "torch.save()",
    "torch.npu.set_device": "torch.npu.set_device()",
    "time.time": "time.time()",
    "time.perf_counter": "time.perf_counter()",
    "time.sleep": "time.sleep()",
    "time.monotonic": "time.monotonic()",
}
GRAPH_BREAK_MODULE_PREFIXES = ("logging.",)
# Logger methods: a graph break when the receiver is a logger (resolved from logging.getLogger or
# conventionally named logger objects).
LOGGER_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})
LOGGER_FACTORIES = frozenset({"logging.getLogger", "vllm.logger.init_logger", "torchair.core.utils.logger"})
LOGGER_NAMES = frozenset({"logger", "log", "_logger", "LOGGER", "_LOGGER", "LOG", "_log"})  # conventional receivers
# Host-side calls that queue no device work and allocate no device memory (logging, printing, timing): they may
# precede the wait that opens a stream scope without queuing anything on the stream first.
HOST_SIDE_CALLS = frozenset({"print", "repr", "warnings.warn", "time.time", "time.perf_counter", "time.monotonic",
                             "time.sleep"})
TENSOR_SYNC_METHODS = {"item": ".item()", "tolist": ".tolist()"}

# The host as a consumer of tensor data (domain.md: the host as a consumer of asynchronous device work).
# A host tensor filled by an asynchronous device-to-host copy (``.to("cpu", non_blocking=True)``,
# ``.cpu(non_blocking=True)``, ``pinned.copy_(dev, non_blocking=True)``) holds its bytes only once the
# copy's stream has run it; until a host synchronisation covers the copy (``stream.synchronize()``,
# ``event.synchronize()`` on an event recorded after it, ``torch.<device>.synchronize()``, a blocking
# transfer on that stream) these read it too early. Reading, here, is what touches the bytes on the host or
# hands them to a reader that has no device ordering: Python conversion / formatting, serialisation to a
# file or a byte string, another thread or process (a queue, a pipe, a socket). Not a read: the tensor's
# metadata (shape, dtype, numel), ``is None`` tests, views (``.numpy()``, ``numpy.asarray``), returning it or
# storing it (its holder may synchronise an event recorded after the copy before reading: vLLM-style async
# outputs), a copy back to the device (ordered by the stream).
# Tensor methods that give host values (``.item()`` / ``.tolist()``) and CPU ops on the
# tensor (host computation) are host reads too (tensorvocab.HOST_VALUE_METHODS; storage.op).
# ``work.wait()`` of an ``async_op=True`` collective is no host synchronisation for device tensors (it makes
# the current stream wait); only the host-blocking forms above cover a copy.
# A host verdict (a bool, a raised assertion) on device tensors: the call returns once the current stream
# computed it (a blocking transfer of its answer).
HOST_VERDICTS = frozenset({"torch.equal", "torch.allclose", "torch.testing.assert_close",
                           "torch.testing.assert_allclose"})
HOST_CONSUMER_FUNCTIONS = frozenset({
    "print", "int", "float", "bool", "str", "repr", "format", "bytes", "bytearray", "memoryview",
    "torch.save", "pickle.dump", "pickle.dumps", "json.dump", "json.dumps", "numpy.array", "numpy.save",
    "numpy.copy", "safetensors.torch.save_file", "safetensors.torch.save",
})
# Methods on a non-tensor receiver that hand their arguments to another reader: a queue / pipe / socket
# (another thread or process), a file or an archive writer (``PyTorchFileWriter.write_record``).
HOST_CONSUMER_METHODS = frozenset({"put", "put_nowait", "send", "send_bytes", "sendall", "send_pyobj", "write",
                                   "write_record", "writelines"})
# Methods on a non-tensor receiver by which the host tells another thread or process that work is done: a
# queue / pipe / socket message, a future's result, a ``threading.Event`` / condition set or notified. Side-stream
# work the caller queued and has not synchronised is still running when the receiver acts on the signal
# (flow/hostsync.py). A file or archive writer (``write``) is a consumer of data, not a completion signal.
HOST_SIGNAL_METHODS = frozenset({"put", "put_nowait", "send", "send_bytes", "sendall", "send_pyobj", "set_result",
                                 "notify", "notify_all"})
# ... and those among them that signal with no argument (``done.set()``): with arguments ``set`` is too common a
# name (a dict-like store, a config setter) to read as a signal.
HOST_SIGNAL_BARE_METHODS = frozenset({"set"})
# ... and the methods by which the receiving side waits for such a signal (``flag.wait()``, ``q.get()``).
HOST_SIGNAL_RECEIVE_METHODS = frozenset({"wait", "is_set", "get", "get_nowait", "recv", "recv_bytes", "recv_pyobj",
                                         "result", "poll"})
# Modules whose ``Event`` / ``Condition`` / ``Queue`` classes synchronise host threads or processes, not device
# streams: a parameter annotated ``threading.Event`` is a host flag (its ``set()`` a completion signal), not a
# device event whose ``wait()`` / ``synchronize()`` would order streams.
HOST_SYNC_MODULES = frozenset({"threading", "multiprocessing", "asyncio", "queue", "concurrent", "torch.multiprocessing"})
# Modules whose objects are host handles only (I/O polling, sockets, processes, message queues): an "event" or
# "stream" such an object hands back (``events = select.poll().poll(ms)``, ``zmq.Poller().poll(ms)``, an eventfd,
# a socket stream) is no device handle.
HOST_HANDLE_MODULES = HOST_SYNC_MODULES | frozenset({"select", "selectors", "socket", "os", "subprocess", "signal",
                                                      "io", "mmap", "zmq"})


def in_modules(qualname: str, modules: frozenset[str]) -> bool:
    """Is ``qualname`` a name of one of ``modules`` (the module itself or anything under it)?"""
    return any(qualname == m or qualname.startswith(m + ".") for m in modules)


# Methods only a host event has (``threading.Event``): a parameter they are called on is no device event
# (``clear`` too, when the same name is waited on: a list's ``clear()`` alone says nothing).
HOST_EVENT_METHODS = frozenset({"set", "is_set"})
# Transfer engines (Mooncake ``TransferEngine`` / ``MooncakeDistributedStore``, their Ascend variants): the methods
# that SEND local memory, handed raw addresses (``data_ptr()`` sums, base addresses plus block offsets) or buffers.
# The engine reads that memory by DMA / RDMA outside every stream: device work still queued on the stream that
# writes it (the model's KV cache writes, a resharding copy on a side stream) is not ordered before the read.
# Only a host synchronisation of the producing stream (``stream.synchronize()``, ``event.synchronize()``,
# ``torch.<device>.synchronize()``) orders it (flow/xfer.py). The receiving methods (``*_read``, ``get_into``)
# write local memory instead and are not listed.
TRANSFER_ENGINE_SEND_METHODS = frozenset({
    "transfer_sync_write", "batch_transfer_sync_write", "batch_transfer_async_write", "transfer_submit_write",
    "put_from", "batch_put_from", "batch_put_from_multi_buffers", "batch_put_from_ascend", "put_from_ascend",
})
SPECS: dict[str, ApiSpec] = {spec.qualname: spec for spec in _SPECS}
for _name in GRAPH_BREAK_CALLS:
    SPECS.setdefault(_name, ApiSpec(_name, Role.GRAPH_BREAK, None))

# Spellings → canonical names. Applied to the longest matching dotted prefix.
_PREFIX_ALIASES: dict[str, str] = {
    "torch_npu.npu.streams": "torch.npu",
    "torch_npu.npu.graphs": "torch.npu",
    "torch.npu.graphs": "torch.npu",
    "torch.npu.streams": "torch.npu",
    "torch_npu.npu.utils": "torch.npu",
    "torch_npu.npu.npugraph_ex": "torch.npu.npugraph_ex",
    "torch_npu.npu": "torch.npu",
    "npugraph_ex.scope": "torch.npu.npugraph_ex.scope",
    "torch_npu.dynamo.npugraph_ex.scope": "torch.npu.npugraph_ex.scope",
    "torch.cuda.streams": "torch.cuda",
    "torch.xpu.streams": "torch.xpu",
    "torch.xpu.graphs": "torch.xpu",
    "torchair.configs.compiler_config": "torchair",
    "torchair.npu_fx_compiler": "torchair",
    "torchair.scope._scope": "torchair.scope",
}
_EXACT_ALIASES: dict[str, str] = {
    "torchair.ops.NpuStreamSwitch": "torchair.scope.npu_stream_switch",
    "torchair.NpuStreamSwitch": "torchair.scope.npu_stream_switch",
    "torchair.ops.npu_stream_switch": "torchair.scope.npu_stream_switch",
    "torchair.ops.npu_wait_tensor": "torchair.scope.npu_wait_tensor",
    "torchair.npu_wait_tensor": "torchair.scope.npu_wait_tensor",
    "torchair.ops.SuperKernelScope": "torchair.scope.super_kernel",
    "torchair.ops.super_kernel": "torchair.scope.super_kernel",
    "torchair.ops.limit_core_num": "torchair.scope.limit_core_num",
    "torch.npu.npu_prefetch": "torch_npu.npu_prefetch",
    "torch.ops.npu.npu_prefetch": "torch_npu.npu_prefetch",
    "torch_npu.npu.npu_prefetch": "torch_npu.npu_prefetch",
    "torch.npu.NPUGraph": "torch.npu.NPUGraph",
    "torch.compiler.compile": "torch.compile",
    "torch.cuda.Event": "torch.cuda.Event",
    "torch.Stream": "torch.npu.Stream",
    "torch.Event": "torch.accelerator.Event",
}


def canonical(qualname: str) -> str:
    if qualname in _EXACT_ALIASES:
        return _EXACT_ALIASES[qualname]
    parts = qualname.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in _PREFIX_ALIASES:
            rewritten = ".".join([_PREFIX_ALIASES[prefix], *parts[cut:]])
            return _EXACT_ALIASES.get(rewritten, rewritten)
    return qualname


def lookup(qualname: str | None) -> ApiSpec | None:
    if qualname is None:
        return None
    return SPECS.get(canonical(qualname))


# Methods on stream / event / tensor objects (receiver typed by the model).
STREAM_METHODS = frozenset({"wait_stream", "wait_event", "record_event", "synchronize", "query"})
EVENT_METHODS = frozenset({"record", "wait", "synchronize", "query"})


def event_record_shape(call) -> bool:
    """Can ``x.record(...)`` be an event's record (``Event.record(stream=None)``: at most one argument, the
    stream)? ``tracker.record(cost, budget)``, ``recorder.record(name=..., value=...)`` are a metrics object's."""
    args = list(call.args)
    if any(a.star for a in args) or len(args) > 1:
        return False
    return all(a.keyword is None or a.keyword.value == "stream" for a in args)
TENSOR_LIFETIME_METHODS = frozenset({"record_stream"})
# torch's own functions that are ``tensor.record_stream(stream)`` (FSDP records the gradients it reduces on a side
# stream with dispatch turned off): (the tensor's position, the stream's position).
RECORD_FUNCTIONS: dict[str, tuple[int, int]] = {
    "torch.distributed.fsdp._common_utils._no_dispatch_record_stream": (0, 1),
    "torch.distributed.utils._no_dispatch_record_stream": (0, 1),
}

# Device queries of an accelerator layer that are true on devices which order the data of their streams
# themselves (DeepSpeed's ``get_accelerator().resolves_data_dependency()``: HPU / synchronized devices) or
# run every kernel synchronously (``is_synchronized_device()``: the CPU accelerator, whose streams are no-ops).
# Code guarded by one needs waits and ``record_stream`` only where it is false, and where it is true no
# cross-stream hazard exists: the analysis follows the branch of a device that does not order its streams.
STREAM_ORDERING_DEVICE_QUERIES = frozenset({"resolves_data_dependency", "is_synchronized_device"})

# Roles that open a scope in which Dynamo must not graph-break (C1, C2).
NO_BREAK_SCOPE_ROLES = frozenset(
    {Role.STREAM_SWITCH, Role.LIMIT_CORE_NUM, Role.LIMIT_CORE_NUM_NPUGRAPH_EX, Role.SUPER_KERNEL,
     Role.OTHER_TORCHAIR_SCOPE}
)
# Roles that switch the current stream.
STREAM_SCOPE_ROLES = frozenset({Role.STREAM_SWITCH, Role.NATIVE_STREAM_CONTEXT})

# Literal mode values seen in mode-dispatching code, mapped to execution paths.
MODE_LITERALS: dict[str, str] = {
    "ge_graph": "ge",
    "ge": "ge",
    "max-autotune": "ge",
    "graph": "ge",
    "reduce-overhead": "reduce-overhead",
    "npugraph_ex": "npugraph_ex",
    "acl_graph": "npugraph_ex",
    "aclgraph": "npugraph_ex",
    "eager": "eager",
}
EXECUTION_PATHS = ("ge", "reduce-overhead", "npugraph_ex", "eager", "cuda")

# "stream" / "Stream" ending an identifier: torch.npu.stream(, wait_stream(, record_stream(, torch.npu.Stream(,
# Optional[Stream], from torch.npu import Stream — but not logging.StreamHandler, streaming, streamer,
# Streams, which a plain substring search let through (a third of the files passing the prefilter on
# the bench corpus, none of them interesting)
class PatternMarker:
    """A prefilter marker that needs more than a substring: ``literal`` must occur (a fast search), then
    ``pattern`` must match (searched only in the files that contain the literal)."""

    __slots__ = ("literal", "pattern")

    def __init__(self, literal: bytes, pattern: bytes) -> None:
        self.literal = literal
        self.pattern = re.compile(pattern)

    def found(self, data: bytes) -> bool:
        return self.literal in data and self.pattern.search(data) is not None

    def __repr__(self) -> str:
        return f"PatternMarker({self.pattern.pattern!r})"


STREAM_WORD = PatternMarker(b"tream", rb"[Ss]tream(?![A-Za-z0-9])")

# Every marker (byte string or pattern) whose presence makes a file worth analysing for stream semantics.
STREAM_MARKERS: tuple[bytes | PatternMarker, ...] = (
    b"torchair", b"npu_stream_switch", b"NpuStreamSwitch", STREAM_WORD, b"Event", b"npu_wait_tensor",
    b"tagged_event", b"limit_core_num", b"super_kernel", b"npu_prefetch", b"CompilerConfig",
)


# torch.distributed functions: (indices written, indices read)
COLLECTIVES: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "all_reduce": ((0,), (0,)),
    "broadcast": ((0,), (0,)),
    "reduce": ((0,), (0,)),
    "all_to_all_single": ((0,), (1,)),
    "all_gather_into_tensor": ((0,), (1,)),
    "_all_gather_base": ((0,), (1,)),
    "reduce_scatter_tensor": ((0,), (1,)),
    "_reduce_scatter_base": ((0,), (1,)),
    "all_gather": ((0,), (1,)),
    "all_to_all": ((0,), (1,)),
    "send": ((), (0,)),
    "isend": ((), (0,)),
    "recv": ((0,), ()),
    "irecv": ((0,), ()),
}


# The documented parameter names of the tensor positions of each collective: a keyword argument with one
# of these names is the same use as the positional argument at that index.
COLLECTIVE_PARAMS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("tensor",),
    "broadcast": ("tensor",),
    "reduce": ("tensor",),
    "all_to_all_single": ("output", "input"),
    "all_gather_into_tensor": ("output_tensor", "input_tensor"),
    "_all_gather_base": ("output_tensor", "input_tensor"),
    "reduce_scatter_tensor": ("output", "input"),
    "_reduce_scatter_base": ("output", "input"),
    "all_gather": ("tensor_list", "tensor"),
    "all_to_all": ("output_tensor_list", "input_tensor_list"),
    "send": ("tensor",),
    "isend": ("tensor",),
    "recv": ("tensor",),
    "irecv": ("tensor",),
}
