"""Per-function cross-stream dataflow: which stream runs each op, where tensors are produced, read,
written and freed, and which orderings (waits, events, synchronisation) hold between those points.

The analysis is a path-sensitive abstract interpretation of one function body in program order:

* **streams** come from the scope chain (``with torch.npu.stream(s)`` / ``npu_stream_switch(tag)``,
  directly or through project wrappers, possibly behind an enable flag); calls inside a scope run on
  that stream, helper functions included. ``MAIN`` is the stream current at function entry.
* **orderings** are tracked CSAN-style with vector clocks: every op gets a time; ``vc[S][A] >= t``
  means every op queued on stream ``A`` up to time ``t`` happens before anything queued on ``S`` from
  now on. ``wait_stream``, event record/wait (native, ``Stream.record_event/wait_event``, tagged
  events, ``torchair.ops.record/wait``), ``npu_wait_tensor`` and host synchronisation update them.
* **tensors**: storages (allocations) with their allocation stream, last write, reads since then, uses
  on other streams, ``record_stream`` streams and escapes; values (objects) with their view base, so
  views share storage and ``npu_wait_tensor`` rewires only the waited object and later views of it.
* **lifetime**: a local storage dies on ``del``, rebinding of its last name, ``untyped_storage().
  resize_(0)`` or at function end unless it escaped (returned, stored on ``self``, appended).
* **control flow**: branches fork paths (bounded), ``if`` tests are correlated by expression so
  ``if self.flag: fork ... if self.flag: join`` never yields the impossible mix; loops run twice;
  early returns end a path; ``try`` runs body/else/finally.
* **helpers**: small project functions that order streams (``self._fork()``, ``wait_for(s)``,
  ``record_event(flag, events, idx)``) are interpreted inline with their arguments bound.

Precision policies (prefer no finding over a guess):

* only values with evidence are tensors: ``Tensor``-annotated or tensor-used parameters, torch tensor
  ops, tensor methods, calls taking a tracked tensor; other parameters, getters and ``self.*`` objects
  are opaque (their attribute chains still name streams and events);
* ``torch.empty*`` allocations launch no kernel, so they have no producer to order; ``.cuda()`` /
  ``.to(device)`` of an argument is a host copy (or a no-op); ``npu_prefetch`` moves no data;
* an event not recorded in the function (a caller's, a previous step's) covers work queued before entry;
  ``query()`` / ``synchronize()`` on an event count as host synchronisation; ``x.wait()`` on an unknown
  object (a collective's work handle) orders everything queued so far;
* a stream handed in as a parameter and waited on is assumed to be the caller's current stream; a stream
  comparison flag (``current_stream() != self.s``) makes both names one stream on the "equal" path;
* zero-argument getters (``ctx = get_context()``) correlate ``ctx is None`` tests across calls; ``a or b``
  / ``a and b`` tests constrain later tests of ``a`` and ``b``; ``exe_mode == "ge_graph"`` tests are
  decided by the execution path under analysis;
* an unknown execution path keeps only the hazards found on every path.

Rules read the hazards this computes (:class:`FunctionFlow`), filtered by execution path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.file import (
    ClassInfo,
    FileModel,
    FunctionInfo,
    dotted,
    string_value,
)
from streamlint.model.uses import bind_arguments
from streamlint.model.streams import (
    EVENT,
    EVENT_LIST,
    MAIN_STREAM,
    STREAM,
    STREAM_LIST,
    attr_kind,
    derived,
    local_kind,
)
from streamlint.model.syntax import contains
from streamlint.model.walk import children
from streamlint.model.wrappers import mode_of_test

if TYPE_CHECKING:
    from streamlint.model.project import Project
    from streamlint.model.uses import ApiUse

MAIN = "<main>"
MAX_PATHS = 48
# Statements interpreted per function analysis (all paths, inlined helpers included). Large branchy
# functions (DeepSpeed's ZeRO reducers, vLLM schedulers) would otherwise take minutes; past the budget
# the function gets no finding — deterministic, and silence rather than a guess.
MAX_STEPS = 4_000


class AnalysisBudgetExceeded(Exception):
    pass
MAX_INLINE_DEPTH = 3
LOOP_UNROLL = 2

META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "is_npu", "requires_grad", "layout",
                        "grad_fn", "is_leaf", "names", "itemsize", "nbytes"})
META_METHODS = frozenset({"size", "dim", "numel", "element_size", "is_contiguous", "stride", "storage_offset",
                          "data_ptr", "get_device", "nelement", "type", "is_floating_point", "is_complex",
                          "untyped_storage", "storage", "__len__"})
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
_STREAM_OBJECT_METHODS = frozenset({"wait_stream", "wait_event", "record_event"})
_RELEVANT_METHODS = frozenset({"wait_stream", "wait_event", "record_event", "record", "wait", "synchronize",
                               "record_stream"})
_RELEVANT_ROLES = frozenset({Role.DEVICE_SYNCHRONIZE, Role.TAGGED_EVENT_RECORD, Role.TAGGED_EVENT_WAIT,
                             Role.RECORD_TAGGED_STREAM, Role.OPS_RECORD, Role.OPS_WAIT, Role.WAIT_TENSOR,
                             Role.STREAM_SWITCH, Role.NATIVE_STREAM_CONTEXT, Role.CURRENT_STREAM})


# ---------------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class Race:
    """An unordered cross-stream access (SL201)."""

    kind: str  # "read" | "write-after-read" | "write-after-write"
    node: cst.CSTNode  # the access on the second stream
    name: str
    src: str  # stream of the earlier access (producer / reader)
    dst: str  # stream of this access
    producer: cst.CSTNode | None
    argument: bool  # the earlier access is the caller's production of an argument
    mode: str


@dataclass(frozen=True)
class Lifetime:
    """A storage used on another stream whose memory can be reused too early (SL301)."""

    node: cst.CSTNode  # first unprotected use on the other stream
    name: str
    alloc: str
    use_stream: str
    free: str  # "del" | "rebinding" | "resize_(0)" | "function end"
    free_node: cst.CSTNode | None
    escaped: bool
    mode: str


@dataclass(frozen=True)
class Unjoined:
    """Side-stream work never joined back before the end of a captured region (SL205)."""

    node: cst.With
    stream: str
    region: str  # "function" | "capture"
    mode: str
    entry: bool = True  # the function is itself a compiled graph entry (nobody else can join it)


@dataclass(frozen=True)
class ViewEscape:
    """A view of a waited tensor, created before ``npu_wait_tensor`` and used after it (SL204)."""

    node: cst.CSTNode
    alias: str
    waited: str
    wait_node: cst.CSTNode


@dataclass(frozen=True)
class FunctionFlow:
    modes: frozenset[str]
    races: tuple[Race, ...]
    lifetimes: tuple[Lifetime, ...]
    unjoined: tuple[Unjoined, ...]
    view_escapes: tuple[ViewEscape, ...]


EMPTY_FLOW = FunctionFlow(frozenset(), (), (), (), ())


def stream_label(key: str) -> str:
    """Human wording of a stream key."""
    if key == MAIN:
        return "the current stream"
    if key.startswith("tag:"):
        return f'stream "{key[4:]}"'
    if key.startswith("tag?:"):
        return f"the stream tagged {key[5:]}"
    if key.startswith("<stream@"):
        return "a new stream"
    return f"`{key}`"


# ---------------------------------------------------------------------------------------------------
# abstract values


class TVal:
    """A tensor object. ``base``: the value it is a view of; ``multi``: result of chunk/split (unpack
    gives views) or of a multi-output op (unpack gives fresh tensors)."""

    __slots__ = ("base", "created", "multi", "sid", "vid")

    def __init__(self, vid: int, sid: int, base: int | None, created: int, multi: str | None = None) -> None:
        self.vid, self.sid, self.base, self.created, self.multi = vid, sid, base, created, multi


@dataclass(frozen=True)
class SVal:
    key: str


@dataclass(frozen=True)
class EVal:
    key: str


@dataclass(frozen=True)
class KVal:
    """An expression key: a ``self.*`` attribute chain, a global, a flag alias."""

    key: str
    glob: bool = False
    opaque: bool = False  # a parameter or getter result that is not evidently a tensor: never tracked as one
    test: str | None = None  # correlation key for `if x:` / `x is None` (a zero-argument getter's call)


@dataclass(frozen=True)
class CVal:
    value: object


@dataclass(frozen=True)
class TupVal:
    items: tuple


NONE = CVal(None)


@dataclass
class Access:
    stream: str
    time: int
    node: cst.CSTNode | None
    snap: dict | None = None
    label: str | None = None  # the variable naming the tensor at this access


class Storage:
    __slots__ = ("alloc", "dead", "escaped", "kind", "last_write", "name", "reads", "recorded", "sid", "uses")

    def __init__(self, sid: int, name: str | None, kind: str, alloc: str, last_write: Access | None) -> None:
        self.sid, self.name, self.kind, self.alloc = sid, name, kind, alloc
        self.last_write = last_write
        self.reads: list[Access] = []
        self.uses: list[Access] = []
        self.recorded: set[str] = set()
        self.escaped = False
        self.dead = False

    def clone(self) -> Storage:
        s = Storage(self.sid, self.name, self.kind, self.alloc, self.last_write)
        s.reads, s.uses, s.recorded = list(self.reads), list(self.uses), set(self.recorded)
        s.escaped, s.dead = self.escaped, self.dead
        return s


@dataclass
class ScopeRun:
    node: cst.With
    stream: str
    start: int
    last: int | None = None
    top: bool = True


class State:
    def __init__(self) -> None:
        self.env: dict[str, object] = {}
        self.vals: dict[int, TVal] = {}
        self.deps: dict[int, list[dict]] = {}
        self.waits: dict[int, list[tuple[int, cst.CSTNode, str]]] = {}  # vid -> (time, wait node, name)
        self.stores: dict[int, Storage] = {}
        self.vc: dict[str, dict[str, int]] = {}
        self.host: dict[str, int] = {}
        self.events: dict[str, dict[str, int]] = {}
        self.stack: list[str] = [MAIN]
        self.assume: dict[str, bool] = {}
        self.clauses: list[tuple[tuple[str, bool], ...]] = []  # at least one literal of each holds
        self.same: dict[str, str] = {}  # stream key -> the key of the same stream (from `s1 == s2` tests)
        self.runs: list[ScopeRun] = []
        self.regions: list[tuple[int, str]] = []
        self.last_op: dict[str, int] = {}
        self.long: dict[str, int] = {}
        self.done = False
        self.ret: object = None
        self.flow: str | None = None

    def clone(self) -> State:
        s = State.__new__(State)
        s.env = dict(self.env)
        s.vals = self.vals  # TVal objects are immutable after creation
        s.deps = {k: list(v) for k, v in self.deps.items()}
        s.waits = {k: list(v) for k, v in self.waits.items()}
        s.stores = {k: v.clone() for k, v in self.stores.items()}
        s.vc = {k: dict(v) for k, v in self.vc.items()}
        s.host = dict(self.host)
        s.events = {k: dict(v) for k, v in self.events.items()}
        s.stack = list(self.stack)
        s.assume = dict(self.assume)
        s.clauses = list(self.clauses)
        s.same = dict(self.same)
        s.runs = [ScopeRun(r.node, r.stream, r.start, r.last, r.top) for r in self.runs]
        s.regions = list(self.regions)
        s.last_op = dict(self.last_op)
        s.long = dict(self.long)
        s.done, s.ret, s.flow = self.done, self.ret, self.flow
        return s

    @property
    def cur(self) -> str:
        return self.stack[-1]

    def know(self, stream: str) -> dict[str, int]:
        k = dict(self.vc.get(stream, {}))
        for s, t in self.host.items():
            if k.get(s, -1) < t:
                k[s] = t
        return k


def _merge(into: dict[str, int], other: dict[str, int]) -> bool:
    changed = False
    for s, t in other.items():
        if into.get(s, -1) < t:
            into[s] = t
            changed = True
    return changed


def _covered(acc: Access, know: dict[str, int]) -> bool:
    return know.get(acc.stream, -1) >= acc.time


# ---------------------------------------------------------------------------------------------------
# mode configuration


@dataclass(frozen=True)
class _Config:
    mode: str
    raw: bool
    war: bool
    waw: bool
    implicit_edges: bool
    args_exempt: bool


def _config(mode: str, explicit_ge: bool, entry: bool) -> _Config:
    if mode == "ge":
        if explicit_ge:
            return _Config(mode, True, True, True, False, True)
        return _Config(mode, False, True, False, True, True)
    if mode in ("reduce-overhead", "npugraph_ex"):
        return _Config(mode, True, True, True, False, entry)
    return _Config(mode, True, True, True, False, False)


# ---------------------------------------------------------------------------------------------------
# the interpreter


class _Interp:
    def mentions_ordering(self, node: cst.CSTNode) -> bool:
        key = id(node)
        if key not in self._mentions:
            self._mentions[key] = _mentions_ordering(node)
        return self._mentions[key]

    def anonymous_key(self, kind: str, node: cst.CSTNode) -> str:
        """A deterministic key for an unnamed stream / event created at ``node`` (never an id(), which
        would leak into messages and differ between runs)."""
        index = self._anonymous.setdefault(id(node), len(self._anonymous))
        return f"<{kind}@{index}>"

    def __init__(self, project: Project, file: FileModel, fn: FunctionInfo, cfg: _Config) -> None:
        self.project = project
        self.file = file
        self.fn = fn
        self.cfg = cfg
        self.clock = 0
        self.next_id = 0
        self.depth = 0
        self.single = False
        self.anchor: cst.CSTNode | None = None
        self.frames: list[tuple[FileModel, FunctionInfo]] = [(file, fn)]
        self.races: dict[tuple, Race] = {}
        self.lifetimes: dict[tuple, Lifetime] = {}
        self.unjoined: dict[tuple, Unjoined] = {}
        self.view_escapes: dict[tuple, ViewEscape] = {}
        self.inline_stack: list[int] = []
        self.param_streams: set[str] = set()
        self._anonymous: dict[int, int] = {}  # creation node -> index in program order
        self.steps = 0
        self._mentions: dict[int, bool] = {}
        self.stream_tests: dict[str, tuple[str, str, bool]] = {}
        self.rest: list = []  # statements after the one being interpreted (same block)
        self.h2d = False  # the current op copies host data to the device (or is a no-op on device data)
        self.deferred_end = _called_by_own_class(file, fn)
        self.entry = id(fn) in _graph_entries(project)
        self.own_withs = _class_withs(file, fn)

    # ---- helpers
    @property
    def cfile(self) -> FileModel:
        return self.frames[-1][0]

    @property
    def cfn(self) -> FunctionInfo:
        return self.frames[-1][1]

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def new_storage(self, st: State, kind: str, stream: str, name: str | None, write: Access | None) -> Storage:
        s = Storage(self.new_id(), name, kind, stream, write)
        st.stores[s.sid] = s
        return s

    def new_tensor(self, st: State, sid: int, base: int | None = None, multi: str | None = None) -> TVal:
        v = TVal(self.new_id(), sid, base, self.clock, multi)
        st.vals[v.vid] = v
        if base is not None and base in st.deps:
            st.deps[v.vid] = list(st.deps[base])
        return v

    def long_tensor(self, st: State, key: str) -> TVal:
        base_key = key.split("[", 1)[0]
        sid = st.long.get(base_key)
        if sid is None:
            sid = self.new_storage(st, "long", MAIN, base_key, None).sid
            st.long[base_key] = sid
        return self.new_tensor(st, sid)

    def is_global(self, name: str) -> bool:
        fn = self.cfn
        while fn is not None:
            if name in fn.locals or name in fn.all_params or name in fn.local_aliases:
                return False
            fn = fn.parent
        return True

    # ---- rendering (keys for flags, events, streams)
    def render(self, st: State, e: cst.BaseExpression) -> str:
        if isinstance(e, cst.Name):
            v = st.env.get(e.value)
            if isinstance(v, (KVal, SVal, EVal)):
                return v.key
            if isinstance(v, CVal) and v is not NONE:
                return repr(v.value)
            return e.value
        if isinstance(e, cst.Attribute):
            return f"{self.render(st, e.value)}.{e.attr.value}"
        if isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
            return f"{self.render(st, e.value)}[{self.render(st, e.slice[0].slice.value)}]"
        if isinstance(e, cst.Integer):
            return repr(int(e.value, 0))
        if isinstance(e, (cst.SimpleString, cst.ConcatenatedString)):
            sv = string_value(e)
            return repr(sv) if sv is not None else self.cfile.code(e)
        if isinstance(e, cst.Call) and not e.args:
            return f"{self.render(st, e.func)}()"
        return self.cfile.code(e)

    def kind_of(self, st: State, v: object) -> str | None:
        if isinstance(v, SVal):
            return STREAM
        if isinstance(v, EVal):
            return EVENT
        if isinstance(v, KVal):
            key = v.key
            indexed = "[" in key
            base = key.split("[", 1)[0]
            kind = None
            if base.startswith("self.") and base.count(".") == 1:
                frame_file, frame_fn = next(((f, fn) for f, fn in reversed(self.frames) if fn.class_name),
                                            (self.file, self.fn))
                cls = frame_file.classes.get(frame_fn.class_name or "")
                kind = attr_kind(self.project, frame_file, cls, base[5:])
            elif "." not in base:
                kind = local_kind(self.project, self.cfile, self.cfn, base)
            if indexed:
                return {EVENT_LIST: EVENT, STREAM_LIST: STREAM}.get(kind or "")
            return STREAM if kind == MAIN_STREAM else kind
        return None

    def stream_key(self, st: State, v: object, e: cst.BaseExpression | None) -> str:
        key = self._stream_key(st, v, e)
        return st.same.get(key, key)

    def _stream_key(self, st: State, v: object, e: cst.BaseExpression | None) -> str:
        if isinstance(v, SVal):
            return v.key
        if isinstance(v, KVal):
            if v.key.startswith("self.") and v.key.count(".") == 1 and "[" not in v.key:
                frame_file, frame_fn = next(((f, fn) for f, fn in reversed(self.frames) if fn.class_name),
                                            (self.file, self.fn))
                cls = frame_file.classes.get(frame_fn.class_name or "")
                if attr_kind(self.project, frame_file, cls, v.key[5:]) == MAIN_STREAM:
                    return MAIN
            return v.key
        return self.render(st, e) if e is not None else "<unknown stream>"

    def event_key(self, st: State, v: object, e: cst.BaseExpression | None) -> str:
        if isinstance(v, (EVal, KVal)):
            return v.key
        return self.render(st, e) if e is not None else "<unknown event>"

    # ---- orderings
    def wait_stream(self, st: State, waiter: str, producer: str) -> None:
        if waiter == producer:
            return
        snap = dict(st.vc.get(producer, {}))
        snap[producer] = self.clock
        if producer in self.param_streams and producer not in st.last_op:
            snap[MAIN] = max(snap.get(MAIN, -1), self.clock)  # a stream handed in: usually the caller's current one
        _merge(st.vc.setdefault(waiter, {}), snap)

    def record(self, st: State, stream: str, key: str) -> None:
        snap = dict(st.vc.get(stream, {}))
        snap[stream] = self.clock
        st.events[key] = snap

    def wait_event(self, st: State, stream: str, key: str) -> None:
        snap = st.events.get(key)
        if snap is None and not key.startswith("<event@"):
            snap = {MAIN: 0}  # recorded before entry (by the caller, or a previous call): covers pre-entry work
        if snap is not None:
            _merge(st.vc.setdefault(stream, {}), {s: t for s, t in snap.items() if s != stream})

    def sync_all(self, st: State) -> None:
        for s in (*st.last_op, *st.vc, MAIN):
            st.host[s] = self.clock

    def sync_stream(self, st: State, stream: str) -> None:
        snap = dict(st.vc.get(stream, {}))
        snap[stream] = self.clock
        _merge(st.host, snap)

    def wait_everything(self, st: State, stream: str) -> None:
        _merge(st.vc.setdefault(stream, {}), {s: self.clock for s in (*st.last_op, MAIN) if s != stream})

    # ---- tensor accesses
    def tensors(self, st: State, v: object) -> list[TVal]:
        if isinstance(v, TVal):
            return [v]
        if isinstance(v, TupVal):
            out: list[TVal] = []
            for item in v.items:
                out += self.tensors(st, item)
            return out
        if isinstance(v, KVal) and not v.opaque and self.kind_of(st, v) is None and not v.key.startswith("<"):
            return [self.long_tensor(st, v.key)]
        return []

    def op(self, st: State, node: cst.CSTNode, reads: list, writes: list = (), result: bool = True,
           read_writes: bool = True) -> TVal | None:
        t = self.tick()
        s = st.cur
        rs = [tv for v in reads for tv in self.tensors(st, v)]
        ws = [tv for v in writes for tv in self.tensors(st, v)]
        if read_writes:
            rs += ws
        know = st.know(s)
        persist: dict[str, int] = {}
        for tv in rs + ws:
            for dep in st.deps.get(tv.vid, ()):
                _merge(persist, dep)
            if self.cfg.implicit_edges:
                lw = st.stores[tv.sid].last_write
                if lw is not None and lw.stream != s and lw.snap is not None:
                    _merge(persist, lw.snap)
        if persist:
            persist.pop(s, None)
            _merge(st.vc.setdefault(s, {}), persist)
            _merge(know, persist)
        for tv in rs:
            self.access(st, tv, s, t, know, False)
        for tv in ws:
            self.access(st, tv, s, t, know, True)
        st.last_op[s] = t
        if not result:
            return None
        snap = dict(know)
        snap[s] = t
        storage = self.new_storage(st, "local", s, None, Access(s, t, self.anchor, snap))
        return self.new_tensor(st, storage.sid)

    def alloc(self, st: State, node: cst.CSTNode) -> TVal:
        """``torch.empty*``: memory from the current stream's pool, no kernel, so no producer to order."""
        self.tick()
        storage = self.new_storage(st, "local", st.cur, None, None)
        return self.new_tensor(st, storage.sid)

    def access(self, st: State, tv: TVal, s: str, t: int, know: dict[str, int], write: bool) -> None:
        S = st.stores.get(tv.sid)
        if S is None:
            return
        lw = S.last_write
        if not write:
            if self.cfg.raw and lw is not None and lw.stream != s and not _covered(lw, know) \
                    and not (self.h2d and S.kind == "arg"):
                self.race(st, "read", S, lw, s, self.label(st, tv.sid))
            S.reads.append(Access(s, t, self.anchor))
        else:
            if self.cfg.waw and lw is not None and lw.stream != s and not _covered(lw, know):
                self.race(st, "write-after-write", S, lw, s, self.label(st, tv.sid))
            elif self.cfg.war:
                for r in S.reads:
                    if r.stream != s and not _covered(r, know):
                        self.race(st, "write-after-read", S, r, s, self.label(st, tv.sid))
                        break
            snap = dict(know)
            snap[s] = t
            S.last_write = Access(s, t, self.anchor, snap)
            S.reads = []
        if S.kind == "local" and s != S.alloc:
            S.uses.append(Access(s, t, self.anchor, label=self.label(st, tv.sid)))
        self.check_view_escape(st, tv)

    def race(self, st: State, kind: str, S: Storage, earlier: Access, s: str, label: str | None = None) -> None:
        if self.depth or self.anchor is None:
            return
        name = label or S.name or "tensor"
        key = (id(self.anchor), name, kind)
        if key not in self.races:
            self.races[key] = Race(kind, self.anchor, name, earlier.stream, s, earlier.node,
                                   S.kind == "arg" and earlier.time == 0, self.cfg.mode)

    def label(self, st: State, sid: int) -> str | None:
        """A variable bound to storage ``sid`` now, preferring one written in the current statement."""
        names = [n for n, v in st.env.items() if isinstance(v, TVal) and v.sid == sid]
        if not names:
            return None
        if len(names) > 1 and self.anchor is not None and self.depth == 0:
            code = self.file.code(self.anchor)
            for n in names:
                if re.search(rf"(?<![\w.]){re.escape(n)}\b", code):
                    return n
        return names[0]

    def check_view_escape(self, st: State, tv: TVal) -> None:
        if self.depth or self.anchor is None or not st.waits:
            return
        base = tv.base
        while base is not None:
            for time, wnode, wname in st.waits.get(base, ()):
                if tv.created < time:
                    key = (tv.vid, id(wnode))
                    if key not in self.view_escapes:
                        name = st.stores[tv.sid].name or "view"
                        alias = self._name_of(st, tv) or name
                        self.view_escapes[key] = ViewEscape(self.anchor, alias, wname, wnode)
                    return
            parent = st.vals.get(base)
            base = parent.base if parent is not None else None

    def _name_of(self, st: State, tv: TVal) -> str | None:
        for name, v in st.env.items():
            if v is tv:
                return name
        return None

    # ---- lifetime
    def referenced(self, st: State, sid: int) -> bool:
        def holds(v: object) -> bool:
            if isinstance(v, TVal):
                return v.sid == sid
            if isinstance(v, TupVal):
                return any(holds(i) for i in v.items)
            return False

        return any(holds(v) for v in st.env.values())

    def escape(self, st: State, v: object) -> None:
        for tv in self.tensors(st, v):
            S = st.stores.get(tv.sid)
            if S is not None:
                S.escaped = True

    def free(self, st: State, sid: int, how: str, node: cst.CSTNode | None, force: bool = False) -> None:
        S = st.stores.get(sid)
        if S is None or S.kind != "local" or S.dead:
            return
        if not force and self.referenced(st, sid):
            return
        if S.escaped and how != "resize_(0)":
            if how != "function end":
                return
        S.dead = True
        if self.depth and how != "function end":
            node = self.anchor
        know = st.know(S.alloc)
        for u in S.uses:
            if u.stream == S.alloc or u.stream in S.recorded or know.get(u.stream, -1) >= u.time:
                continue
            if u.node is None:
                return
            key = (id(u.node), S.name)
            if key not in self.lifetimes:
                self.lifetimes[key] = Lifetime(u.node, u.label or S.name or "tensor", S.alloc, u.stream, how, node,
                                               S.escaped and how == "function end", self.cfg.mode)
            return

    def unbind(self, st: State, old: object, how: str, node: cst.CSTNode | None) -> None:
        for tv in self.tensors(st, old) if isinstance(old, (TVal, TupVal)) else ():
            self.free(st, tv.sid, how, node)

    def bind(self, st: State, name: str, v: object, node: cst.CSTNode | None) -> None:
        old = st.env.get(name)
        st.env[name] = v
        self.invalidate(st, name)
        if isinstance(v, TVal):
            S = st.stores.get(v.sid)
            if S is not None and S.name is None:
                S.name = name
        if old is not None and old is not v:
            self.unbind(st, old, "rebinding", node)

    def invalidate(self, st: State, name: str) -> None:
        if not st.assume:
            return
        pattern = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
        for key in [k for k in st.assume if pattern.search(k)]:
            del st.assume[key]

    # ---- expressions
    def ev(self, st: State, e: cst.BaseExpression) -> object:
        if isinstance(e, cst.Name):
            v = e.value
            if v in st.env:
                return st.env[v]
            if v == "None":
                return NONE
            if v in ("True", "False"):
                return CVal(v == "True")
            if v != "self" and self.is_global(v) and v not in self.cfile.names:
                return KVal(v, glob=True)
            if v == "self":
                return KVal("self")
            return None
        if isinstance(e, (cst.Integer, cst.Float)):
            return CVal(e.value)
        if isinstance(e, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return CVal(string_value(e) if not isinstance(e, cst.FormattedString) else None)
        if isinstance(e, cst.Attribute):
            attr = e.attr.value
            if attr in META_ATTRS:
                return None
            base = self.ev(st, e.value)
            if isinstance(base, TVal):
                if attr in VIEW_ATTRS:
                    return self.new_tensor(st, base.sid, base.vid)
                return None
            if isinstance(base, KVal):
                return KVal(f"{base.key}.{attr}", base.glob, base.opaque)
            return None
        if isinstance(e, cst.Subscript):
            return self.subscript(st, e)
        if isinstance(e, cst.Call):
            return self.call(st, e)
        if isinstance(e, cst.BinaryOperation):
            left, right = self.ev(st, e.left), self.ev(st, e.right)
            if self.tensors(st, left) or self.tensors(st, right):
                return self.op(st, e, [left, right])
            return None
        if isinstance(e, cst.UnaryOperation):
            inner = self.ev(st, e.expression)
            if isinstance(e.operator, cst.Not):
                return None
            return self.op(st, e, [inner]) if self.tensors(st, inner) else None
        if isinstance(e, cst.BooleanOperation):
            self.ev(st, e.left)
            self.ev(st, e.right)
            return None
        if isinstance(e, cst.Comparison):
            if all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in e.comparisons):
                return None
            vals = [self.ev(st, e.left)] + [self.ev(st, c.comparator) for c in e.comparisons]
            return self.op(st, e, vals) if any(self.tensors(st, v) for v in vals) else None
        if isinstance(e, (cst.Tuple, cst.List)):
            return TupVal(tuple(self.ev(st, el.value) if not isinstance(el, cst.StarredElement) else None
                                for el in e.elements))
        if isinstance(e, cst.IfExp):
            self.ev(st, e.test)
            known = self.decide(st, e.test)
            if known is True:
                return self.ev(st, e.body)
            if known is False:
                return self.ev(st, e.orelse)
            body = self.ev(st, e.body)
            self.ev(st, e.orelse)
            return body
        if isinstance(e, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self.comprehension(st, e)
        if isinstance(e, cst.Await):
            return self.ev(st, e.expression)
        return None

    def comprehension(self, st: State, e) -> object:
        saved = dict(st.env)
        f = e.for_in
        while f is not None:
            self.ev(st, f.iter)
            for n in _target_names(f.target):
                st.env[n] = None
            f = f.inner_for_in
        self.ev(st, e.elt)
        st.env = saved
        return None

    def subscript(self, st: State, e: cst.Subscript) -> object:
        base = self.ev(st, e.value)
        idx_vals = []
        for el in e.slice:
            if isinstance(el.slice, cst.Index):
                idx_vals.append(self.ev(st, el.slice.value))
        if isinstance(base, TupVal) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
            iv = e.slice[0].slice.value
            if isinstance(iv, cst.Integer):
                i = int(iv.value, 0)
                return base.items[i] if -len(base.items) <= i < len(base.items) else None
            return None
        if isinstance(base, TVal):
            if any(self.tensors(st, v) for v in idx_vals):
                return self.op(st, e, [base] + idx_vals)
            return self.new_tensor(st, base.sid, base.vid)
        if isinstance(base, KVal):
            if len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
                return KVal(f"{base.key}[{self.render(st, e.slice[0].slice.value)}]", base.glob, base.opaque)
            return KVal(f"{base.key}[:]", base.glob, base.opaque)
        return None

    def call_args(self, st: State, call: cst.Call) -> tuple[list, list, list]:
        """(positional values, tensor-read values, out= write values)."""
        positional, reads, writes = [], [], []
        for arg in call.args:
            v = self.ev(st, arg.value)
            if arg.keyword is None:
                positional.append(v)
                reads.append(v)
            elif arg.keyword.value == "out":
                writes.append(v)
            elif arg.keyword.value not in NON_TENSOR_KWARGS:
                reads.append(v)
        return positional, reads, writes

    def call(self, st: State, e: cst.Call) -> object:
        site = self.cfile.call_site(e)
        func = e.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        # x.untyped_storage().resize_(0): explicit free
        if method == "resize_" and isinstance(func.value, cst.Call) and isinstance(func.value.func, cst.Attribute) \
                and func.value.func.attr.value in ("untyped_storage", "storage"):
            owner = self.ev(st, func.value.func.value)
            if isinstance(owner, TVal) and e.args and isinstance(e.args[0].value, cst.Integer) \
                    and int(e.args[0].value.value, 0) == 0:
                self.op(st, e, [], [owner], result=False)
                self.free(st, owner.sid, "resize_(0)", self.anchor, force=True)
            return None
        uses = self.project.api_uses(self.cfile, site) if site is not None else ()
        direct = [u for u in uses if not u.wrappers]
        if direct:
            return self.api(st, e, direct[0])
        waits = [u for u in uses if u.role is Role.WAIT_TENSOR]
        if waits:
            return self.api(st, e, waits[0])
        if site is not None:
            target = self.inline_target(site)
            if target is not None:
                if _cached_stream_getter(target[0]):
                    return SVal(MAIN)  # caches the stream current at its first call: the default stream
                return self.inline(st, e, *target)
        if uses:
            return self.api(st, e, uses[0])
        target = site.target if site is not None else None
        own = self._self_prefix()
        if method is not None and (target is None or (own is not None and target.startswith(own))
                                   or target.split(".")[0] in ("self",)):
            recv = self.ev(st, func.value)
            return self.method(st, e, recv, method)
        return self.generic(st, e, target)

    def _self_prefix(self) -> str | None:
        fn = self.cfn
        return f"{self.cfile.module_name}.{fn.class_name}." if fn.class_name else None

    def generic(self, st: State, e: cst.Call, target: str | None) -> object:
        last = target.rsplit(".", 1)[-1] if target else None
        if target and (target.startswith("torch.distributed.") or target.startswith("torch_npu.distributed.")) \
                and last in COLLECTIVES:
            written, read = COLLECTIVES[last]
            positional, reads, outs = self.call_args(st, e)
            ws = [positional[i] for i in written if i < len(positional)]
            rs = [positional[i] for i in read if i < len(positional) and i not in written]
            self.op(st, e, rs, ws, result=False)
            return None
        if target in NON_TENSOR_BUILTINS or (target is None and isinstance(e.func, cst.Name)
                                            and e.func.value in NON_TENSOR_BUILTINS):
            for arg in e.args:
                self.ev(st, arg.value)
            return None
        if last in LIKE_FACTORIES or (last in EMPTY_FACTORIES and target and target.startswith("torch")):
            for arg in e.args:
                self.ev(st, arg.value)
            return self.alloc(st, e) if last in EMPTY_FACTORIES else self.op(st, e, [])
        _, reads, writes = self.call_args(st, e)
        is_torch = _tensor_op_target(target)
        if writes:
            self.op(st, e, reads, writes, result=False)
            return writes[0] if len(writes) == 1 else None
        if any(self.tensors(st, v) for v in reads) or is_torch:
            return self.op(st, e, reads)
        return None

    def method(self, st: State, e: cst.Call, recv: object, name: str) -> object:
        args = [a for a in e.args if a.keyword is None]
        kind = self.kind_of(st, recv)
        arg0 = args[0].value if args else None
        if name == "wait_stream" and arg0 is not None:
            waiter = self.stream_key(st, recv, e.func.value)
            producer = self.stream_key(st, self.ev(st, arg0), arg0)
            self.wait_stream(st, waiter, producer)
            return None
        if name == "wait_event" and arg0 is not None:
            self.wait_event(st, self.stream_key(st, recv, e.func.value), self.event_key(st, self.ev(st, arg0), arg0))
            return None
        if name == "record_event":
            stream = self.stream_key(st, recv, e.func.value)
            key = self.event_key(st, self.ev(st, arg0), arg0) if arg0 is not None else self.anonymous_key("event", e)
            self.record(st, stream, key)
            return EVal(key)
        if not isinstance(recv, TVal) and kind != STREAM and name in ("record", "wait", "synchronize", "query"):
            key = self.event_key(st, recv, e.func.value)
            known = key in st.events or kind == EVENT
            stream = self.stream_key(st, self.ev(st, arg0), arg0) if arg0 is not None else st.cur
            if name == "record":
                self.record(st, stream, key)  # tensors have no record(): this is an event
            elif name == "wait":
                if known:
                    self.wait_event(st, stream, key)
                else:
                    self.wait_everything(st, stream)  # a collective's work handle, or an event recorded elsewhere
            elif known:  # synchronize() / query(): the host has seen the event complete
                _merge(st.host, st.events.get(key, {MAIN: 0}))
            else:  # an event recorded elsewhere (e.g. a field inherited from a library class): as for a
                self.sync_all(st)  # known event, a query()/synchronize() the code goes on after is a host sync
            return None
        if kind == STREAM and name in ("synchronize", "query"):
            if name == "synchronize":
                self.sync_stream(st, self.stream_key(st, recv, e.func.value))
            return None
        if name in ESCAPE_METHODS and not isinstance(recv, TVal):
            for arg in e.args:
                self.escape(st, self.ev(st, arg.value))
            return None
        tensors = self.tensors(st, recv)
        if tensors and isinstance(recv, KVal) and not _tensor_method(name):
            tensors = []  # `self.dist_index.get_group()`: an object, not a tensor
        if not tensors and isinstance(recv, KVal) and recv.opaque and name in COPY_METHODS:
            _, reads, _ = self.call_args(st, e)
            return self.op(st, e, reads)  # e.g. host_batches[i].to(device): a new tensor on this stream
        if not tensors:
            _, reads, writes = self.call_args(st, e)
            if writes:
                self.op(st, e, reads, writes, result=False)
                return None
            if any(self.tensors(st, v) for v in reads):
                return self.op(st, e, reads)
            return None
        tv = tensors[0]
        if name == "record_stream" and arg0 is not None:
            stream = self.stream_key(st, self.ev(st, arg0), arg0)
            S = st.stores.get(tv.sid)
            if S is not None:
                S.recorded.add(stream)
            return None
        if name in ("cuda", "npu") or (name == "to" and arg0 is not None and _device_like(arg0)):
            _, reads, _ = self.call_args(st, e)
            self.h2d = True
            try:
                return self.op(st, e, [tv] + reads)
            finally:
                self.h2d = False
        if name in HOST_VALUE_METHODS:
            self.op(st, e, [tv], result=False)
            return None
        if name in META_METHODS:
            for arg in e.args:
                self.ev(st, arg.value)
            return None
        if name in VIEW_METHODS:
            for arg in e.args:
                self.ev(st, arg.value)
            return self.new_tensor(st, tv.sid, tv.vid)
        if name in MULTI_VIEW_METHODS:
            for arg in e.args:
                self.ev(st, arg.value)
            return self.new_tensor(st, tv.sid, tv.vid, multi="view")
        if name in LIKE_FACTORIES:
            for arg in e.args:
                self.ev(st, arg.value)
            return self.alloc(st, e) if name in EMPTY_FACTORIES else self.op(st, e, [])
        if name.endswith("_") and not name.startswith("_"):
            _, reads, writes = self.call_args(st, e)
            overwrite = name in OVERWRITE_METHODS
            self.op(st, e, reads, [tv] + writes, result=False, read_writes=not overwrite)
            return tv
        _, reads, writes = self.call_args(st, e)
        if writes:
            self.op(st, e, [tv] + reads, writes, result=False)
            return writes[0]
        return self.op(st, e, [tv] + reads)

    # ---- APIs
    def api(self, st: State, e: cst.Call, use: ApiUse) -> object:
        role = use.role

        def val(param: str) -> tuple[object, cst.BaseExpression | None]:
            expr = use.value(param)
            if expr is None:
                return None, None
            if use.arg(param) is None:  # a wrapper constant: render without evaluation
                sv = string_value(expr)
                return (CVal(sv) if sv is not None else None), expr
            return self.ev(st, expr), expr

        if role is Role.WAIT_TENSOR:
            target, texpr = val("self")
            if texpr is None:
                texpr = wait_self_expr(self.project, self.cfile, use)
                target = self.ev(st, texpr) if texpr is not None else None
            dep, _ = val("dependency")
            for tv in self.tensors(st, dep):
                lw = st.stores[tv.sid].last_write
                snap = dict(lw.snap) if lw is not None and lw.snap is not None else {}
                if lw is not None:
                    snap[lw.stream] = max(snap.get(lw.stream, -1), lw.time)
                for t in self.tensors(st, target):
                    st.deps.setdefault(t.vid, []).append(snap)
            if isinstance(target, TVal) and self.depth == 0:
                name = self.file.code(texpr) if texpr is not None else "tensor"
                st.waits.setdefault(target.vid, []).append((self.clock + 1, self.anchor or e, name))
            self.tick()
            return target
        if role is Role.OPS_WAIT:
            tensors, _ = val("tensors")
            items = tensors.items if isinstance(tensors, TupVal) else (tensors,)
            for item in items:
                if isinstance(item, EVal):
                    self.wait_event(st, st.cur, item.key)
                for tv in self.tensors(st, item):
                    lw = st.stores[tv.sid].last_write
                    if lw is not None and lw.stream != st.cur:
                        _merge(st.vc.setdefault(st.cur, {}), lw.snap or {lw.stream: lw.time})
            return None
        if role is Role.OPS_RECORD:
            key = self.anonymous_key("event", e)
            self.record(st, st.cur, key)
            return EVal(key)
        if role in (Role.TAGGED_EVENT_RECORD, Role.TAGGED_EVENT_WAIT):
            v, expr = val("event")
            key = self.event_key(st, v, expr)
            if role is Role.TAGGED_EVENT_RECORD:
                self.record(st, st.cur, key)
            else:
                self.wait_event(st, st.cur, key)
            return None
        if role is Role.RECORD_TAGGED_STREAM:
            v, _ = val("input")
            tag, texpr = val("tagged_stream")
            name = tag.value if isinstance(tag, CVal) and isinstance(tag.value, str) else None
            if name is None and texpr is not None:
                name = string_value(texpr)
            stream = MAIN if name == "default" else (f"tag:{name}" if name is not None else None)
            for tv in self.tensors(st, v):
                S = st.stores.get(tv.sid)
                if S is not None and stream is not None:
                    S.recorded.add(stream)
            return None
        if role is Role.DEVICE_SYNCHRONIZE:
            self.sync_all(st)
            return None
        if role is Role.CURRENT_STREAM:
            return SVal(st.cur)
        if role is Role.DEFAULT_STREAM:
            return SVal(MAIN)
        if role is Role.STREAM_NEW:
            return SVal(self.anonymous_key("stream", e))
        if role in (Role.EVENT_NEW, Role.TAGGED_EVENT_CREATE):
            return EVal(self.anonymous_key("event", e))
        if role is Role.PREFETCH:  # an L2 prefetch hint: moves no tensor data another stream could race with
            for arg in e.args:
                self.ev(st, arg.value)
            self.op(st, e, [], result=False)  # still work queued on this stream (matters for capture joins)
            return None
        if role in (Role.NATIVE_STREAM_CONTEXT, Role.STREAM_SWITCH, Role.GRAPH_CAPTURE, Role.SET_STREAM,
                    Role.LIMIT_CORE_NUM, Role.SUPER_KERNEL, Role.OTHER_TORCHAIR_SCOPE, Role.NULL_CONTEXT,
                    Role.LIMIT_CORE_NUM_NPUGRAPH_EX):
            return None
        return self.generic(st, e, use.spec.qualname)

    # ---- inlining helpers
    def inline_target(self, site) -> tuple[FunctionInfo, FileModel] | None:
        if self.depth >= MAX_INLINE_DEPTH:
            return None
        func = site.node.func
        found = self.project.call_target(self.cfile, site) or self.annotated_method(func)
        if found is None:
            return None
        fn, mod = found
        if id(fn) in self.inline_stack or fn is self.fn:
            return None
        if fn.class_name is not None and fn.params[:1] == ("self",):
            # methods of this object (self.method(...)) or of a parameter typed with a project class
            if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                    and fn.node.name.value == func.attr.value
                    and (func.value.value == "self" or self.annotated_method(func) is not None)):
                return None
        if not _relevant(self.project, mod, fn):
            return None
        return fn, mod

    def annotated_method(self, func: cst.BaseExpression) -> tuple[FunctionInfo, FileModel] | None:
        """``plan.record()`` where ``plan: SchedulePlan`` is a parameter annotated with a project class."""
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            return None
        fn, file = self.cfn, self.cfile
        for p in (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params):
            if p.name.value != func.value.value or p.annotation is None:
                continue
            qualname = file.resolve(p.annotation.annotation, fn.parent) if isinstance(
                p.annotation.annotation, (cst.Name, cst.Attribute)) else None
            if qualname is None:
                qualname = f"{file.module_name}.{dotted(p.annotation.annotation) or ''}"
            sym = self.project.symbol(qualname, file)
            if sym is not None and isinstance(sym[0], ClassInfo):
                method = sym[0].methods.get(func.attr.value)
                if method is not None:
                    return method, sym[1]
        return None

    def inline(self, st: State, e: cst.Call, fn: FunctionInfo, mod: FileModel) -> object:
        params = fn.params[1:] if fn.class_name and fn.params[:1] == ("self",) else fn.params
        bound = bind_arguments(params + fn.kwonly, e, kwonly=fn.kwonly)
        env: dict[str, object] = {}
        if fn.class_name and fn.params[:1] == ("self",):
            receiver = e.func.value if isinstance(e.func, cst.Attribute) else None
            env["self"] = KVal(self.render(st, receiver)) if receiver is not None else KVal("self")
        for p in fn.node.params.params + fn.node.params.kwonly_params + fn.node.params.posonly_params:
            name = p.name.value
            if name == "self":
                continue
            expr = bound.get(name)
            if expr is not None:
                v = self.ev(st, expr)
                if v is None and isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)):
                    v = KVal(self.render(st, expr))
                env[name] = v
            elif p.default is not None:
                d = p.default
                if isinstance(d, cst.Name) and d.value in ("True", "False", "None"):
                    env[name] = NONE if d.value == "None" else CVal(d.value == "True")
                elif isinstance(d, (cst.SimpleString, cst.Integer)):
                    env[name] = CVal(string_value(d) if isinstance(d, cst.SimpleString) else d.value)
        saved_env, saved_stack, saved_single = st.env, list(st.stack), self.single
        saved_anchor = self.anchor
        first_id = self.next_id
        st.env = env
        self.depth += 1
        self.single = True
        self.inline_stack.append(id(fn))
        self.frames.append((mod, fn))
        try:
            out = self.block(fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else [], [st])
        finally:
            self.frames.pop()
            self.inline_stack.pop()
            self.single = saved_single
            self.depth -= 1
        result_state = out[0] if out else st
        ret = result_state.ret if result_state.done else None
        if result_state is not st:  # single mode never forks; keep the caller's object
            st.__dict__.update(result_state.__dict__)
        st.env, st.stack, st.done, st.ret, st.flow = saved_env, saved_stack, False, None, None
        self.anchor = saved_anchor
        kept = {tv.sid for tv in self.tensors(st, ret)} if isinstance(ret, (TVal, TupVal)) else set()
        for sid, S in st.stores.items():
            if sid > first_id and S.kind == "local" and sid not in kept and not S.escaped \
                    and not self.referenced(st, sid):
                S.dead = True  # the helper's temporaries die when it returns (reported by the helper itself)
        return ret

    # ---- statements
    def block(self, stmts, states: list[State]) -> list[State]:
        stmts = list(stmts)
        for index, stmt in enumerate(stmts):
            nxt: list[State] = []
            for st in states:
                if st.done or st.flow is not None:
                    nxt.append(st)
                else:
                    self.rest = stmts[index + 1:]
                    nxt.extend(self.stmt(stmt, st))
            states = nxt[:MAX_PATHS]
            if not states:
                break
        return states

    def stmt(self, node: cst.CSTNode, st: State) -> list[State]:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise AnalysisBudgetExceeded
        if isinstance(node, cst.SimpleStatementLine):
            states = [st]
            for small in node.body:
                nxt = []
                for s in states:
                    if s.done or s.flow is not None:
                        nxt.append(s)
                        continue
                    if self.depth == 0:
                        self.anchor = small
                    nxt.extend(self.small(small, s))
                states = nxt
            return states
        if self.depth == 0:
            self.anchor = node
        if isinstance(node, cst.If):
            return self.if_(node, st)
        if isinstance(node, (cst.For, cst.While)):
            return self.loop(node, st)
        if isinstance(node, cst.With):
            return self.with_item(node, 0, st)
        if isinstance(node, cst.Try):
            states = self.block(node.body.body, [st])
            if node.orelse is not None:
                states = self.block(node.orelse.body.body, states)
            if node.finalbody is not None:
                states = self.block(node.finalbody.body.body, states)
            return states
        return [st]

    def small(self, node: cst.CSTNode, st: State) -> list[State]:
        if isinstance(node, cst.Expr):
            v = node.value
            if isinstance(v, cst.Yield):
                if v.value is not None and not isinstance(v.value, cst.From):
                    self.escape(st, self.ev(st, v.value))
                return [st]
            self.ev(st, v)
            return [st]
        if isinstance(node, cst.Assign):
            v = self.ev(st, node.value)
            for t in node.targets:
                self.assign(st, t.target, v, node.value)
            return [st]
        if isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.assign(st, node.target, self.ev(st, node.value), node.value)
            return [st]
        if isinstance(node, cst.AugAssign):
            target = self.ev(st, node.target)
            v = self.ev(st, node.value)
            if self.tensors(st, target) and not isinstance(target, KVal):
                self.op(st, node, [v], [target], result=False)
            elif isinstance(node.target, cst.Name):
                self.bind(st, node.target.value, self.op(st, node, [target, v]) if self.tensors(st, v) else None,
                          node)
            return [st]
        if isinstance(node, cst.Del):
            targets = node.target.elements if isinstance(node.target, cst.Tuple) else [node.target]
            for t in targets:
                expr = t.value if isinstance(t, cst.Element) else t
                if isinstance(expr, cst.Name) and expr.value in st.env:
                    old = st.env.pop(expr.value)
                    self.invalidate(st, expr.value)
                    self.unbind(st, old, "del", node)
            return [st]
        if isinstance(node, cst.Return):
            v = self.ev(st, node.value) if node.value is not None else None
            if self.depth:
                st.done, st.ret = True, v
                return [st]
            self.escape(st, v)
            self.finalize(st)
            return []
        if isinstance(node, cst.Raise):
            return [] if not self.depth else [st]
        if isinstance(node, cst.Break):
            st.flow = "break"
        elif isinstance(node, cst.Continue):
            st.flow = "continue"
        return [st]

    def assign(self, st: State, target: cst.BaseExpression, v: object, value_node: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            if isinstance(v, SVal) and v.key.startswith("<stream@") and value_node is not None \
                    and isinstance(value_node, cst.Call) and target.value not in st.env:
                v = SVal(target.value)  # a stream created here: name it after its variable
            compared = self.stream_compare(st, value_node)
            if compared is not None:
                v = KVal(target.value, opaque=True, test=compared)
            if v is None and isinstance(value_node, cst.Call) and not value_node.args \
                    and isinstance(value_node.func, (cst.Name, cst.Attribute)):
                getter = self.render(st, value_node)
                if not getter.startswith(("torch.", "torch_npu.")):
                    v = KVal(target.value, opaque=True, test=getter)  # e.g. ctx = get_comm_context()
            if v is None and isinstance(value_node, (cst.Name, cst.Attribute)) and not isinstance(v, TVal):
                rendered = self.render(st, value_node)
                v = KVal(rendered) if rendered.startswith("self.") else None
            self.bind(st, target.value, v, value_node)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = [el.value for el in target.elements]
            items = self.unpack(st, v, len(elements))
            for el, item in zip(elements, items):
                if not isinstance(el, cst.StarredElement):
                    self.assign(st, el, item, value_node)
        elif isinstance(target, cst.Attribute):
            self.escape(st, v)
            key = self.render(st, target)
            if st.assume:
                for k in [k for k in st.assume if key in k]:
                    del st.assume[k]
        elif isinstance(target, cst.Subscript):
            base = self.ev(st, target.value)
            for el in target.slice:
                if isinstance(el.slice, cst.Index):
                    self.ev(st, el.slice.value)
            tensor_value = isinstance(v, (TVal, TupVal)) or (isinstance(v, CVal) and isinstance(v.value, str)
                                                              and v.value.replace(".", "").isdigit())
            if isinstance(base, TVal) or (isinstance(base, KVal) and tensor_value and self.tensors(st, base)):
                self.op(st, target, [v], [base], result=False, read_writes=False)
            else:
                self.escape(st, v)  # a container slot (dict / list of events, tensors, objects)

    def unpack(self, st: State, v: object, n: int) -> list[object]:
        if isinstance(v, TupVal) and len(v.items) == n:
            return list(v.items)
        if isinstance(v, TVal):
            if v.multi == "view":
                base = st.vals.get(v.base) if v.base is not None else None
                parent = base if base is not None else v
                return [self.new_tensor(st, parent.sid, parent.vid) for _ in range(n)]
            S = st.stores.get(v.sid)
            out: list[object] = []
            for _ in range(n):
                if S is None:
                    out.append(None)
                    continue
                clone = S.clone()
                clone.sid = self.new_id()
                clone.name = None
                st.stores[clone.sid] = clone
                out.append(self.new_tensor(st, clone.sid))
            return out
        return [None] * n

    # ---- control flow
    def decide(self, st: State, test: cst.BaseExpression) -> bool | None:
        parsed = mode_of_test(test)
        if parsed is not None:
            return (self.cfg.mode in parsed[1]) == parsed[2]
        key, positive = self.test_key(st, test)
        if key is not None and key in st.assume:
            return st.assume[key] == positive
        if key is not None:
            for clause in st.clauses:
                mine = [lit for lit in clause if lit[0] == key]
                others = [lit for lit in clause if lit[0] != key]
                if len(mine) == 1 and all(k in st.assume and st.assume[k] != p for k, p in others):
                    return mine[0][1] == positive
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            comp = test.comparisons[0]
            if isinstance(comp.operator, (cst.Is, cst.IsNot)) and isinstance(comp.comparator, cst.Name) \
                    and comp.comparator.value == "None" and isinstance(test.left, cst.Name):
                v = st.env.get(test.left.value, "?")
                if v == "?":
                    return None
                is_none = v is NONE
                if isinstance(v, (TVal, SVal, EVal)):
                    is_none = False
                elif not is_none:
                    return None
                return is_none if isinstance(comp.operator, cst.Is) else not is_none
        if isinstance(test, cst.Name) and isinstance(st.env.get(test.value), CVal):
            return bool(st.env[test.value].value)
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self.decide(st, test.expression)
            return None if inner is None else not inner
        return None

    def test_key(self, st: State, test: cst.BaseExpression) -> tuple[str | None, bool]:
        positive = True
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test = test.expression
            positive = not positive
        if isinstance(test, cst.Name) and isinstance(st.env.get(test.value), KVal) and st.env[test.value].test:
            return st.env[test.value].test, positive
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
                and isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot)) \
                and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
            left, _ = self.test_key(st, test.left)
            if left is not None:
                is_op = isinstance(test.comparisons[0].operator, cst.Is)
                return f"{left} is None", positive if is_op else not positive
        if isinstance(test, (cst.Name, cst.Attribute, cst.Subscript)):
            return self.render(st, test), positive
        if isinstance(test, cst.Call) and not test.args:
            return self.render(st, test), positive
        if isinstance(test, (cst.Comparison, cst.BooleanOperation)):
            return self.cfile.code(test), positive
        return None, positive

    def branch(self, st: State, test: cst.BaseExpression, outcomes: list[tuple[bool, object]]) -> list[State]:
        """Run each (outcome, runner) consistent with what the path already assumes about ``test``."""
        known = self.decide(st, test)
        key, positive = self.test_key(st, test)
        todo = [(o, r) for o, r in outcomes if known is None or o == known]
        if self.single and len(todo) > 1:
            todo = [self._preferred(todo)]
        results: list[State] = []
        for i, (outcome, runner) in enumerate(todo):
            s = st if i == len(todo) - 1 else st.clone()
            if key is not None and key in self.stream_tests:
                a, b, equal_when_true = self.stream_tests[key]
                if (outcome == positive) == equal_when_true:
                    s.same[b if b != MAIN else a] = a if b != MAIN else b  # one stream under two names
            if key is not None and (not self.single or key.startswith("self.") or "()" in key):
                s.assume[key] = outcome == positive
                if not self.single:
                    self.constrain(s, test, outcome)
            results.extend(runner(s))
        return results

    def stream_compare(self, st: State, expr: cst.BaseExpression) -> str | None:
        """``current_stream() != self.s``: a test key recording which two streams are compared."""
        if not (isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1):
            return None
        op = expr.comparisons[0].operator
        if not isinstance(op, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)):
            return None
        sides = []
        for side in (expr.left, expr.comparisons[0].comparator):
            v = self.ev(st, side)
            if not (isinstance(v, SVal) or self.kind_of(st, v) == STREAM):
                return None
            sides.append(self.stream_key(st, v, side))
        equal_when_true = isinstance(op, (cst.Equal, cst.Is))
        key = f"<same-stream:{sides[0]}|{sides[1]}>"
        self.stream_tests[key] = (sides[0], sides[1], equal_when_true)
        return key

    def constrain(self, st: State, test: cst.BaseExpression, outcome: bool) -> None:
        """Facts about the operands of ``a or b`` / ``a and b`` once the test's outcome is known."""
        negate = False
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negate = test.expression, not negate
        if not isinstance(test, cst.BooleanOperation):
            return
        value = outcome != negate
        is_or = isinstance(test.operator, cst.Or)
        literals = []
        for operand in (test.left, test.right):
            key, positive = self.test_key(st, operand)
            if key is None:
                return
            literals.append((key, positive))
        if is_or == value:  # `a or b` true / `a and b` false: at least one literal (negated for and)
            st.clauses.append(tuple((k, p if is_or else not p) for k, p in literals))
        else:  # `a or b` false: both false; `a and b` true: both true
            for k, p in literals:
                st.assume.setdefault(k, p if value else not p)

    def _preferred(self, todo):
        for outcome, runner in todo:
            if getattr(runner, "relevant", False):
                return outcome, runner
        return todo[0]

    def if_(self, node: cst.If, st: State) -> list[State]:
        rest = self.rest
        self.ev(st, node.test)

        def then(s: State) -> list[State]:
            return self.block(node.body.body, [s])

        def other(s: State) -> list[State]:
            if node.orelse is None:
                return [s]
            if isinstance(node.orelse, cst.If):
                return self.stmt(node.orelse, s)
            return self.block(node.orelse.body.body, [s])

        then.relevant = self.mentions_ordering(node.body)  # type: ignore[attr-defined]
        other.relevant = (node.orelse is not None and self.mentions_ordering(node.orelse)) or (  # type: ignore[attr-defined]
            node.orelse is None and _returns(node.body) and any(self.mentions_ordering(r) for r in rest))
        return self.branch(st, node.test, [(True, then), (False, other)])

    def loop(self, node, st: State) -> list[State]:
        states = [st]
        finished: list[State] = []
        rounds = 1 if self.single else LOOP_UNROLL
        for _ in range(rounds):
            nxt: list[State] = []
            for s in states:
                if isinstance(node, cst.For):
                    self.ev(s, node.iter)
                    for name in _target_names(node.target):
                        self.bind(s, name, None, node)
                else:
                    self.ev(s, node.test)
                    if self.decide(s, node.test) is False:
                        finished.append(s)
                        continue
                nxt.extend(self.block(node.body.body, [s]))
            states = []
            for s in nxt:
                if s.flow == "break":
                    s.flow = None
                    finished.append(s)
                elif s.done:
                    finished.append(s)
                else:
                    s.flow = None
                    states.append(s)
            states = states[:MAX_PATHS]
        if node.orelse is not None:
            states = self.block(node.orelse.body.body, states)
        return (states + finished)[:MAX_PATHS]

    def with_item(self, node: cst.With, i: int, st: State) -> list[State]:
        if i == len(node.items):
            return self.block(node.body.body, [st])
        item = node.items[i]
        site = self.cfile.scope_site(item)
        uses = self.project.scope_use(self.cfile, site).uses if site is not None else ()
        stream_use = next((u for u in uses if u.role in apis.STREAM_SCOPE_ROLES
                           and (u.modes is None or self.cfg.mode in u.modes)), None)
        if stream_use is not None and stream_use.role is Role.NATIVE_STREAM_CONTEXT \
                and isinstance(stream_use.arg("stream"), cst.Name) and stream_use.arg("stream").value == "None":
            stream_use = None  # torch.npu.stream(None) does not switch
        if stream_use is not None:
            key = self.scope_stream(st, stream_use)
            activation = self.activation(st, stream_use)

            def active(s: State) -> list[State]:
                run = ScopeRun(node, key, self.clock, None, self.depth == 0)
                s.runs.append(run)
                s.stack.append(key)
                idx = len(s.runs) - 1
                out = self.with_item(node, i + 1, s)
                for r in out:
                    if r.done:
                        continue
                    if r.stack and r.stack[-1] == key:
                        r.stack.pop()
                    last = r.last_op.get(key)
                    r.runs[idx].last = last if last is not None and last > r.runs[idx].start else None
                return out

            def inactive(s: State) -> list[State]:
                return self.with_item(node, i + 1, s)

            if activation is None:
                return active(st)
            test, positive = activation
            if test is None:
                return active(st) if positive else inactive(st)
            active.relevant = True  # type: ignore[attr-defined]
            return self.branch(st, test, [(positive, active), (not positive, inactive)])
        if any(u.role is Role.GRAPH_CAPTURE for u in uses):
            st.regions.append((self.clock, st.cur))
            out = self.with_item(node, i + 1, st)
            for r in out:
                if r.done or not r.regions:
                    continue
                start, stream = r.regions.pop()
                know = r.know(stream)
                for run in r.runs:
                    if run.top and run.start >= start and run.stream != stream and run.last is not None \
                            and know.get(run.stream, -1) < run.last:
                        self.unjoined.setdefault((id(run.node), "capture"),
                                                 Unjoined(run.node, run.stream, "capture", self.cfg.mode))
            return out
        self.ev(st, item.item)
        return self.with_item(node, i + 1, st)

    def scope_stream(self, st: State, use: ApiUse) -> str:
        if use.role is Role.STREAM_SWITCH:
            expr = use.value("stream_tag")
            tag = string_value(expr) if expr is not None else None
            if tag is None and expr is not None and use.arg("stream_tag") is not None:
                v = self.ev(st, expr)
                if isinstance(v, CVal) and isinstance(v.value, str):
                    tag = v.value
            if tag is not None:
                return f"tag:{tag}"
            return f"tag?:{self.cfile.code(expr)}" if expr is not None else "tag?:<unknown>"
        expr = use.arg("stream")
        if expr is None:
            return "<unknown stream>"
        return self.stream_key(st, self.ev(st, expr), expr)

    def activation(self, st: State, use: ApiUse) -> tuple[cst.BaseExpression | None, bool] | None:
        """(call-site expression, value for which the wrapper really switches), or None if unconditional.
        A None expression means a constant: ``positive`` then says whether the switch happens."""
        if not use.wrappers:
            return None
        site = self.cfile.call_site(use.node)
        found = self.project.call_target(self.cfile, site) if site is not None else None
        if found is None:
            return None
        wfn, wmod = found
        cond = _switch_condition(self.project, wmod, wfn)
        if cond is None:
            return None
        param, positive = cond
        params = wfn.params[1:] if wfn.class_name and wfn.params[:1] == ("self",) else wfn.params
        bound = bind_arguments(params + wfn.kwonly, use.node, kwonly=wfn.kwonly)
        expr = bound.get(param)
        if expr is None:
            for p in (*wfn.node.params.params, *wfn.node.params.kwonly_params):
                if p.name.value == param and isinstance(p.default, cst.Name) and p.default.value in ("True", "False"):
                    return None, (p.default.value == "True") == positive
            return None
        if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
            return None, (expr.value == "True") == positive
        return expr, positive

    # ---- function end
    def finalize(self, st: State) -> None:
        for sid, S in list(st.stores.items()):
            if S.kind == "local" and not S.dead:
                self.free(st, sid, "function end", None, force=True)
        know = st.know(MAIN)
        for run in st.runs:
            if self.deferred_end and run.top:
                continue  # a helper method: its same-class caller is analysed with this scope inlined
            same_file = run.top or id(run.node) in self.own_withs
            if same_file and run.stream != MAIN and run.last is not None and know.get(run.stream, -1) < run.last:
                self.unjoined.setdefault((id(run.node), "function"),
                                         Unjoined(run.node, run.stream, "function", self.cfg.mode, self.entry))

    def run(self) -> None:
        st = State()
        kinds = _param_kinds(self.project, self.file, self.fn)
        for p in (*self.fn.node.params.posonly_params, *self.fn.node.params.params,
                  *self.fn.node.params.kwonly_params):
            name = p.name.value
            kind = kinds.get(name)
            if name == "self":
                continue
            if kind == STREAM:
                st.env[name] = SVal(name)
                self.param_streams.add(name)
                continue
            if kind == EVENT:
                st.env[name] = EVal(name)
                continue
            if kind != "tensor":
                st.env[name] = KVal(name, opaque=True)  # not evidently a tensor (flags, configs, lists, contexts)
                continue
            if self.cfg.args_exempt:
                S = self.new_storage(st, "long", MAIN, name, None)
            else:
                S = self.new_storage(st, "arg", MAIN, name, Access(MAIN, 0, None, {}))
            st.env[name] = self.new_tensor(st, S.sid)
        body = self.fn.node.body.body if isinstance(self.fn.node.body, cst.IndentedBlock) else []
        for s in self.block(body, [st]):
            if not s.done:
                self.finalize(s)


# ---------------------------------------------------------------------------------------------------
# helpers


def wait_self_expr(project: Project, file: FileModel, use: ApiUse) -> cst.BaseExpression | None:
    """The call-site argument forwarded as ``npu_wait_tensor``'s ``self`` (the waited tensor); wrapper
    parameters literally named ``self`` (vllm-ascend's module-level ``npu_wait_tensor(self, dependency,
    *, enabled=True)``) are bound by the wrapper inference like any other."""
    return use.arg("self")


def _called_by_own_class(file: FileModel, fn: FunctionInfo) -> bool:
    """A method its own class calls as ``self.<name>(...)`` from another method."""
    cls = file.classes.get(fn.class_name or "")
    if cls is None or cls.methods.get(fn.node.name.value) is not fn:
        return False
    for other in cls.methods.values():
        if other is fn:
            continue
        for site in other.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == fn.node.name.value \
                    and isinstance(func.value, cst.Name) and func.value.value == "self":
                return True
    return False


def _class_withs(file: FileModel, fn: FunctionInfo) -> frozenset:
    """The ``with`` statements of the methods of ``fn``'s class (inlined scopes reportable in this file)."""
    cls = file.classes.get(fn.class_name or "")
    if cls is None:
        return frozenset()
    return frozenset(id(s.with_node) for m in cls.methods.values() for s in m.scopes)


_NON_TENSOR_TORCH = frozenset({"distributed", "serialization", "cuda", "npu", "utils", "jit", "_dynamo", "compiler",
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


def _tensor_method(name: str) -> bool:
    return (name in _TENSOR_METHODS or name in VIEW_METHODS or name in MULTI_VIEW_METHODS or name in COPY_METHODS
            or name in META_METHODS or name in HOST_VALUE_METHODS or name in LIKE_FACTORIES
            or (name.endswith("_") and not name.startswith("_")))


def _tensor_op_target(target: str | None) -> bool:
    """A torch / torch_npu function that computes tensors (``torch.cat``, ``torch.nn.functional.silu``,
    ``torch_npu.npu_rms_norm``), not a runtime/IO/distributed helper."""
    if not target:
        return False
    parts = target.split(".")
    if parts[0] == "torch_npu":
        return len(parts) == 2 and parts[1].startswith("npu_")
    if parts[0] != "torch" or len(parts) < 2:
        return False
    return parts[1] not in _NON_TENSOR_TORCH


def _device_like(expr: cst.BaseExpression) -> bool:
    """A ``.to(...)`` target that names a device (``"cuda"``, ``"npu:0"``, ``self.device``, ``device``)."""
    sv = string_value(expr)
    if sv is not None:
        return sv.startswith(("cuda", "npu"))
    name = dotted(expr) or ""
    return name.rsplit(".", 1)[-1] in ("device", "dev", "_device") or name.endswith("_device")


def _cached_stream_getter(fn: FunctionInfo) -> bool:
    """``def current_stream(): global _S; if _S is None: _S = torch.npu.current_stream(); return _S``."""
    names = {r.value.value for r in fn.returns if isinstance(r.value, cst.Name)}
    if not names or len(names) != len(fn.returns):
        return False
    for node in fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else []:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, cst.Global) and names <= {n.name.value for n in small.names}:
                    return True
    return False


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: list[str] = []
        for el in target.elements:
            out += _target_names(el.value)
        return out
    return []


_CONTAINER_ANNOTATIONS = ("List", "list[", "Sequence", "Tuple", "tuple[", "Dict", "dict[", "Iterable", "Mapping",
                          "Set[", "set[")
_NON_TENSOR_METHODS = frozenset({"get", "items", "keys", "values", "append", "extend", "insert", "pop", "update",
                                 "setdefault", "index", "count", "join", "format", "startswith", "endswith", "strip",
                                 "lower", "upper", "replace", "copy", "clear", "remove", "popitem", "encode",
                                 "decode", "wait", "record", "synchronize", "query", "wait_stream", "wait_event",
                                 "record_event", "elapsed_time"})


def _param_kinds(project: Project, file: FileModel, fn: FunctionInfo) -> dict[str, str]:
    """What each parameter evidently is: STREAM, EVENT, "container", "tensor", or absent (unknown).

    From annotations, then from use: passed to ``torch.npu.stream(p)`` / ``wait_stream(p)`` / ``.record(p)``
    (a stream); receiver of ``.record()`` / ``.wait()`` or argument of ``wait_event(p)`` (an event); receiver of
    a tensor method, ``.shape``-style metadata, or a positional argument of a torch call or a submodule
    (a tensor). Parameters with none of these (ints, configs, contexts) are not treated as tensors."""
    memo = derived(project, "param_kinds")
    if id(fn) in memo:
        return memo[id(fn)]
    kinds: dict[str, str] = {}
    params = set(fn.all_params) - {"self"}
    for p in (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params):
        ann = p.annotation
        if ann is None:
            continue
        code = cst.Module([]).code_for_node(ann.annotation)
        if any(c in code for c in _CONTAINER_ANNOTATIONS):
            kinds[p.name.value] = "container"
        elif "Stream" in code:
            kinds[p.name.value] = STREAM
        elif "Event" in code:
            kinds[p.name.value] = EVENT
        elif "Tensor" in code or "tensor" in code:
            kinds[p.name.value] = "tensor"
        else:
            kinds[p.name.value] = "other"

    def note(name: str, kind: str) -> None:
        if name in params and name not in kinds:
            kinds[name] = kind

    own = f"{file.module_name}.{fn.class_name}." if fn.class_name else None
    project_methods = {name for cls in file.classes.values() for name in cls.methods}
    for site in fn.calls:
        call = site.node
        func = call.func
        positional = [a.value for a in call.args if a.keyword is None]
        roles = {u.role for u in project.api_uses(file, site)}
        if roles & {Role.NATIVE_STREAM_CONTEXT, Role.SET_STREAM}:
            for arg in positional[:1]:
                if isinstance(arg, cst.Name):
                    note(arg.value, STREAM)
            continue
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        receiver = func.value if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) else None
        if method in ("wait_stream", "record", "wait", "record_stream") and positional \
                and isinstance(positional[0], cst.Name) and method != "record_stream" or method == "record_stream":
            for arg in positional[:1]:
                if isinstance(arg, cst.Name):
                    note(arg.value, STREAM)
        if method == "wait_event" and positional and isinstance(positional[0], cst.Name):
            note(positional[0].value, EVENT)
        if receiver is not None:
            if method in _STREAM_OBJECT_METHODS:
                note(receiver.value, STREAM)
            elif method in ("record", "wait", "query", "elapsed_time"):
                note(receiver.value, EVENT)
            elif method in project_methods and not _tensor_method(method):
                note(receiver.value, "other")  # `plan.wait_current_stream()`: an object of a project class
            elif method not in _NON_TENSOR_METHODS:
                note(receiver.value, "tensor")
        if roles & {Role.TAGGED_EVENT_RECORD, Role.TAGGED_EVENT_WAIT, Role.CURRENT_STREAM, Role.STREAM_NEW,
                    Role.EVENT_NEW, Role.DEVICE_SYNCHRONIZE}:
            continue
        target = site.target or ""
        torch_call = target.split(".")[0] in ("torch", "torch_npu") and not roles
        submodule = own is not None and target.startswith(own) and isinstance(func, cst.Attribute) \
            and isinstance(func.value, cst.Name) and func.value.value == "self" \
            and func.attr.value not in file.classes.get(fn.class_name or "", None).methods \
            if own is not None and fn.class_name in file.classes else False
        if torch_call or submodule:
            for arg in positional:
                if isinstance(arg, cst.Name):
                    note(arg.value, "tensor")
        for a in call.args:
            if a.keyword is not None and a.keyword.value == "out" and isinstance(a.value, cst.Name):
                note(a.value.value, "tensor")
    stack: list[cst.CSTNode] = [fn.node.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) \
                and node.attr.value in META_ATTRS | VIEW_ATTRS:
            note(node.value.value, "tensor")
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            continue
        stack.extend(children(node))
    for p in (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params):
        d = p.default
        if p.name.value not in kinds and d is not None and (
                isinstance(d, (cst.Integer, cst.Float, cst.SimpleString))
                or (isinstance(d, cst.Name) and d.value in ("True", "False"))):
            kinds[p.name.value] = "other"
    memo[id(fn)] = kinds
    return kinds


def _mentions_ordering(node: cst.CSTNode) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call):
            name = dotted(n.func) or ""
            last = name.rsplit(".", 1)[-1]
            if last in _RELEVANT_METHODS or "event" in last or "wait" in last or "stream" in last:
                return True
        stack.extend(children(n))
    return False


def _param_test(test: cst.BaseExpression, params: tuple[str, ...]) -> tuple[str, bool] | None:
    positive = True
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
        positive = not positive
    if isinstance(test, cst.Name) and test.value in params:
        return test.value, positive
    return None


def _switch_condition(project: Project, file: FileModel, fn: FunctionInfo) -> tuple[str, bool] | None:
    """(parameter, value for which the wrapper opens the real stream scope) for enable-flag wrappers."""
    params = fn.all_params
    for site in fn.calls:
        if not any(u.role in apis.STREAM_SCOPE_ROLES for u in project.api_uses(file, site)):
            continue
        for guard in site.guards:
            found = _param_test(guard.test, params)
            if found is not None:
                return found[0], found[1] != guard.negated
        for ret in fn.returns:
            value = ret.value
            if isinstance(value, cst.IfExp):
                found = _param_test(value.test, params)
                if found is None:
                    continue
                if contains(value.body, site.node):
                    return found
                if contains(value.orelse, site.node):
                    return found[0], not found[1]
        body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else []
        for stmt in body:
            if contains(stmt, site.node):
                break
            if isinstance(stmt, cst.If) and stmt.orelse is None and _returns(stmt.body):
                found = _param_test(stmt.test, params)
                if found is not None:
                    return found[0], not found[1]
    return None


def _returns(block: cst.BaseSuite) -> bool:
    body = block.body if isinstance(block, cst.IndentedBlock) else []
    return bool(body) and isinstance(body[-1], cst.SimpleStatementLine) and any(
        isinstance(s, cst.Return) for s in body[-1].body)


def _relevant(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> bool:
    """Does a helper order streams, switch streams or record lifetimes (directly or one level down)?"""
    memo = derived(project, "relevant")
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = False  # recursion guard
    result = False
    for site in fn.calls:
        if site.method in _RELEVANT_METHODS:
            result = True
            break
        if any(u.role in _RELEVANT_ROLES for u in project.api_uses(file, site)):
            result = True
            break
        if _depth < 2:
            found = project.call_target(file, site)
            if found is not None and found[0] is not fn and _relevant(project, found[1], found[0], _depth + 1):
                result = True
                break
    memo[id(fn)] = result
    return result


def _has_stream_work(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    for site in fn.scopes:
        roles = project.scope_use(file, site).roles()
        if roles & (apis.STREAM_SCOPE_ROLES | {Role.GRAPH_CAPTURE}):
            return True
    for site in fn.calls:
        if site.method in ("record_stream", "wait_stream", "wait_event", "record_event"):
            return True
        if any(u.role in (Role.WAIT_TENSOR, Role.RECORD_TAGGED_STREAM, Role.TAGGED_EVENT_RECORD,
                          Role.TAGGED_EVENT_WAIT) for u in project.api_uses(file, site)):
            return True
    return False


def function_modes(project: Project, file: FileModel, fn: FunctionInfo) -> frozenset[str]:
    """The execution paths of a function (empty: unknown). One place to swap the path source."""
    return frozenset(project.execution_path(file, fn).modes)


def _graph_entries(project: Project) -> set[int]:
    holder = derived(project, "graph_entries")
    cache = holder.get("entries")
    if cache is None:
        cache = {id(fn) for site in project.compile_sites() for fn, _mod in site.targets}
        holder["entries"] = cache
    return cache


def function_flow(project: Project, file: FileModel, fn: FunctionInfo, *, explicit_ge_joins: bool = False) \
        -> FunctionFlow:
    """The hazards of one function on every execution path it runs on (cached per project)."""
    cache = derived(project, "flows")
    key = (file.path, fn.qualname, id(fn), explicit_ge_joins)
    if key in cache:
        return cache[key]
    cache[key] = EMPTY_FLOW
    if not _has_stream_work(project, file, fn) and not any(
            (found := project.call_target(file, s)) is not None and _has_stream_work(project, found[1], found[0])
            for s in fn.calls if isinstance(s.node.func, cst.Attribute)
            and isinstance(s.node.func.value, cst.Name) and s.node.func.value.value == "self"):
        return EMPTY_FLOW
    modes = function_modes(project, file, fn)
    races: dict = {}
    lifetimes: dict = {}
    unjoined: dict = {}
    views: dict = {}
    entry = id(fn) in _graph_entries(project)
    if not modes:
        flow = _every_path_flow(project, file, fn, explicit_ge_joins, entry)
        cache[key] = flow
        return flow
    for mode in sorted(modes):
        interp = _Interp(project, file, fn, _config(mode, explicit_ge_joins, entry))
        try:
            interp.run()
        except (RecursionError, AnalysisBudgetExceeded):  # pathological code: report nothing rather than guess
            continue
        races.update({k + (mode,): v for k, v in interp.races.items()})
        lifetimes.update({k + (mode,): v for k, v in interp.lifetimes.items()})
        unjoined.update({k + (mode,): v for k, v in interp.unjoined.items()})
        views.update(interp.view_escapes)
    flow = FunctionFlow(modes, tuple(races.values()), tuple(lifetimes.values()), tuple(unjoined.values()),
                        tuple(views.values()))
    cache[key] = flow
    return flow


def _every_path_flow(project: Project, file: FileModel, fn: FunctionInfo, explicit_ge_joins: bool,
                     entry: bool) -> FunctionFlow:
    """Unknown execution path: keep only the hazards found on every path the code could take."""
    runs = []
    for mode in apis.EXECUTION_PATHS:
        interp = _Interp(project, file, fn, _config(mode, explicit_ge_joins, entry))
        try:
            interp.run()
        except (RecursionError, AnalysisBudgetExceeded):
            return EMPTY_FLOW
        runs.append(interp)
    common = set.intersection(*({(id(r.node), r.name) for r in i.races.values()} for i in runs))
    races = tuple(r for r in runs[0].races.values() if (id(r.node), r.name) in common)
    common_l = set.intersection(*({id(x.node) for x in i.lifetimes.values()} for i in runs))
    lifetimes = tuple(x for x in runs[0].lifetimes.values() if id(x.node) in common_l)
    views = tuple(runs[0].view_escapes.values())
    return FunctionFlow(frozenset(), races, lifetimes, (), views)


def file_flows(project: Project, file: FileModel, *, explicit_ge_joins: bool = False) \
        -> Iterator[tuple[FunctionInfo, FunctionFlow]]:
    for fn in file.functions.values():
        flow = function_flow(project, file, fn, explicit_ge_joins=explicit_ge_joins)
        if flow is not EMPTY_FLOW:
            yield fn, flow


__all__ = [
    "EMPTY_FLOW",
    "MAIN",
    "FunctionFlow",
    "Lifetime",
    "Race",
    "Unjoined",
    "ViewEscape",
    "file_flows",
    "function_flow",
    "function_modes",
    "stream_label",
    "wait_self_expr",
]
