"""Records built by the function that queued their work: the builder's side-stream writes a method of the record
hands out (issue 16, [caller-consumer]).

A launcher queues work on a side stream and hands back a record of a project class built with the results and
that very stream (``return GatherWork(gathered=out, stream=side)``); a method of the record is the join point:
it makes the current stream wait for ``self.stream`` and hands ``self.gathered`` back to its caller
(:mod:`~streamlint.model.flow.recordjoins` takes such a record as the launcher's join handle). Without that wait the
method hands its caller a tensor whose write is still queued on the side stream. This module finds, per class, the
fields some returned construction fills with a tensor its builder left written on a side stream nothing joined
(the builder's run, read at its ``return``), while the construction gives that very stream to another field of the
record: the write is pending on ``self.<that field>`` whenever a method of the record runs.
:func:`~streamlint.model.flow.protocols.protocol_inputs` seeds those writes into the methods handing the field back
(the object's other ways to be joined are its: a join step, the stream reached outside, a device sync in a caller).
A construction giving the stream to no field, or to two, gives nothing (the record cannot name it).

The interpreter runs a project callee with no stream work of its own as an opaque call that only reads its
arguments; a builder filling the record's buffer through one (``range_gather(src, idx, output=buf)`` under the
side stream's scope, the callee writing its parameter in place, :func:`~streamlint.model.flow.recursion.
written_params`) leaves that buffer on the scope's stream too, unless the builder orders anything after that
stream (:func:`_callee_write`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.escapes import handed_value
from streamlint.model.flow.inflight import asked, finished, started
from streamlint.model.flow.recursion import written_params
from streamlint.model.flow.values import ordered_before
from streamlint.model.handedevents import construction_fields, constructions
from streamlint.model.streams import MAIN, derived
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.project import Project

Runner = Callable[["Project", "FileModel", FunctionInfo, str], Any]


def _returned(builder: FunctionInfo, call: cst.Call) -> bool:
    """Is ``call`` what a ``return`` of ``builder`` hands back (itself, or the one binding of the name returned)?"""
    for node in builder.returns:
        value = handed_value(node)
        if value is call:
            return True
        if isinstance(value, cst.Name) and value.value not in builder.all_params \
                and any(v is call for v in builder.name_assigns.get(value.value, ())):
            return len(builder.name_assigns[value.value]) == 1
    return False


def _orders_after(file: FileModel, builder: FunctionInfo, stream: str) -> bool:
    """Does ``builder`` order anything after ``stream`` (a wait for it, an event recorded on it, its
    ``synchronize()`` / ``query()``)? A fork (``stream.wait_stream(cur)``) is none."""
    for site in builder.calls:
        node = site.node
        args = [file.code(a.value).replace('"', "'") for a in node.args]
        receiver = file.code(node.func.value).replace('"', "'") if isinstance(node.func, cst.Attribute) else None
        if site.method in ("wait_stream", "record_event", "record") and stream in args[:1] \
                or site.method in ("synchronize", "query", "record_event") and receiver == stream:
            return True
    return False


def _callee_write(project: Project, file: FileModel, builder: FunctionInfo, name: str, streams: dict[str, str]
                  ) -> tuple[str, cst.CSTNode] | None:
    """(field, call) when ``builder`` hands the local ``name`` to a project callee that writes that parameter in
    place, inside the scope of a stream some other field of the record is given (its text in ``streams``), and
    orders nothing after that stream (see the module); else None."""
    for site in builder.calls:
        scope, stream = site.scope, None
        while scope is not None and stream is None:
            call = scope.calls[0] if len(scope.calls) == 1 else None
            text = file.code(call.args[0].value).replace('"', "'") if call is not None and call.args else None
            stream = text if text in streams.values() and project.scope_use(file, scope).roles() \
                & apis.STREAM_SCOPE_ROLES else None
            scope = scope.parent
        if stream is None or not any(isinstance(a.value, cst.Name) and a.value.value == name for a in site.node.args):
            continue
        target = project.call_target(file, site)
        if target is None:
            continue
        callee = target[0]
        params = callee.params[1:] if callee.class_name and callee.params[:1] in (("self",), ("cls",)) \
            and isinstance(site.node.func, cst.Attribute) else callee.params
        bound = bind_arguments(params + callee.kwonly, site.node, kwonly=callee.kwonly)
        if any(isinstance(e, cst.Name) and e.value == name and q in written_params(project, callee)
               for q, e in bound.items()) and not _orders_after(file, builder, stream):
            holders = [f for f, text in streams.items() if text == stream]
            return (holders[0], site.node) if len(holders) == 1 else None
    return None


def named_fields(project: Project, file: FileModel, cls: ClassInfo) -> frozenset[str]:
    """``self.<field>`` for each field some construction of ``cls`` gives a local name (the candidates: a consumer
    handing none of them back needs no builder run)."""
    return frozenset(f"self.{f}" for _, builder, call, _ in constructions(project, file, cls) if builder is not None
                     for f, v in construction_fields(project, file, cls, call).items() if isinstance(v, cst.Name))


def built_writes(project: Project, file: FileModel, cls: ClassInfo, mode: str, runner: Runner
                 ) -> list[tuple[str, str, FunctionInfo, cst.CSTNode]]:
    """(``self.<field>``, ``self.<stream field>``, builder, the write) for each field of ``cls`` some returned
    construction fills with a tensor its builder left on a side stream it hands the record too (see the module);
    a field two constructions leave on different stream fields gives nothing. Memoised per class and mode."""
    memo = derived(project, "built_writes")
    key = (id(cls), mode)
    if key in memo:
        asked(project, "built_writes", key)
        return memo[key]
    memo[key] = []
    started(project, "built_writes", key)
    try:
        return _built_writes(project, file, cls, mode, runner, memo, key)
    finally:
        finished(project, "built_writes", key)


def _built_writes(project: Project, file: FileModel, cls: ClassInfo, mode: str, runner: Runner, memo: dict, key: tuple
                  ) -> list[tuple[str, str, FunctionInfo, cst.CSTNode]]:
    found: dict[str, tuple | None] = {}
    for model, builder, call, _ in constructions(project, file, cls):
        if builder is None or builder.class_name == cls.name or not _returned(builder, call) \
                or not any(project.scope_use(model, sc).roles() & apis.STREAM_SCOPE_ROLES for sc in builder.scopes):
            continue  # (a builder queuing nothing in a stream scope of its own leaves nothing: not run)
        given = construction_fields(project, file, cls, call)
        texts = {f: model.code(v).replace('"', "'") for f, v in given.items()}
        interp = runner(project, model, builder, mode)
        if interp is None:
            continue
        for field, value in given.items():
            through = _callee_write(project, model, builder, value.value, {f: t for f, t in texts.items()
                                                                             if f != field}) \
                if isinstance(value, cst.Name) else None
            if through is not None:
                old = found.get(field, 0)
                entry = (f"self.{through[0]}", builder, through[1])
                found[field] = entry if old == 0 or old is not None and old[0] == entry[0] else None
        for st in interp.returned:
            know = st.know(MAIN)
            for field, value in given.items():
                if not isinstance(value, cst.Name) or value.value not in st.env:
                    continue
                for tv in interp.tensors(st, st.env[value.value]):
                    S = st.stores.get(tv.sid)
                    lw = S.last_write if S is not None and S.kind != "host" else None
                    if lw is None or lw.stream == MAIN or lw.node is None or ordered_before(lw, know) \
                            or any(snap.get(lw.stream, -1) >= lw.time for snap in st.events.values()):
                        continue  # (joined, or an event recorded after the write: a join handle, whoever waits it)
                    holders = [f for f, text in texts.items() if f != field and text == lw.stream]
                    entry = (f"self.{holders[0]}", builder, lw.node) if len(holders) == 1 else None
                    old = found.get(field, 0)
                    found[field] = entry if old == 0 or old is not None and entry is not None \
                        and old[0] == entry[0] else None
    memo[key] = [(f"self.{field}", *entry) for field, entry in found.items() if entry is not None]
    return memo[key]
