"""Device facades and stream types whose join joins nothing (issue 16 §3, "methods that merely wait").

Frameworks reach the device through a facade class (an *accelerator*: ``get_accelerator().synchronize()``,
``.current_stream()``, ``.Stream``) whose methods forward to the device module's function of the same name
(``def current_device(self): return torch.npu.current_device()``). Every join the framework makes through
the facade's ``synchronize`` — the end of an overlapped gradient reduction, of an offload, of a prefetch —
is that one method: when its body is empty on a facade that does reach a real device, all of them order
nothing, and the consumers are in every caller. The root cause is the facade's method, where it is reported
(SL201, medium: the consumers are presumed).

A class is a device facade when at least ``_FORWARDED`` of its methods forward to a ``torch.<device>`` /
``torch_npu.npu`` function of their own name, its streams or events among them (a platform class that only
forwards device queries and whose ``synchronize`` fences a profiling run is not one); its ``synchronize`` is silent when it is an interface stub of a
class that forwards nothing (a CPU back-end, an abstract accelerator, a stand-in stream) — those do not
qualify — or when its body calls anything at all.

A host-wait helper that dispatches on the device back-end with one device's branch empty is reported at that
branch, unless its callers use it only to fence a host clock (:func:`timing_fence`): callers whose reads of device
results wait for the device themselves, one of which reads the clock right after the call.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import ancestry, call_name, local_nodes

if TYPE_CHECKING:
    from streamlint.model.project import Project

_FORWARDED = 3  # methods forwarding to the device module's same-named function
_STREAM_API = ("current_stream", "default_stream", "Stream", "Event", "stream", "set_stream")


def forwards(fn: FunctionInfo) -> bool:
    """Does the method call the device module's function of its own name (``torch.npu.<name>(...)``)?"""
    name = fn.node.name.value
    return any((dotted(site.node.func) or "") in {f"{m}.{name}" for m in apis.DEVICE_MODULE_SPELLINGS} for site in fn.calls)


def device_facade(cls: ClassInfo) -> bool:
    """Forwards at least ``_FORWARDED`` methods to the device module, among them its streams or events: its
    users overlap work on the device's streams, and its ``synchronize`` is their join."""
    return sum(forwards(m) for m in cls.methods.values()) >= _FORWARDED \
        and any(name in cls.methods and forwards(cls.methods[name]) for name in _STREAM_API)


def empty_body(fn: FunctionInfo) -> bool:
    """No call, no assignment, no return of a value: docstring, ``pass``, ``...``, bare ``return``."""
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else []
    return not any(isinstance(n, (cst.Call, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Raise, cst.Yield))
                   or isinstance(n, cst.Return) and n.value is not None for stmt in body for n in local_nodes(stmt))


def silent_facade_syncs(project: Project, file: FileModel) -> list[FunctionInfo]:
    """The ``synchronize`` methods of the file's device facades whose body does nothing, and the joins
    (``wait_stream`` / ``wait_event`` / ``synchronize``) that a subclass of a device stream type overrides
    with an empty body (``class Stream(torch_npu._C._NPUStreamBase)``: every ``s.wait_stream(other)`` of its
    users then orders nothing; a stand-in stream of a host back-end subclasses no device type)."""
    memo = derived(project, "silent_facade_syncs")
    if id(file) not in memo:
        memo[id(file)] = [cls.methods["synchronize"] for cls in file.classes.values()
                          if "synchronize" in cls.methods and empty_body(cls.methods["synchronize"])
                          and device_facade(cls)]
        memo[id(file)] += [m for cls in file.classes.values() if _device_stream_type(cls)
                           for name, m in cls.methods.items() if name in _JOINS and empty_body(m)]
    return memo[id(file)]


_JOINS = ("wait_stream", "wait_event", "synchronize")

# a branch test naming a device back-end (``IS_NPU_AVAILABLE``, ``torch.cuda.is_available()``, ``device.type == "mlu"``)
# (a whole word or underscore-separated part: `inputs_on_host` names no npu, `timemps` no mps)
_DEVICE_TEST = re.compile(r"(?<![A-Za-z0-9])(?:npu|cuda|xpu|mlu|mps|musa|hpu)(?![A-Za-z0-9])", re.IGNORECASE)


def _names_device(file: FileModel, test: cst.BaseExpression) -> bool:
    """Does a branch test select a device back-end (a device named outside any ``not``)?"""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return False  # `not torch.cuda.is_available()`: the host back-end
    if isinstance(test, cst.BooleanOperation):
        return _names_device(file, test.left) or _names_device(file, test.right)
    return bool(_DEVICE_TEST.search(file.code(test)))


def silent_device_branches(project: Project, file: FileModel) -> list[tuple[FunctionInfo, cst.CSTNode, str]]:
    """A host-wait helper that dispatches on the device back-end (``if IS_CUDA_AVAILABLE:
    torch.cuda.current_stream().synchronize() elif IS_NPU_AVAILABLE: ...``): at least two branches of an
    ``if`` / ``elif`` chain are each one host synchronisation and a branch whose test names a device does
    nothing (only ``pass`` / ``...``). On that device every caller's wait orders nothing (the consumers are in
    the callers). (function, the empty branch's first statement, the branch's test); an ``else`` branch (a
    host back-end with nothing to wait for) does not qualify."""
    memo = derived(project, "silent_device_branches")
    if id(file) in memo:
        return memo[id(file)]
    out: list[tuple[FunctionInfo, cst.CSTNode, str]] = []
    for fn in file.iter_functions():
        elifs: set[int] = set()
        for node in local_nodes(fn.node.body):
            if not isinstance(node, cst.If) or id(node) in elifs:
                continue
            chain: list[tuple[cst.BaseExpression, cst.BaseSuite]] = []
            cur = node
            while True:
                chain.append((cur.test, cur.body))
                if isinstance(cur.orelse, cst.If):
                    elifs.add(id(cur.orelse))
                    cur = cur.orelse
                    continue
                break
            if sum(_one_sync(body) for _, body in chain) < 2:
                continue
            for test, body in chain:
                if _nothing(body) and _names_device(file, test) and not timing_fence(project, file, fn):
                    out.append((fn, body.body[0], file.code(test)))
    memo[id(file)] = out
    return out


# host clocks a benchmark reads right after its fence (``t = time.perf_counter() - t0``)
_CLOCKS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.process_time", "time.time_ns",
                     "time.perf_counter_ns", "time.monotonic_ns", "timeit.default_timer", "perf_counter", "monotonic"})
# what makes a host wait order data a caller reads: an asynchronous copy (its host memory is filled by the device
# later), page-locked memory, streams and events (a host wait is the join of their work)
_ASYNC_KEYWORDS = frozenset({"non_blocking", "pin_memory"})
_ORDERING_CALLS = frozenset({"record", "wait_event", "wait_stream", "record_event", "record_stream", "query",
                             "Stream", "stream", "Event", "pin_memory"})


def timing_fence(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Is the host-wait helper ``fn`` only a fence for the host clock ([timing-only-sync])? Every project call
    of it is seen (none handed by reference) and made by a function that makes no asynchronous copy, pins no
    memory and names no stream or event (its host reads of device results — ``.tolist()``, ``.item()``, printing —
    wait for the device themselves, so the helper orders none of them), and some call is followed at once by a
    read of a host clock (``device_sync(device); t = time.perf_counter() - t0``): a silent device branch skews
    that device's timings, it leaves no data unordered."""
    from streamlint.model.flow.callers import callers_of
    from streamlint.model.flow.fieldfacts import _referenced

    sites = callers_of(project, file, fn)
    if not sites or fn.class_name is not None or _referenced(project, fn.node.name.value, file.path):
        return False
    timed = False
    for model, site in sites:
        caller = site.function
        if caller is None or caller is fn or _orders_data(caller):
            return False
        timed = timed or _clock_follows(model, caller, site.node)
    return timed


def _orders_data(fn: FunctionInfo) -> bool:
    for site in fn.calls:
        if site.method in _ORDERING_CALLS or (call_name(site.node) or "").rsplit(".", 1)[-1] in _ORDERING_CALLS:
            return True
        if any(a.keyword is not None and a.keyword.value in _ASYNC_KEYWORDS for a in site.node.args):
            return True
    return False


def _clock_follows(model: FileModel, fn: FunctionInfo, call: cst.Call) -> bool:
    """Is the statement right after the one holding ``call`` (in its block) a read of a host clock?"""
    path = ancestry(fn.node, call) or []
    for parent, child in zip(reversed(path[:-1]), reversed(path[1:])):
        if isinstance(child, cst.SimpleStatementLine) and isinstance(parent, cst.IndentedBlock):
            i = next((k for k, stmt in enumerate(parent.body) if stmt is child), None)
            if i is None or i + 1 >= len(parent.body):
                return False
            return any(isinstance(n, cst.Call) and (dotted(n.func) or "") in _CLOCKS
                       for n in local_nodes(parent.body[i + 1]))
    return False


def _statements(body: cst.BaseSuite) -> list:
    if not isinstance(body, cst.IndentedBlock):
        return [body]
    return [small for line in body.body for small in (line.body if isinstance(line, cst.SimpleStatementLine)
                                                      else [line])]


def _one_sync(body: cst.BaseSuite) -> bool:
    """One statement, a call of a ``synchronize`` (``torch.npu.current_stream().synchronize()``)."""
    stmts = _statements(body)
    if len(stmts) != 1 or not isinstance(stmts[0], cst.Expr):
        return False
    return (call_name(stmts[0].value) or "").endswith("synchronize")


def _nothing(body: cst.BaseSuite) -> bool:
    return isinstance(body, cst.IndentedBlock) and all(
        isinstance(s, cst.Pass) or isinstance(s, cst.Expr) and isinstance(s.value, (cst.Ellipsis, cst.SimpleString))
        for s in _statements(body))


def _device_stream_type(cls: ClassInfo) -> bool:
    """A subclass of a device stream type: a base named ``*StreamBase`` / ``Stream`` under a torch module."""
    return any(b.rsplit(".", 1)[-1] in ("Stream", "_CudaStreamBase", "_NPUStreamBase", "_XpuStreamBase")
               and b.startswith(("torch.", "torch_npu.")) for b in cls.bases)


__all__ = ["device_facade", "silent_device_branches", "silent_facade_syncs", "timing_fence"]
