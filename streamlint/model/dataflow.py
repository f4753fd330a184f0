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
* **list slots**: ``outs.append(y)`` / ``outs[i] = y`` then ``outs[i]`` in the same function gives ``y`` back;
  an element of a ``List[torch.Tensor]`` / ``Tuple[Tensor, Tensor]`` parameter is the caller's tensor
  (:mod:`streamlint.model.flow.slots`).
* **lifetime**: a local storage dies on ``del``, rebinding of its last name, ``untyped_storage().
  resize_(0)`` or at function end unless it escaped (returned, stored on ``self``, appended).
* **control flow**: branches fork paths (bounded), ``if`` tests are correlated by expression so
  ``if self.flag: fork ... if self.flag: join`` never yields the impossible mix; loops run twice;
  early returns end a path; ``try`` runs body/else/finally. A function past the statement budget is run
  again coarsely: a branch that mentions no ordering takes one outcome (:mod:`streamlint.model.flow.coarse`).
* **helpers**: small project functions that order streams (``self._fork()``, ``wait_for(s)``,
  ``record_event(flag, events, idx)``) are interpreted inline with their arguments bound, also methods of
  an object the class holds (``self.exchange.dispatch(x)``) or the function builds (``plan.launch(x)``);
  a function whose only stream work is in such helpers is analysed too, on their execution path
  (:mod:`streamlint.model.flow.effects`), so a helper's side-stream work, waits and results reach every
  caller, in any module.

Precision policies (prefer no finding over a guess):

* only values with evidence are tensors: ``Tensor``-annotated or tensor-used parameters, torch tensor
  ops, tensor methods, calls taking a tracked tensor, project helpers whose every return is a tensor their
  own kernels compute (:mod:`streamlint.model.flow.computed`); other parameters, getters and ``self.*``
  objects are opaque (their attribute chains still name streams and events);
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

Rules read the hazards this computes (:class:`FunctionFlow`), filtered by execution path. This module is
the entry (which functions to analyse, on which execution paths, and the cache); the interpreter is
split by concern in :mod:`streamlint.model.flow`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.captures import captured_host_outputs
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.paths import native_mode
from streamlint.model.flow.calls import wait_self_expr
from streamlint.model.flow.callerfrees import register_flow
from streamlint.model.flow.effects import calls_stream_work, inherited_modes
from streamlint.model.flow.hostreads import async_host_copy_call
from streamlint.model.flow.inflight import asked, finished, started
from streamlint.model.flow.interp import Interp, run_producer
from streamlint.model.flow.producerruns import take
from streamlint.model.flow.fieldliterals import steer_points
from streamlint.model.flow.protocols import family_consumer, protocol_inputs
from streamlint.model.flow.sidecalls import side_entry
from streamlint.model.flow.entryctx import entry_context
from streamlint.model.flow.results import EMPTY_FLOW, EarlyRecord, FunctionFlow, HostRead, Lifetime, Race, Unjoined, \
    ViewEscape
from streamlint.model.flow.values import AnalysisBudgetExceeded, flow_config
from streamlint.model.flow.threadstreams import thread_worker
from streamlint.model.flow.xfer import send_method
from streamlint.model.streams import MAIN, derived, stream_label
from streamlint.model.syntax import contains, local_nodes

if TYPE_CHECKING:
    from streamlint.model.project import Project


def _has_stream_work(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does ``fn`` do stream work itself (asked of every callee at every call site: cached per function)?"""
    memo = derived(project, "stream_work")
    found = memo.get(id(fn))
    if found is None or found[0] is not fn:
        found = memo[id(fn)] = (fn, _stream_work(project, file, fn))
    return found[1]


def _stream_work(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    for site in fn.scopes:
        roles = project.scope_use(file, site).roles()
        if roles & (apis.STREAM_SCOPE_ROLES | {Role.GRAPH_CAPTURE}):
            return True
    for site in fn.calls:
        if site.method in ("record_stream", "wait_stream", "wait_event", "record_event") \
                or _replays_host_copy(project, file, fn, site):
            return True
        if any(u.role in (Role.WAIT_TENSOR, Role.RECORD_TAGGED_STREAM, Role.TAGGED_EVENT_RECORD,
                          Role.TAGGED_EVENT_WAIT) or u.role in apis.GRAPH_TASK_ROLES
               for u in project.api_uses(file, site)):
            return True
    return _host_synced_record(file, fn) or any(async_host_copy_call(site.node, site.method)
                                                or send_method(project, file, site) for site in fn.calls) \
        or thread_worker(project, file, fn)


def _host_synced_record(file: FileModel, fn: FunctionInfo) -> bool:
    """``ev.record()`` and ``ev.synchronize()`` / ``ev.query()`` on the same receiver: the host consumes an
    event of this function (``HostReads``), with or without a side stream."""
    def receivers(methods: tuple[str, ...]) -> set[str]:
        return {file.code(s.node.func.value) for s in fn.calls
                if s.method in methods and isinstance(s.node.func, cst.Attribute) and not s.node.args}

    return bool(receivers(("record",)) & receivers(("synchronize", "query")))


def function_modes(project: Project, file: FileModel, fn: FunctionInfo) -> frozenset[str]:
    """The execution paths of a function (empty: unknown). One place to swap the path source."""
    return frozenset(project.execution_path(file, fn).modes)


def path_tag(project: Project, file: FileModel, fn: FunctionInfo) -> str:
    """The execution-path tag of a finding in ``fn`` (``ge``, ``eager``, ``cuda``, joined with ``/``): its
    paths when known; else the device its own calls name, else its module's (`cuda` for ``torch.cuda.*``
    and no ``torch.npu.*`` / ``torch_npu.*``, else `eager`)."""
    modes = function_modes(project, file, fn)
    if modes:
        return "/".join(sorted(modes))
    return native_mode(file, fn)


def function_flow(project: Project, file: FileModel, fn: FunctionInfo, *, explicit_ge_joins: bool = False) \
        -> FunctionFlow:
    """The hazards of one function on every execution path it runs on (cached per project)."""
    cache = derived(project, "flows")
    key = (file.path, fn.qualname, id(fn), explicit_ge_joins)
    if key in cache:
        asked(project, "flows", key)
        return cache[key]
    cache[key] = EMPTY_FLOW
    started(project, "flows", key)
    try:
        flow = _flow(project, file, fn, explicit_ge_joins)
    finally:
        finished(project, "flows", key)
    cache[key] = flow
    return flow


def _flow(project: Project, file: FileModel, fn: FunctionInfo, explicit_ge_joins: bool) -> FunctionFlow:
    """:func:`function_flow` once its memo holds its placeholder."""
    own_work = _has_stream_work(project, file, fn)
    modes = function_modes(project, file, fn)
    side = side_entry(project, file, fn) if not modes else None
    if side is not None and side[1]:  # every caller runs it in a native side-stream scope: their path is its path
        modes, own_work = frozenset({side[2]}), True
    if not own_work and not calls_stream_work(project, file, fn, _has_stream_work):
        # no stream work of its own: only a class protocol's pending writes it reads (protocols.py)
        modes = frozenset(m for m in (modes or {native_mode(file, fn)})
                          if protocol_inputs(project, file, fn, m, run_producer) or entry_context(project, file, fn, m, True))
        if not modes:  # (nor what every caller hands it: a side-stream write, an event, a stream: entryctx.py)
            return EMPTY_FLOW
    if not modes and own_work and family_consumer(project, file, fn, native_mode(file, fn), run_producer):
        modes = frozenset({native_mode(file, fn)})  # a join of a container field's entries: the producer's path
    if not modes and not own_work:  # only its helpers' stream work: their path is its path
        modes = inherited_modes(project, file, fn, _has_stream_work, function_modes)
    races: dict = {}
    lifetimes: dict = {}
    unjoined: dict = {}
    views: dict = {}
    early: dict = {}
    host_reads: dict = {}
    if not modes:
        return _every_path_flow(project, file, fn, explicit_ge_joins)
    for mode in sorted(modes):
        interp = take(project, file, fn, mode, run_producer)  # its producer's run, when that is its own run
        if interp is None:
            interp = _own_run(project, file, fn, mode, explicit_ge_joins)
        if interp is None:  # pathological code: report nothing rather than guess
            if mode != "ge":
                found, looped = _single_path_early_records(
                    project, file, fn, flow_config(mode, explicit_ge_joins, _entry(project, file, fn, mode)))
                early.update(found)
                races.update({k + (mode,): v for k, v in looped.items()})
            continue
        races.update({k + (mode,): v for k, v in interp.races.items()})
        if not interp.coarse:  # (a free's cover, e.g. the next step's event wait, may lie on a skipped outcome)
            lifetimes.update({k + (mode,): v for k, v in interp.lifetimes.items()})
        else:  # a plain free in the function itself, outside any loop: its cover is between use and free, on
            # the paths the coarse run forks (every outcome mentioning an ordering): kept, medium (coarse.py)
            lifetimes.update({k + (mode,): replace(v, coarse=True) for k, v in interp.lifetimes.items()
                              if _straight_free(fn, v)})
        unjoined.update({k + (mode,): v for k, v in interp.unjoined.items()})
        views.update(interp.view_escapes)
        if mode != "ge":  # native events have no place in GE graphs (SL502)
            early.update(interp.early_records)
        host_reads.update(interp.host_reads)
        if mode in ("eager", "cuda") and not interp.coarse:
            host_reads.update(_steered_reads(project, file, fn, flow_config(mode, explicit_ge_joins, False), host_reads))
    return FunctionFlow(modes, tuple(races.values()), tuple(lifetimes.values()), tuple(unjoined.values()),
                        tuple(views.values()), tuple(early.values()), tuple(host_reads.values()))


def _own_run(project: Project, file: FileModel, fn: FunctionInfo, mode: str, explicit_ge_joins: bool) -> Interp | None:
    """The run of ``fn`` in ``mode``; with too many paths the coarse run (flow/coarse.py); None when that fails too."""
    interp = Interp(project, file, fn, flow_config(mode, explicit_ge_joins, _entry(project, file, fn, mode)))
    try:
        interp.run()
    except (RecursionError, AnalysisBudgetExceeded):  # too many paths: the coarse run
        interp = Interp(project, file, fn, flow_config(mode, explicit_ge_joins, _entry(project, file, fn, mode)))
        interp.coarse = True
        try:
            interp.run()
        except (RecursionError, AnalysisBudgetExceeded):
            return None
    return interp


def _steered_reads(project: Project, file: FileModel, fn: FunctionInfo, cfg, known: dict) -> dict:
    """The host reads of pending device-to-host copies on the paths through each literal a method of the object
    ``fn`` calls stores in a field ``fn`` tests (:mod:`~streamlint.model.flow.fieldliterals`): one run per
    assignment, the inlined helper steered through it. Medium (``placed`` False): one path of the helper stands
    for the configurations that choose that literal."""
    found: dict = {}
    for point in steer_points(project, file, fn):
        interp = Interp(project, file, fn, cfg)
        interp.steer = point
        try:
            interp.run()
        except (RecursionError, AnalysisBudgetExceeded):
            continue
        found.update({k: replace(r, placed=False) for k, r in interp.host_reads.items()
                      if k not in known and k not in found and r.kind == "copy"})
    return found


def _straight_free(fn: FunctionInfo, issue: Lifetime) -> bool:
    """A lifetime of the coarse run that rests on no other step: a local freed at the return, by a ``del`` or a
    rebinding, its use and free in no loop of the function (no next iteration's join to miss)."""
    if issue.kind != "free" or issue.free not in ("function end", "del", "rebinding") or issue.escaped \
            or issue.entry is not None or issue.flag or issue.guess:
        return False
    loops = [n for n in local_nodes(fn.node) if isinstance(n, (cst.For, cst.While))]
    return not any(contains(loop, node) for loop in loops for node in (issue.node, issue.free_node) if node is not None)


def _entry(project: Project, file: FileModel, fn: FunctionInfo, mode: str) -> bool:
    """Is ``fn`` compiled itself, where that decides the flow (``flow_config``: reduce-overhead and
    npugraph_ex graphs only; asking needs every compile site of the project)?"""
    return mode in ("reduce-overhead", "npugraph_ex") and project.path_index.is_graph_entry(file, fn)


MAX_FOCUSED_RUNS = 12  # single-path runs of a function too large for the path-sensitive one


def _single_path_early_records(project: Project, file: FileModel, fn: FunctionInfo, cfg) -> tuple[dict, dict]:
    """Events recorded before the work they guard, in a function too large for the path-sensitive run: the
    function is run again on one path through each event record it writes (each branch takes the outcome
    holding that record, else one that mentions an ordering and does not return; each loop body once),
    which bounds the work by the function's length times its records. Only the early records of that run are
    kept, and only when the record and the work it misses share their innermost block (straight-line code
    needs no path correlation), while a race on a path the single run merged could be one no execution takes.
    The exception is a loop whose steps alternate streams (:mod:`~streamlint.model.flow.counters`): the run
    reads it step by step with the counter's values, so a race between two of its steps, both accesses in
    the loop, is on the path through the record (the second dict)."""
    found: dict = {}
    looped: dict = {}
    records = [site.node for site in fn.calls if site.method in ("record", "record_event")]
    for focus in records[:MAX_FOCUSED_RUNS]:
        if any(contains(early.node, focus) for early in found.values()):
            continue
        interp = Interp(project, file, fn, cfg)
        interp.single, interp.focus = True, focus
        try:
            interp.run()
        except (RecursionError, AnalysisBudgetExceeded):
            continue
        found.update({k: early for k, early in interp.early_records.items()
                      if early.work is not None and contains(_innermost_block(fn, early.node), early.work)})
        looped.update({k: race for k, race in interp.races.items()
                       if race.producer is not None and not race.argument and not race.escape
                       and any(contains(loop, race.node) and contains(loop, race.producer)
                               for loop in interp.counted_loops)})
    return found, looped


def _innermost_block(fn: FunctionInfo, node: cst.CSTNode) -> cst.CSTNode:
    """The innermost compound statement (``with`` / ``for`` / ``while`` / ``if`` / ``try``) holding ``node``:
    a single-path record and the work it misses must share it (straight-line code, no path to correlate)."""
    block: cst.CSTNode = fn.node
    for n in local_nodes(fn.node):
        if isinstance(n, (cst.With, cst.For, cst.While, cst.If, cst.Try)) and contains(n, node):
            block = n
    return block


def _native_methods(fn: FunctionInfo) -> bool:
    return any(site.method in ("wait_stream", "wait_event", "record_event") for site in fn.calls)


def _native_events(fn: FunctionInfo) -> bool:
    """Does ``fn`` make a device event object and record it (``done = torch.get_device_module(dev).Event()``,
    ``done.record()``)? Its early records are its native path's finding, as for :func:`_native_methods`."""
    made = {site.method for site in fn.calls}
    return "Event" in made and "record" in made


def _race_keys(interp: Interp, runs: list[Interp], native: bool) -> set:
    """The races of one path's run; a hand-back to the caller (``Race.escape``) is looked for on the native
    paths only (``HandOuts.unjoined_escape``: captured graphs join their outputs), so on another path it counts
    as found when a native run found it. Code ordering native stream objects does not run on the GE path: its
    GE run says nothing about races (its run still bounds the lifetimes kept)."""
    if native and interp.cfg.mode == "ge":
        return {(id(r.node), r.name) for i in runs if i is not interp for r in i.races.values()}
    keys = {(id(r.node), r.name) for r in interp.races.values()}
    if interp.cfg.mode not in ("eager", "cuda"):
        keys |= {(id(r.node), r.name) for i in runs if i.cfg.mode in ("eager", "cuda")
                 for r in i.races.values() if r.escape}
    return keys


def _lifetime_keys(interp: Interp, runs: list[Interp]) -> set:
    """The lifetimes of one path's run; a side-stream allocation handed over after a native join
    (flow/consumers.py) is looked for on the native paths only, so on another path it counts as found when a
    native run found it (as a race's hand-back does: :func:`_race_keys`)."""
    keys = {id(x.node) for x in interp.lifetimes.values()}
    if interp.cfg.mode not in ("eager", "cuda"):
        keys |= {id(x.node) for i in runs if i.cfg.mode in ("eager", "cuda")
                 for x in i.lifetimes.values() if x.kind == "handoff"}
    return keys


def _every_path_flow(project: Project, file: FileModel, fn: FunctionInfo, explicit_ge_joins: bool) -> FunctionFlow:
    """Unknown execution path: keep only the hazards found on every path the code could take. Code that
    orders streams with the native stream objects' methods (``wait_stream``, ``wait_event``,
    ``record_event``: no GE-graph API, domain.md §1.14) does not take the GE path for its races (:func:`_race_keys`);
    the races reported are its native path's run (with that path's tag)."""
    runs = []
    native = _native_methods(fn)
    first = native_mode(file, fn) if native or _native_events(fn) else None  # (after GE: the runs that find
    # hand-backs come early)
    for mode in sorted(apis.EXECUTION_PATHS, key=lambda m: (m != "ge", m != first, m not in ("eager", "cuda"))):
        interp = Interp(project, file, fn, flow_config(mode, explicit_ge_joins, _entry(project, file, fn, mode)))
        try:
            interp.run()
        except (RecursionError, AnalysisBudgetExceeded):
            return EMPTY_FLOW
        runs.append(interp)
        if (first is None or any(i.cfg.mode == first for i in runs)) and not runs[0].view_escapes and not (
                set.intersection(*(_race_keys(i, runs, native) for i in runs))
                or set.intersection(*(_lifetime_keys(i, runs) for i in runs))):
            # nothing found on every path so far: the other paths cannot add to it
            host_reads, pinned_early = _native_host_reads(project, file, fn, explicit_ge_joins, runs)
            early = _native_early_records(runs, first) + pinned_early
            return FunctionFlow(frozenset(), (), (), (), (), early, host_reads) if host_reads or early else EMPTY_FLOW
    common = set.intersection(*(_race_keys(i, runs, native) for i in runs))
    source = next((i for i in runs if native and i.cfg.mode == first), runs[0])  # (its path's tag)
    races = tuple(r for r in source.races.values() if (id(r.node), r.name) in common)
    common_l = set.intersection(*(_lifetime_keys(i, runs) for i in runs))
    lifetimes = tuple(x for x in runs[0].lifetimes.values() if id(x.node) in common_l)
    native_run = next((i for i in runs if i.cfg.mode in ("eager", "cuda")), None)  # (hand-offs: a native path's)
    lifetimes += tuple(x for x in (native_run.lifetimes.values() if native_run is not None else ())
                       if x.kind == "handoff" and id(x.node) in common_l
                       and all(id(x.node) != id(y.node) for y in lifetimes))
    views = tuple(runs[0].view_escapes.values())
    host_reads, pinned_early = _native_host_reads(project, file, fn, explicit_ge_joins, runs)
    return FunctionFlow(frozenset(), races, lifetimes, (), views, _native_early_records(runs, first) + pinned_early,
                        host_reads)


def _native_early_records(runs: list, native: str | None) -> tuple:
    """Unknown execution path: an event recorded with the native stream objects' methods before the work it
    should guard is that code's native path's finding (native events have no place in GE graphs)."""
    interp = next((i for i in runs if native is not None and i.cfg.mode == native), None)
    return tuple(interp.early_records.values()) if interp is not None else ()


def _queues_host_copy(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does ``fn`` queue a copy to host memory, or hand memory to a transfer engine (both read on the host)?"""
    return any(async_host_copy_call(site.node, site.method) or send_method(project, file, site)
               or _replays_host_copy(project, file, fn, site) for site in fn.calls)


def _replays_host_copy(project: Project, file: FileModel, fn: FunctionInfo, site) -> bool:
    """``graph.replay()`` of a graph whose captured work copies into host buffers (captures.py)."""
    return site.method == "replay" and isinstance(site.node.func, cst.Attribute) and not site.node.args \
        and bool(captured_host_outputs(project, file, fn, file.code(site.node.func.value)))


def _native_host_reads(project: Project, file: FileModel, fn: FunctionInfo, explicit_ge_joins: bool,
                       runs: list) -> tuple[tuple, tuple]:
    """Unknown execution path: the host reads of pending copies are those of the native run (a copy to
    host memory and its host read run eagerly), run here if the paths tried so far did not include it; second,
    that run's early records of the events fencing pinned fields another method reads (flow/pendingfields.py)."""
    if not _queues_host_copy(project, file, fn) and not calls_stream_work(project, file, fn, _queues_host_copy):
        return (), ()
    native = native_mode(file, fn)
    interp = next((i for i in runs if i.cfg.mode == native), None)
    if interp is None:
        interp = Interp(project, file, fn, flow_config(native, explicit_ge_joins, _entry(project, file, fn, native)))
        try:
            interp.run()
        except (RecursionError, AnalysisBudgetExceeded):
            return (), ()
    known = dict(interp.host_reads)
    early = tuple(e for e in interp.early_records.values() if e.host_reader is not None)  # (a repeat: one finding)
    return tuple(known.values()) + tuple(_steered_reads(project, file, fn, interp.cfg, known).values()), early


def file_flows(project: Project, file: FileModel, *, explicit_ge_joins: bool = False) \
        -> Iterator[tuple[FunctionInfo, FunctionFlow]]:
    for fn in file.functions.values():
        flow = function_flow(project, file, fn, explicit_ge_joins=explicit_ge_joins)
        if flow is not EMPTY_FLOW:
            yield fn, flow


register_flow(function_flow)  # (flow/callerfrees.py asks the callers' flows: no import cycle)


def lifetime_reported_at(project: Project, file: FileModel, fn: FunctionInfo, node: cst.CSTNode) -> bool:
    """Does the analysis of ``fn`` itself report an SL301 lifetime at the statement holding ``node`` (a caller
    that inlines the helper it calls and sees its own tensor die)? One finding per cause."""
    flow = function_flow(project, file, fn)
    line = file.span(node).start_line
    return any(file.span(x.node).start_line <= line <= file.span(x.node).end_line for x in flow.lifetimes
               if x.mode != "ge")


__all__ = [
    "EMPTY_FLOW",
    "EarlyRecord",
    "HostRead",
    "MAIN",
    "FunctionFlow",
    "Lifetime",
    "Race",
    "Unjoined",
    "ViewEscape",
    "file_flows",
    "function_flow",
    "function_modes",
    "lifetime_reported_at",
    "path_tag",
    "stream_label",
    "wait_self_expr",
]
