"""Classes whose methods each join their own side-stream work: the one method that does not leaves it in flight
for the object's next use (issue 16, [cross-method] deleted host synchronisations).

A pool, a swap manager or a defragmenter keeps one side stream on ``self`` (``self._copy_stream``) and runs its
copies there from several methods: ``swap_out()`` reads blocks on it, ``swap_in()`` writes blocks back, each into
the object's own storage (``self.pool[...]``, a slot from a getter of it). When every such method ends its side-stream
work with a join of that stream (``self._copy_stream.synchronize()``, ``current_stream().wait_stream(...)``, a device
synchronisation) and no method of the class joins the stream for the others (a ``wait()`` / ``fence()`` step that
enters no scope of it), the class's protocol is "each method leaves nothing in flight": its callers, and its other
methods reading the storage on the current stream (``get_slice()`` handing out views, ``write_slice()`` writing
it), take a returned call as complete. A method of that class that returns with its side-stream writes into the
object's storage unjoined breaks that protocol: its writes race with whatever reads the storage next.

:func:`joins_own_work` answers the class half (is ``stream`` such a stream of ``fn``'s class, ``fn`` aside?);
:func:`caller_joins_after` whether every seen caller of ``fn`` joins after its call (a synchronisation kept on the
caller's path: the work is joined there). :mod:`~streamlint.model.flow.leaves` then reports the write where it leaves
the function (SL201 medium: which method the caller runs next is not seen), instead of deferring to a class protocol
(:mod:`~streamlint.model.flow.protocols`), which reports only where a join is expected in the reader.

Silent (precision first) when: the stream is not a plain field of ``self`` the class makes itself; the class returns it
or hands it to a helper (``self._launch(self._copy)``), or code outside the class reaches a field of that name
(``obj._copy_stream``: ``leaves.stream_exposed``); ``fn`` joins it before its own scope (a
rolling prefetch joining the previous call's work); some other method records an event on it, joins it without
entering it, or enters it without joining after (the class then has a protocol of another shape); no other method
enters it at all (nothing shows the class's convention).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.apis import Role
from streamlint.model.file import FileModel, FunctionInfo, dotted
from streamlint.model.flow.callers import callers_of
from streamlint.model.heldslots import stream_text
from streamlint.model.streams import derived
from streamlint.model.syntax import call_name, descendants, is_none, local_nodes, self_attribute

if TYPE_CHECKING:
    from streamlint.model.project import Project

_SYNC = "synchronize"
_RECORDS = frozenset({"record", "record_event"})
_MAX_CALLERS = 8


def _scope_lines(project: Project, file: FileModel, fn: FunctionInfo, stream: str) -> list[tuple[int, int]]:
    """(first, last) lines of ``fn``'s native stream scopes entering ``stream``."""
    out = []
    for site in fn.scopes:
        for use in project.scope_use(file, site).uses:
            if use.role is not Role.NATIVE_STREAM_CONTEXT:
                continue
            expr = use.arg("stream")
            if expr is not None and stream_text(project, file, fn, expr) == stream:
                span = file.span(site.with_node)
                out.append((span.start_line, span.end_line))
    return out


def _device_module(expr: cst.BaseExpression) -> bool:
    name = dotted(expr) or ""
    return name in ("torch.cuda", "torch.npu", "torch.xpu", "torch.accelerator", "torch_npu.npu")


def _orderings(project: Project, file: FileModel, fn: FunctionInfo, stream: str) -> tuple[list[int], bool]:
    """(lines of ``fn``'s joins of ``stream``: its ``synchronize()``, a ``wait_stream`` of it, a device
    synchronisation; does ``fn`` record any event?)"""
    joins: list[int] = []
    records = False
    for site in fn.calls:
        func = site.node.func
        if not isinstance(func, cst.Attribute):
            continue
        recv = func.value
        args = [a.value for a in site.node.args if a.keyword is None or a.keyword.value == "stream"]
        if site.method == _SYNC and (_device_module(recv) or stream_text(project, file, fn, recv) == stream):
            joins.append(file.span(site.node).start_line)
        elif site.method == "wait_stream" and args and stream_text(project, file, fn, args[0]) == stream:
            joins.append(file.span(site.node).start_line)
        elif site.method in _RECORDS:
            records = True  # (an event recorded in the method, on this stream or on the scope's current one: a
            # join handle handed around; `ev.record()` inside the scope records on it)
    return joins, records


def _own_stream_field(cls, attr: str) -> bool:
    """Does the class make ``self.<attr>`` a stream of its own: every assignment of it in its methods a
    ``*.Stream(...)`` constructor or ``None`` (no stream on this device), at least one a constructor?"""
    values = [a.value for m in cls.methods.values() for a in m.assigns if a.target == f"self.{attr}"]
    made = [v for v in values if not is_none(v)]
    return bool(made) and all(isinstance(v, cst.Call) and (dotted(v.func) or "").endswith("Stream") for v in made)


_STREAM_USES = frozenset({"stream", "StreamContext", "use_stream", "wait_stream", "wait_event", "record",
                          "record_event", "record_stream", "synchronize", "len", "bool", "isinstance", "id"})


def _handed_on(file: FileModel, cls, attr: str) -> bool:
    """Does a method of the class return ``self.<attr>`` or hand it to a call other than a stream scope or ordering
    (``self._launch(self._copy)``: that code may join it)?"""
    for method in cls.methods.values():
        for ret in method.returns:
            if ret.value is not None and any(self_attribute(n) == attr for n in local_nodes(ret.value)):
                return True
        for site in method.calls:
            if site.method in _STREAM_USES or call_name(site.node) in _STREAM_USES:
                continue
            if any(self_attribute(a.value) == attr for a in site.node.args):
                return True
    return False


def _nested_reach(fn: FunctionInfo, attr: str) -> bool:
    """Does a function or lambda nested in ``fn`` reach ``self.<attr>`` (``def finish(): self._copy.synchronize()``
    called after the scope: a join :func:`_orderings` does not see)?"""
    return any(isinstance(n, (cst.FunctionDef, cst.Lambda)) and n is not fn.node
               and any(self_attribute(d) == attr for d in descendants(n)) for n in local_nodes(fn.node))


def joins_own_work(project: Project, file: FileModel, fn: FunctionInfo, stream: str) -> bool:
    """Is ``stream`` (a ``self.<field>`` key) a stream of ``fn``'s class whose other methods each join the work they
    queue on it, none joining it for the others (see the module docstring)?"""
    memo = derived(project, "selfjoins_own_work")
    key = (id(fn), stream)
    if key not in memo:
        memo[key] = False
        memo[key] = _joins_own_work(project, file, fn, stream)
    return memo[key]


def _joins_own_work(project: Project, file: FileModel, fn: FunctionInfo, stream: str) -> bool:
    cls = file.classes.get(fn.class_name or "")
    if cls is None or not stream.startswith("self.") or stream.count(".") != 1:
        return False
    attr = stream[5:]
    if not attr.isidentifier() or not _own_stream_field(cls, attr) or _handed_on(file, cls, attr) \
            or any(_nested_reach(m, attr) for m in cls.methods.values()):
        return False  # (a nested function reaching the stream may join it: not seen)
    own_scopes = _scope_lines(project, file, fn, stream)
    own_joins, own_records = _orderings(project, file, fn, stream)
    if not own_scopes or own_records or any(j < min(s for s, _ in own_scopes) for j in own_joins):
        return False  # (an event handed on; a join of the previous call's work before the scope: a rolling protocol)
    convention = 0
    for method in cls.methods.values():
        if method is fn:
            continue
        scopes = _scope_lines(project, file, method, stream)
        joins, records = _orderings(project, file, method, stream)
        if records:
            return False  # an event on the stream: a join handle the class hands around
        if not scopes:
            if joins:
                return False  # a join step for the other methods' work
            continue
        last = max(end for _, end in scopes)
        if not any(j > last for j in joins):
            return False  # another method leaves its work in flight too: not this class's convention
        convention += 1
    return convention > 0


def caller_joins_after(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does every seen caller of ``fn`` (one at least) synchronise or wait after its call, in the calling function
    (the synchronisation kept on the caller's path)? Too many callers to tell count as joining; a call whose receiver
    cannot be an object of ``fn``'s class (:func:`~streamlint.model.flow.joinowners.unrelated_receiver`: another class's
    method of the same name) is no caller."""
    from streamlint.model.flow.joinowners import unrelated_receiver

    sites = list(callers_of(project, file, fn) or ())
    if len(sites) > _MAX_CALLERS:
        return True
    sites = [(model, site) for model, site in sites
             if fn.class_name is None or not unrelated_receiver(project, model, site, fn.class_name)]
    for model, site in sites:
        if site.function is None:
            return False
        line = model.span(site.node).start_line
        if not any(other.method in ("synchronize", "wait_stream", "wait_event", "wait")
                   and model.span(other.node).start_line > line for other in site.function.calls):
            return False
    return bool(sites)


__all__ = ["caller_joins_after", "joins_own_work"]
