"""Reads of event-guarded fields that run inside a replayed graph (issue 16, [caller-protocol-wait]: capture / replay).

A method that reads a field another method fills on a side stream before recording an event (``self.ready``,
:mod:`~streamlint.model.eventguards`) needs no wait of its own when it never runs eagerly on data it did not make:
when every project call of it is either

- made inside a graph capture (``with torch.cuda.graph(self.graph):``): its kernels are recorded, not run; they run
  when the graph replays, and every replay of that graph in the class (``self.graph.replay()``) follows a wait on
  the guard's event (or a stream join, a synchronisation) in the same function, on every path to it, and nothing
  outside the class replays a graph field of that name, but a function that builds the class's objects itself and
  never runs the recorder (a warm-up replaying each fresh object's graph on the placeholders its capture wrote:
  no recorder's work is queued there to wait for); or
- made eagerly by a method that wrote the read field itself on its current stream before the call, on every path
  (a warm-up run on buffers the capture fills with placeholders): the read follows that write on one stream;

the seen code orders every read, and the read is not reported. A call through another receiver, a method that may
be called unseen, a replay with no wait before it, or an eager call on data the caller did not write keep the
finding."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import dotted
from streamlint.model.syntax import contains, dominates, local_nodes

if TYPE_CHECKING:
    from streamlint.model.eventguards import UnguardedRead
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

_WAITS = frozenset({"wait_event", "wait", "synchronize", "wait_stream"})


def _captured_graph(project: Project, model: FileModel, site) -> str | None:
    """The ``self.*`` graph of the innermost graph capture around ``site``; ``""`` outside every capture and every
    stream scope; None inside a stream scope or a capture of anything else."""
    for scope in project.enclosing_scopes(model, site.scope):
        roles = scope.roles()
        if apis.Role.GRAPH_CAPTURE in roles:
            call = scope.site.item.item
            first = call.args[0].value if isinstance(call, cst.Call) and call.args and call.args[0].keyword is None \
                else None
            text = dotted(first) if first is not None else None
            return text if text is not None and text.startswith("self.") else None
        if roles & apis.STREAM_SCOPE_ROLES:
            return None
    return ""


def _waits_before(model: FileModel, fn: FunctionInfo, event: str, node) -> bool:
    """Does ``fn`` wait on ``.event`` (or join a stream, synchronise) on every path to ``node``?"""
    return any(site.method in _WAITS and (site.method in ("wait_stream", "synchronize") or f".{event}" in
                                          model.code(site.node)) and dominates(fn.node.body, site.node, node)
               for site in fn.calls)


def _fresh_replays(fn: FunctionInfo, cls, recorder: str) -> bool:
    """Does ``fn`` build objects of ``cls`` itself (``Slot(r, n)``) and never call the guard's recorder
    (``.project()``) on anything? Then a graph it replays through another receiver is one of its fresh objects
    (or one whose recorder ran before it, which it does not redo): the warm-up of a bank of captured inputs,
    replaying each graph on the placeholders its capture wrote, queues no recorder's work to wait for."""
    built = any(isinstance(site.node.func, (cst.Name, cst.Attribute)) and (dotted(site.node.func) or "")
                .rsplit(".", 1)[-1] == cls.name for site in fn.calls)
    return built and not any(site.method == recorder or (dotted(site.node.func) or "") == recorder
                             for site in fn.calls)


def _replays_wait(project: Project, model: FileModel, cls, graph: str, event: str, recorder: str) -> bool:
    """Is every replay of the graph field ``graph`` (``self.graph.replay()``) made in the class after a wait on
    ``event``, with at least one such replay, and none through another receiver (``inputs.graph.replay()``) but in
    a function replaying objects it built itself without running ``recorder`` (:func:`_fresh_replays`)?"""
    attr = graph.rsplit(".", 1)[1]
    seen = 0
    for fn in cls.methods.values():
        for site in fn.calls:
            if site.method == "replay" and isinstance(site.node.func, cst.Attribute) \
                    and dotted(site.node.func.value) == graph:
                if not _waits_before(model, fn, event, site.node):
                    return False
                seen += 1
    if not seen:
        return False
    for path in project.paths_containing((f".{attr}.replay(".encode(),)) or ():
        other = project.file(path)
        if other is None:
            return False
        for fn in other.functions.values():
            if any(site.method == "replay" and isinstance(site.node.func, cst.Attribute)
                   and isinstance(site.node.func.value, cst.Attribute) and site.node.func.value.attr.value == attr
                   and dotted(site.node.func.value) != f"self.{attr}" for site in fn.calls) \
                    and not _fresh_replays(fn, cls, recorder):
                return False  # (the graph of an object replayed through another receiver: maybe this class's)
    return True


def _written_before(project: Project, model: FileModel, caller: FunctionInfo, site, field: str) -> bool:
    """Does ``caller`` write ``self.<field>`` with device work, outside every stream scope, on every path to the
    call ``site`` (itself outside every stream scope)?"""
    from streamlint.model.eventguards import _writes

    if _captured_graph(project, model, site) != "":
        return False
    withs = [w for w in local_nodes(caller.node.body) if isinstance(w, cst.With)]
    for stmt in local_nodes(caller.node.body):
        if isinstance(stmt, cst.SimpleStatementLine) and field in _writes(stmt, "self") \
                and not any(contains(w, stmt) for w in withs) and dominates(caller.node.body, stmt, site.node):
            return True
    return False


def replay_ordered(project: Project, file: FileModel, read: UnguardedRead) -> bool:
    """Is every project call of the reading method a captured one whose replays wait on the guard's event, or an
    eager one after the caller's own write of the field (module docstring)?"""
    from streamlint.model.flow.callers import self_call_sites
    from streamlint.model.flow.callerscopes import _unseen

    fn, guard = read.function, read.guard
    cls = file.classes.get(fn.class_name or "")
    if read.holder != "self" or cls is None or fn.params[:1] != ("self",) or _unseen(project, file, fn):
        return False
    sites = self_call_sites(project, file, fn)
    if sites is None:
        return False
    for model, site in sites:
        caller = site.function
        if model is not file:
            return False
        graph = _captured_graph(project, model, site)
        if graph is None:
            return False
        if graph and not _replays_wait(project, model, cls, graph, guard.event,
                                                guard.recorder.node.name.value):
            return False
        if not graph and not _written_before(project, model, caller, site, guard.field):
            return False
    return True


__all__ = ["replay_ordered"]
