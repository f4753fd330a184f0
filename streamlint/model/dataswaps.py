"""Parameter storage swapped in on a side stream and swapped out by another function.

Layer offloading keeps a module's parameters and buffers on the host and, before the layer runs, binds each
one's ``.data`` to a device copy made on a transfer stream (``with torch.cuda.stream(up): p.data =
p.data_cpu.to(dev, non_blocking=True)``); another function of the project later swaps it back (``p.data =
p.data_cpu`` in a ``free_layer`` / ``offload``). The parameter object is long-lived, but its device storage is
not: the swap-back drops the last reference, the block returns to the transfer stream's pool, and the next
upload can take it while the compute stream still reads the layer. So each such storage needs
``record_stream`` for every other stream that uses it.

:func:`unrecorded_data_swaps` answers: in a native stream scope on a stream S, which ``x.data = <device
allocation>`` bindings of a parameter / buffer (a loop variable over ``m.parameters()`` / ``m.buffers()`` and
their ``named_`` forms, or ``self.<field>``) are recorded on no stream other than S, when

- the same function records a sibling (another object bound in its scopes, or an attribute of one) on a
  stream T other than S (the evidence of the stream that uses what it uploads), and
- another function of the file or its package rebinds ``.data`` of the same kind of object (a loop over the
  same ``parameters`` / ``buffers`` method, or the same field of the same class) with no synchronisation or
  wait before it: the swap-back that frees it.

The allocation needs device evidence: ``.to(x)`` counts only when ``x`` names a device.

A binding never recorded is reported at the binding; one recorded only on S (a no-op: its memory already
belongs to S) at the record. Medium confidence: the reader's stream is inferred from the sibling records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from streamlint._lazy import cst

from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.slotevents import scope_stream
from streamlint.model.syntax import node_code, self_attribute
from streamlint.model.walk import children

_HOLDERS = {"parameters": "parameters", "named_parameters": "parameters", "buffers": "buffers",
            "named_buffers": "buffers"}
_MOVES = frozenset({"to", "cuda", "npu", "xpu"})
_FACTORIES = frozenset({"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
                        "empty_strided"})
_MAX_SIBLING_FILES = 40


@dataclass(frozen=True)
class DataSwap:
    """A parameter / buffer storage bound on ``alloc`` and recorded on no other stream."""

    node: cst.CSTNode  # the `.data =` assignment, or the record on the allocating stream (noop)
    name: str  # code of the bound target (``param.data``)
    alloc: str  # code of the scope's stream
    other: str  # code of a stream the function records siblings on
    noop: bool
    swap_file: FileModel
    swap_node: cst.CSTNode  # the rebinding in another function


def unrecorded_data_swaps(project, file: FileModel) -> list[DataSwap]:
    out: list[DataSwap] = []
    if b".data" not in (project.file_bytes(file.path) or b".data"):
        return out
    swaps_cache: dict[object, tuple[FileModel, cst.CSTNode] | None] = {}
    for fn in list(file.functions.values()):
        try:
            out.extend(_function_swaps(project, file, fn, swaps_cache))
        except RecursionError:  # an absurdly nested function: stay silent
            continue
    return out


def _function_swaps(project, file: FileModel, fn: FunctionInfo, cache) -> list[DataSwap]:
    scopes = []
    for site in fn.scopes:
        if site.function is not fn:
            continue
        code = scope_stream(project, file, site)
        if code is None:
            continue
        if "current_stream" in code or "default_stream" in code:
            continue
        scopes.append((site.with_node, code))
    if not scopes:
        return []
    records = _records(file, fn.node.body, scopes)
    bound = {with_node: _bindings(file, with_node.body) for with_node, _ in scopes}
    bases = {file.code(target) for found in bound.values() for _, target, _ in found}
    siblings = [(b, r, n) for b, r, n in records if b.split(".")[0].split("[")[0] in bases or
                any(b == base or b.startswith(base + ".") for base in bases)]
    out: list[DataSwap] = []
    for with_node, alloc in scopes:
        others = sorted({r for _, r, _ in siblings if r != alloc})
        if not others:
            continue
        for assign, target, kind in bound[with_node]:
            base = file.code(target)
            mine = [(r, node) for b, r, node in records if b in (base, f"{base}.data")]
            if any(r != alloc for r, _ in mine):
                continue
            key = (kind, fn.class_name)
            back = cache[key] if key in cache else _swap_back(project, file, fn, kind)
            cache[key] = back
            if back is None:
                continue
            noop = bool(mine)
            node = mine[0][1] if noop else assign
            out.append(DataSwap(node, f"{base}.data", alloc, others[0], noop, back[0], back[1]))
    return out


def _records(file: FileModel, body, scopes) -> list[tuple[str, str, cst.CSTNode]]:
    """(tensor code as written, stream code, call) of every ``x.record_stream(s)``
    in ``body``; a ``current_stream()`` argument inside a scope is that scope's stream."""
    out = []

    def visit(node, scope: str | None) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return
        if isinstance(node, cst.With):
            inner = next((c for w, c in scopes if w is node), scope)
            for child in children(node):
                visit(child, inner)
            return
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value == "record_stream" and len(node.args) == 1:
            stream = file.code(node.args[0].value)
            if "current_stream" in stream and scope is not None:
                stream = scope
            out.append((file.code(node.func.value), stream, node))
        for child in children(node):
            visit(child, scope)

    visit(body, None)
    return out


def _data_assigns(body) -> list[tuple[cst.Assign, cst.BaseExpression, dict[str, str]]]:
    """(assignment, object, holder loops in scope) of every ``x.data = ...`` in ``body``, with the loop
    variables over a module's parameters / buffers around it (variable -> method family)."""
    out = []

    def visit(node, loops: dict[str, str]) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return
        if isinstance(node, cst.For):
            holder = _holder_loop(node)
            inner = dict(loops)
            if holder is not None:
                inner[holder[0]] = holder[1]
            for child in children(node):
                visit(child, inner)
            return
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            t = node.targets[0].target
            if isinstance(t, cst.Attribute) and t.attr.value == "data":
                out.append((node, t.value, loops))
        for child in children(node):
            visit(child, loops)

    visit(body, {})
    return out


def _bindings(file: FileModel, body) -> list[tuple[cst.CSTNode, cst.BaseExpression, object]]:
    """(assignment, target object, kind) of ``x.data = <device allocation>`` in ``body``, where x is a loop
    variable over a module's parameters / buffers (kind: the method family) or ``self.<field>`` (kind: the
    field's name with the class)."""
    out = []
    for node, obj, loops in _data_assigns(body):
        if not _allocates(node.value):
            continue
        if isinstance(obj, cst.Name) and obj.value in loops:
            out.append((node, obj, ("loop", loops[obj.value])))
        elif self_attribute(obj) is not None:
            out.append((node, obj, ("field", self_attribute(obj))))
    return out


def _holder_loop(node: cst.For) -> tuple[str, str] | None:
    """(loop variable, "parameters" | "buffers") of ``for p in m.parameters():`` (``for _, p in
    m.named_buffers():``)."""
    it = node.iter
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in _HOLDERS):
        return None
    method = it.func.attr.value
    target = node.target
    if method.startswith("named_"):
        if isinstance(target, cst.Tuple) and len(target.elements) == 2:
            target = target.elements[1].value
        else:
            return None
    return (target.value, _HOLDERS[method]) if isinstance(target, cst.Name) else None


def _allocates(value) -> bool:
    """A new device storage: ``.to(...)`` / ``.cuda()`` / ``.npu()`` / ``.clone()`` (not to the host) or a
    ``torch.empty`` / ``zeros`` / ... factory."""
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if name in _FACTORIES:
        return True
    if name not in _MOVES:
        return False
    if name != "to":
        return True
    for arg in value.args:  # `.to(x)`: a device only when x says so (`"cuda"`, `stream.device`, `self.device`)
        if arg.keyword is not None and arg.keyword.value != "device":
            continue
        text = _text(arg.value).lower()
        if "cpu" in text or "host" in text:
            return False
        if any(w in text for w in ("cuda", "npu", "xpu", "device")):
            return True
    return False


def _text(node) -> str:
    try:
        return node_code(node)
    except Exception:  # noqa: BLE001 -- a node the printer refuses: not a host move we can see
        return ""


def _swap_back(project, file: FileModel, fn: FunctionInfo, kind) -> tuple[FileModel, cst.CSTNode] | None:
    """A ``.data`` rebinding of the same kind of object in another function: the file first, then the other
    modules of its package that mention ``.data =``."""
    models = [file]
    folder = os.path.dirname(os.path.abspath(file.path))
    try:  # a package's modules only (a folder of unrelated scripts shares no objects)
        if not os.path.isfile(os.path.join(folder, "__init__.py")):
            raise LookupError(folder)
        paths = [p for p in project.all_files() if os.path.dirname(os.path.abspath(p)) == folder
                 and os.path.abspath(p) != os.path.abspath(file.path)]
    except Exception:  # noqa: BLE001 -- not a package, or a project without a file list: this file only
        paths = []
    for path in paths[:_MAX_SIBLING_FILES]:
        data = project.file_bytes(path) or b""
        if b".data =" in data or b".data=" in data:
            model = project.file(path)
            if model is not None:
                models.append(model)
    for model in models:
        for other in model.functions.values():
            if other is fn or other.node is fn.node:
                continue
            if kind[0] == "field" and (model is not file or other.class_name != fn.class_name):
                continue
            for node in _rebindings(other.node.body, kind):
                if not _synchronised_before(model, other, node):
                    return model, node
    return None


_SYNCS = frozenset({"synchronize", "wait_stream", "wait_event", "wait"})


def _synchronised_before(model: FileModel, fn: FunctionInfo, node: cst.CSTNode) -> bool:
    """Does ``fn`` synchronise (the device, a stream or an event) or wait before the rebinding ``node``?
    Then no stream still reads the storage it drops."""
    try:
        line = model.span(node).start_line
        return any(site.method in _SYNCS and model.span(site.node).start_line <= line for site in fn.calls)
    except Exception:  # noqa: BLE001 -- positions unavailable: assume it may synchronise (precision first)
        return True


def _rebindings(body, kind) -> list[cst.CSTNode]:
    """``x.data = ...`` of the kind's objects in ``body`` (any value: the old storage loses its owner)."""
    out = []
    for node, obj, loops in _data_assigns(body):
        if kind[0] == "loop" and isinstance(obj, cst.Name) and loops.get(obj.value) == kind[1]:
            out.append(node)
        elif kind[0] == "field" and self_attribute(obj) == kind[1]:
            out.append(node)
    return out


__all__ = ["DataSwap", "unrecorded_data_swaps"]
