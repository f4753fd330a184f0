"""What an event kept on an object guards: guarded-by inference for event fields (issue 16 §3, "caller
protocols", "effects through helpers").

The join analysis runs per function (plus the callees it inlines). An event that is a FIELD of an object
(``self.h2d_done``, ``slot.recv_ready`` on a slot handed to a static method) is recorded in one function
and waited in another; nothing tells the waiter's function which data the event covers, so a reader of
that data that lost its wait looks like any read of a field. Race detectors infer the lock that guards a
field from the accesses (Eraser's lockset, RacerD's guarded-by); this module does the same for events:

* from every record of ``H.E`` (``H.E.record()``, ``H.E.record(s)``, ``s.record_event(H.E)``; ``H`` is
  ``self`` or a parameter whose class is known) inside a side-stream scope, the fields ``H.F`` of the same
  holder the scope writes with device work before the record (an in-place op on ``H.F``, a store into
  ``H.F[...]``, ``H.F`` as the output of a collective or an ``out=``, a new value bound to ``H.F``, and the
  same inside the holder's own methods called there) are *guarded* by ``E`` on that stream
  (:func:`event_guards`, per class, memoised per file);
* a function that reads a guarded ``H.F`` on the current stream with no wait on ``H.E`` before it (nor a
  stronger join: a stream wait, a synchronisation, a helper of the holder that waits) races with that
  device work (:func:`unguarded_reads`). Evidence that the read is meant to be ordered is required: the
  function itself ran the recorder on ``H`` just before (``swap.reload(stream); use(swap.buf)``), the recorder
  is the object's constructor and the reader one of its methods (every method runs after ``__init__``), or
  another function of the module waits on ``.E`` before reading ``.F`` (the protocol the class's users
  follow).

An event only ever read by ``elapsed_time`` times work and guards nothing; a reader inside a stream scope
(possibly the recording stream), in ``__init__``, or in the recorder itself is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.devobjects import annotation_classes, param_annotation
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.streams import EVENT, attr_kind, derived, local_kind
from streamlint.model.syntax import local_nodes

if TYPE_CHECKING:
    from streamlint.model.project import Project

_OUTPUT_CALLS = ("all_to_all", "all_gather", "reduce_scatter", "all_reduce", "broadcast", "recv", "scatter",
                 "gather")
_OUT_KEYWORDS = frozenset({"out", "output", "output_tensor", "output_tensor_list"})
_METADATA = frozenset({"shape", "dtype", "device", "size", "stride", "numel", "dim", "ndim", "is_cuda",
                       "data_ptr", "record_stream", "element_size", "nelement", "is_contiguous", "layout",
                       "requires_grad", "untyped_storage"})
CURRENT = "<current>"  # the stream of a guard recorded outside any side-stream scope
_HOST_ONLY = frozenset({"keys", "__len__", "__contains__"})
_WAITS = frozenset({"wait_event", "wait", "synchronize", "query"})


@dataclass(frozen=True)
class Guard:
    """``cls.field`` is written on a side stream before ``cls.event`` is recorded there (in ``recorder``)."""

    cls: str
    event: str
    field: str
    stream: str  # the scope's stream expression in the recorder (its text)
    recorder: FunctionInfo
    record: cst.CSTNode
    helpers: frozenset[str] = frozenset()  # the holder's methods the recorder calls in the scope (producers)


@dataclass(frozen=True)
class UnguardedRead:
    """A read of a guarded field with no wait on the event guarding it."""

    function: FunctionInfo
    node: cst.CSTNode  # the ``H.F`` expression read
    holder: str
    guard: Guard
    produced_here: cst.CSTNode | None  # the call of the recorder on the holder, earlier in the function


def _holder_attr(node: cst.CSTNode) -> tuple[str, str] | None:
    """``H.F`` (or ``H.F[...]``) with ``H`` a plain name: ``(H, F)``."""
    while isinstance(node, cst.Subscript):
        node = node.value
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        return node.value.value, node.attr.value
    return None


def _stream_scopes(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[cst.With, str]]:
    """The side-stream scopes of ``fn``: their ``with`` statements and the stream expression's text."""
    memo = derived(project, "eventguard_scopes")
    key = (file.path, fn.qualname, id(fn.node))
    if key not in memo:
        out = []
        for site in fn.scopes:
            if not project.scope_use(file, site).roles() & apis.STREAM_SCOPE_ROLES:
                continue
            call = site.item.item
            arg = call.args[0].value if isinstance(call, cst.Call) and call.args else call
            text = file.code(arg)
            if "current_stream" in text:
                continue
            out.append((site.with_node, text))
        memo[key] = out
    return memo[key]


def _in_unknown_stream_scope(file: FileModel, fn: FunctionInfo, index, at) -> bool:
    """Is the position inside a ``with`` naming a stream that the API table does not classify (a project
    wrapper such as ``switch_to(stream)``)? The record there is on no stream we know: not a fork handle."""
    for site in fn.scopes:
        i = index.get(id(site.with_node))
        if i and i[0] < at[0] <= i[1] and "stream" in file.code(site.item.item).lower():
            return True
    return False


def _writes(node: cst.CSTNode, holder: str, cls: ClassInfo | None = None) -> set[str]:
    """The fields of ``holder`` a statement writes with device work (see the module doc). With ``cls`` (the
    holder's class when ``holder`` is ``self``), a method of the class named like a collective
    (``self.__avg_scatter_grads(self.params_in_bucket)``) writes its first argument only when its own body writes
    that parameter (:func:`_param_written`): its code is seen, its name is no evidence."""
    out: set[str] = set()
    for n in local_nodes(node):
        if isinstance(n, cst.Call):
            func = n.func
            own = None
            if isinstance(func, cst.Attribute):
                name = func.attr.value
                hf = _holder_attr(func.value)
                if hf and hf[0] == holder and name.endswith("_") and not name.startswith("_") \
                        and name != "record_stream_":
                    out.add(hf[1])
                if cls is not None and isinstance(func.value, cst.Name) and func.value.value == "self":
                    own = cls.methods.get(name)
            else:
                name = func.value if isinstance(func, cst.Name) else ""
            for i, a in enumerate(n.args):
                hf = _holder_attr(a.value)
                if not hf or hf[0] != holder:
                    continue
                if a.keyword is not None and a.keyword.value in _OUT_KEYWORDS \
                        or a.keyword is None and i == 0 and any(k in name for k in _OUTPUT_CALLS) \
                        and (own is None or _param_written(own, 0)):
                    out.add(hf[1])
        elif isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            value = n.value
            for t in targets:
                hf = _holder_attr(t)
                if not hf or hf[0] != holder:
                    continue
                if isinstance(t, cst.Subscript) or isinstance(n, cst.AugAssign) or any(
                        isinstance(v, cst.Call) for v in local_nodes(value) if value is not None):
                    out.add(hf[1])
    return out


def _param_written(fn: FunctionInfo, index: int) -> bool:
    """Does the method's body write its ``index``-th parameter after ``self`` with device work (an in-place op on
    it, a store into it, it as a collective's output or an ``out=``)?"""
    params = fn.params[1:] if fn.params[:1] in (("self",), ("cls",)) else fn.params
    if index >= len(params):
        return False
    name = params[index]
    for n in local_nodes(fn.node.body):
        if isinstance(n, cst.Call):
            func = n.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name \
                    and func.attr.value.endswith("_") and not func.attr.value.startswith("_"):
                return True
            callee = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) \
                else ""
            for i, a in enumerate(n.args):
                if isinstance(a.value, cst.Name) and a.value.value == name and (
                        a.keyword is not None and a.keyword.value in _OUT_KEYWORDS
                        or a.keyword is None and i == 0 and any(k in callee for k in _OUTPUT_CALLS)):
                    return True
        elif isinstance(n, (cst.Assign, cst.AugAssign)):
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            if any(isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and t.value.value == name
                   for t in targets):
                return True
    return False


def _method_writes(project: Project, file: FileModel, cls: ClassInfo, name: str, depth: int = 0) -> set[str]:
    """The ``self.F`` a method of the class writes with device work (and the methods it calls on self)."""
    m = cls.methods.get(name)
    if m is None or depth > 2 or m.params[:1] != ("self",):
        return set()
    out = _writes(m.node.body, "self", cls)
    for site in m.calls:
        recv = site.receiver
        if isinstance(recv, cst.Name) and recv.value == "self" and site.method and site.method != name:
            out |= _method_writes(project, file, cls, site.method, depth + 1)
    return out


def holder_class(project: Project, file: FileModel, fn: FunctionInfo, holder: str) -> ClassInfo | None:
    """The project class of ``holder`` in ``fn``: ``self`` of a method, a parameter annotated with a class
    of this module (or one it imports)."""
    if holder == "self":
        return file.classes.get(fn.class_name or "") if fn.params[:1] == ("self",) else None
    if holder not in fn.all_params:
        return None
    annotation = param_annotation(fn, holder)
    classes = annotation_classes(project, file, fn, annotation) if annotation is not None else None
    if classes and len(classes) == 1:
        return classes[0][0]
    return None  # (an unannotated parameter: its attribute names alone do not say its class)


def _recorded(file: FileModel, site) -> tuple[str, str, str | None] | None:
    """A record of ``H.E`` at a call site: ``(H, E, explicit stream text)``."""
    node = site.node
    if site.method == "record" and isinstance(node.func, cst.Attribute):
        hf = _holder_attr(node.func.value)
        if hf and not isinstance(node.func.value, cst.Subscript):
            return hf[0], hf[1], file.code(node.args[0].value) if node.args else None
    if site.method == "record_event" and node.args and isinstance(node.func, cst.Attribute):
        hf = _holder_attr(node.args[0].value)
        if hf and not isinstance(node.args[0].value, cst.Subscript):
            return hf[0], hf[1], file.code(node.func.value)
    return None


def _recorded_local(file: FileModel, fn: FunctionInfo, site) -> tuple[str, str, str | None] | None:
    """A record of a local event the function keeps in a field of a holder (``ev.record();
    self.ready[key] = ev``): ``(H, C, explicit stream text)``."""
    node = site.node
    if site.method == "record" and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name):
        name, explicit = node.func.value.value, (file.code(node.args[0].value) if node.args else None)
    elif site.method == "record_event" and node.args and isinstance(node.args[0].value, cst.Name) \
            and isinstance(node.func, cst.Attribute):
        name, explicit = node.args[0].value.value, file.code(node.func.value)
    else:
        return None
    hf = _stored_event(fn, name)
    return (hf[0], hf[1], explicit) if hf else None


def _is_event(project: Project, file: FileModel, fn: FunctionInfo, cls: ClassInfo, site, event: str) -> bool:
    """Is what the site records evidently an event (never the evidence of a ``record()`` method name alone:
    ``self.stats.record()``)? The local recorded (``ev = torch.cuda.Event(); ev.record()``) or the holder
    field (its assignments in the class of this module, or its class-level annotation) is an event."""
    recv = site.node.func.value if site.method == "record" else site.node.args[0].value
    if isinstance(recv, cst.Name):
        return local_kind(project, file, fn, recv.value) == EVENT
    return file.classes.get(cls.name) is cls and attr_kind(project, file, cls, event) == EVENT


def _stored_event(fn: FunctionInfo, name: str) -> tuple[str, str] | None:
    """The holder field a local event is kept in: ``H.C[k] = ev``, ``H.C = ev``, ``H.C.append(ev)``."""
    for n in local_nodes(fn.node.body):
        if isinstance(n, cst.Assign) and isinstance(n.value, cst.Name) and n.value.value == name:
            for t in n.targets:
                hf = _holder_attr(t.target)
                if hf:
                    return hf
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) \
                and n.func.attr.value in ("append", "setdefault", "put") \
                and any(isinstance(a.value, cst.Name) and a.value.value == name for a in n.args):
            hf = _holder_attr(n.func.value)
            if hf:
                return hf
    return None


def _timing(project: Project, file: FileModel, event: str) -> bool:
    memo = derived(project, "eventguard_timing")
    key = (file.path, event)
    if key not in memo:
        text = file.source.text if hasattr(file.source, "text") else file.module.code
        memo[key] = f".{event}.elapsed_time(" in text or f"elapsed_time(self.{event}" in text \
            or f".elapsed_time({event}" in text
    return memo[key]


def event_guards(project: Project, file: FileModel) -> dict[str, list[Guard]]:
    """Class name -> the guards its event fields carry, from the records in this module (memoised)."""
    memo = derived(project, "event_guards")
    if file.path in memo:
        return memo[file.path]
    out: dict[str, list[Guard]] = {}
    memo[file.path] = out
    for fn in file.functions.values():
        scopes = None
        for site in fn.calls:
            rec = _recorded(file, site)
            if rec is None:
                rec = _recorded_local(file, fn, site)
            if rec is None:
                continue
            holder, event, explicit = rec
            cls = holder_class(project, file, fn, holder)
            if cls is None or _timing(project, file, event) or not _is_event(project, file, fn, cls, site, event):
                continue
            if scopes is None:
                scopes = _stream_scopes(project, file, fn)
            index = file.lexical_index(fn.node)
            at = index.get(id(site.node))
            if at is None:
                continue
            inside = [w for w, text in scopes if (i := index.get(id(w))) and i[0] < at[0] <= i[1]]
            scope = next((w for w, text in reversed(scopes) if w in inside
                          and (explicit is None or text == explicit)), None)
            if scope is not None:
                stream, body = next(text for w, text in scopes if w is scope), scope.body
            elif not inside and (explicit is None or "current_stream" in explicit) \
                    and not _in_unknown_stream_scope(file, fn, index, at):
                stream, body = CURRENT, fn.node.body  # recorded on the current stream: a fork handle
            else:
                continue  # on a stream with no scope of its own here
            ranges = [index.get(id(w)) for w, _ in scopes] if scope is None else []
            fields: set[str] = set()
            helpers: set[str] = set()
            for n in local_nodes(body):
                i = index.get(id(n))
                if i is None or i[1] >= at[0] or not isinstance(n, cst.SimpleStatementLine) \
                        or any(r and r[0] < i[0] <= r[1] for r in ranges):
                    continue
                fields |= _writes(n, holder, cls if holder == "self" else None)
                for m in local_nodes(n):
                    if isinstance(m, cst.Call) and isinstance(m.func, cst.Attribute) \
                            and isinstance(m.func.value, cst.Name) and m.func.value.value == holder:
                        fields |= _method_writes(project, file, cls, m.func.attr.value)
                        helpers.add(m.func.attr.value)
            for field in sorted(fields - {event}):
                out.setdefault(cls.name, []).append(Guard(cls.name, event, field, stream, fn, site.node,
                                                          frozenset(helpers)))
    return out


def _joins_in(project: Project, file: FileModel, fn: FunctionInfo, event: str, depth: int = 0) -> bool:
    """Does ``fn`` (or what it calls on ``self``) wait on ``.event``, a stream, or synchronise?"""
    if depth > 2:
        return False
    for site in fn.calls:
        if site.method in ("wait_stream", "synchronize") or site.method in _WAITS and event in file.code(site.node):
            return True
        recv = site.receiver
        if isinstance(recv, cst.Name) and recv.value == "self" and fn.class_name:
            cls = file.classes.get(fn.class_name)
            m = cls.methods.get(site.method or "") if cls is not None else None
            if m is not None and m is not fn and _joins_in(project, file, m, event, depth + 1):
                return True
    return False


def _waits_then_reads(project: Project, file: FileModel, event: str, field: str, skip: FunctionInfo) -> bool:
    """Does a function of the module other than ``skip`` wait on ``X.event`` and then read ``X.field``?"""
    memo = derived(project, "eventguard_waiters")
    key = (file.path, event, field)
    if key not in memo:
        found: list[FunctionInfo] = []
        for fn in file.functions.values():
            index = None
            for site in fn.calls:
                if site.method not in _WAITS or f".{event}" not in file.code(site.node):
                    continue
                index = index or file.lexical_index(fn.node)
                at = index.get(id(site.node))
                if at and any(isinstance(n, cst.Attribute) and n.attr.value == field
                              and (i := index.get(id(n))) and i[0] > at[1] for n in local_nodes(fn.node.body)):
                    found.append(fn)
                    break
        memo[key] = found
    return any(fn is not skip for fn in memo[key])


def unguarded_reads(project: Project, file: FileModel) -> list[UnguardedRead]:
    """Reads of guarded fields on the current stream with no wait on the guarding event (memoised)."""
    memo = derived(project, "unguarded_reads")
    if file.path in memo:
        return memo[file.path]
    out: list[UnguardedRead] = []
    memo[file.path] = out
    guards = event_guards(project, file)
    if not guards:
        return out
    for fn in file.functions.values():
        if fn.node.name.value == "__init__":
            continue
        holders = [h for h in (fn.all_params or ()) if h not in ("cls",)]
        for holder in holders:
            cls = holder_class(project, file, fn, holder)
            if cls is None or cls.name not in guards:
                continue
            found = _unguarded(project, file, fn, holder, cls, guards[cls.name])
            if found is not None:
                out.append(found)
    return out


def _unguarded(project, file, fn, holder, cls, guards) -> UnguardedRead | None:
    fields = {g.field for g in guards}
    if not any(isinstance(n, cst.Attribute) and n.attr.value in fields and isinstance(n.value, cst.Name)
               and n.value.value == holder for n in local_nodes(fn.node.body)):
        return None
    index = file.lexical_index(fn.node)
    scopes = [index.get(id(w)) for w, _ in _stream_scopes(project, file, fn)]
    stored: set[int] = set()
    meta: set[int] = set()
    for n in local_nodes(fn.node.body):
        if isinstance(n, cst.Assign):
            stored |= {id(t.target) for t in n.targets}
        elif isinstance(n, (cst.AnnAssign, cst.AugAssign)):
            stored.add(id(n.target))
        elif isinstance(n, cst.Attribute) and n.attr.value in _METADATA | _HOST_ONLY:
            meta.add(id(n.value))
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in ("len", "isinstance"):
            meta |= {id(a.value) for a in n.args}
        elif isinstance(n, cst.Comparison):
            meta |= {id(c.comparator) for c in n.comparisons
                     if isinstance(c.operator, (cst.In, cst.NotIn, cst.Is, cst.IsNot))}
            if any(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in n.comparisons):
                meta.add(id(n.left))
    by_field: dict[str, list[Guard]] = {}
    name = fn.node.name.value
    for g in guards:
        if g.recorder is not fn and not (fn.class_name == g.cls and name in g.helpers):
            by_field.setdefault(g.field, []).append(g)
    reads = sorted((index[id(n)][0], n) for n in local_nodes(fn.node.body)
                   if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == holder
                   and n.attr.value in by_field and id(n) not in stored and id(n) not in meta and id(n) in index)
    for at, node in reads:
        scoped = any(s and s[0] < at <= s[1] for s in scopes)
        # a side-stream guard is for readers on the current stream (one inside a scope may run on the
        # recording stream); a current-stream guard for readers inside a side-stream scope
        g = next((g for g in by_field[node.attr.value] if scoped == (g.stream == CURRENT)), None)
        if g is None:
            continue
        joined, produced = False, None
        for site in fn.calls:
            i = index.get(id(site.node))
            if i is None or i[1] >= at:
                continue
            text = file.code(site.node)
            if site.method in ("wait_stream", "synchronize") or site.method in _WAITS and f".{g.event}" in text:
                joined = True
                break
            if site.method == "wait_event" and site.node.args and isinstance(site.node.args[0].value, cst.Name):
                joined = True  # a local handle: perhaps the event
                break
            recv = site.receiver
            on_holder = isinstance(recv, cst.Name) and recv.value == holder
            passes = any(isinstance(a.value, cst.Name) and a.value.value == holder for a in site.node.args)
            if not on_holder and not passes:
                continue
            target = cls.methods.get(site.method or "") if on_holder else None
            target_file = file
            if target is None and not on_holder:
                found = project.call_target(file, site)
                target, target_file = (found[0], found[1]) if found is not None else (None, file)
            if target is None:
                joined = True  # an unknown helper given the holder: perhaps it waits
                break
            if target is g.recorder:
                produced, joined = site.node, False
                continue
            if _joins_in(project, target_file, target, g.event):
                joined = True
                break
        if joined or any(site.method in ("wait_stream", "synchronize") or site.method in _WAITS
                         and f".{g.event}" in file.code(site.node) for site in fn.calls):
            return None  # (a join after the read: the function knows the protocol, the touch is a view)
        if produced is None and holder == "self" and g.recorder.node.name.value == "__init__" \
                and g.recorder.class_name == fn.class_name:
            produced = g.record  # the constructor queued the work: every method of the object runs after it
        if produced is None and not _waits_then_reads(project, file, g.event, g.field, fn):
            continue
        return UnguardedRead(fn, node, holder, g, produced)
    return None


__all__ = ["Guard", "UnguardedRead", "event_guards", "holder_class", "unguarded_reads"]
