from __future__ import annotations

from streamlint._lazy import cst
from streamlint.finding import Confidence, Location, Severity
from streamlint.model.apis import STREAM_MARKERS
from streamlint.model.ctxfactories import uncorrelated_optional
from streamlint.rule import FIRST_LINE, Invalid, Option, Rule, RuleContext, Valid, first_line


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global EarlyRecord, HostRead, Race, file_flows, path_tag, CURRENT, UnguardedRead, unguarded_reads, duck_calls, \
        declared_calls, \
        UnwaitedEntry, unwaited_entries, UnwaitedElement, unwaited_elements, guessed_calls, silent_device_branches, \
        silent_facade_syncs, HANDED, FOREIGN, GUESSED, \
        SilentJoin, silent_joins, taken_events, module_mark_joins, cleared_slots, DroppedEvent, UnheldEvent, \
        ticket_joins, branch_joins, dropped_events, unheld_events, \
        FunctionFlow, one_per_cause, device_module, function_at, MAIN, entry_stream_name, stream_expr, stream_label, \
        partial_joins, partial_param_joins, unwaited_slot_reads, UnwaitedHandle, unwaited_handles, chosen_stream, \
        chosen_upstream, chosen_by_caller, current_at_some_site, handed_elsewhere, unjoined_flag_clears, \
        unread_choice, field_is_side, idle_stream_loops, returned_handle_waits, worker_thread_only, synced_share, signal_reads, \
        signals_of, replay_ordered, DroppedQueueEvent, dropped_queue_events
    from streamlint.model.flow.signalfolds import signal_reads, signals_of
    from streamlint.model.flow.callerwaits import returned_handle_waits
    from streamlint.model.flow.hostargs import worker_thread_only
    from streamlint.model.flow.syncedresults import synced_share
    from streamlint.model.dataflow import EarlyRecord, HostRead, Race, file_flows, path_tag
    from streamlint.model.eventguards import CURRENT, UnguardedRead, unguarded_reads
    from streamlint.model.flow.callerstreams import chosen_upstream, current_at_some_site, handed_elsewhere, \
        unread_choice
    from streamlint.model.flow.capturedreads import replay_ordered
    from streamlint.model.flow.chosenstreams import chosen_by_caller, chosen_stream
    from streamlint.model.flow.paramfields import field_is_side
    from streamlint.model.flow.duckmethods import duck_calls
    from streamlint.model.flow.typedholders import declared_calls
    from streamlint.model.flow.elementevents import UnwaitedElement, unwaited_elements
    from streamlint.model.flow.entryevents import UnwaitedEntry, unwaited_entries
    from streamlint.model.flow.returnedhandles import UnwaitedHandle, unwaited_handles
    from streamlint.model.flow.objeffects import guessed_calls
    from streamlint.model.flow.facades import silent_device_branches, silent_facade_syncs
    from streamlint.model.flow.handedfields import HANDED
    from streamlint.model.flow.foreignfields import FOREIGN, GUESSED
    from streamlint.model.flow.joinsteps import SilentJoin, silent_joins, taken_events
    from streamlint.model.flow.pendingmarks import cleared_slots, module_mark_joins
    from streamlint.model.flow.ticketjoins import branch_joins, ticket_joins
    from streamlint.model.flow.droppedevents import DroppedEvent, UnheldEvent, dropped_events, unheld_events
    from streamlint.model.flow.results import FunctionFlow, one_per_cause
    from streamlint.model.devicenames import device_module, function_at
    from streamlint.model.streams import MAIN, entry_stream_name, stream_expr, stream_label
    from streamlint.model.waits import partial_joins
    from streamlint.model.paramjoins import partial_param_joins
    from streamlint.model.slotevents import unwaited_slot_reads
    from streamlint.model.flow.queuehandoffs import DroppedQueueEvent, dropped_queue_events
    from streamlint.model.flow.lostjoins import idle_stream_loops, unjoined_flag_clears


_RANK = {None: 3, Confidence.HIGH: 3, Confidence.MEDIUM: 2, Confidence.LOW: 1}


class MissingWaitAtJoin(Rule):
    """## What it does
    Flags a tensor produced on one stream and used on another without the execution path's ordering
    primitive: a side-stream scope reading a tensor (or argument) produced on the current stream with
    no fork wait, a side-stream result consumed on another stream with no join wait after its
    production, and in-place writes racing with an earlier read on another stream (write-after-read).
    In `reduce-overhead` the ordering must be tagged events; in `ge` only the orderings GE cannot see
    (in-place / side-effecting writes racing with reads in another stream scope) are reported.
    The host is a consumer too: a host tensor filled by a non-blocking device-to-host copy read on the host
    (`.tolist()`, a CPU op, a branch test, `torch.save`, a queue) before a host synchronisation covers the copy.
    When the consumer is the caller, the join step itself is flagged: a function named for joining
    (`wait_*`, `await_*`, `sync_*`, `finish_*`) that orders nothing after the stream or event it is handed, or the
    class's join step when nothing in the project joins a stream another method leaves work on. Across the
    methods of a class: an event recorded before side-stream work it should cover (also when another method
    joins that stream only for its own work or as a teardown), and a method handing out the tensors of a
    container entry (`return item.state`) with no wait on the event stored with them after their copies, a method
    reading a tensor field of the record a producer method returned (`cur = self._prefetch(i)` ... `cur.on_device`)
    with no wait on the event that producer recorded after copying it, or a
    batch taken from a container field (`batch = self._batches.pop(0)`) whose event, taken from its container
    with it, is dropped unwaited. A slot arena's hand-out (`return self.arena.views(slot)`) whose per-slot events
    (`self.layer_ready[i].record(self.copy)` after another method's write through `self.arena` in that stream's
    scope) nobody waits, and a join loop over an events parameter that leaves out its first or last element while
    the inputs it guards (another parameter) are read whole, are reported at medium confidence.

    ## Why is this bad?
    Work on different streams runs concurrently. Without a wait the consumer can read memory before
    the producer wrote it (garbage values), or the producer can overwrite memory the other stream is
    still reading. These races are timing dependent and show up as wrong tokens or loss spikes.

    ## Example
    ```python
    with torch.npu.stream(self.side):
        shared = self.shared_experts(x)
    return routed + shared  # main never waited on self.side
    ```

    ## Use instead
    ```python
    self.side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(self.side):
        shared = self.shared_experts(x)
    torch.npu.current_stream().wait_stream(self.side)
    return routed + shared
    ```

    ## Options
    - `ge-explicit-join-waits` (bool, default false): in `ge`, also report every cross-stream data join
      that has no explicit `npu_wait_tensor` / `torchair.ops.wait` (GE synchronises data edges itself,
      so this is a conservative policy).
    """

    code = "SL201"
    name = "missing-wait-at-join"
    severity = Severity.ERROR
    confidence = Confidence.HIGH
    mode_tagged = True
    markers = STREAM_MARKERS
    options = (
        Option("ge-explicit-join-waits", bool, False,
               "In ge, report every cross-stream data join without an explicit wait."),
    )

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        explicit = bool(ctx.options.get("ge-explicit-join-waits", False))
        groups: dict[tuple[int, str, str, str], list] = {}
        flows: dict[int, tuple] = {}
        for fn, flow in file_flows(ctx.project, ctx.file, explicit_ge_joins=explicit):
            for race in flow.races:
                kind = "write" if race.kind != "read" else "read"
                groups.setdefault((id(race.node), kind, race.src, race.dst), []).append(race)
                flows.setdefault(id(race.node), (fn, flow))
        reported: set[int] = set()
        named: dict[int, set[str]] = {}  # line -> the names the flow's findings there are about
        signals = signal_reads(file_flows(ctx.project, ctx.file, explicit_ge_joins=explicit))
        for races, also in one_per_cause(groups, flows):
            race = races[0]
            if id(race.node) in reported:
                continue
            reported.add(id(race.node))
            fn, flow = flows[id(race.node)]
            main = entry_stream_name(ctx.project, ctx.file, fn)
            names = list(dict.fromkeys(r.name for r in races))
            also = list({(id(o.node), o.name): o for o in also  # (a read and a write of one access: one use)
                         if not (o.node is race.node and o.name in names)}.values())
            use_line = ctx.file.span(race.node).start_line
            producer_line = max((ctx.file.span(r.producer).end_line for r in (race, *also)
                                 if r.producer is not None), default=None)
            confidence, hint = _judge(ctx, race, fn, flow, main, use_line, producer_line)
            head = race  # (one missing wait: the finding names its surest race, is as sure, and says why)
            for other in also:
                judged = _judge(ctx, other, fn, flow, main, use_line, producer_line)
                if _RANK[judged[0]] > _RANK[confidence]:
                    (confidence, hint), head = judged, other
            if head is not race:  # (reported at that race's use; the first use, where the wait goes, is related)
                rest = [*races, *(o for o in also if o is not head)]
                names = list(dict.fromkeys([head.name] + [o.name for o in rest if o.node is head.node]))
                also = [o for o in rest if o.node is not head.node]
            message = _message(head, names, main)
            related = _related(ctx, head) + [
                Location(ctx.file.path, ctx.file.span(r.node), f"`{r.name}` also used here, before any wait")
                for r in also]
            for signal in {id(s.node): s for r in (head, *also) for s in signals_of(r, signals)}.values():
                reported.add(id(signal.node))  # (the thread's early signal of the same work: one defect)
                related.append(Location(ctx.file.path, ctx.file.span(signal.node),
                                        "the producing thread signals here while that work may still run"))
                if _RANK[confidence] < _RANK[Confidence.MEDIUM]:
                    confidence = Confidence.MEDIUM  # (as sure as the signal's own finding would be)
            # (the SL301 findings the same wait clears are this root cause's: folded into it by the engine)
            absorbs = [("SL301", i.node) for i in _cleared(ctx, head, flow, use_line)]
            ctx.report(head.node, message, confidence=confidence, related=related, hint=hint, absorbs=absorbs)
            named.setdefault(ctx.file.span(head.node).start_line, set()).update(names)
        for fn, flow in file_flows(ctx.project, ctx.file, explicit_ge_joins=explicit):
            raced = {race.src for race in flow.races}  # the race found at the consumer is that root cause's finding
            for early in flow.early_records:
                if id(early.node) not in reported and early.stream not in raced:
                    reported.add(id(early.node))
                    _report_early(ctx, fn, early)
            for read in flow.host_reads:
                if id(read.node) not in reported:
                    reported.add(id(read.node))
                    _report_host_read(ctx, fn, read)
        for fn in ctx.file.functions.values():
            joins = partial_joins(ctx.project, ctx.file, fn)
            params = partial_param_joins(ctx.project, ctx.file, fn)
            if not joins and not params:
                continue
            tag = path_tag(ctx.project, ctx.file, fn)
            for join in joins:
                model, store = join.evidence
                if join.stream:  # (model/streamjoins.py)
                    _report_stream_join(ctx, join, tag)
                    continue
                ctx.report(join.loop,
                           first_line(f"this join loop leaves out the {join.dropped} element of `{join.collection}`: "
                                      f"its work is never waited for [{tag}]",
                                      f"this join loop leaves out the {join.dropped} element of its events [{tag}]"),
                           confidence=Confidence.MEDIUM,
                           related=[Location(model.path, model.span(store),
                                             "event recorded and stored here" if join.field is None
                                             else f"`{join.field}` recorded here")],
                           hint=(f"`{join.collection}` holds events recorded after device work" if join.field is None
                                 else f"the elements of `{join.collection}` each carry `{join.field}`, an event "
                                      "recorded after their device work")
                           + ": iterate over every element (the left-out event's work is otherwise never joined)")
            for join in params:  # (model/paramjoins.py)
                model, read = join.evidence
                ctx.report(join.loop,
                           first_line(f"this join loop leaves out the {join.dropped} element of the events parameter "
                                      f"`{join.collection}` while the inputs it guards are read whole [{tag}]",
                                      f"this join loop leaves out the {join.dropped} element of `{join.collection}` "
                                      f"[{tag}]"),
                           confidence=Confidence.MEDIUM,
                           related=[Location(model.path, model.span(read), "the guarded inputs are all read here")],
                           hint=(f"`{join.collection}` is waited element by element before every input is read (the "
                                 "events are paired with the inputs by the signature only): iterate over every "
                                 "event, or the left-out producer's work is never joined"))

        lines = {ctx.file.span(race.node).start_line for flow in {id(f): f for _, f in flows.values()}.values()
                 for race in flow.races}
        for read in unguarded_reads(ctx.project, ctx.file):
            if id(read.node) not in reported and ctx.file.span(read.node).start_line not in lines \
                    and not replay_ordered(ctx.project, ctx.file, read):  # (flow/capturedreads.py)
                reported.add(id(read.node))
                _report_unguarded(ctx, read)
        for slot in unwaited_slot_reads(ctx.project, ctx.file):  # (model/slotevents.py)
            if id(slot.node) in reported:
                continue
            reported.add(id(slot.node))
            tag = path_tag(ctx.project, ctx.file, slot.reader)
            line = ctx.file.span(slot.record).start_line
            ctx.report(slot.node,
                       first_line(f"`{slot.buffer}` is handed out here with no wait on `{slot.events}`, recorded after "
                                  f"`{slot.writer.node.name.value}` writes it on its stream [{tag}]",
                                  f"`{slot.buffer}` is handed out with no wait on the events of its writes [{tag}]"),
                       confidence=Confidence.MEDIUM,
                       related=[Location(ctx.file.path, ctx.file.span(slot.record), "the write's event is recorded here")],
                       hint=(f"wait the slot's element of `{slot.events}` on the current stream before handing "
                             f"`{slot.buffer}` out (recorded at line {line}): no code of this file waits it or joins the "
                             "writer's stream and no other module names either, so the caller's stream can read the "
                             "slot before the copy into it finished (the slot and the event are paired by the "
                             "writer's stream scope only)"))
        for fn in ctx.file.functions.values():  # (flow/lostjoins.py)
            for loop, coll, (model, store) in idle_stream_loops(ctx.project, ctx.file, fn):
                if id(loop) in reported:
                    continue
                reported.add(id(loop))
                ctx.report(loop,
                           first_line(f"this loop walks the side streams of `{coll}` and joins none of them "
                                      f"[{path_tag(ctx.project, ctx.file, fn)}]",
                                      f"this loop over `{coll}` joins none of its side streams"),
                           confidence=Confidence.MEDIUM,
                           related=[Location(model.path, model.span(store), "side stream created and kept here")],
                           hint=f"`{coll}` holds side streams the object issues work on: make the current stream wait "
                                "for each (`torch.cuda.current_stream().wait_stream(s)`) before their results are read")
        for clear in unjoined_flag_clears(ctx.project, ctx.file):
            if id(clear.node) not in reported and not any(
                    f.code == "SL201" and f.span.start_line == ctx.file.span(clear.node).start_line for f in ctx.findings):
                reported.add(id(clear.node))
                _report_flag_clear(ctx, clear)
        dropping: set[int] = set()
        for cls in ctx.file.classes.values():
            for drop in dropped_events(ctx.project, ctx.file, cls):
                _report_dropped(ctx, drop)
                dropping.add(id(drop.method))
            for queued in dropped_queue_events(ctx.project, ctx.file, cls):
                line = ctx.file.span(queued.use).start_line
                if id(queued.use) not in reported and not any(
                        f.code == "SL201" and f.span.start_line == line for f in ctx.findings):
                    reported.add(id(queued.use))
                    _report_queued_drop(ctx, queued)
            for entry in unwaited_entries(ctx.project, ctx.file, cls):
                if id(entry.node) not in reported:
                    reported.add(id(entry.node))
                    _report_unwaited_entry(ctx, entry)
            for handle in unwaited_handles(ctx.project, ctx.file, cls):
                if id(handle.node) not in reported and not any(
                        f.code == "SL201" and f.span.start_line == ctx.file.span(handle.node).start_line
                        for f in ctx.findings):
                    reported.add(id(handle.node))
                    _report_unwaited_handle(ctx, handle)
            for element in unwaited_elements(ctx.project, ctx.file, cls):
                line = ctx.file.span(element.record if element.early else element.node).start_line
                if element.early and any(f.code == "SL201" and f.span.start_line == line for f in ctx.findings) \
                        or not element.early and named.get(line, set()) & {element.handed, element.data}:
                    continue  # (the flow already reports that name there: one finding per cause)
                if id(element.node) not in reported:
                    reported.add(id(element.node))
                    (_report_early_element if element.early else _report_unwaited_element)(ctx, element)
        for fn, node, test in silent_device_branches(ctx.project, ctx.file):
            _report_silent_branch(ctx, fn, node, test)
        for unheld in unheld_events(ctx.project, ctx.file):
            span = ctx.file.span(unheld.function.node)
            if not any(span.start_line <= f.span.start_line <= span.end_line for f in ctx.findings):
                _report_unheld(ctx, unheld)  # (a finding of the function already names the unjoined work)
        for fn in silent_facade_syncs(ctx.project, ctx.file):
            _report_silent_join(ctx, SilentJoin(fn, fn.node.body.body[-1], "facade-sync", fn.node.name.value))
        for silent in silent_joins(ctx.project, ctx.file) + taken_events(ctx.project, ctx.file) \
                + module_mark_joins(ctx.project, ctx.file) \
                + cleared_slots(ctx.project, ctx.file) + ticket_joins(ctx.project, ctx.file) \
                + branch_joins(ctx.project, ctx.file):
            line = ctx.file.span(silent.node).start_line
            if id(silent.function) not in dropping and not any(  # (the dropped event is that join step's finding;
                    f.code == "SL201" and f.span.start_line == line for f in ctx.findings):  # the flow's is one too)
                _report_silent_join(ctx, silent)

    VALID = [
        Valid(
            """
            import torch

            class M(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.side = torch.npu.Stream()

                def forward(self, x: torch.Tensor):
                    self.side.wait_stream(torch.npu.current_stream())
                    with torch.npu.stream(self.side):
                        y = x * 2
                    torch.npu.current_stream().wait_stream(self.side)
                    return x + y
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class M(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.side = torch.npu.Stream()

                def forward(self, x: torch.Tensor):
                    self.side.wait_stream(torch.npu.current_stream())
                    with torch.npu.stream(self.side):
                        y = x * 2
                    return x + y
            """,
            line=12,
        ),
    ]


def _current(ctx: RuleContext, fn, tag: str) -> str:
    """``<device>.current_stream()`` for code of ``fn`` on the paths of ``tag`` (``torch.xpu`` in Intel GPU code)."""
    mode = "cuda" if "cuda" in tag.split("/") else tag.split("/")[0]
    return f"{device_module(ctx.project, ctx.file, fn, mode)}.current_stream()"


def _report_unguarded(ctx: RuleContext, read: UnguardedRead) -> None:
    """A field guarded by an event of its holder read with no wait on it (model: ``eventguards``)."""
    g = read.guard
    tag = path_tag(ctx.project, ctx.file, read.function)
    recorder = g.recorder.node.name.value
    field, event = f"{read.holder}.{g.field}", f"{read.holder}.{g.event}"
    on_current = g.stream == CURRENT
    where = "the current stream" if on_current else f"`{g.stream}`"
    why = (f"the constructor writes it on {where} and records `{event}` after"
           if read.produced_here is g.record else
           f"`{recorder}()`, called just before, writes it on {where} and records `{event}` after"
           if read.produced_here is not None else
           f"`{recorder}()` writes it on {where} and records `{event}` after; the module's other readers "
           f"wait on `{g.event}` first")
    ctx.report(read.node,
               first_line(f"`{field}` is read on {'a side stream' if on_current else 'the current stream'} with "
                          f"no wait on `{event}`: {why} [{tag}]",
                          f"`{field}` is read with no wait on `{event}` [{tag}]"),
               confidence=Confidence.MEDIUM,
               related=[Location(ctx.file.path, ctx.file.span(g.record), f"`{g.event}` recorded here, in "
                                                                          f"`{recorder}()`, after the write")],
               hint=(f"`{'<side stream>' if on_current else _current(ctx, read.function, tag)}.wait_event({event})` "
                     f"(or the device's equivalent) before the read: `{g.event}` is what orders `{g.field}` after "
                     f"the work on {where}; this assumes "
                     f"that work ran before this read, as the class's protocol implies"))


def _report_dropped(ctx: RuleContext, drop: DroppedEvent) -> None:
    """An event of the object tested and dropped with no wait (model: ``droppedevents.dropped_events``)."""
    tag = path_tag(ctx.project, ctx.file, drop.method)
    recorder = drop.recorder.node.name.value
    ctx.report(drop.node,
               first_line(f"`{drop.event}` is dropped with no wait: the work `{recorder}()` recorded it after is "
                          f"never joined [{tag}]",
                          f"`{drop.event}` is dropped with no wait on it [{tag}]"),
               confidence=Confidence.MEDIUM,
               related=[Location(ctx.file.path, ctx.file.span(drop.record), f"recorded here, in `{recorder}()`")],
               hint=(f"wait on it before dropping it (`current_stream().wait_event({drop.handle})` or "
                     f"`{drop.handle}.wait()`): it is the class's only handle on that work; this assumes the "
                     "caller reads what that work produced after this call"))


def _report_queued_drop(ctx: RuleContext, queued: DroppedQueueEvent) -> None:
    """The event queued with data taken off and dropped before the data's use (model:
    ``queuehandoffs.dropped_queue_events``)."""
    tag = path_tag(ctx.project, ctx.file, queued.taker)
    putter = queued.putter.node.name.value
    ctx.report(queued.use,
               first_line(f"`{queued.data}` (taken off `{queued.field}`) is used with no wait on `{queued.event}`, the "
                          f"event `{putter}()` recorded after its work and queued with it [{tag}]",
                          f"`{queued.data}` is used with no wait on the event queued with it [{tag}]"),
               confidence=Confidence.MEDIUM,
               related=[Location(ctx.file.path, ctx.file.span(queued.take), "taken off the queue here"),
                        Location(ctx.file.path, ctx.file.span(queued.record), f"recorded here, in `{putter}()`")],
               hint=(f"wait on it after taking the item and before using the data (`{queued.event}.wait()`, or "
                     f"`current_stream().wait_event({queued.event})`); this assumes the taker does not run on the "
                     f"stream `{putter}()` recorded it on"))


def _report_silent_branch(ctx: RuleContext, fn, node, test: str) -> None:
    """A device branch of a host-wait helper that does nothing (model: ``facades.silent_device_branches``)."""
    tag = path_tag(ctx.project, ctx.file, fn)
    name = fn.node.name.value
    ctx.report(node,
               first_line(f"the `{test}` branch of `{name}()` does nothing while its other device branches "
                          f"synchronise: on that device its callers' wait orders nothing [{tag}]",
                          f"a device branch of `{name}()` does not synchronise [{tag}]"),
               confidence=Confidence.MEDIUM,
               hint=("synchronise that device's stream as the other branches do; this assumes the callers read "
                     "what the device produced after the call"))


def _report_unheld(ctx: RuleContext, unheld: UnheldEvent) -> None:
    """An event a function makes and records and never names again (model: ``droppedevents.unheld_events``)."""
    tag = path_tag(ctx.project, ctx.file, unheld.function)
    name = unheld.function.node.name.value
    ctx.report(unheld.node,
               first_line(f"`{unheld.event}` is recorded here and never waited on, synchronised or handed on: the "
                          f"work queued before the record is never joined through it, in `{name}()` [{tag}]",
                          f"`{unheld.event}` is recorded and never waited on [{tag}]"),
               confidence=Confidence.MEDIUM,
               hint=(f"wait on it where the work's results are used (`{unheld.event}.synchronize()` for the host, "
                     f"`stream.wait_event({unheld.event})` for another stream) or hand it to whoever reads them; "
                     "an event nobody holds orders nothing. This assumes a reader of that work follows the call"))


def _report_silent_join(ctx: RuleContext, silent: SilentJoin) -> None:
    """A join step that joins nothing of what it was handed (model: ``joinsteps.silent_joins``)."""
    name = silent.function.node.name.value
    tag = path_tag(ctx.project, ctx.file, silent.function)
    related: list[Location] = []
    if silent.kind == "stream-param":
        message = first_line(f"`{name}()` is a join step given `{silent.handle}` but orders nothing after it (no "
                             f"wait, no record, not handed on): the caller's reads of that work are unordered [{tag}]",
                             f"join step `{name}()` orders nothing after `{silent.handle}` [{tag}]")
        hint = f"`{_current(ctx, silent.function, tag)}.wait_stream({silent.handle})` (or wait on the event) before returning"
    elif silent.kind == "event":
        message = first_line(f"`{name}()` takes `{silent.handle}` and never waits on it (nor hands it on): the work "
                             f"it stands for is joined by nobody [{tag}]",
                             f"join step `{name}()` never waits on `{silent.handle}` [{tag}]")
        hint = f"`{silent.handle}.wait()` (or `current_stream().wait_event({silent.handle})`)"
    elif silent.kind == "facade-sync":
        message = first_line(f"`{silent.function.qualname}()` does nothing, on a class that passes the rest of the "
                             f"device API on to the device (its streams included): every join its users make "
                             f"through it orders nothing [{tag}]",
                             f"`{silent.function.qualname}()` does nothing: every caller's `{name}` is lost [{tag}]")
        hint = f"do the device's `{name}` here (the callers' consumers rely on it)"
    elif silent.kind == "taken-event":
        tested = isinstance(silent.node, (cst.If, cst.While))  # (else popped and never named again)
        how, short = ("only tests it", "only tests") if tested else ("drops it", "drops")
        message = first_line(f"`{name}()` takes `{silent.handle}` out of its events container and {how}: "
                             f"nothing waits on the work recorded into it, before this step goes on [{tag}]",
                             f"`{name}()` {short} `{silent.handle}`, never waits on it [{tag}]")
        hint = (f"`{silent.handle}.wait()` (or `current_stream().wait_event({silent.handle})`) when it is set; "
                "this assumes the work it was recorded after produces what this step goes on to use")
    elif silent.kind == "mark-event":
        recorder = silent.producer.node.name.value if silent.producer is not None else "another method"
        message = first_line(f"`{name}()` lowers `{silent.fenced}`, the mark `{recorder}()` raises with "
                             f"`{silent.handle}`, without waiting on that event (nothing else in the project "
                             f"waits on it): the recorded work is joined by nobody [{tag}]",
                             f"`{name}()` lowers `{silent.fenced}` but never waits on `{silent.handle}` [{tag}]")
        cur = _current(ctx, silent.function, tag)
        wait = f"`{cur}.wait_event({silent.handle})`" if silent.handle.startswith("self.") \
            else f"`{cur}.wait_event(...)` on the entry of `{silent.handle}` it takes over"
        hint = (f"{wait} here, before returning "
                "(this assumes the callers read the recorded work after the call)")
        if silent.work is not None:
            related.append(Location(ctx.file.path, ctx.file.span(silent.work), f"`{silent.handle}` recorded here"))
    elif silent.kind == "cleared-slot":
        message = first_line(f"`{name}()` takes the event in `{silent.handle}` and clears the slot, only testing "
                             f"`{silent.fenced}`: nothing waits on the work recorded into it before this step goes "
                             f"on [{tag}]",
                             f"`{name}()` clears `{silent.handle}` without waiting on it [{tag}]")
        hint = (f"`{_current(ctx, silent.function, tag)}.wait_event({silent.fenced})` when it is set, before "
                "clearing the slot (this assumes the recorded work produces what the step goes on to use)")
    elif silent.kind == "branch-handle":
        line = ctx.file.span(silent.work).start_line if silent.work is not None else 0
        message = first_line(f"`{name}()` joins `{silent.handle}` on the branch at line {line} but falls through to "
                             f"its end without waiting on it or handing it on: the caller's reads after this call "
                             f"are unordered on that path [{tag}]",
                             f"join step `{name}()` skips the join of `{silent.handle}` on its main path [{tag}]")
        hint = (f"join `{silent.handle}` here too, as the branch at line {line} does (this assumes the callers read "
                "the work it stands for after the call)")
        if silent.work is not None:
            related.append(Location(ctx.file.path, ctx.file.span(silent.work), f"`{silent.handle}` joined here"))
    elif silent.kind == "ticket-event":
        producer = silent.producer.node.name.value if silent.producer is not None else "its producer"
        message = first_line(f"`{name}()` is a join step handed a `{silent.fenced}` but never waits on "
                             f"`{silent.handle}`, the event `{producer}()` records after its side-stream work, and "
                             f"nothing else in the project waits on it: the caller's reads after this call are "
                             f"unordered [{tag}]",
                             f"join step `{name}()` never waits on `{silent.handle}` (recorded in "
                             f"`{producer}()`) [{tag}]")
        hint = (f"`{_current(ctx, silent.function, tag)}.wait_event({silent.handle})` here, before returning "
                "(this assumes the callers read the recorded work after the call)")
        from streamlint.model.flow.ticketjoins import record_model
        model = record_model(ctx.project, silent.work) if silent.work is not None else None
        if model is not None:
            related.append(Location(model.path, model.span(silent.work), f"`{silent.handle}` recorded here"))
    elif silent.kind == "class-event" and silent.fenced is not None:
        message = first_line(f"`{silent.handle}` is recorded on the current stream to fence `{silent.fenced}`, but "
                             f"nothing in the project waits on it: that stream is not ordered after the current "
                             f"stream's work [{tag}]",
                             f"nothing waits on `{silent.handle}`, recorded here to fence `{silent.fenced}` [{tag}]")
        hint = (f"`{silent.fenced}.wait_event({silent.handle})` right after the record, before queueing work on "
                f"`{silent.fenced}` (this assumes its work reads or overwrites what the current stream still uses)")
    elif silent.kind == "class-event":
        recorder = silent.producer.node.name.value if silent.producer is not None else "another method"
        message = first_line(f"`{name}()` is the class's join step for `{silent.handle}`, which `{recorder}()` "
                             f"records, but nothing in the project waits on that event: the recorded work is "
                             f"joined by nobody [{tag}]",
                             f"join step `{name}()`: nothing waits on `{silent.handle}` (recorded in "
                             f"`{recorder}()`) [{tag}]")
        hint = f"wait on `{silent.handle}` here (`stream.wait_event({silent.handle})`)"
        if silent.work is not None:
            related.append(Location(ctx.file.path, ctx.file.span(silent.work), f"`{silent.handle}` recorded here"))
    else:
        producer = silent.producer.node.name.value if silent.producer is not None else "another method"
        message = first_line(f"`{name}()` is the class's join step, but nothing in the project orders the current "
                             f"stream after `{silent.handle}`, on which `{producer}()` leaves work in flight [{tag}]",
                             f"join step `{name}()`: nothing joins `{silent.handle}` (`{producer}()` queues work "
                             f"there) [{tag}]")
        hint = (f"`{_current(ctx, silent.function, tag)}.wait_stream({silent.handle})` here (the caller reads that "
                "work's results)")
        if silent.work is not None:
            related.append(Location(ctx.file.path, ctx.file.span(silent.work), f"queued on `{silent.handle}` here"))
    ctx.report(silent.node, message, confidence=Confidence.MEDIUM, related=related, hint=hint)


def _report_flag_clear(ctx, clear) -> None:
    """A method clearing the pending flag its producer raised after side-stream work, joining nothing."""
    tag = path_tag(ctx.project, ctx.file, clear.method)
    name, producer = clear.method.node.name.value, clear.producer.node.name.value
    ctx.report(clear.node,
               first_line(f"`{name}()` clears `{clear.flag}`, raised by `{producer}()` after its side-stream work "
                          f"(`{clear.handle}`), without joining that work [{tag}]",
                          f"`{clear.flag}` is cleared with no join of the work it marks pending [{tag}]"),
               confidence=Confidence.MEDIUM,
               related=[Location(ctx.file.path, ctx.file.span(clear.work), "the pending work is marked here")],
               hint=(f"`{name}()` is where the class consumes the pending state: make the current stream wait for "
                     f"`{clear.handle}` there (the code running after it reads what `{producer}()` wrote)"))


def _report_stream_join(ctx, join, tag: str) -> None:
    """A join loop over the side streams an object made that leaves one out (``model/streamjoins.py``)."""
    model, store = join.evidence
    what = f"`{join.collection}`" if join.field is None else f"the `{join.field}` streams of `{join.collection}`"
    ctx.report(join.loop,
               first_line(f"this join loop leaves out the {join.dropped} element of {what}: the work issued on that "
                          f"side stream is never joined [{tag}]",
                          f"this join loop leaves out the {join.dropped} side stream of `{join.collection}` [{tag}]"),
               confidence=Confidence.MEDIUM,
               related=[Location(model.path, model.span(store), "side stream created and kept here")],
               hint=(f"`{join.collection}` holds side streams the object issues work on" if join.field is None
                     else f"the elements of `{join.collection}` each carry `{join.field}`, a side stream of their own")
               + ": wait for every one of them (what the left-out stream writes is otherwise read unordered)")


def _report_early(ctx: RuleContext, fn, early: EarlyRecord) -> None:
    """An event recorded before the work it should guard (model: ``Orderings.uncovered_records``)."""
    main = entry_stream_name(ctx.project, ctx.file, fn)
    stream = stream_label(early.stream, main)
    event = f"the event of `{early.event}`" if early.event.endswith(")") else f"`{early.event}`"
    work_line = ctx.file.span(early.work).start_line if early.work is not None else None
    at = f" (line {work_line})" if work_line is not None else ""
    if early.handed is not None:
        _report_handed_early(ctx, early, event, stream, work_line)
        return
    message = first_line(
        f"{event} is recorded on {stream} before the work it should guard{at} [{early.mode}]",
        f"{event} is recorded before the work it should guard{at} [{early.mode}]",
        f"an event is recorded before the work it should guard [{early.mode}]")
    joins = (f"`{early.thread}()`, which waits on it, runs on a thread of its own: the joins of {stream} after the "
             "record here do not order it") if early.thread is not None else "nothing else joins the work after it"
    hint = (f"a wait on {event} orders only what {stream} queued before the record, and {joins}: record the event "
            "after that work")
    confidence = None
    if early.caller_may_join:
        confidence = Confidence.MEDIUM
        hint += "; the stream is handed in: this assumes the caller does not join it after the call"
    if early.presumed_waiter:
        confidence = Confidence.MEDIUM
        hint += (f"; `{early.event}` is made outside this project (its class is another package's): this assumes "
                 f"its owner there waits on it")
    if early.guessed is not None:
        confidence = Confidence.MEDIUM
        hint += (f"; the work is a call of `{early.guessed}()` on an object of unknown class: every definition of that "
                 "name in the project queues device work")
    if early.aside is not None:
        confidence = Confidence.MEDIUM
        hint += (f"; `{early.aside}()` of the class also joins {stream}, but only after its own work there or as a "
                 f"teardown synchronising every stream: this assumes the waiters of {event} rely on it for this work")
    if early.thread is not None:
        confidence = Confidence.MEDIUM
        hint += "; this assumes the thread waits while this work runs"
    if early.release is not None:
        confidence = Confidence.MEDIUM
        hint += (f"; `{early.release}` recorded after that work is kept only with other values (a release of its "
                 f"source): this assumes the readers of what the work writes wait on {event}")
    if early.optional is not None:  # (low: no such finding was a bug on real code, bench/quality-journal.md)
        confidence = Confidence.LOW
        hint += (f"; that work runs only when `{early.optional}` (a parameter) is set, and the record runs either way: "
                 f"this assumes the waiters of {event} rely on it for that work, not only for what came before")
    if early.host_reader is not None:
        confidence = confidence or Confidence.MEDIUM  # (not above a condition already lowered to low)
        hint += (f"; `{early.host_reader}()` synchronises {event} on the host and then reads what that work copies into "
                 "page-locked memory: this assumes it runs after this call")
    related = [Location(ctx.file.path, ctx.file.span(early.work), "work the event does not cover")] \
        if early.work is not None else []
    ctx.report(early.node, message, confidence=confidence, related=related, hint=hint)


def _report_handed_early(ctx: RuleContext, early: EarlyRecord, event: str, stream: str, line: int | None) -> None:
    """An event recorded before a write of a tensor it leaves the function with (model: ``flow/handedearly.py``)."""
    at = f" at line {line}" if line is not None else ""
    what = f"`{early.handed}`" if early.handed else "a tensor"
    message = first_line(
        f"{event} is recorded on {stream} before the write of {what}{at} that it is handed out with "
        f"[{early.mode}]",
        f"{event} is recorded before the write of {what}{at} that it is handed out with [{early.mode}]",
        f"an event is recorded before the work it should guard [{early.mode}]")
    hint = (f"whoever waits on {event} reads {what} with it, but the wait orders only what {stream} "
            "queued before the record: record the event after that write")
    if early.caller_may_join:
        hint += "; the stream is handed in: the caller may also join it, but the event's waiter relies on the event"
    related = [Location(ctx.file.path, ctx.file.span(early.work), f"write of {what} the event does not cover")] \
        if early.work is not None else []
    ctx.report(early.node, message, confidence=Confidence.MEDIUM, related=related, hint=hint)


def _report_unwaited_entry(ctx: RuleContext, entry: UnwaitedEntry) -> None:
    """A method hands out tensors of a container entry another method copied on a side stream, without
    waiting on the event stored with them (model: ``flow/entryevents.py``)."""
    tag = path_tag(ctx.project, ctx.file, entry.method)
    name, producer = entry.method.node.name.value, entry.producer.node.name.value
    message = first_line(
        f"`{name}()` hands out `{entry.handed}`, written on `{entry.stream}` by `{producer}()`, with no wait on "
        f"`{entry.event}` (recorded there after that work) [{tag}]",
        f"`{entry.handed}` is handed out with no wait on `{entry.event}` [{tag}]")
    hint = (f"`torch.cuda.current_stream().wait_event({entry.event})` (or the consumer stream's) before returning it; "
            f"this assumes `{producer}()` ran before this call and the caller reads it on its current stream, as the "
            "class's protocol (the event stored with the entry) implies")
    related = [Location(ctx.file.path, ctx.file.span(entry.record), f"`{entry.event.split('.')[-1]}` recorded here")]
    ctx.report(entry.node, message, confidence=Confidence.MEDIUM, related=related, hint=hint)


def _report_unwaited_handle(ctx: RuleContext, handle: UnwaitedHandle) -> None:
    """A method reads a tensor field of the record a producer method returned (copied there on a side stream,
    its event recorded after the copy) with no wait on that event (model: ``flow/returnedhandles.py``)."""
    tag = path_tag(ctx.project, ctx.file, handle.method)
    producer = handle.producer.node.name.value
    message = first_line(
        f"`{handle.read}` is read with no wait on `{handle.event}`: `{producer}()` copies it on `{handle.stream}` "
        f"and records that event after the copy [{tag}]",
        f"`{handle.read}` is read with no wait on `{handle.event}` [{tag}]")
    hint = (f"`torch.cuda.current_stream().wait_event({handle.event})` (or the reading stream's) before the first "
            f"read; this assumes the read runs on the current stream, and ties `{handle.read.split('.')[0]}` to "
            f"`{producer}()` by the call that returned it")
    related = [Location(ctx.file.path, ctx.file.span(handle.record), f"`{handle.event.split('.')[-1]}` recorded "
                        f"here by `{producer}()`")]
    ctx.report(handle.node, message, confidence=Confidence.MEDIUM, related=related, hint=hint)


def _report_unwaited_element(ctx: RuleContext, element: UnwaitedElement) -> None:
    """A method hands out a side-stream product taken from a container field and drops, unwaited, the event
    taken with it (model: ``flow/elementevents.py``)."""
    tag = path_tag(ctx.project, ctx.file, element.method)
    name, producer = element.method.node.name.value, element.producer.node.name.value
    verb, short = ("hands out", "handed out") if element.handed_out else ("reads", "read")
    message = first_line(
        f"`{name}()` {verb} `{element.handed}` (taken from `{element.data}`, written on `{element.stream}` by "
        f"`{producer}()`) with no wait on `{element.event}`, the event taken from `{element.events}` with it [{tag}]",
        f"`{element.handed}` is {short} with no wait on `{element.event}` [{tag}]")
    hint = (f"`{element.event}.wait()` (or `torch.cuda.current_stream().wait_event({element.event})`) before "
            f"{'handing it out' if element.handed_out else 'reading it'}; this assumes `{producer}()` stored it first "
            "and the caller reads it on its current stream, as the event stored with it implies")
    related = [Location(ctx.file.path, ctx.file.span(element.record), f"`{element.event}` recorded here")]
    ctx.report(element.node, message, confidence=Confidence.MEDIUM, related=related, hint=hint)


def _report_early_element(ctx: RuleContext, element: UnwaitedElement) -> None:
    """An event stored as an element of a container field is recorded before the copy of the element stored
    with it, which a sibling method hands out after waiting on that event (model: ``flow/elementevents.py``)."""
    tag = path_tag(ctx.project, ctx.file, element.method)
    name, producer = element.method.node.name.value, element.producer.node.name.value
    message = first_line(
        f"`{element.event}` is recorded on `{element.stream}` before the copy of `{element.handed}` it is stored "
        f"with (`{element.data}`), which `{name}()` takes after waiting on it [{tag}]",
        f"the event stored with `{element.handed}` is recorded before its copy on `{element.stream}` [{tag}]")
    hint = (f"record the event after the copy in `{producer}()`: a wait on it orders only what `{element.stream}` "
            "queued before the record")
    related = [Location(ctx.file.path, ctx.file.span(element.node), f"`{element.handed}` used here after the wait")]
    ctx.report(element.record, message, confidence=Confidence.MEDIUM, related=related, hint=hint)


def _report_host_read(ctx: RuleContext, fn, read: HostRead) -> None:
    """The host reads a host tensor an asynchronous device-to-host copy still fills (model: ``HostReads``), or
    signals another thread that side-stream work is done while it still runs (model: ``HostSyncs``)."""
    main = entry_stream_name(ctx.project, ctx.file, fn)
    stream = stream_label(read.stream, main)
    if read.kind == "signal":
        _report_host_signal(ctx, read, main, stream)
        return
    if read.kind == "dropped":
        _report_dropped_path(ctx, fn, read, main, stream)
        return
    if read.kind == "engine":
        _report_engine_send(ctx, read, main, stream)
        return
    if read.kind == "returned":
        _report_returned_pending(ctx, read, main, stream)
        return
    if read.kind == "exit":
        _report_pending_exit(ctx, read, main, stream)
        return
    at = _copy_at(ctx, read)
    message = first_line(
        f"`{read.name}` is read on the host ({read.consumer}) while its non-blocking copy from the device{at} "
        f"may still be running on {stream} [{read.mode}]",
        f"`{read.name}` is read on the host before its non-blocking device-to-host copy{at} is synchronised "
        f"[{read.mode}]",
        f"a host tensor is read before its non-blocking device-to-host copy is synchronised [{read.mode}]")
    sync = _sync_call(ctx, read, main, stream)
    hint = (f"a non-blocking copy to host memory returns before the data arrives: call {sync} (or synchronize an "
            f"event recorded after the copy) before the host reads `{read.name}`")
    related = _copy_related(ctx, read, "non-blocking copy queued here")
    confidence = Confidence.LOW if read.hedged else None if read.placed else Confidence.MEDIUM
    ctx.report(read.node, message, confidence=confidence, related=related, hint=hint)


def _unsure_between(race, main):
    """What the flow saw between the two accesses that it cannot read, each as (the assumption the finding states,
    whether it makes the finding low rather than medium) (flow/unseenmethods.py, elementaliases.py, siblingevents.py,
    discardedreads.py)."""
    if race.unseen_method is not None:
        yield (f"; `self.{race.unseen_method}()`, called in between, is defined by no class of the project (the class "
               "extends another package's class, or is patched onto one): this assumes it orders neither stream", True)
    if race.element is not None:  # (medium: the corpus has a bug in this class as well, bench/quality-journal.md)
        yield (f"; {stream_label(race.dst, main)} waited, after that, on work of `{race.element}`, an element of the "
               f"same stream collection: this assumes it is not {stream_label(race.src, main)} itself", False)
    if race.sibling is not None:
        yield (f"; `{race.sibling}`, kept on the same object, is waited in between, and this function does not record "
               "it: this assumes it was not recorded after the earlier use (where the object went meanwhile)", True)
    if race.labelled is not None:
        yield (f"; what it reads only reaches `{race.labelled}`, which the function reads only inside f-strings (a "
               "label, a log line): this assumes that text is meant to show the finished value", True)


def _judge(ctx: RuleContext, race: Race, fn, flow: FunctionFlow, main: str | None, use_line: int,
           producer_line: int | None) -> tuple[Confidence | None, str]:
    """How sure the finding of ``race`` is (None: the rule's own, high) and its hint: where the wait goes, and
    what the finding assumes."""
    confidence = None
    hint = _hint(race, main, producer_line, use_line, device_module(ctx.project, ctx.file, fn, race.mode))
    if race.task:
        confidence = Confidence.MEDIUM
        hint = (f"make {stream_label(race.dst, main)} wait, before the group begins, on the event the updater "
                "records after `graph_task_update_end` (`event = torch.npu.ExternalEvent()`, "
                "`event.wait(stream)`, `event.reset(stream)`, kept with the handle): without it the replay "
                "may run the task on stale or half-updated parameters; this assumes the kept handle is "
                "updated before replays (the project calls `graph_task_update_begin`)")
    elif race.body:  # (no `with` of the context manager seen: the with-body's reads rest on unseen callers)
        confidence = Confidence.LOW if race.held == "unseen" else Confidence.MEDIUM
        dev = device_module(ctx.project, ctx.file, fn, race.mode)
        hint = (f"fork before the yield: `{stream_expr(race.dst, main, dev) or 'side'}.wait_stream("
                f"{stream_expr(race.src, main, dev) or 'current'})` before the stream scope (or wait "
                "on an event recorded on the current stream); this assumes the with-body reads tensors "
                "the caller produced on its current stream")
    elif race.replay:
        confidence = Confidence.MEDIUM
        hint += "; this assumes the replayed graph reads it (one of its static inputs)"
    elif race.argument:
        confidence = Confidence.MEDIUM
        hint += "; this assumes the caller produced it on its current stream shortly before the call"
    elif race.held:
        confidence = Confidence.LOW if race.held == "unseen" else Confidence.MEDIUM
        hint += ("; it outlives the call and nothing else in the project joins that stream: this assumes "
                 "the caller reads it on its current stream after the call")
    elif race.escape:
        confidence = Confidence.MEDIUM
        hint += "; it is handed back to the caller here: this assumes the caller uses it on its current stream"
        if race.flag is not None:  # (flow/flagjoins.py: unjoined only at the caller's request)
            confidence = Confidence.LOW
            hint += (f"; the function joins before this return unless the caller's `{race.flag}` turns it off: "
                     "this assumes a caller that does reads the result before its own join")
        elif returned_handle_waits(ctx.project, ctx.file, fn, race.node, race.name) == "maybe":
            confidence = Confidence.LOW
            hint += (f"; every caller seen hands `{race.name}` to a helper that waits on it on some of its paths: "
                     "this assumes a path where it does not")
    elif race.caller_stream is not None:
        confidence = Confidence.MEDIUM
        hint += (f"; `{race.caller_stream}` is a parameter: this assumes the caller passes a stream other "
                 "than its current one")
    elif race.release is not None:
        releaser, field, mentioned = race.release
        confidence = Confidence.MEDIUM if mentioned else Confidence.LOW
        hint = (f"wait on `{field}` before line {use_line} (`{stream_expr(race.dst, main, None) or 'side'}.wait_stream("
                f"{field})`): `{releaser}()` recorded this buffer on the stream that last used it and stored that stream "
                f"in `{field}`; overwriting the buffer on {stream_label(race.dst, main)} first must wait for it"
                + ("" if mentioned else "; this assumes the object was released by that method before this call"))
    elif race.protocol is not None and race.unproven and race.unproven == fn.node.name.value:
        confidence = Confidence.MEDIUM  # (flow/unproven.next_call_order: the method leaves it pending itself)
        hint += (f"; it is written in `{race.protocol}()` of {_owner(race)}, which this method runs itself on "
                 f"{stream_label(race.src, main)}, leaving it there with no join at its exit: each call "
                 "reads what the call before it left queued (this assumes the caller does not join that stream "
                 "between the calls)")
    elif race.protocol is not None and race.unproven:
        confidence = Confidence.MEDIUM
        hint += (f"; it is written in `{race.protocol}()` of {_owner(race)}, which leaves it on "
                 f"{stream_label(race.src, main)} with no join, and `{race.unproven}()` runs `{race.protocol}()` "
                 "before this method with no join in between")
    elif race.protocol is not None and race.unproven is not None:
        confidence = Confidence.LOW
        hint += (f"; it is written in `{race.protocol}()` of {_owner(race)}, which leaves it on "
                 f"{stream_label(race.src, main)} with no join: this assumes `{race.protocol}()` ran before "
                 "this method and that the caller does not join that stream in between (nothing in the class "
                 "does)")
    elif race.protocol is not None:
        confidence = Confidence.MEDIUM
        hint += (f"; it is written in `{race.protocol}()` of {_owner(race)}, which leaves it on "
                 f"{stream_label(race.src, main)} for a later reader: this assumes `{race.protocol}()` "
                 "ran before this method, as the class's protocol (an event recorded after the write, a "
                 "join in its other readers) implies")
    elif race.step is not None and race.step.startswith(FOREIGN):
        writer = race.step[len(FOREIGN):].removesuffix(GUESSED)
        confidence = Confidence.LOW if race.step.endswith(GUESSED) else Confidence.MEDIUM
        hint += (f"; `{race.name}` is not long-lived: `{writer}()` of the object holding it rewrites it every step "
                 "(on its caller's current stream, this assumes"
                 + (", though no call of it is seen" if race.step.endswith(GUESSED) else "")
                 + "): order this stream after that write")
    elif race.step is not None and race.step.startswith(HANDED):
        confidence = Confidence.MEDIUM
        hint += (f"; `{race.name}` is not long-lived: the object holds the tensor its constructor was handed, "
                 f"and only step code builds it (`{race.step[len(HANDED):]}()`, on its current stream, this "
                 "assumes): order this stream after the caller's producer")
    elif race.step is not None:
        confidence = Confidence.MEDIUM
        hint += (f"; `{race.name}` is not long-lived: `{race.step}()` of the class rewrites it every step "
                 "(on the caller's current stream, this assumes): order this stream after that write")
    elif race.handshake:
        confidence = Confidence.MEDIUM
        hint += ("; the host waits for another thread in between (a threading handshake): this assumes "
                 "that thread does not order the streams before it signals")
    unsure = False  # (low, whatever comes after: no such finding was a bug on real code, bench/quality-journal.md)
    for assumption, low in _unsure_between(race, main):  # the first condition making a sure race unsure names itself
        if confidence in (None, Confidence.HIGH):
            confidence, unsure = (Confidence.LOW, True) if low else (Confidence.MEDIUM, False)
            hint += assumption
    if race.entry is not None:
        confidence = Confidence.MEDIUM
        if race.entry[2] is not None:
            hint = f"wait on `{race.entry[2]}` (the event the callers record after writing it) before line {use_line}"
        hint += ("; its producer is in the caller: this assumes the callers shown (every call site in the "
                 "project hands it so)")
    if race.unknown:
        confidence = Confidence.MEDIUM if confidence in (None, Confidence.HIGH) else confidence
        hint += ("; it was made by a call whose result's type is not known (collected in a side-stream scope): "
                 "this assumes the call hands back device data made on that stream")
    if race.opaque:  # (flow/nativewrites.py, flow/opaqueresults.py)
        cap = Confidence.LOW if race.opaque == "low" else Confidence.MEDIUM
        confidence = cap if confidence in (None, Confidence.HIGH) or cap is Confidence.LOW else confidence
        hint += ("; the work on that stream is a call of code not seen here (its device work is read from its name "
                 "and what it is handed): this assumes it writes device data there")
    if race.helper_guess and race.helper_built and not race.argument:
        confidence = Confidence.LOW  # (flow/unseenbuilds.py)
        hint += (f"; `{race.name}` is the result of `{race.helper_guess}()`, whose code makes no device tensor: it "
                 "assembles what it hands back from what several calls of code not seen give (objects a store hands out "
                 "for keys an index made); this assumes they are device data made on the current stream at this call")
    elif race.helper_guess and not race.argument and confidence in (None, Confidence.HIGH):
        confidence = Confidence.MEDIUM
        hint += (f"; `{race.name}` is the result of `{race.helper_guess}()`, whose code shows no device tensor it makes "
                 "(it hands back what code not seen here gives): this assumes it is device data made on the current stream")
    if race.guessed and race.argument:  # (not a race with the function's own write: `kv.mul_(...)`)
        confidence = Confidence.MEDIUM if confidence in (None, Confidence.HIGH) else confidence
        hint += (f"; `{race.guessed}` is annotated with no tensor type: this assumes its use here (one only a torch tensor has) "
                 "means device memory")
    if race.dispatched and race.argument:  # (flow/dispatchedargs.py)
        confidence = Confidence.MEDIUM if confidence in (None, Confidence.HIGH) else confidence
        hint += (f"; `{race.name}` is forwarded to a callable handed in with it: this assumes the callers hand device "
                 "tensors made on their current stream (a call site shown hands one)")
    if race.foreign and race.argument:
        confidence = Confidence.LOW
        hint += (f"; `{race.foreign}` is used here only as the receiver of methods no tensor has: this assumes it is "
                 "device memory (not a copy engine, a stream pool or another host object)")
    if race.batch_guard is not None and not race.batch_guard[2] and confidence in (None, Confidence.HIGH):
        confidence = Confidence.MEDIUM
        hint += (f"; the producer and this use each run under a different test of `{race.batch_guard[0]}`: this "
                 "assumes both can hold at once (flow/batchguards.py)")
    if race.host_handed and confidence in (None, Confidence.HIGH):
        confidence = Confidence.MEDIUM
        hint += (f"; `{race.name}` holds host memory and is handed to a call of code not seen here: this assumes "
                 "that call reads its data, not only its address and size (a transfer descriptor)")
    if race.host_handed and race.gated:
        confidence = Confidence.LOW
        hint += ("; an event recorded after the write goes on with what that call made, kept for its consumer to "
                 "wait: this assumes the call itself reads the data before that wait")
    if race.inlined is not None:
        confidence = Confidence.MEDIUM
        hint += ("; the access is inside the called helper, on the stream this function made current: "
                 "order that stream before the call")
    if race.batch_guard is not None and race.batch_guard[2]:
        confidence = Confidence.LOW
        hint += (f"; the producer runs only in one phase of `{race.batch_guard[0]}` (prefill / decode) and this use "
                 "only in the other: this assumes one batch can be in both (flow/phaseguards.py, flow/modesets.py)")
    if race.ambient is not None and not race.task and not race.body:
        confidence = Confidence.LOW
        other = stream_label(race.dst if race.src == MAIN else race.src, main)
        hint += (f"; {other} may be the current stream itself: a call in the project runs this code on it, and its "
                 "other calls are not all seen to run elsewhere" if len(race.ambient) == 2 else
                 f"; {other} may be the current stream itself: every call in the project runs this code inside its "
                 f"caller's scope on `{race.ambient[2]}`, which may be that very stream: this assumes they differ")
    chosen = chosen_stream(fn, race) if not race.task and not race.body else None
    handed = race.handed_wait is not None and not handed_elsewhere(
        ctx.project, ctx.file, fn, race.mode, race.handed_wait, race.escape)  # (a caller read hands another: real)
    if handed and race.argument:
        confidence = Confidence.LOW
        hint += (f"; {stream_label(race.dst, main)} waits on `{race.handed_wait}`, a stream the caller hands in: "
                 "this assumes that is not the stream the caller produced it on")
    elif handed and race.escape:
        confidence = Confidence.LOW
        hint += (f"; `{race.handed_wait}`, a stream the caller hands in, waits on {stream_label(race.src, main)} "
                 "before the hand-back: this assumes that is not the caller's current stream")
    elif chosen is not None and chosen_upstream(ctx.project, ctx.file, fn, chosen, race.mode) \
            and not field_is_side(ctx.project, ctx.file, fn, race.dst if race.src == MAIN else race.src):
        # (its class builds it: paramfields)
        confidence = Confidence.LOW
        hint += (f"; its stream comes from `{chosen}`, which the caller chooses, and no call in the project chooses "
                 f"it (no call of `{fn.node.name.value}` is seen, or every seen one hands on a stream its own unseen "
                 "callers choose): this assumes a caller passes a stream other than its current one without "
                 "ordering it first")
    elif race.caller_stream is not None and (
            passed := current_at_some_site(ctx.project, ctx.file, fn, race.mode, race.caller_stream)) is not None:
        confidence = Confidence.LOW  # (flow/entryctx.py: a seen caller passes its current stream, none another)
        hint += (f"; the call at {passed[0].path.rsplit('/', 1)[-1]}:{passed[0].span(passed[1]).start_line} passes "
                 f"its current stream as `{race.caller_stream}`, and no call read passes another: this assumes a "
                 "caller not read does")
    elif chosen is not None and confidence is not Confidence.LOW \
            and unread_choice(ctx.project, ctx.file, fn, chosen, race.mode, race.caller_stream or (
                race.dst if race.src == MAIN else race.src)) == "unread" \
            and not field_is_side(ctx.project, ctx.file, fn, race.dst if race.src == MAIN else race.src):
        confidence = Confidence.LOW  # (flow/callerstreams.py: no call read passes another stream)
        hint += (f"; its stream comes from `{chosen}`, which the caller chooses, and no call of "
                 f"`{fn.node.name.value}` the analysis reads passes a stream other than its current one: this "
                 "assumes a caller not read does")
    if race.argument and confidence is not Confidence.LOW:
        synced, seen = synced_share(ctx.project, ctx.file, fn, race.name)
        if seen >= 2 and 2 * synced >= seen:  # (flow/syncedresults.py: synchronised inputs are its contract)
            confidence = Confidence.LOW
            hint += (f"; {synced} of the {seen} calls of `{fn.node.name.value}` seen hand in a result their host "
                     "synchronised: this assumes one of the others hands in a tensor its current stream still "
                     "produces")
    if race.kind == "alloc" and race.src == MAIN and confidence is not Confidence.LOW \
            and worker_thread_only(ctx.project, ctx.file, fn):  # (flow/hostargs.py)
        confidence = Confidence.LOW
        hint += (f"; `{fn.node.name.value}` runs only on worker threads (handed to a thread, never called on the "
                 "spawning thread's stream): a block this allocation may reuse is one other threads' work freed on "
                 "that stream, an ordering (the host handshakes before the threads start) not followed here: this "
                 "assumes such work is still running when the side stream first writes it")
    optional = next((k for k in (race.dst, race.src)
                     if uncorrelated_optional(ctx.project, ctx.file, fn, k)), None)
    if optional is not None and confidence in (None, Confidence.HIGH):
        confidence = Confidence.MEDIUM
        hint += (f"; `{optional}` may be None (then its scope switches nothing) and its orderings here are "
                 "guarded by a test not known to match: this assumes it exists on this path")
    duck = duck_calls(ctx.project, ctx.file, fn) or guessed_calls(ctx.project, ctx.file, fn)
    if duck is not None:
        confidence = confidence if confidence is Confidence.LOW else Confidence.MEDIUM
        hint += (f"; this assumes `{duck}()` is the project's only method of that name (its receiver has "
                 "no annotation)")
    declared = declared_calls(ctx.project, ctx.file, fn) if confidence in (None, Confidence.HIGH) else None
    if declared is not None:
        confidence = Confidence.MEDIUM
        hint += (f"; this assumes `{declared[0]}` is the `{declared[2]}` its annotation states when "
                 f"`{declared[0]}.{declared[1]}()` runs (no binding of it is seen here)")
    hint += _also_clears(ctx, race, flow, use_line, main)
    return (Confidence.LOW if unsure else confidence), hint


def _sync_call(ctx: RuleContext, read: HostRead, main: str | None, stream: str) -> str:
    """The host synchronisation of the read's stream, spelt as the code names it when it can be."""
    obj = stream_expr(read.stream, main, device_module(ctx.project, ctx.file, function_at(ctx.file, read.node),
                                                       read.mode))
    return f"`{obj}.synchronize()`" if obj is not None else f"a synchronisation of {stream}"


def _copy_at(ctx: RuleContext, read: HostRead) -> str:
    """`` (line N)``: where the copy or side-stream work the read depends on was queued, when known."""
    return f" (line {ctx.file.span(read.copy).start_line})" if read.copy is not None else ""


def _copy_related(ctx: RuleContext, read: HostRead, label: str) -> list[Location]:
    return [Location(ctx.file.path, ctx.file.span(read.copy), label)] if read.copy is not None else []


def _report_host_signal(ctx: RuleContext, read: HostRead, main: str | None, stream: str) -> None:
    at = _copy_at(ctx, read)
    message = first_line(
        f"`{read.name}{read.consumer}` signals another thread while the work queued on {stream}{at} may still be "
        f"running: nothing synchronises it first [{read.mode}]",
        f"a completion signal is sent while side-stream work{at} may still be running [{read.mode}]")
    sync = _sync_call(ctx, read, main, stream)
    hint = (f"the receiver takes the signal as the work being done (reads the copies' results, frees or reuses "
            f"their sources): call {sync} before it, or send an event recorded after the work for the receiver "
            "to synchronise; this assumes the receiver acts on what the work produces")
    related = _copy_related(ctx, read, "side-stream work queued here")
    ctx.report(read.node, message, confidence=Confidence.MEDIUM, related=related, hint=hint)


def _report_returned_pending(ctx: RuleContext, read: HostRead, main: str | None, stream: str) -> None:
    """A helper hands back host tensors its non-blocking copies still fill, and its caller reads them on the
    host with no synchronisation between (model: ``HostReads.mark_exit``)."""
    at = _copy_at(ctx, read)
    message = first_line(
        f"`{read.name}` is handed back here (returned, or left in a field) while its non-blocking copy to the "
        f"host may still be running on {stream}; the caller reads it on the host{at} [{read.mode}]",
        f"`{read.name}` is handed back before its device-to-host copy is synchronised; the caller reads it{at} "
        f"[{read.mode}]",
        f"a pending host tensor is handed back, then read on the host by the caller{at} [{read.mode}]")
    sync = _sync_call(ctx, read, main, stream)
    hint = (f"call {sync} (or synchronize an event recorded after the copies) before returning, or return an "
            "event for the caller to synchronise before it reads")
    related = _copy_related(ctx, read, "read on the host here")
    ctx.report(read.node, message, confidence=Confidence.MEDIUM, related=related, hint=hint)


def _report_pending_exit(ctx: RuleContext, read: HostRead, main: str | None, stream: str) -> None:
    """The function hands out page-locked host memory its non-blocking copy may still be filling (returned,
    or left in a field), with no synchronisation and no event for the holder (model: ``HostReads.pending_exit``)."""
    at = _copy_at(ctx, read)
    how, _, reader = read.consumer.partition(":")
    how = "returned" if how == "returned" else "left in a field of the object"
    who = f"`{reader}` reads it on the host with no synchronisation" if reader else \
        "whoever reads it on the host next may read bytes not written yet"
    message = first_line(
        f"`{read.name}` is {how} while its non-blocking copy into pinned host memory{at} may still be running on "
        f"{stream}; {who} [{read.mode}]",
        f"`{read.name}` leaves the function ({how}) before its non-blocking copy{at} is synchronised [{read.mode}]",
        f"pinned host memory leaves the function before its non-blocking copy is synchronised [{read.mode}]")
    sync = _sync_call(ctx, read, main, stream)
    hint = (f"call {sync} before it leaves the function, or record an event after the copy and hand it over for "
            "the reader to synchronise")
    related = _copy_related(ctx, read, "non-blocking copy queued here")
    confidence = Confidence.LOW if read.hedged else Confidence.HIGH if reader and read.placed else Confidence.MEDIUM
    ctx.report(read.node, message, confidence=confidence, related=related, hint=hint)


def _report_engine_send(ctx: RuleContext, read: HostRead, main: str | None, stream: str) -> None:
    """A transfer engine reads device memory outside every stream (model: ``flow/xfer.py``)."""
    if read.copy is not None:
        start = ctx.file.span(read.copy).start_line
        message = first_line(
            f"`{read.name}()` hands memory to a transfer engine ({read.consumer}) while the work queued on {stream} "
            f"(line {start}) may still be running: the engine reads outside every stream and nothing synchronises "
            f"it first [{read.mode}]",
            f"a transfer engine send reads memory while side-stream work (line {start}) may still be running "
            f"[{read.mode}]")
        related = [Location(ctx.file.path, ctx.file.span(read.copy), "device work queued here")]
    else:
        message = first_line(
            f"`{read.name}()` hands device memory to a transfer engine ({read.consumer}) with no host "
            f"synchronisation before it on this path: device work queued earlier on {stream} (the writes of "
            f"what it sends) may still be running [{read.mode}]",
            f"a transfer engine send with no host synchronisation before it on this path [{read.mode}]")
        related = []
    sync = _sync_call(ctx, read, main, stream)
    hint = (f"a transfer engine reads the addresses it is handed by DMA/RDMA, not in stream order: call {sync} (or "
            "synchronize an event recorded after the writes) before the send; this assumes the sent memory is "
            "written by that device work")
    ctx.report(read.node, message, confidence=Confidence.MEDIUM, related=related, hint=hint)


def _report_dropped_path(ctx: RuleContext, fn, read: HostRead, main: str | None, stream: str) -> None:
    message = first_line(
        f"the event `{read.name}` recorded here after the work on {stream} is dropped on a path to the function's "
        f"end (not waited, synchronised or handed on there): that work is never joined [{read.mode}]",
        f"an event recorded after side-stream work is dropped on a path: the work is never joined [{read.mode}]")
    hint = (f"the other paths of the function use `{read.name}` as the join handle of this work: on this path too, "
            f"synchronise it (`{read.name}.synchronize()`), make the consumer's stream wait on it, or hand it on; "
            "this assumes the function's caller acts on the work being done")
    confidence = Confidence.MEDIUM
    chosen = chosen_by_caller(fn, read.stream)
    if chosen is not None and chosen_upstream(ctx.project, ctx.file, fn, chosen, read.mode):
        confidence = Confidence.LOW  # (the caller that chose the stream may join it: none is seen)
        hint += (f"; the work runs on a stream that comes from `{chosen}`, which the caller chooses, and no call of "
                 f"`{fn.node.name.value}` is seen in the project: this assumes that caller does not join it")
    related = _copy_related(ctx, read, "side-stream work it covers")
    ctx.report(read.node, message, confidence=confidence, related=related, hint=hint)


def _listed(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _message(race: Race, names: list[str], main: str | None) -> str:
    """The first line: what races with what, on which streams, and the execution path tag."""
    src, dst = stream_label(race.src, main), stream_label(race.dst, main)
    listed = _listed(names)
    plural = len(names) > 1
    be, tag = "are" if plural else "is", f" [{race.mode}]"
    if race.kind == "read":
        if race.task:
            candidates = [f"the task group captured on {dst} is updated on another stream before replays (`{race.name}` "
                          f"is kept) but {dst} waits on no event before it{tag}",
                          f"the task group captured on {dst} is updated on another stream but waits on no event{tag}"]
        elif race.body:
            candidates = [f"the caller's with-body runs on {dst} (yielded inside the stream scope) with no wait "
                          f"on the caller's stream{tag}",
                          f"the caller's with-body runs on {dst} with no wait on the caller's stream{tag}"]
        elif race.replay:
            candidates = [f"{listed} {be} written on {src} and the graph replayed on {dst} may read "
                          f"{'them' if plural else 'it'} with no wait{tag}",
                          f"the graph replayed on {dst} may read {listed} with no wait after the write{tag}"]
        elif race.held:
            candidates = [f"{listed} {be} written on {src} and left to the caller with no join{tag}",
                          f"{listed} {be} left to the caller with no join after {'their' if plural else 'its'} "
                          f"write on {src}{tag}"]
        elif getattr(race, "escape", False):
            candidates = [f"{listed} {be} produced on {src} and handed back to the caller with no join{tag}",
                          f"{listed} {be} handed back to the caller with no join after {'their' if plural else 'its'} "
                          f"producer{tag}"]
        elif race.argument:
            candidates = [f"argument{'s' if plural else ''} {listed} {be} used on {dst} with no wait on the caller's "
                          f"stream{tag}"]
        elif race.process:
            candidates = [f"{listed} {be} produced on {src} and handed to another process ({race.process}) with no "
                          f"join{tag}",
                          f"{listed} {be} handed to another process with no join after {'their' if plural else 'its'} "
                          f"producer{tag}"]
        else:
            candidates = [f"{listed} {be} produced on {src} and used on {dst} with no wait{tag}",
                          f"{listed} {be} used on {dst} with no wait after {'their' if plural else 'its'} "
                          f"producer{tag}"]
    elif race.kind == "alloc":
        candidates = [f"{listed} {be} allocated on {src} and first used on {dst} with no wait: the block may still "
                      f"be in use by earlier work of {src}{tag}",
                      f"{listed} {be} allocated on {src} and first used on {dst} with no wait{tag}"]
    else:
        verb = "read" if race.kind == "write-after-read" else "write"
        candidates = [f"{listed} {be} written on {dst} while {src} may still {verb} {'them' if plural else 'it'}{tag}",
                      f"{listed} {be} written on {dst} while another stream may still {verb} "
                      f"{'them' if plural else 'it'}{tag}"]
    if plural and all(len(c) > FIRST_LINE for c in candidates):
        return _message(race, names[:1], main)
    return first_line(*candidates)


def _hint(race: Race, main: str | None, producer_line: int | None, use_line: int, dev: str) -> str:
    """Where the wait goes: on which stream, for which stream, between which lines."""
    src, dst = stream_label(race.src, main), stream_label(race.dst, main)
    after = f"after line {producer_line} and " if producer_line is not None else ""
    where = f"{after}before line {use_line}" if producer_line is None or producer_line < use_line \
        else f"after line {producer_line}"
    if race.mode == "reduce-overhead":
        after_producer = f" after line {producer_line}" if producer_line is not None else ""
        return (f"record a tagged event on {src}{after_producer} (`npu_tagged_event_record`) and "
                f"`npu_tagged_event_wait` it on {dst} before line {use_line}")
    if race.mode == "ge":
        return f"order them with `npu_wait_tensor` / `torchair.ops.wait` on {dst} {where}"
    src_obj, dst_obj = stream_expr(race.src, main, dev), stream_expr(race.dst, main, dev)
    if src_obj is None or dst_obj is None:
        return f"wait on {dst} for an event recorded on {src} {where}"
    return f"add `{dst_obj}.wait_stream({src_obj})` {where} (or wait on an event recorded on {src} there)"


def _owner(race: Race) -> str:
    """Whose method the protocol's producer is: the reader's class, or the class of an object it holds by an
    annotated name (``sched.prefetch``: flow/typedholders.py)."""
    holder = race.protocol.rpartition(".")[0] if race.protocol else ""
    if holder[:1].isupper():  # (a record's field another class's method wrote: flow/recordwriters.py)
        return f"class `{holder}`, which stores it on the record"
    return f"`{holder}`'s class" if holder else "the same class"


def _related(ctx: RuleContext, race: Race) -> list[Location]:
    inner = [Location(race.inlined[0].path, race.inlined[0].span(race.inlined[1]), "accessed here, in the helper")] \
        if race.inlined is not None else []
    if race.entry is not None:  # the producer is the callers' (flow/entryctx.py)
        model, call = race.entry[:2]
        inner.append(Location(model.path, model.span(call), "called here, with it written on that stream unjoined"))
    if race.ambient is not None:  # a caller runs it on the other stream itself (flow/ambient.py)
        model, call = race.ambient[:2]
        inner.append(Location(model.path, model.span(call), "called here with that stream current" if len(
            race.ambient) == 2 else f"called here inside a scope on `{race.ambient[2]}`"))
    if race.producer is None:
        return inner
    if race.held and race.caller is not None:
        model, call = race.caller
        return [Location(ctx.file.path, ctx.file.span(race.producer), "written here"),
                Location(model.path, model.span(call), "called here: the caller goes on with no wait")]
    label = {"write-after-read": "read here", "alloc": "allocated here"}.get(race.kind, "produced here")
    if race.protocol is not None:
        label = f"produced here, in `{race.protocol}()`"
    return [Location(ctx.file.path, ctx.file.span(race.producer), label), *inner]


def _cleared(ctx: RuleContext, race: Race, flow: FunctionFlow, use_line: int) -> list:
    """The SL301 lifetime issues the join ``race`` asks for also clears: a join (``race.dst`` waits on
    ``race.src`` before this use) also protects the memory of tensors allocated on ``race.dst`` and used earlier
    on ``race.src`` that are freed after this line; a fork wait at every entry onto a side stream also protects
    side-allocated tensors read later on the current stream (SL301's entry discipline)."""
    if race.kind != "read":
        return []
    if race.src == MAIN and race.dst != MAIN and not race.dst.startswith(("tag", "<")) \
            and race.mode != "reduce-overhead":
        return [i for i in flow.lifetimes
                if i.kind == "free" and i.alloc == race.dst and i.use_stream == MAIN and i.mode != "ge" and not i.escaped
                and ctx.file.span(i.node).start_line > use_line]
    if race.argument:
        return []
    cleared = []
    for issue in flow.lifetimes:
        if issue.kind != "free" or issue.alloc != race.dst or issue.use_stream != race.src or issue.mode == "ge" \
                or issue.escaped:
            continue
        line = ctx.file.span(issue.node).start_line
        free_line = ctx.file.span(issue.free_node).start_line if issue.free_node is not None else None
        if line < use_line and (free_line is None or free_line >= use_line):
            cleared.append(issue)
    return cleared


def _also_clears(ctx: RuleContext, race: Race, flow: FunctionFlow, use_line: int, main: str | None) -> str:
    """The hint's note naming the SL301 findings the same wait clears (``_cleared``)."""
    cleared = _cleared(ctx, race, flow, use_line)
    if not cleared:
        return ""
    names = ", ".join(dict.fromkeys(f"`{i.name}` (line {ctx.file.span(i.node).start_line})" for i in cleared))
    if race.src == MAIN:
        return f"; made at every entry onto {stream_label(race.dst, main)}, the same wait also clears SL301 for {names}"
    return f"; the same wait also clears SL301 for {names}"
