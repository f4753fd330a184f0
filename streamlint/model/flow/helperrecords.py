"""Project helpers that take over a tensor's lifetime for another stream (issue 16, [own-lifetime-manager]).

Torch's ``t.record_stream(s)`` is one way to keep a block from going back to its allocating stream's pool while
``s`` still uses it. A project may wrap it (``def mark_used(t, stream): t.record_stream(stream)``) or keep its
own storage tracker: an object whose method is handed the tensor and the streams it crosses
(``ledger.pin(t, src_stream=compute, dst_stream=side)``) and keeps the tensor's storage in a field of the object
together with those streams (``self.pinned[t.untyped_storage()] = [src_stream, dst_stream]``) until the
project's own wait releases it. Either way the call is the caller's ``record_stream`` of the tensor argument on
the stream arguments: deleting it is the same lifetime defect as deleting torch's record.

Per function, :func:`recorded_params` says which tensor parameter it records on which stream parameter: ``p.record_stream(s)``
(``s`` a parameter), a storage tracker's keep (the parameter's ``untyped_storage()`` / ``storage()``, maybe
bound to a local, stored in a ``self.*`` field or container in the same statement as the stream parameters, or
the parameter or its storage as the key of a ``self.*`` place the streams are stored in:
``self.in_use[storage] = [a, b]``, ``self.in_use[t].append(b)``, ``self.held.append((t.untyped_storage(), s))``;
the tensor object itself stored next to a stream, ``self.pending.append((t, s))``, is a debug trace or a work
queue as often, and popping it frees the block unrecorded: no keep), and through a
project function it hands both to (two levels), including a method of an object of a project class reached
through a field chain (``worker.ledger.pin(...)`` with ``worker: Worker`` and
``self.ledger = BlockLedger()`` in its ``__init__``). A tracker that only logs what it is handed
(keeps neither the tensor nor its storage) records nothing; a helper recording on the stream the tensor was
made on records there (a no-op, judged like ``t.record_stream(alloc_stream)``).

:func:`helper_records` maps a call site onto that summary: the caller's argument expressions and, for each,
the stream expressions it is recorded on. The interpreter applies them as records at the call
(:class:`HelperRecords`); the callers' side of the lifetime questions (``argdrops``, ``consumers``) asks
:func:`records_through_helper`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import descendants, local_nodes, node_code
from streamlint.model.uses import bind_arguments
from streamlint.model.flow.typedholders import checking_import, declared_class  # noqa: F401 (checking_import: re-exported)

if TYPE_CHECKING:
    from streamlint.model.flow.values import State
    from streamlint.model.project import Project

_MAX_DEPTH = 2
_STORAGE_GETTERS = frozenset({"untyped_storage", "storage", "_typed_storage"})
_KEEPING = frozenset({"append", "appendleft", "extend", "insert", "add", "put", "put_nowait", "setdefault"})
_STREAM_NAME = re.compile(r"(^|_)stream(s)?$")


def _params(fn: FunctionInfo) -> tuple[str, ...]:
    method = fn.class_name is not None and fn.params[:1] in (("self",), ("cls",))
    return (fn.params[1:] if method else fn.params) + fn.kwonly


def recorded_params(project: Project, file: FileModel, fn: FunctionInfo,
                    _depth: int = 0) -> dict[str, frozenset[str]]:
    """Tensor parameter -> the stream parameters ``fn`` records it on (see the module docstring). Memoised."""
    memo = derived(project, "helper_recorded_params")
    found = memo.get(id(fn))
    if found is not None and found[0] is fn:
        return found[1]
    if _depth == 0:
        memo[id(fn)] = (fn, {})  # (a recursion sees nothing)
    out = _recorded_params(project, file, fn, _depth)
    result = {p: frozenset(v) for p, v in out.items() if v}
    if _depth == 0:
        memo[id(fn)] = (fn, result)
    return result


def _recorded_params(project: Project, file: FileModel, fn: FunctionInfo, depth: int) -> dict[str, set[str]]:
    params = set(_params(fn))
    out: dict[str, set[str]] = {}
    if not params:
        return out
    storages = _storage_locals(fn, params)  # `storage = tensor.untyped_storage()` -> "tensor"

    def tensor_of(expr: cst.BaseExpression) -> str | None:  # (a key: the tensor or its storage)
        if isinstance(expr, cst.Name) and expr.value in params:
            return None if _stream_param(fn, expr.value) else expr.value
        return storage_of(expr)

    def storage_of(expr: cst.BaseExpression) -> str | None:  # (a value kept: only the tensor's storage)
        if isinstance(expr, cst.Name):
            return None if expr.value in params else storages.get(expr.value)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
                and expr.func.attr.value in _STORAGE_GETTERS and isinstance(expr.func.value, cst.Name) \
                and expr.func.value.value in params and not expr.args:
            return expr.func.value.value
        return None

    for site in fn.calls:
        node = site.node
        func = node.func
        if site.method == "record_stream" and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                and func.value.value in params:
            first = node.args[0].value if node.args else None
            if isinstance(first, cst.Name) and first.value in params:
                out.setdefault(func.value.value, set()).add(first.value)
            continue
        if site.method in _KEEPING and isinstance(func, cst.Attribute) and _self_place(func.value):
            kept = _names_in(node, params, storage_of) + _keys(func.value, tensor_of)  # (`self.d[t].append(s)`)
            streams = {n for n in _plain_names(node) if n in params and _stream_param(fn, n)} - set(kept)
            for t in kept:
                if streams:
                    out.setdefault(t, set()).update(streams)
            continue
        if depth >= _MAX_DEPTH:
            continue
        target = call_target(project, file, fn, site)
        if target is None or target[0] is fn:
            continue
        g, gmod = target
        inner = recorded_params(project, gmod, g, depth + 1)
        if not inner:
            continue
        bound = bind_arguments(_params(g), node, kwonly=g.kwonly)
        for q, streams in inner.items():
            t = bound.get(q)
            if isinstance(t, cst.Name) and t.value in params:
                names = {bound[s].value for s in streams if isinstance(bound.get(s), cst.Name)
                         and bound[s].value in params}
                if names:
                    out.setdefault(t.value, set()).update(names)
    for node in local_nodes(fn.node.body):
        if not isinstance(node, (cst.Assign, cst.AnnAssign)) or node.value is None:
            continue
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if not (isinstance(target, cst.Subscript) and _self_place(target.value)):
                continue
            held = _keys(target, tensor_of) + _names_in(node.value, params, storage_of)
            streams = {n for n in _plain_names(node.value) if n in params and _stream_param(fn, n)} - set(held)
            for t in held:
                if streams:
                    out.setdefault(t, set()).update(streams)
    return out


def _storage_locals(fn: FunctionInfo, params: set[str]) -> dict[str, str]:
    """Locals bound once to a parameter's storage (``storage = tensor.untyped_storage()``)."""
    out: dict[str, str] = {}
    for name, values in fn.name_assigns.items():
        if name in params or len(values) != 1:
            continue
        value = values[0]
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value in _STORAGE_GETTERS and isinstance(value.func.value, cst.Name) \
                and value.func.value.value in params and not value.args:
            out[name] = value.func.value.value
    return out


def _self_place(expr: cst.BaseExpression) -> bool:
    """``self.in_use``, ``self.in_use[key]``, ``self.queues[a][b]``: a place of the object itself."""
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            return expr.value.value == "self"
        expr = expr.value
    return False


def _plain_names(node: cst.CSTNode) -> list[str]:
    """The names ``node`` holds as values (``[a, b]``, ``(t, s)``, ``a``), not through attributes or calls."""
    out: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            out.append(n.value)
        elif isinstance(n, cst.Call):
            stack.extend(a.value for a in n.args)
        elif isinstance(n, (cst.List, cst.Tuple, cst.Set)):
            stack.extend(el.value for el in n.elements)
        elif isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None:
            stack.append(n.value)
    return out


def _names_in(node: cst.CSTNode, params: set[str], tensor_of) -> list[str]:
    """The tensor parameters whose storage ``node`` keeps as a value (``tensor_of``: the storage getter). The
    tensor object itself kept next to a stream is no lifetime protocol: a debug trace or a queue of work items
    (``self.pending.append((t, stream))``) holds the same pair, and popping it frees the block unrecorded."""
    out: list[str] = []
    stack: list[cst.CSTNode] = [node]
    while stack:
        n = stack.pop()
        t = tensor_of(n) if isinstance(n, cst.BaseExpression) else None
        if t is not None:
            out.append(t)
            continue
        if isinstance(n, cst.Call):
            if isinstance(n.func, cst.Attribute) and n.func.attr.value in _KEEPING:
                stack.extend(a.value for a in n.args)
            elif not isinstance(n.func, cst.Attribute):
                stack.extend(a.value for a in n.args if (dotted(n.func) or "") in ("tuple", "list"))
        elif isinstance(n, (cst.List, cst.Tuple)):
            stack.extend(el.value for el in n.elements)
    return out


def _keys(place: cst.BaseExpression, tensor_of) -> list[str]:
    """The tensor parameters a place of the object is keyed by (``self.in_use[storage]``)."""
    out: list[str] = []
    while isinstance(place, (cst.Subscript, cst.Attribute)):
        if isinstance(place, cst.Subscript):
            out += [k for k in (tensor_of(s.slice.value) for s in place.slice if isinstance(s.slice, cst.Index))
                    if k is not None]
        place = place.value
    return out


def _stream_param(fn: FunctionInfo, name: str) -> bool:
    """A parameter that holds a stream: annotated with a stream class, or named for one (``use_stream``)."""
    for p in (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params):
        if p.name.value == name:
            if p.annotation is not None:
                return "Stream" in node_code(p.annotation.annotation)
            return bool(_STREAM_NAME.search(name))
    return False


# ---- the callee of a call site

def call_target(project: Project, file: FileModel, fn: FunctionInfo, site) -> tuple[FunctionInfo, FileModel] | None:
    """The project function a call runs: :meth:`Project.call_target`, a method of a local object built from a
    project class, or a method of an object of a project class reached from ``self`` or an annotated parameter
    through fields whose class the holder's ``__init__`` constructs (``worker.ledger.pin(...)``)."""
    from streamlint.model.flow.effects import local_method

    found = project.call_target(file, site) or local_method(project, file, fn, site.node.func)
    if found is not None:
        return found
    func = site.node.func
    if not isinstance(func, cst.Attribute):
        return None
    cls = _receiver_class(project, file, fn, func.value)
    if cls is None:
        return None
    method = _method(project, cls[0], cls[1], func.attr.value)
    return method if method is not None and method[0].params[:1] == ("self",) else None


def _method(project: Project, cls: ClassInfo, mod: FileModel, name: str, depth: int = 0):
    if name in cls.methods:
        return cls.methods[name], mod
    for base in cls.bases if depth < 3 else ():
        sym = project.symbol(base, mod)
        if sym is not None and isinstance(sym[0], ClassInfo):
            found = _method(project, sym[0], sym[1], name, depth + 1)
            if found is not None:
                return found
    return None


def _receiver_class(project: Project, file: FileModel, fn: FunctionInfo,
                    expr: cst.BaseExpression, depth: int = 0) -> tuple[ClassInfo, FileModel] | None:
    if depth > 3:
        return None
    if isinstance(expr, cst.Name):
        if expr.value == "self" and fn.class_name is not None:
            own = file.classes.get(fn.class_name)
            return (own, file) if own is not None else None
        return _param_class(project, file, fn, expr.value)
    if isinstance(expr, cst.Attribute):
        holder = _receiver_class(project, file, fn, expr.value, depth + 1)
        if holder is None:
            return None
        cls, mod = holder
        ctor = cls.attr_types.get(expr.attr.value)
        if ctor is None:
            return None
        sym = project.symbol(ctor, mod)
        return sym if sym is not None and isinstance(sym[0], ClassInfo) else None
    return None


def _param_class(project: Project, file: FileModel, fn: FunctionInfo, name: str) -> tuple[ClassInfo, FileModel] | None:
    """The project class the parameter ``name`` is annotated with (``Optional[...]``, a forward reference:
    :func:`~.typedholders.declared_class`)."""
    return declared_class(project, file, fn, name) if name in fn.all_params else None


def helper_records(project: Project, file: FileModel, fn: FunctionInfo | None,
                   site) -> list[tuple[cst.BaseExpression, list[cst.BaseExpression]]]:
    """For a call of a project helper that records what it is handed (:func:`recorded_params`): each tensor
    argument with the stream arguments it is recorded on. Empty for any other call."""
    if fn is None or site is None or site.method == "record_stream" and _tensor_receiver(site):
        return []
    target = call_target(project, file, fn, site)
    if target is None or target[0] is fn:
        return []
    g, gmod = target
    summary = recorded_params(project, gmod, g)
    if not summary:
        return []
    bound = bind_arguments(_params(g), site.node, kwonly=g.kwonly)
    out = []
    for q, streams in summary.items():
        arg = bound.get(q)
        exprs = [bound[s] for s in sorted(streams) if bound.get(s) is not None]
        if arg is not None and exprs:
            out.append((arg, exprs))
    return out


def _tensor_receiver(site) -> bool:
    """``t.record_stream(s)``: torch's own (one argument); a tracker's ``mem.record_stream(t, a, b)`` is not."""
    return len(site.node.args) <= 1


def records_through_helper(project: Project, file: FileModel, fn: FunctionInfo | None, site,
                           name: str | None = None) -> bool:
    """Does the call ``site`` in ``fn`` record a tensor on a stream through a project helper (of ``name``, an
    argument's text, when given)?"""
    found = helper_records(project, file, fn, site)
    return any(name is None or file.code(arg) == name for arg, _ in found)


def _place(expr: cst.BaseExpression) -> bool:
    """A name, field or item chain with no call, walrus, yield or await anywhere in it (``bufs[i].data``): reading
    it again has no effect."""
    if not isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)):
        return False
    return not any(isinstance(n, (cst.Call, cst.NamedExpr, cst.Yield, cst.Await)) for n in descendants(expr))


class HelperRecords:
    """Mixin of :class:`~streamlint.model.flow.interp.Interp`: a call of a project helper that records a tensor
    argument on stream arguments (:func:`helper_records`) records it there, as ``t.record_stream(s)`` would.
    Interp state it uses: ``cfile``, ``cfn``, ``project``; it asks records (``note_record``)."""

    def call(self, st: State, e: cst.Call) -> object:
        out = super().call(st, e)  # type: ignore[misc]
        if not e.args:
            return out
        memo = derived(self.project, "helper_records_at")  # type: ignore[attr-defined]
        held = memo.get(id(e))
        if held is None or held[0] is not e:  # (a call is met on every path through it: answered once)
            site = self.cfile.call_site(e)  # type: ignore[attr-defined]
            held = memo[id(e)] = (e, helper_records(self.project, self.cfile, self.cfn, site))  # type: ignore
        for arg, streams in held[1]:
            if not _place(arg):
                continue  # (a temporary, or a place indexed by a call: evaluating it again would run its work twice)
            tensors = self.tensors(st, self.ev(st, arg))  # type: ignore[attr-defined]
            if not tensors:
                continue
            for s in streams:
                if not _place(s) or isinstance(s, cst.Subscript):
                    continue
                key = self.stream_key(st, self.ev(st, s), s)  # type: ignore[attr-defined]
                self.note_record(st, tensors, key, self.cfile.code(arg))  # type: ignore[attr-defined]
        return out
