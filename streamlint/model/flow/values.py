"""The value lattice and the per-path state of the dataflow interpreter.

Abstract values: :class:`TVal` (a tensor object, possibly a view of another), :class:`SVal` /
:class:`EVal` (a stream / an event, by key), :class:`KVal` (an opaque or named object whose attribute
chains may still name streams and events), :class:`CVal` (a constant), :class:`TupVal` (a tuple).
:class:`Storage` is an allocation with its accesses; :class:`State` is everything one control-flow path
carries (environment, storages, vector clocks, recorded events, the stream stack); ``merge_clock`` /
``ordered_before`` are the vector-clock join and happens-before test. Analysis limits (paths, steps,
inlining depth, loop unrolling) and the per-mode configuration live here too."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from streamlint._lazy import cst
from streamlint.model.streams import MAIN


MAX_PATHS = 48

# The host's own timeline: a write the host made (``cpu_buf.fill_(v)``: flow/hostwrites.py) is done when any later
# work is handed to a stream, so every stream is ordered after it (``ordered_before``)
HOST = "<host>"


# Statements interpreted per function analysis (all paths, inlined helpers included). Large branchy
# functions (DeepSpeed's ZeRO reducers, vLLM schedulers) would otherwise take minutes; past the budget
# the function gets no finding — deterministic, and silence rather than a guess.
MAX_STEPS = 4_000


class AnalysisBudgetExceeded(Exception):
    pass


MAX_INLINE_DEPTH = 3


LOOP_UNROLL = 2


class TVal:
    """A tensor object. ``base``: the value it is a view of; ``multi``: result of chunk/split (unpack
    gives views) or of a multi-output op (unpack gives fresh tensors)."""

    __slots__ = ("base", "created", "multi", "part", "sid", "vid")

    def __init__(self, vid: int, sid: int, base: int | None, created: int, multi: str | None = None) -> None:
        self.vid, self.sid, self.base, self.created, self.multi = vid, sid, base, created, multi
        self.part: str | None = None  # `out[i]` for a representative index i: that element's own part


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
    part: str | None = field(default=None, compare=False)  # an element's part (`self.kv[k + 1]`: indexsyms.py)


@dataclass(frozen=True)
class HVal(KVal):
    """A completion handle (a collective's work handle, a future made from it: flow/handles.py): a host object,
    never device data; its ``wait()`` orders the current stream after the work it stands for."""

    opaque: bool = True


@dataclass(frozen=True)
class CVal:
    value: object


@dataclass(frozen=True)
class TupVal:
    items: tuple


@dataclass(frozen=True)
class FieldsVal(TupVal):
    """A record object of device data a project call handed back (:mod:`~streamlint.model.flow.recordresults`):
    ``items`` the storages of its fields ``names``; it stands for every element of a list of such records too."""

    names: tuple = ()
    owner: object = field(default=None, compare=False)  # (the record class and its module)


@dataclass(frozen=True)
class EventRecordVal(TupVal):
    """(The sibling of :class:`FieldsVal` for a record the function builds itself, not one a summarised call hands
    back.) A project record built from the values it holds (``Receipt(slot, done)``, a dataclass / NamedTuple / plain
    holder), with the field each item was given to: ``receipt.done`` is that item, also after the record is
    handed back by a helper the caller inlined (:func:`record_value`); only
    event fields are read so (the hand-back of a join handle)."""

    names: tuple = ()  # (field, index into items)

    def field(self, name: str) -> object:
        """The event the field was given (other values keep their old reading: the record's field unknown)."""
        value = next((self.items[i] for f, i in self.names if f == name), None)
        return value if isinstance(value, EVal) else None


def record_value(project, file, cls, call, items: tuple) -> object:
    """The value of a construction of a project record (``Receipt(slot, done)``): its items, one per argument,
    named by the field each is given to (``handedevents.construction_fields``, by keyword or position), so that
    ``receipt.done`` is the event the record was built with, in the function that built it and in a caller the
    record is handed back to (the caller's wait on it is the join of the work recorded before it)."""
    from streamlint.model.handedevents import construction_fields

    if not any(isinstance(item, EVal) for item in items):
        return TupVal(items)  # (only event fields are read through the record)
    index = {id(arg.value): i for i, arg in enumerate(call.args)}
    names = tuple((f, index[id(v)]) for f, v in construction_fields(project, file, cls, call).items() if id(v) in index)
    return EventRecordVal(items, names)


@dataclass(frozen=True)
class RecordVal(TupVal):
    """A record object of another package built from the values it holds (``LoadMetadata(slot_mapping=s)``):
    handed to a call outside the project, its tensors may be kept there (exprs.records_handed_out)."""


@dataclass(frozen=True)
class IVal:
    """The index of a representative element of a collection (``"0"`` first, ``"1"`` middle, ``"-1"``
    last: :mod:`~streamlint.model.flow.elements`); ``xs[i]`` renders as ``xs[0]`` ... for it."""

    pos: str


@dataclass(frozen=True)
class CtxVal:
    """A stream context built before its ``with`` (``ctx = torch.cuda.stream(s)`` ... ``with ctx:``): entering
    it switches to stream ``key``."""

    key: str


NONE = CVal(None)


def known_truth(v: object) -> bool | None:
    """The truth Python gives value ``v`` when the model knows it: None and False are false, True and stream,
    event and stream-context objects (no ``__bool__``) are true; anything else (a tensor, a number kept as its
    source text, an unknown value) is unknown (None)."""
    if isinstance(v, CVal) and (v.value is None or isinstance(v.value, bool)):
        return bool(v.value)
    if isinstance(v, (SVal, EVal, CtxVal)):
        return True
    return None


@dataclass
class Access:
    stream: str
    time: int
    node: cst.CSTNode | None
    snap: dict | None = None
    label: str | None = None  # the variable naming the tensor at this access
    part: str | None = None  # the element's part (``TVal.part``); accesses to two parts never conflict
    inner: cst.CSTNode | None = None  # a write's statement inside the helper inlined at ``node`` (batchguards.py)


class Storage:
    __slots__ = ("alloc", "born", "copies", "container", "d2h", "dead", "escaped", "exit", "handed", "kind",
                 "last_write", "name", "origin", "parts", "reads", "recorded", "sid", "uses")

    def __init__(self, sid: int, name: str | None, kind: str, alloc: str, last_write: Access | None) -> None:
        self.sid, self.name, self.kind, self.alloc = sid, name, kind, alloc
        self.last_write = last_write
        self.reads: list[Access] = []
        self.uses: list[Access] = []
        self.recorded: set[str] = set()
        self.parts: list[Access] = []  # earlier writes of other parts (``Access.part``) than the last one
        self.escaped = False
        self.dead = False
        self.origin: tuple | None = None  # (file, with node) of the side-stream scope it was allocated in
        self.d2h: Access | None = None  # host memory: the asynchronous device-to-host copy that fills it
        self.born: Access | None = None  # ``torch.empty*`` on a stream: the allocation, before any write
        self.exit: cst.CSTNode | None = None  # the return of the inlined helper that handed it back still pending
        self.handed: tuple | None = None  # (statement, destination, consumer): its first hand-over after a join (consumers.py)
        self.container: str | None = None  # an element of a collection parameter: the parameter (elements.py)
        self.copies = False  # a comprehension of device copies (``[b.to(d, non_blocking=True) for b in bs]``)

    def clone(self) -> Storage:
        s = Storage.__new__(Storage)  # (every slot is set below: no lists made by __init__ only to be replaced)
        s.sid, s.name, s.kind, s.alloc, s.last_write = self.sid, self.name, self.kind, self.alloc, self.last_write
        s.origin, s.d2h, s.born, s.exit, s.handed = self.origin, self.d2h, self.born, self.exit, self.handed
        s.container, s.copies = self.container, self.copies
        s.reads, s.uses, s.recorded = list(self.reads), list(self.uses), set(self.recorded)
        s.parts = list(self.parts)
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
        self.shape_syncs: dict[str, int] = {}  # stream -> last data-dependent-shape op on it (hostreads.py)
        self.maybe_syncs: dict[str, int] = {}  # stream -> last `.item()` of a value of unknown placement on it
        self.events: dict[str, dict[str, int]] = {}
        self.stack: list[str] = [MAIN]
        self.assume: dict[str, bool] = {}
        self.literals: dict[str, object] = {}  # `self.f` -> the str / int literal this path assigned it (fieldliterals.py)
        self.clauses: list[tuple[tuple[str, bool], ...]] = []  # at least one literal of each holds
        self.same: dict[str, str] = {}  # stream key -> the key of the same stream (from `s1 == s2` tests)
        self.bounds: dict[str, tuple[int | None, int | None]] = {}  # loop bound text -> its interval (counters.py)
        self.fields: dict[str, dict[str, object]] = {}  # local -> the fields of the record object it holds (promises.py)
        self.runs: list[ScopeRun] = []
        # frees whose cross-stream uses a later join may still cover: (storage id, uses, how, free node)
        self.pending: list[tuple] = []
        self.regions: list[tuple[int, str, str]] = []  # open graph captures: (clock, stream, kind)
        self.last_op: dict[str, int] = {}
        self.work: dict[str, int] = {}  # stream -> time of its last work outside a test (what an event can cover)
        # stream -> (time of its last work known for certain, time of the guessed work after it): a call resolved
        # by its method name only (devicework.every_method_queues_work; orderings.helper_work)
        self.guessed: dict[str, tuple[int, int]] = {}
        self.long: dict[str, int] = {}
        self.held: dict[str, tuple[int, ...]] = {}  # local container -> storages put in its slots (`outs[i] = t`)
        # list slots (slots.py): `xs[i]` -> (value, stamp); `xs` -> (last appended value, stamp); the names
        # holding such slots; name -> stamp of its last binding
        self.slots: dict[str, tuple] = {}  # (value, stamp, the binding loops of the index's names)
        self.appended: dict[str, tuple] = {}
        self.slot_names: frozenset[str] = frozenset()
        self.bound_at: dict[str, tuple[int, int | None]] = {}  # (stamp, id of the binding `for` or None)
        self.ixfields: dict[str, tuple] = {}  # `self.*` field -> its index symbol once rebound (indexsyms.py)
        self.done = False
        self.ret: object = None
        self.flow: str | None = None
        # values of untracked type (a collection handed in, an opaque call's result) used on a side stream,
        # the streams they were recorded on, and the collection each loop variable walks: see
        # Storages.free_untracked
        self.loose_uses: dict[str, list[Access]] = {}
        self.loose_rec: dict[str, frozenset[str]] = {}
        self.elem_of: dict[str, tuple[str, ...]] = {}
        # attributes rebound while a local shared their storage: (place, its side uses, the locals, its records)
        self.kept_frees: list[tuple] = []
        # module globals a function declared `global` assigned on this path, by (module, name): a stream
        # stored by a setter is the one a getter of that module returns later (a place, not a local)
        self.globs: dict[tuple[str, str], object] = {}
        # events this path named after their last record (waited, synchronised, handed on, stored...): an event
        # recorded here and never named again on the path is a dropped join handle (hostsync.py)
        self.used_events: set[str] = set()
        # events this path handed to a receiver call together with the tensors they guard (syncops.handoff):
        # the receiver waits on them, so side-stream work before their record is joined there (storage.published_after)
        self.handed_off: dict[str, dict[str, int]] = {}
        # anonymous event key -> (stamp of the object's creation, stamp of its last hand-off to a container or a
        # field): a record after the hand-off is seen by the holder (orderings.record)
        self.event_stamps: dict[str, tuple[int, int]] = {}
        # the last ``graph.replay()`` on this path: the captured kernels write the graph's static outputs,
        # long-lived buffers this function had not written before it (storage.Storages.replay)
        self.replayed: Access | None = None
        # a ``query()`` a branch decides on -> (the call, what the host has seen once it returned True): flow/polls.py
        self.polls: dict[int, tuple[cst.Call, dict[str, int]]] = {}
        # family key (``streams[self.idx[*]]``, flow/indexsets.py) -> what every member of the family knows
        self.families: dict[str, dict[str, int]] = {}
        self.fanout = 1  # how many paths the stream picks of this path made of it (flow/choices.py bounds it)

    def clone(self) -> State:
        s = State.__new__(State)
        s.env = dict(self.env)
        s.vals = self.vals  # TVal objects are immutable after creation
        s.deps = {k: list(v) for k, v in self.deps.items()}
        s.waits = {k: list(v) for k, v in self.waits.items()}
        s.stores = {k: v.clone() for k, v in self.stores.items()}
        s.vc = {k: dict(v) for k, v in self.vc.items()}
        s.host = dict(self.host)
        s.shape_syncs = dict(self.shape_syncs)
        s.maybe_syncs = dict(self.maybe_syncs)
        s.events = {k: dict(v) for k, v in self.events.items()}
        s.stack = list(self.stack)
        s.assume = dict(self.assume)
        s.literals = dict(self.literals)
        s.clauses = list(self.clauses)
        s.same = dict(self.same)
        s.bounds = dict(self.bounds)
        s.fields = dict(self.fields)
        s.runs = [ScopeRun(r.node, r.stream, r.start, r.last, r.top) for r in self.runs]
        s.pending = list(self.pending)
        s.regions = list(self.regions)
        s.last_op = dict(self.last_op)
        s.work = dict(self.work)
        s.guessed = dict(self.guessed)
        s.long = dict(self.long)
        s.held = dict(self.held)
        s.slots, s.appended, s.slot_names = dict(self.slots), dict(self.appended), self.slot_names
        s.bound_at, s.ixfields = dict(self.bound_at), self.ixfields
        s.done, s.ret, s.flow = self.done, self.ret, self.flow
        s.loose_uses = {k: list(v) for k, v in self.loose_uses.items()}
        s.loose_rec, s.elem_of, s.kept_frees = dict(self.loose_rec), dict(self.elem_of), list(self.kept_frees)
        s.globs = dict(self.globs)
        s.used_events = set(self.used_events)
        s.handed_off = dict(self.handed_off)
        s.event_stamps = dict(self.event_stamps)
        s.replayed = self.replayed
        s.polls = dict(self.polls)
        s.families = {k: dict(v) for k, v in self.families.items()}
        s.fanout = self.fanout
        return s

    @property
    def cur(self) -> str:
        return self.stack[-1]

    def clock_of(self, stream: str) -> dict[str, int]:
        """A copy of ``stream``'s vector clock, with what every family it belongs to knows."""
        k = dict(self.vc.get(stream, {}))
        members = collapsed_members(stream) if stream.endswith("]") else None
        if members is not None and all(m in self.vc for m in members):  # what every element knows, "some" knows
            shared = set.intersection(*(set(self.vc[m]) for m in members))
            merge_clock(k, {s: min(self.vc[m][s] for m in members) for s in shared})
        for family, clock in self.families.items():
            if family_match(family, stream):
                merge_clock(k, clock)
        return k

    def know(self, stream: str) -> dict[str, int]:
        k = self.clock_of(stream)
        for s, t in self.host.items():
            if k.get(s, -1) < t:
                k[s] = t
        return k


def family_match(family: str, key: str) -> bool:
    """Is stream ``key`` a member of the family ``xs[I[*]]`` (``xs[I[e]]`` for any index text ``e``, the family
    key itself included; flow/indexsets.py)?"""
    head, _, tail = family.partition("*")
    if not (key.startswith(head) and key.endswith(tail) and len(key) > len(head) + len(tail)):
        return False
    middle = key[len(head):len(key) - len(tail)]
    depth = 0
    for ch in middle:
        depth += (ch in "[(") - (ch in "])")
        if depth < 0:
            return False
    return depth == 0


def merge_clock(into: dict[str, int], other: dict[str, int]) -> bool:
    changed = False
    for s, t in other.items():
        if into.get(s, -1) < t:
            into[s] = t
            changed = True
    return changed


def ordered_before(acc: Access, know: dict[str, int]) -> bool:
    if acc.stream == HOST or know.get(acc.stream, -1) >= acc.time:
        return True
    members = collapsed_members(acc.stream) if acc.stream.endswith("]") else None
    return members is not None and all(know.get(m, -1) >= acc.time for m in members)


_COLLAPSED = re.compile(r"^(?P<base>[\w.]+)\[(?P<index>[^\[\]]+)\]$")


@lru_cache(maxsize=4096)
def collapsed_members(stream: str) -> tuple[str, ...] | None:
    """``streams[index - 1]``, an element of a stream collection picked by an index the analysis does not follow (the
    collapsed reading of flow/elements.py: "some element"): the representative elements a loop over the collection
    itself has (``streams[0]``, ``streams[1]``, ``streams[-1]``). Work on such an element is ordered before a stream
    that knows every representative element up to it (a join loop over the whole collection after it); a join over
    a slice (``streams[1:]``) leaves one out, and so the element. None for a literal index or another key."""
    found = _COLLAPSED.match(stream)
    if found is None or re.fullmatch(r"\s*-?\d+\s*", found.group("index")) or "*" in found.group("index"):
        return None
    base = found.group("base")
    return (f"{base}[0]", f"{base}[1]", f"{base}[-1]")


@dataclass(frozen=True)
class FlowConfig:
    mode: str
    raw: bool
    war: bool
    waw: bool
    implicit_edges: bool
    args_exempt: bool


def flow_config(mode: str, explicit_ge: bool, entry: bool) -> FlowConfig:
    if mode == "ge":
        if explicit_ge:
            return FlowConfig(mode, True, True, True, False, True)
        return FlowConfig(mode, False, True, False, True, True)
    if mode in ("reduce-overhead", "npugraph_ex"):
        return FlowConfig(mode, True, True, True, False, entry)
    return FlowConfig(mode, True, True, True, False, False)
