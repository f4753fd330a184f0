"""Handles a method returns: side-stream tensors and the event recorded after them, travelling in one record
(issue 16, [cross-method]).

A prefetching builder copies the next tensor while the current one is compared, and hands both the copy and
its completion event back in one record::

    def _prefetch(self, key) -> Prefetched:
        stream = self._copy_stream(dev)
        with torch.cuda.stream(stream):
            on_device = host[key].to(dev, non_blocking=True)
            done = torch.cuda.Event()
            done.record(stream)
        return Prefetched(key=key, on_device=on_device, done=done)

    def build(self):
        nxt = self._prefetch(keys[0])
        for i in range(n):
            cur = nxt
            nxt = self._prefetch(keys[i + 1]) if i + 1 < n else None
            torch.cuda.current_stream().wait_event(cur.done)   # without it, the read races the copy
            diff = weights[i].ne(cur.on_device)

The producer is a method of the class every ``return`` of which gives ``None`` or one construction of a project
class (in any module; fields mapped by keyword or position,
:func:`~streamlint.model.handedevents.construction_fields`) whose event field is a local recorded in a stream
scope of the producer after device work there (``entryevents.recorded_after_work``, any stream but the
current / default one, by its stream kind), and whose tensor fields are locals bound in that scope before the
record to device values (not a host value made there: ``.tolist()``, ``.item()``, a blocking ``.cpu()``,
``int(...)``, a literal; ``hostresults``, ``placement``); the producer neither joins that stream nor waits on or
synchronises that event (``done.synchronize()``, ``current_stream().wait_event(done)``) nor the
device. The handle is tied to its producer by the call, not by field names: a consumer's local every
binding of which is ``self.<producer>(...)``, ``None``, a conditional of those, or another such local (``cur =
nxt``). The consumer reading a tensor field of such a local (``cur.on_device``, outside any stream scope) is
reported (SL201, medium: the read is assumed to run on the current stream; metadata -- ``.shape``, ``.dtype``,
``.device``, ``.size()``, a ``record_stream`` -- is no read) unless it names the event field of
any of those locals otherwise than by a presence test (a wait, handing it on), calls a method of one that may
wait (``entryevents.handed_on``) or hands one to any call / returns / yields / stores it (the join may be
elsewhere), joins any stream or event (``wait_stream`` / ``wait_event`` / ``synchronize``) or synchronises the
device, itself or through a method of the class it calls (``self._join_copies()``, two levels deep).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, normalized_code

if TYPE_CHECKING:
    from streamlint.model.project import Project

_norm = normalized_code
_JOINS = ("wait_stream", "wait_event", "synchronize")
# what a tensor answers without reading its data (or, record_stream, tells the allocator)
_METADATA = frozenset({"shape", "dtype", "device", "is_cuda", "ndim", "size", "numel", "dim", "element_size",
                       "nbytes", "itemsize", "layout", "requires_grad", "is_contiguous", "stride",
                       "record_stream"})


@dataclass(frozen=True)
class UnwaitedHandle:
    """A method reading a tensor field of a handle its producer method returned, with no wait on its event."""

    method: FunctionInfo  # the consumer
    node: cst.CSTNode  # the first read of the tensor field
    read: str  # ``cur.on_device``
    event: str  # ``cur.done``
    stream: str  # the producer's stream, by its text there
    producer: FunctionInfo
    record: cst.CSTNode  # the event's record after the copy


def _producer_handle(project: Project, file: FileModel, fn: FunctionInfo):
    """(tensor fields, event field, stream, record, the record's class and module or None) of the record ``fn``
    returns, or None."""
    from streamlint.model.flow.entryevents import entry_fields, recorded_after_work, within, held_stream_scopes
    from streamlint.model.flow.protocols import joined_keys, synchronizes_device
    from streamlint.model.hostresults import _host_value
    from streamlint.model.placement import settled_host_value
    calls = []
    for ret in fn.returns:
        value = ret.value
        if value is None or _norm(file.code(value)) == "None":
            continue
        if isinstance(value, cst.Name):
            bound = fn.name_assigns.get(value.value, ())
            value = bound[0] if len(bound) == 1 else None
        if not isinstance(value, cst.Call):
            return None
        calls.append(value)
    if len(calls) != 1:
        return None
    fields = entry_fields(project, file, calls[0])
    scopes = held_stream_scopes(file, fn, any_stream=True)
    event = None
    for field, value in fields.items():
        if isinstance(value, cst.Name):
            found = recorded_after_work(file, fn, value.value, any_stream=True)
            if found is not None:
                event = (field, *found)
                break
    if event is None:
        return None
    field, stream, record = event
    scope = next((sc for sc, _ in scopes if within(record, sc)), None)
    # the producer joining the stream, or waiting / synchronising its own event (``done.synchronize()``,
    # ``current_stream().wait_event(done)``), hands back a finished copy
    local = record.func.value.value
    joined = joined_keys(file, fn)
    if scope is None or _main_stream(project, file, fn, scope) or stream in joined or local in joined \
            or synchronizes_device(project, file, fn):
        return None
    line = file.span(record).start_line
    tensors = []
    for name, value in fields.items():
        if name == field or not isinstance(value, cst.Name):
            continue
        bound = fn.name_assigns.get(value.value, ())
        made = [v for v in bound if within(v, scope) and file.span(v).start_line < line]
        # a host value made there (``.tolist()``, ``.item()``, a blocking ``.cpu()``, ``int(...)``, a literal) is
        # ready when the producer returns: only device values wait on the event
        if made and not any("Event(" in file.code(v) for v in bound) \
                and not all(_host_value(fn, v, file=file) or settled_host_value(v) for v in made):
            tensors.append(name)
    from streamlint.model.flow.entryevents import entry_class
    return (tensors, field, stream, record, entry_class(project, file, calls[0])) if tensors else None


def _main_stream(project: Project, file: FileModel, fn: FunctionInfo, scope: cst.With) -> bool:
    """The scope's stream is the current or default stream (``streams.kind_of_call`` MAIN_STREAM), given
    directly or as a local bound only to it (``stream = torch.cuda.current_stream(dev)``): no side stream."""
    from streamlint.model.streams import MAIN_STREAM, kind_of_call
    for item in scope.items:
        call = item.item
        if not isinstance(call, cst.Call) or not call.args:
            continue
        arg = call.args[0].value
        values = fn.name_assigns.get(arg.value, ()) if isinstance(arg, cst.Name) else (arg,)
        if values and all(isinstance(v, cst.Call) and kind_of_call(project, file, v) == MAIN_STREAM for v in values):
            return True
    return False


def _handle_locals(file: FileModel, fn: FunctionInfo, sources: tuple) -> set[str]:
    """The locals of ``fn`` every binding of which is a handle source (``self.<producer>(...)``, a forwarder's call,
    a handle field: :mod:`.handlesources`), None, a conditional of those, or another such local; at least one binding
    a handle source."""
    from streamlint.model.flow.handlesources import is_source, not_none
    calls, fields = sources
    pool = set(fn.name_assigns)
    while True:
        keep = {n for n in pool if all(is_source(file, fn, v, calls, fields, pool) for v in fn.name_assigns[n])}
        if keep == pool:
            break
        pool = keep
    return {n for n in pool if any(not_none(v) and is_source(file, fn, v, calls, fields) for v in fn.name_assigns[n])}


def _other_bindings(fn: FunctionInfo, names: set[str]) -> bool:
    """A name of ``names`` bound otherwise than by a plain assignment (a loop / with / tuple target)."""
    for node in local_nodes(fn.node.body):
        targets = []
        if isinstance(node, (cst.For, cst.CompFor)):
            targets = [node.target]
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            targets = [node.asname.name]
        elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            for t in (node.targets if isinstance(node, cst.Assign) else [node]):
                target = t.target
                if isinstance(target, (cst.Tuple, cst.List)):
                    targets.append(target)
        for target in targets:
            for n in [target, *local_nodes(target)]:
                if isinstance(n, cst.Name) and n.value in names:
                    return True
    return False


def _handle_escapes(project, file, fn: FunctionInfo, names: set[str], field: str, entry) -> bool:
    """A handle local used bare otherwise than as an attribute's base, an assignment target, the value of an
    alias among ``names`` or a presence test: returned, yielded, stored, handed to a call, a method called."""
    from streamlint.model.flow.entryevents import handed_on, presence_tests
    if any(handed_on(project, file, fn, n, field, entry) for n in names):
        return True
    allowed = presence_tests(file, fn)  # (`if h:`, `while h is not None:`, `not h`)
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.Attribute):
            allowed.add(id(node.value))
        elif isinstance(node, cst.Assign):
            allowed.update(id(t.target) for t in node.targets)
            if all(isinstance(t.target, cst.Name) and t.target.value in names for t in node.targets):
                allowed.add(id(node.value))
                if isinstance(node.value, cst.IfExp):
                    allowed.update((id(node.value.body), id(node.value.orelse)))
        elif isinstance(node, cst.Comparison):
            allowed.add(id(node.left))  # (any comparison's left side: `h == last` compares, it keeps nothing)
    return any(isinstance(n, cst.Name) and n.value in names and id(n) not in allowed
               for n in local_nodes(fn.node.body))


def unwaited_handles(project: Project, file: FileModel, cls: ClassInfo) -> list[UnwaitedHandle]:
    """The reads of a returned handle's tensor field with no wait on its event, per class (memoised)."""
    memo = derived(project, "unwaited_handles")
    if id(cls) in memo:
        return memo[id(cls)]
    memo[id(cls)] = out = []
    for producer in cls.methods.values():
        if producer.params[:1] != ("self",) or not producer.returns or not producer.scopes:
            continue
        found = _producer_handle(project, file, producer)
        if found is None:
            continue
        for method in cls.methods.values():
            if method is not producer:
                hit = _unwaited_read(project, file, cls, method, producer, found)
                if hit is not None:
                    out.append(hit)
    return out


def _joins_via_self(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo, depth: int = 0,
                    seen: set[int] | None = None) -> bool:
    """``fn`` calls a method of the class (``self._join_copies()``, two levels deep) that joins a stream or an
    event or synchronises the device: the class's own join step (the producer, in ``seen``, is none: its joins
    before the copy order the copy after the caller's work)."""
    seen = set() if seen is None else seen
    seen.add(id(fn))
    from streamlint.model.flow.protocols import synchronizes_device
    for site in fn.calls:
        func = site.node.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            continue
        callee = cls.methods.get(func.attr.value)
        if callee is None or id(callee) in seen:
            continue
        seen.add(id(callee))
        if any(s.method in _JOINS for s in callee.calls) or synchronizes_device(project, file, callee) \
                or depth < 1 and _joins_via_self(project, file, cls, callee, depth + 1, seen):
            return True
    return False


def _unwaited_read(project, file, cls, method, producer, found) -> UnwaitedHandle | None:
    from streamlint.model.flow.entryevents import names_event, within, held_stream_scopes
    from streamlint.model.flow.protocols import synchronizes_device
    tensors, field, stream, record, entry = found
    from streamlint.model.flow.handlesources import handle_sources
    sources = handle_sources(project, file, cls, producer)
    if method.node.name.value in sources[0]:
        return None  # (a forwarder hands it on)
    names = _handle_locals(file, method, sources)
    if not names or _other_bindings(method, names) or _handle_escapes(project, file, method, names, field, entry) \
            or any(names_event(file, method, n, field) for n in names) \
            or any(site.method in _JOINS for site in method.calls) or synchronizes_device(project, file, method) \
            or _joins_via_self(project, file, cls, method, seen={id(producer)}):
        return None
    stores = {id(t.target) for n in local_nodes(method.node.body) if isinstance(n, cst.Assign) for t in n.targets}
    scopes = [w for w, _ in held_stream_scopes(file, method, any_stream=True)]
    meta = {id(n.value) for n in local_nodes(method.node.body)
            if isinstance(n, cst.Attribute) and n.attr.value in _METADATA}
    reads = [n for n in local_nodes(method.node.body)
             if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value in names
             and n.attr.value in tensors and id(n) not in stores and id(n) not in meta
             and not any(within(n, w) for w in scopes)]
    if not reads:
        return None
    first = min(reads, key=lambda n: (file.span(n).start_line, file.span(n).start_col))
    handle = first.value.value
    return UnwaitedHandle(method, first, f"{handle}.{first.attr.value}", f"{handle}.{field}", stream, producer,
                          record)
