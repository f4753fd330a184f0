"""Slot buffers handed out by one method while the per-slot events another method records are waited by nobody.

A layer prefetcher / KV-cache slot arena keeps its staging buffers in a field (``self.arena``, ``self.slots``)
and one event per slot or layer in a list field (``self.xfer_done``). One method writes a slot on a transfer
stream and records the slot's event after the write (``with torch.cuda.stream(self.copy): self.arena.copy_into(
slot, host); self.xfer_done[i].record(self.copy)``); another hands the slot's views out to its caller
(``return self.arena.slot_views(slot)``), which reads them on its own stream. The event is what orders that
read after the copy: when no code of the project consumes it (waits it, synchronises or queries it, hands an
element on to a call), the views are handed out unordered.

:func:`unwaited_slot_reads` answers per class: the methods that return a call on, or an element of, a buffer
field ``B`` (``return self.B.views(k)`` / ``return self.B[k]``) such that

- the class binds ``self.B`` to device memory (a call with a device argument, a ``.cuda()`` result);
- another method of the class writes through ``B`` (a call on ``self.B`` or on one of its elements) inside a
  stream scope, and records an element of a list event field ``E`` of the object later in the same scope
  (the pairing is by the scope only: medium confidence);
- ``self.E`` is used nowhere in the class but for those records, its construction and ``len``; no code of the
  file outside the class names ``.E`` otherwise, and no other module of the project names it (byte search);
- the stream it is recorded on is joined by no code of the class (``wait_stream`` of it or of a local alias of
  it, its ``synchronize()``, a device synchronisation; also
  :func:`~streamlint.model.flow.deadevents.recorded_on_joined_stream`), by no function of the file outside it,
  and no other module names its field next to a ``wait_stream`` / ``synchronize`` (byte search).

A reader that waits the event itself, or whose caller waits an element (handed on: a use), is not reported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from streamlint._lazy import cst

from streamlint.model.apis import Role
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.deadevents import recorded_on_joined_stream
from streamlint.model.syntax import local_nodes, node_code


_ORDERING = frozenset({"wait_stream", "wait_event", "record_event", "synchronize", "query", "record"})


@dataclass(frozen=True)
class UnwaitedSlotRead:
    reader: FunctionInfo
    node: cst.CSTNode  # the return handing the buffer out
    buffer: str  # ``self.arena``
    events: str  # ``self.xfer_done``
    writer: FunctionInfo
    record: cst.CSTNode


def unwaited_slot_reads(project, file: FileModel) -> list[UnwaitedSlotRead]:
    out: list[UnwaitedSlotRead] = []
    for cls in file.classes.values():
        try:
            out.extend(_class_reads(project, file, cls))
        except RecursionError:
            continue
    return out


def _class_reads(project, file: FileModel, cls: ClassInfo) -> list[UnwaitedSlotRead]:
    pairs = []  # (buffer field, event field, writer, record)
    for method in cls.methods.values():
        for site in method.scopes:
            stream = scope_stream(project, file, site) if site.function is method else None
            if stream is None:
                continue
            pairs.extend((b, e, method, rec, stream) for b, e, rec in _writes_then_records(site.with_node.body))
    if not pairs:
        return []
    out: list[UnwaitedSlotRead] = []
    dead: dict[str, bool] = {}
    joined = _joined_streams(file, cls)
    for buffer, events, writer, record, stream in pairs:
        if not _device_field(cls, buffer):
            continue
        if events not in dead:
            dead[events] = _unconsumed(project, file, cls, events)
        if not dead[events] or joined is None or stream in joined or _joined_elsewhere(project, file, cls, stream) \
                or recorded_on_joined_stream(project, file, cls, writer, record):
            continue
        for reader in cls.methods.values():
            if reader is writer:
                continue
            for ret in reader.returns:
                if ret.value is not None and _hands_out(ret.value, buffer):
                    out.append(UnwaitedSlotRead(reader, ret, f"self.{buffer}", f"self.{events}", writer, record))
    return out


def scope_stream(project, file: FileModel, site) -> str | None:
    """The code of the stream a native stream scope switches to (``self.copy_stream``); also used by
    :mod:`~streamlint.model.dataswaps`."""
    use = next((u for u in project.scope_use(file, site).uses if u.role is Role.NATIVE_STREAM_CONTEXT), None)
    stream = use.arg("stream") if use is not None else None
    return file.code(stream) if stream is not None else None


def _joined_streams(file: FileModel, cls: ClassInfo) -> set[str] | None:
    """The streams some method of the class joins (``cur.wait_stream(self.copy)``, ``self.copy.synchronize()``);
    None when one synchronises the device (every stream is joined)."""
    out: set[str] = set()
    for method in cls.methods.values():
        aliases = _local_aliases(file, method)
        for site in method.calls:
            if site.method == "wait_stream" and site.node.args:
                code = file.code(site.node.args[0].value)
                out.add(code)
                out.update(aliases.get(code, ()))
            elif site.method == "synchronize":
                if site.receiver is None or file.code(site.receiver).endswith(("cuda", "npu", "xpu", "accelerator")):
                    return None
                out.add(file.code(site.receiver))
    return out


def _self_attr(e) -> str | None:
    while isinstance(e, cst.Subscript):
        e = e.value
    if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self":
        return e.attr.value
    return None


def _event_element(e) -> str | None:
    """``self.E[k]`` -> ``E``."""
    return _self_attr(e) if isinstance(e, cst.Subscript) else None


def _writes_then_records(body) -> list[tuple[str, str, cst.CSTNode]]:
    """(buffer field, event field, record) for each record of ``self.E[k]`` in a scope body that follows a
    call through a field ``self.B`` (``self.B.copy_into(...)``, ``self.B[k].copy_(...)``), statement order."""
    out = []
    written: list[str] = []
    for stmt in getattr(body, "body", ()):
        for node in _calls(stmt):
            func = node.func
            if not isinstance(func, cst.Attribute):
                continue
            if func.attr.value == "record" and _event_element(func.value) is not None:
                out.extend((b, _event_element(func.value), node) for b in written)
                continue
            if func.attr.value == "record_event" and node.args and _event_element(node.args[0].value) is not None:
                out.extend((b, _event_element(node.args[0].value), node) for b in written)
                continue
            field = _self_attr(func.value)
            if field is not None and field not in written and func.attr.value not in _ORDERING:
                written.append(field)
    return out


def _calls(node) -> list[cst.Call]:
    """The calls of a statement in lexical order, not inside a nested definition (nor a nested one itself)."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return []
    return [n for n in local_nodes(node) if isinstance(n, cst.Call)]


def _unconsumed(project, file: FileModel, cls: ClassInfo, events: str) -> bool:
    """Is ``self.<events>`` used in the class only to be built, recorded and measured, and named by no other
    module of the project?"""
    for method in cls.methods.values():
        stack = [method.node.body]
        parents: dict[int, cst.CSTNode] = {}
        while stack:
            cur = stack.pop()
            for child in cur.children:
                parents[id(child)] = cur
                stack.append(child)
            if not (isinstance(cur, cst.Attribute) and cur.attr.value == events
                    and isinstance(cur.value, cst.Name) and cur.value.value == "self"):
                continue
            if not _inert_use(cur, parents):
                return False
    if _named_outside(file, cls, events):
        return False
    return not _other_paths(project, file, events.encode())


def _other_paths(project, file: FileModel, needle: bytes) -> list[str]:
    """The other project files whose bytes contain ``needle`` (a byte search: nothing is parsed)."""
    own = os.path.abspath(file.path)
    try:
        return [p for p in project.paths_containing((needle,)) if os.path.abspath(p) != own]
    except Exception:  # noqa: BLE001 -- a project without a file index: this file only
        return []


def _named_outside(file: FileModel, cls: ClassInfo, events: str) -> bool:
    """Does code of the file outside ``cls``'s own ``self.<events>`` uses name the field other than to build,
    record or measure it (``pf.layer_ready[i]`` waited by a module function)? ``self.<events>`` in another
    class is that class's own field."""
    stack: list[tuple[cst.CSTNode, cst.ClassDef | None]] = [(file.module, None)]
    parents: dict[int, cst.CSTNode] = {}
    while stack:
        cur, owner = stack.pop()
        inner = cur if isinstance(cur, cst.ClassDef) else owner
        for child in cur.children:
            parents[id(child)] = cur
            stack.append((child, inner))
        if not (isinstance(cur, cst.Attribute) and cur.attr.value == events):
            continue
        if isinstance(cur.value, cst.Name) and cur.value.value == "self":
            continue  # the class's own uses are checked above; another class's self is another object
        if not _inert_use(cur, parents):
            return True
    return False


def _local_aliases(file: FileModel, method: FunctionInfo) -> dict[str, set[str]]:
    """``side = self.h2d`` in a method: local name -> the codes it is bound to."""
    out: dict[str, set[str]] = {}
    stack: list[cst.CSTNode] = [method.node.body]
    while stack:
        cur = stack.pop()
        if isinstance(cur, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(cur, cst.Assign) and len(cur.targets) == 1 and isinstance(cur.targets[0].target, cst.Name):
            out.setdefault(cur.targets[0].target.value, set()).add(file.code(cur.value))
        stack.extend(cur.children)
    return out


def _joined_elsewhere(project, file: FileModel, cls: ClassInfo, stream: str) -> bool:
    """Is the stream ``self.<S>`` joined by code outside the class: a ``wait_stream(x.S)`` /
    ``x.S.synchronize()`` in the file, or another project file naming ``S`` with a ``wait_stream`` /
    ``synchronize`` (a byte search: a caller may join it)?"""
    name = stream.rpartition(".")[2]
    if not name.isidentifier():
        return True
    for fn in file.functions.values():
        if fn.class_name == cls.name:
            continue
        aliases = None
        for site in fn.calls:
            if site.method == "wait_stream" and site.node.args:
                target = site.node.args[0].value
            elif site.method == "synchronize" and site.receiver is not None:
                target = site.receiver
            else:
                continue
            codes = [file.code(target)]
            if isinstance(target, cst.Name):
                aliases = _local_aliases(file, fn) if aliases is None else aliases
                codes = sorted(aliases.get(target.value, ()))
                if not codes:  # a parameter or a name we do not follow: it may be this stream
                    return True
            for code in codes:
                if code.startswith("self.") and fn.class_name:
                    continue  # another class's own stream
                if code.rpartition(".")[2] == name or "." not in code:
                    return True
    for path in _other_paths(project, file, name.encode()):
        data = project.file_bytes(path) or b""
        if b"wait_stream" in data or b"synchronize" in data:
            return True
    return False


_DEVICE_WORDS = ("device", "cuda", "npu", "xpu")
_DEVICE_MOVES = frozenset({"cuda", "npu", "xpu"})


def _device_field(cls: ClassInfo, buffer: str) -> bool:
    """Does some method of the class bind ``self.<buffer>`` to device memory: a ``.to(dev)`` / ``.cuda()``
    result, or a call (a factory, an arena's constructor) with a device argument (``device=dev``,
    ``"cuda"``), directly or as the elements of a list? A host list popped for a slot number is not."""
    for method in cls.methods.values():
        stack: list[cst.CSTNode] = [method.node.body]
        while stack:
            cur = stack.pop()
            if isinstance(cur, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            stack.extend(cur.children)
            if isinstance(cur, (cst.Assign, cst.AnnAssign)) and cur.value is not None:
                targets = [t.target for t in cur.targets] if isinstance(cur, cst.Assign) else [cur.target]
                if any(_self_attr(t) == buffer and not isinstance(t, cst.Subscript) for t in targets) \
                        and _device_value(cur.value):
                    return True
    return False


def _device_value(value) -> bool:
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return _device_value(value.elt)
    if isinstance(value, (cst.List, cst.Tuple)):
        return bool(value.elements) and all(_device_value(e.value) for e in value.elements)
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value in _DEVICE_MOVES:
        return True
    for arg in value.args:
        text = _text(arg.value).lower()
        if arg.keyword is not None and arg.keyword.value != "device":
            continue
        if "cpu" in text or "host" in text or "pin" in text:
            continue
        if any(w in text for w in _DEVICE_WORDS):
            return True
    return False


def _text(node) -> str:
    try:
        return node_code(node)
    except Exception:  # noqa: BLE001 -- a node the printer refuses: no evidence
        return ""


def _inert_use(attr: cst.Attribute, parents: dict[int, cst.CSTNode]) -> bool:
    """``self.E = [...]`` / ``self.E[k].record(s)`` / ``s.record_event(self.E[k])`` / ``len(self.E)``."""
    parent = parents.get(id(attr))
    if isinstance(parent, cst.AssignTarget):
        return True
    if isinstance(parent, cst.Arg):
        call = parents.get(id(parent))
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len":
            return True
    if isinstance(parent, cst.Subscript) and parent.value is attr:
        up = parents.get(id(parent))
        if isinstance(up, cst.Attribute) and up.attr.value == "record" and up.value is parent:
            return True
        if isinstance(up, cst.Arg):
            call = parents.get(id(up))
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                    and call.func.attr.value == "record_event":
                return True
    return False


def _hands_out(value, buffer: str) -> bool:
    """``self.B.views(k)`` / ``self.B[k]`` / ``self.B.slots[k].view(...)``: the buffer's contents handed out."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        return _self_attr(value.func.value) == buffer
    if isinstance(value, cst.Subscript):
        return _self_attr(value) == buffer
    return False


__all__ = ["UnwaitedSlotRead", "scope_stream", "unwaited_slot_reads"]
