"""Host writes of host memory (mixin of :class:`~streamlint.model.flow.interp.Interp`).

``self.batch_cpu.fill_(v)`` on a CPU (pinned) tensor runs on the host: when it returns the memory holds the
new contents, so any work a stream is handed afterwards (the H2D ``dev.copy_(self.batch_cpu,
non_blocking=True)`` on a copy stream) is ordered after it. No stream produces it, and a side stream reading
it needs no wait on the current one. The write is recorded on the host timeline (``HOST``, ordered before
any later stream work: ``values.ordered_before``); it is still checked against what streams did to that memory before, as a
write on the current stream was (a pinned staging buffer overwritten while the previous H2D from it may
still run, a pinned buffer a side-stream D2H fills overwritten unsynchronised: both still reported).

Which tensors are certainly host memory: a storage the flow already knows as host (a local CPU factory,
``.cpu()``), or a field of the class every assignment of which (in this file; no other file of the project as
discovered has a byte marker of assigning a field of that name: ``.f =``, ``.f:``, ``.f, ``, ``.f)``, and no file
names it in quotes next to a ``setattr(``) is ``None``, a settled host value whose outermost placement is the host
(``torch.empty(n, device="cpu")``, ``pin_memory=True``, ``x.cpu()``, ``torch.from_numpy(a)``; not
``torch.zeros(n, device="cpu").to(device)``, ``.cuda()``, ``.npu()``: a move that may leave the host decides), a
torch factory with a ``pin_memory=`` argument and no ``device=`` while the project never changes the default
device (``torch.set_default_device``, ``with torch.device(...)`` as any with-item; bytes, comments included),
or another such field (``self.a, self.b = self.b, self.a``), or a Python list of numbers (``[0] * n``, ``[0, 0]``,
``[0 for _ in range(n)]``, ``[]`` declared ``list[int]``: host bookkeeping such as per-slot counters). An op is a host write when every tensor it
reads and writes is such host memory and it is not a possibly asynchronous copy (``non_blocking=``, a
positional flag); a blocking ``dst.copy_(src)`` into such host memory is one whatever ``src`` is (torch finishes a
copy with a host side before it returns: a device source is read on the current stream and waited for).

A field of a record handed in (``lane.shadow`` where ``lane: _Lane``, :func:`host_record_field`) is host memory
when the record is a project dataclass (no project base) whose every construction the project shows binds the
field, positionally or by keyword, to such host memory (a local bound only to ``torch.empty(n, pin_memory=pin)``,
``x.to("cpu")``), and no file assigns the field otherwise (``.shadow =``, ``setattr``, ``replace(lane, shadow=...)``;
bytes only) nor derives a class from the record (a subclass is built with its own arguments)."""

from __future__ import annotations

import os
import re
from dataclasses import replace

from streamlint._lazy import cst
from streamlint.model.devobjects import object_classes
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.values import HOST, Access, State
from streamlint.model.placement import host_container_field, host_factory, settled_host_value
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.streams import derived
from streamlint.model.syntax import node_code
from streamlint.model.uses import bind_arguments

_DEFAULT_DEVICE = (b"set_default_device", b"torch.device(", b"with device(", b", device(", b"(device(")
_ASYNC_COPIES = frozenset({"copy_", "to", "cuda", "npu", "pin_memory"})


def _none(v: cst.BaseExpression) -> bool:
    return isinstance(v, cst.Name) and v.value == "None"


def _default_device_changed(project, file: FileModel) -> bool:
    """Does any project file set the default device (``torch.set_default_device``) or build under a device
    context (``with torch.device("cuda"):``)? Then a factory without ``device=`` may give device memory. (Bytes
    only: no file is parsed.)"""
    memo = derived(project, "default_device_changed")
    if "v" not in memo:
        memo["v"] = any(_changes_default(project.file_bytes(p) or b"")
                        for p in project.paths_containing(_DEFAULT_DEVICE))
    return memo["v"]


_NO_MEMORY_DEVICE = re.compile(rb"""device\(\s*["'](meta|cpu)["']\s*\)""")
_DEVICE_CALL = re.compile(rb"(?<![\w.])(?:torch\.)?device\(")


def _changes_default(data: bytes) -> bool:
    """Does a line of the file set the default device, or enter a device context (a ``with`` line naming
    ``torch.device(`` anywhere in its items, ``with torch.device("meta") if m else torch.device(d):`` included, or a
    line opening with it) other than ``"meta"`` (no memory, no stream work) or ``"cpu"`` (host memory)? A
    ``torch.device(...)`` handed to a call on another line is no context."""
    for line in data.splitlines():
        if b"set_default_device" in line:
            return True
        text = line.lstrip().lstrip(b"(").lstrip()
        if (text.startswith((b"with ", b"async with ", b"torch.device(", b"device(")) and
                len(_DEVICE_CALL.findall(line)) > len(_NO_MEMORY_DEVICE.findall(line))):
            return True  # (an item of a parenthesised ``with (...)`` on its own line counts as well)
    return False


def _pinned_factory(project, file: FileModel, fn, v: cst.BaseExpression) -> bool:
    """``torch.empty(n, dtype=..., pin_memory=pin)``: a torch factory naming ``pin_memory`` and no ``device``."""
    if not isinstance(v, cst.Call) or not any(a.keyword is not None and a.keyword.value == "pin_memory"
                                              for a in v.args):
        return False
    target = file.resolve(v.func, fn) if isinstance(v.func, (cst.Name, cst.Attribute)) else None
    return host_factory(target, v) and not any(a.keyword is not None and a.keyword.value == "device"
                                               for a in v.args) and not _default_device_changed(project, file)


_SCALARS = frozenset({"int", "float", "bool"})


def _number(e: cst.BaseExpression) -> bool:
    if isinstance(e, cst.UnaryOperation):
        e = e.expression
    return isinstance(e, (cst.Integer, cst.Float)) or isinstance(e, cst.Name) and e.value in ("True", "False")


def _scalar_list(node: cst.CSTNode, v: cst.BaseExpression) -> bool:
    """A Python list of numbers, host bookkeeping no stream touches: ``[0] * n``, ``[0, 0]``, ``[0 for _ in
    range(n)]``, or ``[]`` declared ``list[int]`` (an empty list alone may be filled with tensors later)."""
    if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Multiply):
        v = v.left if isinstance(v.left, cst.List) else v.right
    if isinstance(v, cst.ListComp):
        return _number(v.elt)
    if not isinstance(v, cst.List):
        return False
    if v.elements:
        return all(isinstance(el, cst.Element) and _number(el.value) for el in v.elements)
    ann = node.annotation.annotation if isinstance(node, cst.AnnAssign) else None
    return isinstance(ann, cst.Subscript) and (dotted(ann.value) or "").rsplit(".", 1)[-1] in ("list", "List") \
        and len(ann.slice) == 1 and isinstance(ann.slice[0].slice, cst.Index) \
        and dotted(ann.slice[0].slice.value) in _SCALARS


def host_fields(project, file: FileModel, cls: ClassInfo) -> frozenset[str]:
    """The fields of ``cls`` that certainly hold host memory (see the module docstring)."""
    memo = derived(project, "host_write_fields")
    key = (os.path.realpath(file.path), cls.name)
    if key in memo:
        return memo[key]
    values: dict[str, list] = {}
    for a in file.assigns:
        if a.target.startswith("self.") and a.target.count(".") == 1 and a.target[5:].isidentifier():
            values.setdefault(a.target[5:], []).append((a.function, a.value, a.node))
    own = {attr for attr, vs in values.items()
           if any(fn is not None and fn.class_name == cls.name for fn, _v, _n in vs)}
    fields = {attr for attr in own if all(_none(v) or settled_host_value(v) or _pinned_factory(project, file, fn, v)
                                          or _scalar_list(node, v) or dotted(v) in {f"self.{o}" for o in own}
                                          for fn, v, node in values[attr])
              and any(not _none(v) for _fn, v, _n in values[attr])}
    changed = True
    while changed:  # `self.a = self.b`: only fields of the set
        changed = False
        for attr in list(fields):
            if any(not _none(v) and dotted(v) is not None and dotted(v).startswith("self.")
                   and dotted(v)[5:] not in fields for _fn, v, _n in values[attr]):
                fields.discard(attr)
                changed = True
    here = os.path.realpath(file.path)
    for attr in list(fields):  # a subclass elsewhere may set it to anything (bytes only: no file is parsed)
        markers = (f".{attr} =".encode(), f".{attr}=".encode(), f".{attr}, ".encode(), f".{attr})".encode(),
                   f".{attr}:".encode(), f".{attr} :".encode())
        named = (f'"{attr}"'.encode(), f"'{attr}'".encode())  # setattr(obj, "attr", v), here too
        if any(os.path.realpath(p) != here for p in project.paths_containing(markers)) \
                or set(project.paths_containing(named)) & set(project.paths_containing((b"setattr(",))):
            fields.discard(attr)
    memo[key] = frozenset(fields)
    return memo[key]


def _reassigned_elsewhere(project, here: str, attr: str) -> bool:
    """Does a project file other than ``here`` bind a field named ``attr`` (``.attr =``, a tuple target), or does
    any file set it by name next to a ``setattr(``? (Bytes only: no file is parsed.)"""
    markers = (f".{attr} =".encode(), f".{attr}=".encode(), f".{attr}, ".encode(), f".{attr})".encode(),
               f".{attr}:".encode(), f".{attr} :".encode())
    named = (f'"{attr}"'.encode(), f"'{attr}'".encode())
    return any(os.path.realpath(p) != here for p in project.paths_containing(markers)) \
        or bool(set(project.paths_containing(named)) & set(project.paths_containing((b"setattr(",))))


def host_container_of(project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """``slot.pinned`` of a ``slot: PageSlot`` where the class keeps host buffers in the container field
    (:func:`~streamlint.model.placement.host_container_field`: ``self.pinned[k] = torch.empty(..., device="cpu",
    pin_memory=True)``), no code of the file outside the class stores the field (``lane.bufs = bufs``) and no other
    file binds a field of that name (bytes only)."""
    return host_container_field(file, cls, attr) and not _reassigned_elsewhere(project, os.path.realpath(file.path), attr) \
        and not any(a.target.endswith(f".{attr}") and not a.target.startswith("self.") for a in file.assigns)


def _copied_or_derived(project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """Can a record typed ``cls`` hold ``attr`` bound elsewhere than in a construction of ``cls`` itself: a project
    subclass (``class GpuLane(Lane)``, built with its own arguments), or a copy that rebinds the field by keyword
    (``dataclasses.replace(lane, shadow=...)``)? Unsure (too many files name the class) counts as yes."""
    from streamlint.model.accelerators import direct_subclasses

    if len(project.paths_containing((cls.name.encode(),))) > MAX_CALLER_FILES or direct_subclasses(project, file, cls):
        return True
    return bool(set(project.paths_containing((b"replace(",))) & set(project.paths_containing((f"{attr}=".encode(),))))


def _dataclass_fields(cls: ClassInfo) -> list[str] | None:
    """The ``__init__`` fields of a ``@dataclass`` with no base, in order; None for any other class."""
    if cls.bases or not any((dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "")
                            .rsplit(".", 1)[-1] == "dataclass" for d in cls.node.decorators):
        return None
    body = cls.node.body.body if isinstance(cls.node.body, cst.IndentedBlock) else ()
    return [st.body[0].target.value for st in body if isinstance(st, cst.SimpleStatementLine)
            and len(st.body) == 1 and isinstance(st.body[0], cst.AnnAssign) and isinstance(st.body[0].target, cst.Name)
            and "ClassVar" not in node_code(st.body[0].annotation.annotation)]


def _host_local(project, file: FileModel, fn: FunctionInfo | None, v: cst.BaseExpression) -> bool:
    """``v`` is host memory when it returns: a settled host value, a pinned factory, or a local of ``fn`` bound
    only to such values."""
    if settled_host_value(v) or _pinned_factory(project, file, fn, v):
        return True
    if not isinstance(v, cst.Name) or fn is None or v.value in fn.all_params:
        return False
    values = fn.name_assigns.get(v.value) or []
    return bool(values) and all(settled_host_value(x) or _pinned_factory(project, file, fn, x) for x in values)


def _bound_argument(call: cst.Call, params: list[str], name: str) -> cst.BaseExpression | None | bool:
    """The argument ``call`` binds to the parameter ``name`` of ``params`` (:func:`~streamlint.model.uses.bind_arguments`);
    False when a ``*args`` / ``**kwargs`` hides which."""
    return False if any(a.star for a in call.args) else bind_arguments(tuple(params), call).get(name)


def host_record_field(project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """Does every construction of the dataclass ``cls`` the project shows bind ``attr`` to host memory (see the
    module docstring)?"""
    memo = derived(project, "host_record_field")
    key = (os.path.realpath(file.path), cls.name, attr)
    if key not in memo:
        memo[key] = False
        fields = _dataclass_fields(cls)
        if fields is None:
            memo[key] = _host_object_field(project, file, cls, attr)
            return memo[key]
        if attr not in fields or attr in cls.methods \
                or any(a.target.endswith(f".{attr}") for a in file.assigns) \
                or _reassigned_elsewhere(project, key[0], attr) or _copied_or_derived(project, file, cls, attr):
            return False
        paths = project.paths_containing((f"{cls.name}(".encode(),))
        if len(paths) > MAX_CALLER_FILES:
            return False
        found = []
        for path in paths:
            model = project.file(path)
            for site in model.calls if model is not None else ():
                sym = project.symbol(site.target, model) if site.target is not None else None
                if sym is None or sym[0] is not cls:
                    continue
                if (bound := _bound_argument(site.node, fields, attr)) is False:
                    return False
                found.append(bound is not None and _host_local(project, model, site.function, bound))
        memo[key] = bool(found) and all(found)
    return memo[key]


def _false(e: cst.BaseExpression) -> bool:
    return isinstance(e, cst.Name) and e.value == "False"


def _maybe_async(call: cst.Call) -> bool:
    """May this copy (``copy_``, ``to``, ...) run asynchronously? Not when it has at most one positional argument
    and no keyword but a literal ``non_blocking=False``; ``dst.copy_(src, False)`` is blocking as well (issue 16,
    "Blocking transfers synchronise")."""
    positional = [a for a in call.args if a.keyword is None]
    keywords = [a for a in call.args if a.keyword is not None]
    if any(a.keyword.value != "non_blocking" or not _false(a.value) for a in keywords):
        return True
    extra = positional[1:]
    return bool(extra) and not (call.func.attr.value == "copy_" and len(extra) == 1 and _false(extra[0].value))


def _host_object_field(project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """``slot.host`` where ``slot`` is an instance of a plain project class (not a dataclass): the class itself
    keeps host memory in the field (:func:`host_fields`: every ``self.host = ...`` a settled host value;
    :func:`~streamlint.model.placement.host_container_field`: a dict of pinned buffers grown only with host
    factories), no code of this file binds the field through another receiver (``slot.host = dev`` in a function),
    no other file binds it at all (bytes, as :func:`host_fields`), and no project class derives from it."""
    if attr in cls.methods or any(a.target.endswith(f".{attr}") and not a.target.startswith("self.")
                                  for a in file.assigns) \
            or _reassigned_elsewhere(project, os.path.realpath(file.path), attr) \
            or _copied_or_derived(project, file, cls, attr):
        return False
    return host_container_field(file, cls, attr) or attr in host_fields(project, file, cls) \
        or _constructed_host(project, file, cls, attr)


def _constructed_host(project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """``state.ring`` where the plain class binds ``self.ring`` only in ``__init__``, to its parameter ``ring``, and
    every construction the project shows (``State(...)``, ``cls(...)`` in a classmethod of the class) binds that
    parameter to host memory, or to a tuple / list of host buffers (``tuple(torch.empty(n, pin_memory=True) for _
    in range(2))``): the field holds host memory, its elements too."""
    init = cls.methods.get("__init__")
    values = [a.value for m in cls.methods.values() for a in m.assigns if a.target == f"self.{attr}"]
    params = [p for p in init.params if p != "self"] if init is not None else []
    if init is None or len(values) != 1 or not isinstance(values[0], cst.Name) or values[0].value not in params \
            or not any(a.value is values[0] for a in init.assigns):
        return False
    name = values[0].value
    paths = project.paths_containing((f"{cls.name}(".encode(),))
    if len(paths) > MAX_CALLER_FILES:
        return False
    found = []
    for path in dict.fromkeys([*paths, file.path]):  # (the class's own file: its `cls(...)` constructions)
        model = project.file(path)
        for site in model.calls if model is not None else ():
            sym = project.symbol(site.target, model) if site.target is not None else None
            own = model is file and isinstance(site.node.func, cst.Name) and site.node.func.value == "cls" \
                and site.function is not None and site.function.class_name == cls.name
            if not own and (sym is None or sym[0] is not cls):
                continue
            if (bound := _bound_argument(site.node, params, name)) is False:
                return False
            found.append(bound is not None and _host_buffers(project, model, site.function, bound))
    return bool(found) and all(found)


def _host_buffers(project, file: FileModel, fn: FunctionInfo | None, v: cst.BaseExpression) -> bool:
    """Host memory (:func:`_host_local`), or a tuple / list of it: a display, a comprehension or ``tuple(...)`` /
    ``list(...)`` of a generator."""
    if isinstance(v, cst.Call) and (dotted(v.func) or "") in ("tuple", "list") and len(v.args) == 1 \
            and not v.args[0].star:
        v = v.args[0].value
    if isinstance(v, (cst.GeneratorExp, cst.ListComp)):
        return _host_local(project, file, fn, v.elt)
    if isinstance(v, (cst.Tuple, cst.List)):
        return bool(v.elements) and all(not isinstance(el, cst.StarredElement)
                                        and _host_local(project, file, fn, el.value) for el in v.elements)
    return _host_local(project, file, fn, v)


class HostWrites:
    """Host-timeline writes (mixin of the interpreter). Interp state it uses: ``clock``, ``frames``,
    ``project``. It asks storage (op, tensors, place, is_host)."""

    def op(self, st: State, node: cst.CSTNode, reads: list, writes: list = (), result: bool = True,
           read_writes: bool = True):
        host = self._host_write(st, node, reads, writes) if writes else ()
        t0 = self.clock
        handed = frozenset(tv.sid for v in reads for tv in self.tensors(st, v) if not self.is_host(st, tv)
                           and self._host_memory(st, tv)) if self.unseen_call and not writes else frozenset()
        gates = self.note_handed_gates(st, handed, t0 + 1)
        saved, self.host_handed_now = (self.host_handed_now, self.gates_now), handed
        self.gates_now = gates
        try:
            out = super().op(st, node, reads, writes, result, read_writes)  # type: ignore[misc]
        finally:
            self.host_handed_now, self.gates_now = saved
        self.host_handed_reads |= {(sid, t0 + 1) for sid in handed}
        for sid in host:
            S = st.stores.get(sid)
            lw = S.last_write if S is not None else None
            if lw is not None and lw.time == t0 + 1 and lw.stream == st.cur:
                S.last_write = Access(HOST, lw.time, lw.node, lw.snap, lw.label, lw.part)
        return out

    def unseen_call_op(self, st: State, node: cst.Call, reads: list) -> object:
        """The generic reading of a call of code the analysis does not see (a method of an object of unknown
        class, a library function) handed tensors: they are read on the current stream at the call, and a
        result is made there. When one of them is a field that certainly holds host memory (:func:`host_fields`:
        a pinned staging pool), the call may only describe it (its address and size for a transfer engine) or
        read it on the host: no evidence of a stream read (``Race.host_handed``: medium)."""
        saved, self.unseen_call = self.unseen_call, True
        try:
            return self.op(st, node, reads)
        finally:
            self.unseen_call = saved

    def note_handed_gates(self, st: State, handed: frozenset[int], time: int) -> dict[int, frozenset[str]]:
        """The events recorded, on the stream that last wrote each host storage ``handed`` to a call of code not seen,
        after that write (``ev.record(copy_stream)`` after the D2H into the pinned slot, then
        ``agent.describe(slot_view)``): the write's join tokens existing when the call is handed the memory."""
        found: dict[int, frozenset[str]] = {}
        for sid in handed:
            S = st.stores.get(sid)
            lw = S.last_write if S is not None else None
            if lw is None or lw.stream in (st.cur, HOST):
                continue
            keys = frozenset(k for k, snap in st.events.items() if snap.get(lw.stream, -1) >= lw.time)
            if keys:
                self.handed_gates[(sid, time)] = found[sid] = keys
        return found

    def mark_gated(self) -> None:
        """At the end of the run: a race one access of which is a call of code not seen handed host memory
        (``Race.host_handed``) after the memory's last write on another stream was covered by an event this function
        then hands on (kept on an object or in a record for its consumer: ``handed_events``) is a gated hand-off
        (``Race.gated``): the call is given the memory with the join token of its write, which travels to whoever reads
        the data (a transfer engine's descriptor built from the slot's address, the event stored beside it); the
        finding rests on that call reading the data itself (low). An early record only such a race found goes."""
        self.races = {k: replace(r, gated=True) if r.host_handed and r.gates & self.handed_events else r
                      for k, r in self.races.items()}
        for ident, gates in self.early_gates.items():
            if gates & self.handed_events:
                self.early_records.pop(ident, None)

    def race_gates(self, sid: int, earlier: int) -> frozenset[str]:
        """The gates (:meth:`note_handed_gates`) of the access at hand, or of the earlier one at time ``earlier``."""
        return self.gates_now.get(sid, frozenset()) | self.handed_gates.get((sid, earlier), frozenset())

    def handed_host(self, sid: int, earlier: int) -> bool:
        """Is the access at hand, or the earlier one (at time ``earlier``) it races with, a call of code not seen
        handed storage ``sid``, a field certainly in host memory (:meth:`unseen_call_op`)?"""
        return sid in self.host_handed_now or (sid, earlier) in self.host_handed_reads

    def _host_write(self, st: State, node: cst.CSTNode, reads: list, writes: list) -> tuple[int, ...]:
        """The storages an op writes on the host, or () when it is not certainly host work."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in _ASYNC_COPIES and _maybe_async(node):
            return ()
        ws = [tv for v in writes for tv in self.tensors(st, self.place(st, v))]
        rs = [tv for v in reads for tv in self.tensors(st, v)]
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "copy_":
            rs = []  # a blocking copy into host memory: done when it returns, whatever its source (docstring)
        if not ws or not all(self._host_memory(st, tv) for tv in ws + rs):
            return ()
        return tuple({tv.sid for tv in ws})

    def _host_memory(self, st: State, tv) -> bool:
        if self.is_host(st, tv):
            return True
        S = st.stores.get(tv.sid)
        name = S.name if S is not None and S.kind == "long" else None
        recv, _, attr = (name or "").partition(".")
        if recv != "self" and recv.isidentifier() and attr.isidentifier():
            return self._host_record(recv, attr)
        if not name or not name.startswith("self.") or not name[5:].isidentifier():
            return False
        file, fn = next(((f, fn) for f, fn in reversed(self.frames) if fn.class_name), (None, None))
        cls = file.classes.get(fn.class_name or "") if file is not None else None
        return cls is not None and name[5:] in host_fields(self.project, file, cls)


    def _host_record(self, recv: str, attr: str) -> bool:
        """``recv.attr`` where ``recv`` is a parameter of the innermost function naming it, annotated with project
        dataclasses each of which holds host memory in ``attr`` (:func:`host_record_field`)."""
        for file, fn in reversed(self.frames):
            if recv in fn.all_params or recv in fn.name_assigns:
                classes = object_classes(self.project, file, fn, cst.Name(recv))
                return bool(classes) and all(host_record_field(self.project, mod, cls, attr)
                                             or host_container_of(self.project, mod, cls, attr) for cls, mod in classes)
        return False


__all__ = ["HostWrites", "host_container_of", "host_fields", "host_record_field"]
