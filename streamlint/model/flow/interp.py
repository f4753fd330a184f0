"""The dataflow interpreter of one function: the concerns (orderings, storage, expressions, calls,
control flow) composed into :class:`Interp`, plus its entry (parameters typed, body run, end of
function checks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.tensoruse import tensor_annotation
from streamlint.model.flow.absentevents import AbsentEvents
from streamlint.model.flow.ambient import entry_ambient
from streamlint.model.flow.calls import Calls, current_stream_params
from streamlint.model.flow.provenance import param_alias
from streamlint.model.flow.paramfields import forked_param_fields
from streamlint.model.flow.forks import callers_current_getters, forked_self_streams, forked_stream_params, \
    recorded_event_params
from streamlint.model.flow.choices import Choices
from streamlint.model.flow.flagclauses import FlagClauses
from streamlint.model.flow.control import ControlFlow
from streamlint.model.flow.closures import closure_scope
from streamlint.model.flow.consumers import Consumers
from streamlint.model.flow.argdrops import PendingArgs
from streamlint.model.flow.fielddrops import FieldDrops
from streamlint.model.flow.guardedwork import GuardedWork
from streamlint.model.flow.indexsets import IndexSets
from streamlint.model.flow.indexsyms import IndexSyms
from streamlint.model.flow.membership import Membership
from streamlint.model.flow.hostwrites import HostWrites
from streamlint.model.flow.calleerecords import CalleeRecords
from streamlint.model.flow.helperrecords import HelperRecords
from streamlint.model.flow.scopenone import ScopedNoneTests
from streamlint.model.flow.handedholders import HandedHolders
from streamlint.model.flow.counters import Counters
from streamlint.model.flow.promises import Promises
from streamlint.model.flow.elements import Elements
from streamlint.model.flow.entryctx import register_runner, seed_entry
from streamlint.model.flow.inflight import reads
from streamlint.model.flow.producerruns import keep
from streamlint.model.flow.escapes import EventEscapes
from streamlint.model.flow.fieldfamilies import FieldFamilies
from streamlint.model.flow.hostreads import HostReads
from streamlint.model.flow.hostgrads import HostGradients
from streamlint.model.flow.listreads import ListReads
from streamlint.model.flow.opaqueresults import OpaqueResults
from streamlint.model.flow.hostsync import HostSyncs
from streamlint.model.flow.xfer import TransferSends
from streamlint.model.flow.apicalls import ApiCalls
from streamlint.model.flow.exprs import Expressions
from streamlint.model.flow.outsidecalls import OutsideCalls
from streamlint.model.flow.orderings import Orderings
from streamlint.model.flow.handedback import HandedBack
from streamlint.model.flow.handedearly import HandedEarly
from streamlint.model.flow.pendingfields import PendingFields
from streamlint.model.flow.threadstreams import ThreadStreams
from streamlint.model.flow.elementevents import element_rooted
from streamlint.model.flow.handbacks import HandBacks
from streamlint.model.flow.protocols import protocol_inputs, seed
from streamlint.model.flow.releasestreams import ReleaseTests, seed_releases
from streamlint.model.flow.fieldliterals import FieldLiterals
from streamlint.model.flow.results import EarlyRecord, HostRead, Lifetime, Race, Unjoined, ViewEscape
from streamlint.model.flow.slots import Slots
from streamlint.model.flow.records import Records
from streamlint.model.flow.replays import Replays
from streamlint.model.flow.rounds import Rounds
from streamlint.model.flow.roundtests import RoundTests
from streamlint.model.flow.notnone import NotNone
from streamlint.model.flow.storage import Storages
from streamlint.model.flow.finals import Finals
from streamlint.model.flow.unsets import Unsets
from streamlint.model.flow.syncops import SyncMethods
from streamlint.model.flow.polls import Polls
from streamlint.model.flow.values import AnalysisBudgetExceeded, Access, EVal, FlowConfig, KVal, SVal, State, flow_config
from streamlint.model.streams import EVENT, MAIN, STREAM
from streamlint.model.tensors import param_kinds, torch_returns_tensor
from streamlint.model.tensorvocab import VIEW_METHODS
from streamlint.model.tensoruse import tensor_annotation
from streamlint.model.opaqueparams import guessed_params
from streamlint.model.flow.dispatchedargs import dispatched_level
from streamlint.model.hostobjects import foreign_receivers

if TYPE_CHECKING:
    from streamlint.model.project import Project


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


def _last_simple(body: list) -> cst.CSTNode | None:
    """The last simple statement of a body (descending into a trailing compound statement): where the
    function hands control back when it falls off its end."""
    node = body[-1] if body else None
    while node is not None and not isinstance(node, cst.SimpleStatementLine):
        inner = getattr(node, "body", None)
        stmts = getattr(inner, "body", None)
        node = stmts[-1] if isinstance(stmts, (list, tuple)) and stmts else None
    return node.body[-1] if node is not None and node.body else None


class Interp(HandBacks, HandedEarly, CalleeRecords, HelperRecords, HandedHolders, ScopedNoneTests, GuardedWork, IndexSets, IndexSyms, Membership, HostWrites, Consumers, PendingArgs, FieldDrops, Orderings, Records, Storages, Unsets, Expressions, OutsideCalls, ApiCalls, SyncMethods, Calls, ControlFlow, Elements, EventEscapes,
             HostReads, HostSyncs, ThreadStreams, TransferSends, Counters, Promises, Slots, Replays, Rounds, RoundTests, NotNone, Finals,
             HandedBack, Polls, FieldFamilies, HostGradients, ListReads, OpaqueResults, Choices, AbsentEvents, ReleaseTests,
             FieldLiterals, FlagClauses, PendingFields):
    """Path-sensitive abstract interpretation of one function body in program order."""

    protocol_seed = True  # seed the fields other methods of the class leave on a side stream (protocols.py)
    entry_seed = True  # seed the entry with what every caller hands the function (entryctx.py)
    collect: dict | None = None  # a collecting run: (call node id, callee id) -> the facts handed there (entryctx.py)
    entry_site: tuple | None = None  # (file model, call node) of a caller whose facts seeded the entry
    default_key = MAIN  # the device's default stream (another one when every caller runs this on a side stream)

    def __init__(self, project: Project, file: FileModel, fn: FunctionInfo, cfg: FlowConfig) -> None:
        self.project = project
        self.file = file
        self.fn = fn
        self.cfg = cfg
        self.clock = 0
        self.next_id = 0
        self.depth = 0
        self.finals: list[tuple] = []  # (depth, finally block, stack depth of its try) around the statement run now
        self.single = False
        self.coarse = False  # a branch that mentions no ordering runs one outcome (:func:`coarse_choice`)
        self.focus: cst.CSTNode | None = None  # single mode: the statement the one path must run through
        self.anchor: cst.CSTNode | None = None
        self.frames: list[tuple[FileModel, FunctionInfo]] = [(file, fn)]
        self.races: dict[tuple, Race] = {}
        self.lifetimes: dict[tuple, Lifetime] = {}
        self.noop_records: dict[int, tuple] = {}  # storage -> (statement, text) of a record on its own stream
        self.entry_uses: dict[int, Access] = {}  # argument storage -> its latest use on the entry stream
        self.side_recorded: set[int] = set()  # argument storages recorded on some path (records.py)
        self.recorded_for: dict[str, dict[int, object]] = {}  # side stream -> argument storages recorded on it
        self.unjoined: dict[tuple, Unjoined] = {}
        self.view_escapes: dict[tuple, ViewEscape] = {}
        self.inline_stack: list[int] = []
        self.outer_envs: list[dict] = []  # the environments of the functions an inlined helper is called from
        self.inline_floor = 0  # the last storage id before the outermost inlined helper ran
        self.inline_entry: tuple[int, str] = (0, "")  # the clock and current stream at the outermost inlined call
        self.inner: tuple[FileModel, cst.CSTNode] | None = None  # the inlined helper's statement running now
        self.param_streams: set[str] = set()
        self.field_events: dict[str, set[str]] = {}  # event -> the fields of self it is stored in ("": elsewhere)
        self.handed_events: set[str] = set()  # events stored on an object or a container (waited elsewhere)
        self.event_bundles: dict[str, list[frozenset[int]]] = {}  # event -> per hand-over, the tensors with it
        self.waited_events: set[str] = set()  # events waited (by a stream or the host) in this function
        self.timing_events: set[str] = set()  # events read by elapsed_time: they time work, they guard none
        self.presumed_waits: set[str] = set()  # event fields whose waiter is presumed (made by another package)
        self.aside_joins: dict[str, str] = {}  # early-recorded event -> a method joining its stream aside from it
        self.release_covers: dict[str, str] = {}  # early-recorded event -> a later release event of other values
        self.thread_waiters: dict[str, str] = {}  # early-recorded event -> its waiter method on a thread of its own
        self.guessed_work: dict[int, str] = {}  # time -> the method name a helper's work was resolved by
        self.record_sites: dict[tuple[str, str, int], tuple[cst.CSTNode, str]] = {}  # (event, stream, time) ->
        # (the record statement, the event's text)
        self.op_sites: dict[str, list[tuple[int, cst.CSTNode]]] = {}  # stream -> (time, statement) of its work
        self.work_sites: dict[str, list[tuple[int, cst.CSTNode]]] = {}  # the same, with the work of inlined helpers
        # (their statement is the call of this function that runs them: Orderings.note_work)
        self.early_records: dict[int, EarlyRecord] = {}
        self.inlined_records: set[tuple[str, str, int]] = set()  # records in inlined helpers (hostreads.py)
        self.evident_copies: set[int] = set()  # copies of parameters / fields shown device memory (hostreads.py)
        self.counted_loops: list[cst.For] = []  # loops read step by step with their counter (counters.py)
        self.host_reads: dict[int, HostRead] = {}  # host reads of pending device-to-host copies (hostreads.py)
        self.dict_values: dict[int, object] = {}  # dict literal -> TupVal of its values (exprs.py)
        self.pinned_copies: set[int] = set()  # asynchronous copies into page-locked host memory (hostreads.py)
        self.unplaced_copies: set[int] = set()  # ... of a tensor of unknown placement (hostreads.py: medium)
        self.unknown_results: set[int] = set()  # storages of call results of unknown type (listreads.py: medium)
        self.guessed_args: dict[int, str] = {}  # storages of parameters typed by their use (opaqueparams.py)
        self.foreign_args: dict[int, str] = {}  # ... typed only by methods no tensor has (hostobjects.foreign_receivers)
        self.unseen_call = False  # the op at hand is a call of code not seen (hostwrites.unseen_call_op)
        self.host_handed_now: frozenset[int] = frozenset()  # host-field storages that call is handed
        self.host_handed_reads: set[tuple[int, int]] = set()  # (storage, time) of such reads (Race.host_handed)
        self.handed_gates: dict[tuple[int, int], frozenset[str]] = {}  # (storage, time) -> events covering its
        # last write when such a call was handed it (hostwrites.py)
        self.gates_now: dict[int, frozenset[str]] = {}  # ... of the call at hand, by storage
        self.early_gates: dict[int, frozenset[str]] = {}  # early records found by such a race (promises.py)
        self.host_grads: dict[int, str] = {}  # pending host ``.grad`` storages: their place (hostgrads.py)
        self.dropped: dict[int, tuple] = {}  # records whose event a path drops (hostsync.py): id -> (key, finding)
        self._anonymous: dict[int, int] = {}  # creation node -> index in program order
        self.steps = 0
        self._mentions: dict[int, bool] = {}
        self._elem_texts: dict[int, str] = {}
        self.stream_tests: dict[str, tuple[str, str, bool]] = {}
        self.rest: list = []  # statements after the one being interpreted (same block)
        self.host_args: frozenset[int] = frozenset()  # argument nodes of the call at hand bound to host parameters
        self.project_call = False  # the call at hand runs a project function (call_args)
        self.h2d = False  # the current op copies host data to the device (or is a no-op on device data)
        self.handed_owners: dict[str, dict[str, int]] = {}  # objects handed to a library call: the clock then
        self.host_depth = 0  # inside a host test / host arithmetic (storage.host_test): no device work
        self.deferred_end = _called_by_own_class(file, fn)
        self._entry: bool | None = None  # see entry
        self.entry_time = 0  # the time of the caller's productions of the arguments
        self.handshake_time = -1  # the last host handshake with another thread (``train_flag.wait()``)
        self.handshake_forks: frozenset[str] = frozenset()  # streams its signallers fork before they signal
        self.own_withs = _class_withs(file, fn)
        self.exits: list[State] = []  # the states at the function's exits (a class protocol's producer summary)
        self.returned: list[State] = []  # the states at its `return` statements (top level only)
        self.field_writes: dict[str, list[int]] = {}  # `self.x = t`: the storages assigned to each field
        self.protocol_sources: dict[int, str] = {}  # storage -> the method that left it on a side stream
        self.family_events = False  # an event family of a class protocol is seeded (fieldfamilies.py)
        self.seeded_families: set[str] = set()  # their event families, and the storages seeded for them
        self.family_sids: set[int] = set()
        self.step_sources: dict[int, str] = {}  # storage -> the method rewriting it every step (stepstate.py)
        self.helper_writes: set[int] = set()  # storages last written by an inlined helper (leaves.py)
        self.index_rounds: dict[int, tuple[int | None, int]] = {}  # binding stamp -> (start, round): first_round_test
        self.first_elements: dict[int, str] = {}  # binding stamp of a loop variable's first round -> `xs[0]`
        self.index_loops: set[tuple[int, str]] = set()  # (id of a `for`, its integer index): control.loop_index
        self.round_indexes: dict[tuple[int, str], tuple] = {}  # (id of a collection walk, round) -> its index
        self.fresh_keys: set[str] = set()  # stream keys of spliced runs of new streams (roundtests.py)
        self.slot_clock = 0  # stamps of list slots and name bindings (slots.py)
        self.entry_sources: dict[int, tuple] = {}  # argument storage -> (file model, call node) seeding it
        self.given_events: set[str] = set()  # event parameters every caller hands (recorded): never None here
        # calls of a caching stream getter whose stream every caller has current at the call (forks.py)
        self.entry_getters: frozenset[int] = frozenset()

    @property
    def entry(self) -> bool:
        """Is the function compiled itself (a compile site's target)? Asked only when it decides something
        (all compile sites of the project: it parses every module that may compile)."""
        if self._entry is None:
            self._entry = self.project.path_index.is_graph_entry(self.file, self.fn)
        return self._entry

    # ---- helpers
    @property
    def cfile(self) -> FileModel:
        return self.frames[-1][0]

    @property
    def cfn(self) -> FunctionInfo:
        return self.frames[-1][1]

    def bind_star_args(self, st: State) -> None:
        """``*inputs``: the positional arguments a wrapper forwards (``self.module(*inputs)``) are, like an
        unannotated tensor parameter read by a call, the caller's tensors produced on its current stream;
        one argument storage stands for all of them. Not when annotated with a non-tensor type, nor, unannotated,
        when they are forwarded to a callable parameter (a dispatcher) unless a seen caller hands a tensor among them
        (flow/dispatchedargs.py: medium); annotated ``*inputs: Tensor``, they are the
        caller's tensors whatever callable reads them (``fn(*inputs)`` under a side-stream scope reads them there)."""
        star = self.fn.node.params.star_arg
        if not isinstance(star, cst.Param) or self.cfg.args_exempt:
            return
        if star.annotation is not None and not tensor_annotation(star.annotation.annotation):
            return
        name = star.name.value
        level = None
        if star.annotation is None and any(isinstance(site.node.func, cst.Name) and site.node.func.value in self.fn.all_params
               and any(a.star == "*" and isinstance(a.value, cst.Name) and a.value.value == name
                       for a in site.node.args) for site in self.fn.calls):
            level = dispatched_level(self.project, self.file, self.fn)
            if level is None:
                return  # `func(*args)` with `func` handed in: a generic dispatcher, the arguments are anything its
                # seen callers hand (none a tensor; flow/dispatchedargs.py)
        S = self.new_storage(st, "arg", MAIN, star.name.value, Access(MAIN, 0, None, {}))
        st.env[star.name.value] = self.new_tensor(st, S.sid)
        if level is not None:
            self.__dict__.setdefault("dispatched_args", {})[S.sid] = level

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def run(self) -> None:
        st = State()
        kinds = param_kinds(self.project, self.file, self.fn)
        self.container_params = frozenset(  # `outputs: Tuple[Tensor, Tensor]`: unpacked by parts (control.unpack)
            p.name.value for p in (*self.fn.node.params.params, *self.fn.node.params.kwonly_params)
            if kinds.get(p.name.value) == "container" and p.annotation is not None
            and tensor_annotation(p.annotation.annotation))  # (not `Dict[str, Tensor]`: unpacking gives keys)
        current = current_stream_params(self.project, self.file, self.fn,
                                        {name for name in self.fn.all_params if kinds.get(name) != "tensor"})
        forked = forked_stream_params(self.project, self.file, self.fn, {
            name for name in self.fn.all_params if kinds.get(name) == STREAM and name not in current})
        # a list of tensors some caller fills after its fork (`for w in weights: w.mul_(s)`) has no storage to
        # date as produced late (deferred below): the fork does not order that stream at all
        forked = {k: names for k, names in forked.items() if not any(kinds.get(p) == "container" for p in names)}
        own = forked_self_streams(self.project, self.file, self.fn)
        own.update(forked_param_fields(self.project, self.file, self.fn))  # `store.comm_stream` (paramfields.py)
        self.given_events |= recorded_event_params(self.project, self.file, self.fn, {
            name for name in self.fn.all_params if kinds.get(name) == EVENT})
        late = {p for names in (*forked.values(), *own.values()) for p in names}  # produced after the fork
        guessed = guessed_params(self.project, self.file, self.fn, (torch_returns_tensor, VIEW_METHODS))
        foreign = foreign_receivers(self.fn)
        if self.fn.scopes and self.fn.all_params:
            self.entry_getters = callers_current_getters(self.project, self.file, self.fn)
        deferred: list[str] = []
        for p in (*self.fn.node.params.posonly_params, *self.fn.node.params.params,
                  *self.fn.node.params.kwonly_params):
            name = p.name.value
            kind = kinds.get(name)
            if name == "self":
                continue
            if name in current:  # every caller passes its current stream
                st.env[name] = SVal(MAIN)
                continue
            if kind == STREAM:
                st.env[name] = SVal(name)
                self.param_streams.add(name)
                if name in forked:
                    self.wait_stream(st, name, MAIN)  # every caller forked it just before the call
                continue
            if kind == EVENT:
                st.env[name] = EVal(name)
                continue
            if kind != "tensor":
                st.env[name] = KVal(name, opaque=True)  # not evidently a tensor (flags, configs, lists, contexts)
                continue
            if self.cfg.args_exempt:
                S = self.new_storage(st, "long", MAIN, name, None)
            elif name in late:
                deferred.append(name)
                continue
            else:
                S = self.new_storage(st, "arg", MAIN, name, Access(MAIN, 0, None, {}))
            if name in guessed:
                self.guessed_args[S.sid] = name
            if name in foreign:
                self.foreign_args[S.sid] = name
            st.env[name] = self.new_tensor(st, S.sid)
        self.bind_star_args(st)
        if self.entry_seed:
            seed_entry(self, st, kinds)
        if self.protocol_seed:
            seed(self, st, element_rooted(self.project, self.file, self.fn,
                                          protocol_inputs(self.project, self.file, self.fn, self.cfg.mode, run_producer)))
            seed_releases(self, st)  # buffers another function released on the current stream (releasestreams.py)
        self.closure_entry(st)
        ambient = entry_ambient(self.project, self.file, self.fn)
        if ambient is not None:  # every caller runs this method under that stream of the object (flow/ambient.py)
            st.same[ambient] = MAIN
            for name in sorted(self.param_streams):  # a stream parameter every caller binds to that very stream
                if param_alias(self.project, self.file, self.fn, name) == ambient:
                    st.same[name] = MAIN
        for stream in own:
            self.wait_stream(st, stream, MAIN)  # forked by every caller (or when it was parked on the object)
        if deferred:  # the caller produced these after its fork: the fork does not order them
            self.entry_time = self.tick()
            for name in deferred:
                S = self.new_storage(st, "arg", MAIN, name, Access(MAIN, self.entry_time, None, {}))
                st.env[name] = self.new_tensor(st, S.sid)
        body = self.fn.node.body.body  # (an IndentedBlock's lines, or a one-line body's small statements)
        last = _last_simple(body)
        for s in self.block(body, [st]):
            self.exits.append(s)
            if not s.done:
                self.unjoined_escape(s, None, last)
                self.pending_exit(s, None, last)
                self.finalize(s)
        self.resolve_dropped()
        self.mark_gated()


    def closure_entry(self, st: State) -> None:
        """A local closure its enclosing function only calls inside one stream scope runs on that stream: the
        scope's stream is its entry stream (flow/closures.py), under each name the closure can reach it by."""
        for expr in closure_scope(self.project, self.file, self.fn):
            key = self.stream_key(st, self.ev(st, expr), expr)
            if key != MAIN and not key.startswith("<"):
                st.same[key] = MAIN


def run_producer(project: Project, file: FileModel, fn: FunctionInfo, mode: str) -> Interp | None:
    """Run a method on its own to read what it leaves on the object at its exits (a class protocol's
    producer, :mod:`~streamlint.model.flow.protocols`); None when the analysis gives up on it."""
    # (what it leaves on the object; not asked of its callers: no order dependence)
    before = reads(project)
    interp = _run_alone(Interp(project, file, fn, flow_config(mode, False, False)), protocol_seed=False)
    if interp is not None:  # (the method's own flow may take it: flow/producerruns.py)
        keep(project, fn, mode, interp, reads(project) == before)
    return interp


def run_collector(project: Project, file: FileModel, fn: FunctionInfo, mode: str) -> Interp | None:
    """Run a caller on its own (not seeded by its own callers) to read what each of its calls hands the
    callee (:mod:`~streamlint.model.flow.entryctx`); None when the analysis gives up on it."""
    return _run_alone(Interp(project, file, fn, flow_config(mode, False, False)), collect={})


def _run_alone(interp: Interp, **settings) -> Interp | None:
    """Run ``interp`` not seeded by its function's callers, with ``settings`` set on it; None when the analysis
    gives up."""
    interp.entry_seed = False
    for name, value in settings.items():
        setattr(interp, name, value)
    try:
        interp.run()
    except (RecursionError, AnalysisBudgetExceeded):
        return None
    return interp


register_runner(run_collector)
