"""A class protocol producer's run serving as its method's own run (issue 15: SL201's cost per file).

A method that opens a side-stream scope is run twice per mode: once on its own as a protocol producer
(:func:`~streamlint.model.flow.interp.run_producer`: what it leaves on the object, asked by the other methods'
:func:`~streamlint.model.flow.protocols.protocol_inputs`), once as itself (``dataflow.function_flow``). The
two runs differ only by what the second seeds at the entry: what every caller hands it (``seed_entry``:
nothing when :func:`~streamlint.model.flow.entryctx.entry_context` is None), the fields the class's other
producers leave pending that it reads (``seed``: nothing when its protocol inputs are empty) and the buffers
other functions released (``seed_releases``: nothing when it mentions no holder of a release fact); the flow
configuration of the native modes (``eager``, ``cuda``) is one. When all three seed nothing, the second run
is the first one again, and the producer's finished run is taken as the method's own.

A run reads memoised facts; a fact still being computed when asked (its placeholder: a question that
re-enters itself) may be answered otherwise by the time of the second run. Each such read is counted
(:mod:`~streamlint.model.flow.inflight`, for the memos a producer's run sits inside: the flows, the protocol
inputs and the class's pending fields), and a producer's run during which one happened is not kept.

Kept runs are few (one per producer method and mode, taken by the method's flow, at most :data:`KEPT` at a
time): they live with the project's derived facts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint.model.streams import derived

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

KEPT = 64


def keep(project: Project, fn: FunctionInfo, mode: str, interp: object, clean: bool) -> None:
    """Keep a producer's finished run for its method's own flow (``clean``: no placeholder read during it)."""
    kept = derived(project, "producer_runs")
    kept.pop((id(fn), mode), None)
    if not clean or mode not in ("eager", "cuda"):
        return
    if len(kept) >= KEPT:
        del kept[next(iter(kept))]
    kept[(id(fn), mode)] = interp


def take(project: Project, file: FileModel, fn: FunctionInfo, mode: str, runner) -> object | None:
    """The producer's run of ``fn`` in ``mode`` when the method's own run would be that run (see above), else
    None. Asks the facts the method's own run seeds its entry from, in the order that run asks them: its
    protocol inputs run the class's producers, ``fn`` among them when it is one."""
    if mode not in ("eager", "cuda"):
        return None
    from streamlint.model.flow.entryctx import entry_context
    from streamlint.model.flow.protocols import protocol_inputs
    from streamlint.model.flow.releasestreams import release_facts, writer_holders

    if entry_context(project, file, fn, mode) is not None:
        return None
    inputs = protocol_inputs(project, file, fn, mode, runner)
    interp = derived(project, "producer_runs").pop((id(fn), mode), None)
    if interp is None or inputs or any(writer_holders(file, fn, fact) for fact in release_facts(project, file)):
        return None
    return interp
