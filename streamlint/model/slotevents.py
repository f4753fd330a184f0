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

- another method of the class writes through ``B`` (a call on ``self.B`` or on one of its elements) inside a
  stream scope, and records an element of a list event field ``E`` of the object later in the same scope
  (the pairing is by the scope only: medium confidence);
- ``self.E`` is used nowhere in the class but for those records, its construction and ``len``; no other module
  of the project names the field;
- the stream it is recorded on is joined by no code of the class (``wait_stream`` of it, its
  ``synchronize()``, a device synchronisation; also
  :func:`~streamlint.model.flow.deadevents.recorded_on_joined_stream`).

A reader that waits the event itself, or whose caller waits an element (handed on: a use), is not reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamlint._lazy import cst

from streamlint.model.apis import Role
from streamlint.model.file import ClassInfo, FileModel, FunctionInfo
from streamlint.model.flow.deadevents import recorded_on_joined_stream


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
            stream = _scope_stream(project, file, site) if site.function is method else None
            if stream is None:
                continue
            pairs.extend((b, e, method, rec, stream) for b, e, rec in _writes_then_records(site.with_node.body))
    if not pairs:
        return []
    out: list[UnwaitedSlotRead] = []
    dead: dict[str, bool] = {}
    joined = _joined_streams(file, cls)
    for buffer, events, writer, record, stream in pairs:
        if events not in dead:
            dead[events] = _unconsumed(project, file, cls, events)
        if not dead[events] or joined is None or stream in joined \
                or recorded_on_joined_stream(project, file, cls, writer, record):
            continue
        for reader in cls.methods.values():
            if reader is writer:
                continue
            for ret in reader.returns:
                if ret.value is not None and _hands_out(ret.value, buffer):
                    out.append(UnwaitedSlotRead(reader, ret, f"self.{buffer}", f"self.{events}", writer, record))
    return out


def _scope_stream(project, file: FileModel, site) -> str | None:
    """The code of the stream a native stream scope switches to (``self.copy_stream``)."""
    use = next((u for u in project.scope_use(file, site).uses if u.role is Role.NATIVE_STREAM_CONTEXT), None)
    stream = use.arg("stream") if use is not None else None
    return file.code(stream) if stream is not None else None


def _joined_streams(file: FileModel, cls: ClassInfo) -> set[str] | None:
    """The streams some method of the class joins (``cur.wait_stream(self.copy)``, ``self.copy.synchronize()``);
    None when one synchronises the device (every stream is joined)."""
    out: set[str] = set()
    for method in cls.methods.values():
        for site in method.calls:
            if site.method == "wait_stream" and site.node.args:
                out.add(file.code(site.node.args[0].value))
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
    out = []
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(cur, cst.Call):
            out.append(cur)
        stack.extend(reversed(cur.children))
    return out


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
    needle = events.encode()
    try:
        others = [m for m in project.files_containing((needle,)) if m is not file]
    except Exception:  # noqa: BLE001 -- a project without a file index: this file only
        others = []
    return not others


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


__all__ = ["UnwaitedSlotRead", "unwaited_slot_reads"]
