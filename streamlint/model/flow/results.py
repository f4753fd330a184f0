"""The hazards the dataflow reports (:class:`FunctionFlow` and its parts): the interface between
the per-function flow analysis and the rules (SL201, SL204, SL205, SL301)."""

from __future__ import annotations

from dataclasses import dataclass

from streamlint._lazy import cst
from streamlint.model.syntax import contains, dominates, other_arms, same_with


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
    escape: bool = False  # this "use" is the hand-back to the caller (a return, a written argument)
    body: bool = False  # this "use" is a context manager's yield: the caller's with-body runs on ``dst``
    replay: bool = False  # this "use" is a graph replay reading what it captured (assumed a static input)
    handshake: bool = False  # the host waited for another thread (``flag.wait()``) between the two accesses
    caller_stream: str | None = None  # the other side is the current stream and this one a stream parameter
    protocol: str | None = None  # the earlier write is another method's (a class protocol): that method's name
    held: str = ""  # an escape through a long-lived tensor written in place (no return, leaves.py): how the
    # callers take it, "caller" (a caller goes on without an ordering) or "unseen" (no caller is visible)
    caller: tuple | None = None  # held: (file model, call node) of a call its caller follows with no ordering
    task: bool = False  # a task group captured on ``dst`` whose parameters another stream updates (``name``: the
    # call ending it); no wait on ``dst`` precedes it (replays.py)
    step: str | None = None  # the earlier write is the caller's step: this ``self.*`` tensor is rewritten every
    # step by that method of the class (stepstate.py), assumed run on the current stream before this call
    inlined: tuple | None = None  # (file model, statement) of the access inside a helper inlined at ``node`` (a
    # call the caller makes on ``dst``): the race exists only in the caller's context
    entry: tuple | None = None  # (file model, call node): the earlier access is what every caller hands the
    # function (entryctx.py), shown at this call
    cause: tuple[int, int, int] = (-1, 0, 0)  # (what ``dst`` knew of ``src`` at the access, the earlier access's
    # time, this access's time): races whose one missing wait is the same root cause share the first entry
    ambient: tuple | None = None  # (file model, call node) of a project call that runs the function (or the step's
    # writer) on the other stream itself, when its other calls are not all seen so (flow/ambient.py); with a third
    # element, the caller's scope stream, when every call runs it inside a caller's scope that may be the other
    # stream (flow/callerscopes.py)
    handed_wait: str | None = None  # an argument race whose ``dst`` waited on a stream the caller hands in
    # (``dev.compute_stream``): the producer it means, maybe the caller's current stream; or a hand-back whose
    # producer stream that handed-in stream waited on: the caller's join, maybe (chosenstreams.handed_wait)
    unknown: bool = False  # the earlier access made a value of unknown type: a call's result taken as device data
    # because it was collected in a side-stream scope (flow/listreads.py)
    # the earlier access is a call of code not seen whose device work is assumed (nativewrites.py: a native collective
    # writing what it is handed, by its name; opaqueresults.py: an opaque callable's result): "medium" / "low"
    opaque: str = ""
    helper_guess: str = ""  # the earlier access made the result of this project helper, taken for a new device tensor
    # of the current stream by the generic call rule only: its code shows none it makes (flow/hosthelpers.py)
    helper_built: bool = False  # ... and the helper assembles that result (a list it fills, a tuple) from what
    # several calls of code not seen hand out (flow/unseenbuilds.py)
    guessed: str = ""  # the parameter (annotated ``Any`` / an opaque alias) whose storage this is, taken for device
    # memory from a use that shows a torch tensor only (opaqueparams.guessed_params); it weighs only when ``argument``
    # (the caller's production): a race with the function's own write (``kv.mul_``) rests on that write
    dispatched: str = ""  # "medium": the storage is a `*args` forwarded to a handed callable, taken for the callers'
    # tensors because a seen caller hands one (flow/dispatchedargs.py)
    foreign: str = ""  # the parameter whose storage this is, taken for a tensor only as the receiver of methods no
    # tensor has (hostobjects.foreign_receivers: a copy engine, a stream pool?); it weighs only when ``argument``
    host_handed: bool = False  # one of the two accesses is a call of code not seen handed a field that certainly
    # holds host memory (a pinned pool): it may only describe it, or read it on the host (flow/hostwrites.py)
    gates: frozenset = frozenset()  # the events covering the memory's last write when that call was handed it
    # (``HostWrites.note_handed_gates``)
    gated: bool = False  # one of them is handed on by the function: a gated hand-off (``HostWrites.mark_gated``: low)
    batch_guard: tuple | None = None  # (name, producer statement, exclusive phases): the caller-given object two
    # different tests of which the producer and the use each rest on: the race needs both to hold
    # (flow/batchguards.py); whether the two tests name two phases of the batch, prefill and decode (flow/phaseguards.py)
    unproven: str | None = None  # ``protocol``: the class shows no join the reader is expected to make
    # (flow/unproven.py): "" (low), or the method of the class seen running the producer, then this one (medium)
    release: tuple | None = None  # a write-after-read on a buffer another function released on the current stream
    # and stored that stream on its object: (that function, the stream field, whether this one mentions it)
    # (flow/releasestreams.py)
    flag: str | None = None  # a hand-back (``escape``) found only on paths where the caller's flag turned the
    # function's own join off (``if sync: torch.cuda.synchronize()``: flow/flagjoins.skipped_join_flag)
    labelled: str | None = None  # a read whose result, bound to this name, is read only inside f-strings (a label,
    # a log line: flow/discardedreads.py)
    sibling: str | None = None  # an event field of the tensor's own object, waited between the two accesses, which
    # the function does not record (recorded where the object went in between: flow/siblingevents.py)
    element: str | None = None  # another element of the producer stream's collection, joined by this one after the
    # producer: maybe the same stream (flow/elementaliases.py)
    unseen_method: str | None = None  # a ``self`` method no project class defines, called between the two accesses
    # (the class extends another package's class, or is patched onto one: flow/unseenmethods.py)
    process: str = ""  # this read is a hand-off to another process (``self.outbox.put()``: the call), which waits
    # only on the IPC event the put records on the current stream (flow/ipchandoffs.py)


@dataclass(frozen=True)
class Lifetime:
    """A storage used on another stream whose memory can be reused too early (SL301)."""

    node: cst.CSTNode  # first unprotected use on the other stream
    name: str
    alloc: str
    use_stream: str
    free: str  # "del" | "rebinding" | "resize_(0)" | "unset" | "unset-shared" (an attribute rebound: storage.py
    # unset_place) | "call end" (an unnamed argument) | "function end"; ""
    # for the kinds below
    free_node: cst.CSTNode | None  # the free; for "noop-record": the late use on the other stream
    escaped: bool
    mode: str
    kind: str = "free"  # "free": freed before the allocating stream waits on the use; "noop-record": a
    # record_stream on the allocating stream itself (``node``); "caller-drop": a tensor parameter used on the
    # side stream callers run the function on, which some caller drops (flow/sidecalls.py); "handoff": a
    # side-stream allocation handed over (``free``: "<return>", "self.<field>", "<data>") after the function joined
    # its stream into the current one, never recorded there (flow/consumers.py; ``node``: the hand-over)
    entry: tuple | None = None  # (file model, call node): the allocating stream is what every caller hands
    # the function (entryctx.py), shown at this call
    flag: str | None = None  # the caller's flag whose arm skipped a join the other arm makes (flagjoins.py)
    flag_tests: bool = False  # only callers in test modules hand the flag that arm's value (flagvalues.py): low
    guess: str | None = None  # the place of unknown type the freed value's tensor-ness rests on (guessedresults.py)
    foreign_use: str | None = None  # the use reads the tensor only through this method no tensor has (a library's
    # patch handing it to its native runtime): its stream rests on code not seen (foreignuses.py)
    assumed: bool = False  # a record a call resolved by its method name only handed back (recordresults.py): medium
    kept_event: str | None = None  # an event recorded after the use, handed to a project receiver that only keeps
    # it (waits on it nowhere: syncops.receiver_joins): no join of the current stream, as its code says (medium)
    coarse: bool = False  # found by the coarse run (flow/coarse.py): one outcome of its ordering-free branches (medium)
    kept_by_record: str | None = None  # for "noop-record": the tensor is kept until its use stream's join by a work
    # record handed back ("kept": every seen caller keeps it; "unseen": no caller seen) (flow/recordkeeps.py)
    pooled: bool = False  # freed at the function's end on a stream the function made for itself and lets die: only the
    # stream pool handing that stream to a later ``Stream()`` can take the block back (flow/localstreams.py)


@dataclass(frozen=True)
class Unjoined:
    """Side-stream work never joined back before the end of a captured region (SL205)."""

    node: cst.With
    stream: str
    region: str  # "function" | "capture"
    mode: str
    entry: bool = True  # the function is itself a compiled graph entry (nobody else can join it)


@dataclass(frozen=True)
class EarlyRecord:
    """An event recorded on a side stream before work queued there after it, which nothing else joins (SL201):
    the event's waiters order only what came before the record."""

    node: cst.CSTNode  # the record
    event: str
    stream: str
    work: cst.CSTNode | None  # the first work on the stream after the record
    mode: str
    caller_may_join: bool  # the stream is the caller's (a parameter): it may join it after the call
    presumed_waiter: bool = False  # the event's waiter is presumed: a field made by another package
    aside: str | None = None  # another method of the class joins the stream, aside from the event (asidejoins.py)
    guessed: str | None = None  # the work is a call resolved by its method name only (every definition's work)
    handed: str | None = None  # the tensor the work writes, handed out with the event (flow/handedearly.py)
    release: str | None = None  # a later event covers the work only as a release of other values (releaseguards.py)
    thread: str | None = None  # the event's waiter, a method the class runs on a thread of its own (threadwaiters.py)
    optional: str | None = None  # the parameter whose test alone runs the work after the record (optionalwork.py)
    host_reader: str | None = None  # the method that host-waits the event, then reads the pinned field the work fills
    # (flow/pendingfields.py)


@dataclass(frozen=True)
class HostRead:
    """The host reads (or hands to another thread, a file, a serialiser) a host tensor an asynchronous
    device-to-host copy is still filling: no host synchronisation covers the copy (SL201). With ``kind``
    "signal": the host tells another thread the work is done while it still runs on a side stream."""

    node: cst.CSTNode  # the host read
    name: str
    stream: str  # the stream the copy is queued on
    copy: cst.CSTNode | None  # the copy
    consumer: str  # what reads it (".tolist()", "torch.save", "a CPU op", "a queue", ...)
    mode: str
    # "copy": the host reads a pending copy's result; "signal": the host signals another thread that the work is
    # done (``.put()``, ``.set()``) while side-stream work this function queued (``copy``: its scope) still runs;
    # "dropped": ``node`` records event ``name`` after the work ``copy``, and a path drops the event (hostsync.py)
    kind: str = "copy"
    # False: the copy's source is of unknown placement (only a device tensor copies asynchronously), or the host
    # read a value of unknown placement on the copy's stream after it (``n.item()``: a wait, if it is device data)
    placed: bool = True
    # True: the copy's source is of unknown placement AND the host read or copied to the host a value of unknown
    # placement on the copy's stream after it (``n.sum().cpu()``): the code treats both as device data, and if they
    # are, the host waited for the copy (reported low)
    hedged: bool = False


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
    early_records: tuple[EarlyRecord, ...] = ()
    host_reads: tuple[HostRead, ...] = ()


EMPTY_FLOW = FunctionFlow(frozenset(), (), (), (), ())


def _flavour(race: Race) -> tuple:
    """What makes two races need different waits: the pair of streams and what the waiting one knew of the
    other (one ``dst.wait_stream(src)`` before the first use orders every later access of that pair, a read
    or a write, whichever assumption stands behind each: a step writer, an argument, a hand-back). A graph
    task group's update and a context manager's yield are orderings of their own."""
    return (race.src, race.dst, race.cause[0], race.task, race.body)


def _one_join(root: cst.CSTNode, first: list, races: list) -> bool:
    """Are two accesses of one missing wait in the different arms of one ``if`` whose producers all come
    before it (the join was due before the ``if``: one wait there orders both arms' uses)?"""
    branch = other_arms(root, first[0].node, races[0].node)
    return branch is not None and all(r.producer is not None and not contains(branch, r.producer)
                                      for r in (*first, *races))


def one_per_cause(groups: dict, flows: dict) -> list[tuple[list, list]]:
    """One finding per missing wait: the races of one function on the same pair of streams, with nothing
    learnt by the accessing stream about the other in between (``Race.cause``), whose earlier accesses
    all precede the first one's use, are fixed by one wait before that first use when that use is on every
    path to theirs (:func:`~streamlint.model.syntax.dominates`: a use in one branch does not fold the other branch's,
    unless both are in one ``with`` statement (:func:`~streamlint.model.syntax.same_with`) or in the two arms of
    one ``if`` after their one producer (:func:`_one_join`), which one wait before it orders): they are its
    finding (the later uses as related locations), not findings of their own, whatever their kinds (a read and
    a write-after-write of one join) and the assumptions behind each (the rule gives the finding the
    confidence of its surest race). ``groups``: the races of one access
    node each; ``flows``: node id -> (function, flow). Returns (races, later races) per finding, in the order
    of the interpreter's clock (the first use first)."""
    firsts: dict[tuple, list[tuple[list, list]]] = {}
    order = sorted(groups.values(), key=lambda rs: rs[0].cause[2])
    out: list[tuple[list, list]] = []
    for races in order:
        race = races[0]
        fn = flows[id(race.node)][0]
        key = (id(flows[id(race.node)][1]), _flavour(race))
        first = next((f for f in firsts.get(key, ()) if race.cause[2]
                      and max(r.cause[1] for r in races) <= f[0][0].cause[2]
                      and (dominates(fn.node, f[0][0].node, race.node)
                           or same_with(fn.node, f[0][0].node, race.node)
                           or _one_join(fn.node, f[0], races))), None)
        if first is not None:
            first[1].extend(races)
            continue
        entry = (races, [])
        firsts.setdefault(key, []).append(entry)
        out.append(entry)
    return out
