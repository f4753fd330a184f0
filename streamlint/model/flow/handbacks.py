"""A class protocol's consumer that hands the pending field back to its caller (issue 16 §3, "Across the methods
of one class", [cross-method]).

Prefetchers and weight stores hand a side-stream product from one method to the next through a field, and the
second method gives it to its caller::

    def _prefetch(self, phase, it):                       def next_batch(self, phase, it):
        with torch.cuda.stream(self._copy):                   batch = self._next[phase]
            self._next[phase] = to_dev(next(it))              self._prefetch(phase, it)
                                                              return batch

:mod:`~streamlint.model.flow.protocols` analyses a consumer with the producer's write pending only when the
class's protocol says that consumer must join (an event recorded after the write, another consumer joining the
stream before its read): the order of the calls is the caller's, and a class whose join step is elsewhere must
stay silent. A consumer that *returns* the field (or a name bound from it, a part of a tuple taken from it) is the
object's hand-out point: its caller goes on with the value on its current stream, exactly as with a side-stream
local returned unjoined (the hand-back check of ``HandOuts.unjoined_escape``). That is evidence of its own, but only
where nobody can join the producing stream in between:

* no code of the project orders anything after that stream (:func:`~streamlint.model.flow.leaves.
  stream_joined_elsewhere` with ``forks=False``: a wait on it, an event recorded on it, its ``synchronize()`` or
  ``query()``; another class's own stream of the same name, one it constructs itself, does not count);
* no caller of the consumer synchronises the device (``synchronizes``: ``torch.cuda.synchronize()`` between the
  producer's call and the take is a device-wide join that names no stream);
* the write is no blocking copy (:func:`~streamlint.model.flow.devicecopies.blocking_write`);
* the producer records no event on that stream (:func:`records_on`: an event is a join handle, whoever waits it);
* the protocol's other conditions still hold (``protocols._expected``: no method of the class that does not read
  the field joins the stream or synchronises the device, no code outside the class reaches the stream).

The finding is the hand-back's (SL201, medium at most: the calls' order is assumed from the class).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.devicecopies import blocking_write
from streamlint.model.flow.escapes import handed_value
from streamlint.model.flow.fieldfamilies import family
from streamlint.model.flow.leaves import stream_joined_elsewhere, stream_name
from streamlint.model.flow.values import KVal, TVal
from streamlint.model.syntax import local_nodes, normalized_code
from streamlint.model.tensorvocab import VIEW_ATTRS, VIEW_METHODS

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import ClassInfo, FunctionInfo
    from streamlint.model.project import Project

_HOST = re.compile(r"\b(?:len|bool|id|isinstance|repr|str|int|float|type)\(\s*$")


def _mentions(code: str, ref: str) -> bool:
    """``ref`` occurs in ``code`` other than as the argument of a host inspection (``len(self.q)``)."""
    return any(not _HOST.search(code[:m.start()]) for m in re.finditer(rf"(?<![\w.]){re.escape(ref)}\b", code))


def _bindings(file: FileModel, fn: FunctionInfo) -> list[tuple[str, str]]:
    """(name, code of its value) for each plain binding of ``fn``, a tuple target paired with a tuple value item
    by item (``pending, self._pending = self._pending, None``)."""
    out: list[tuple[str, str]] = []
    for node in local_nodes(fn.node.body):
        if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                if isinstance(target, cst.Name):
                    out.append((target.value, normalized_code(file.code(node.value))))
                elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(node.value, (cst.Tuple, cst.List)) \
                        and len(target.elements) == len(node.value.elements):
                    out += [(t.value.value, normalized_code(file.code(v.value)))
                            for t, v in zip(target.elements, node.value.elements) if isinstance(t.value, cst.Name)]
    return out


def hands_back(file: FileModel, fn: FunctionInfo, field: str) -> bool:
    """Does ``fn`` return or yield the field ``field`` (``self.F``, an entry of it), or a name bound from it
    (through other names: ``rows = pending[1]`` after ``pending, self._pending = self._pending, None``)?"""
    refs = {field}
    bindings = _bindings(file, fn)
    grown = True
    while grown:
        grown = False
        for name, code in bindings:
            if name not in refs and name not in fn.all_params and any(_mentions(code, r) for r in refs):
                refs.add(name)
                grown = True
    for node in local_nodes(fn.node.body):
        value = node.value if isinstance(node, (cst.Return, cst.Yield)) else None
        if isinstance(value, cst.From):
            value = value.item
        if value is not None:
            code = normalized_code(file.code(value))
            if any(_mentions(code, r) for r in refs):
                return True
    return False


def _own_stream(cls: ClassInfo, name: str) -> bool:
    """Every assignment of ``self.<name>`` in the class's methods makes a stream of its own (``Stream(...)``), or
    that or ``None`` under a test (``torch.cuda.Stream() if cuda else None``)."""
    def fresh(v) -> bool:
        if isinstance(v, cst.IfExp):
            return all(fresh(x) or isinstance(x, cst.Name) and x.value == "None" for x in (v.body, v.orelse)) \
                and (fresh(v.body) or fresh(v.orelse))
        return isinstance(v, cst.Call) and (dotted(v.func) or "").endswith("Stream")
    values = [a.value for m in cls.methods.values() for a in m.assigns if a.target == f"self.{name}"]
    return bool(values) and all(fresh(v) for v in values)


def records_on(interp, st, stream: str) -> bool:
    """Does the producer's run hold, at its exit ``st``, an event whose record covers some of ``stream``'s work (an
    event of the object, a local kept in a container field or handed on, ``ev.record()`` under the stream's scope
    naming no stream, an event recorded after a wait on the stream), before or after the write? That event is a join handle: its waiter orders the stream (a record before the write is the
    producer's early-record finding, the root cause, :mod:`~streamlint.model.flow.records`), so the hand-back is
    no evidence that nobody joins. Events only timing work (``elapsed_time``) are no handle."""
    return any(stream in snap for k, snap in st.events.items() if k not in interp.timing_events)


def unjoined_hand_back(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo, p, synchronizes: Callable
                       ) -> bool:
    """``fn`` hands the pending field ``p`` (a ``protocols.Pending``) back to its caller and nothing in the project
    orders anything after its stream (see the module): the hand-back is the protocol's join point."""
    field, stream = p.field, p.stream
    name = stream_name(stream)
    if name is None or not stream.startswith("self.") or stream.count(".") != 1 or not hands_back(file, fn, field):
        return False
    if p.handles or blocking_write(project, file, p.node):  # (the producer is a method of the same class)
        return False  # an event on the stream is a join handle; a blocking copy leaves nothing in flight
    owner = cls.name if _own_stream(cls, name) else None
    return not stream_joined_elsewhere(project, name, forks=False, owner=owner, field_of=cls.name) \
        and not any(site.function is not None and synchronizes(project, model, site.function)
                    for model, site in callers_of(project, file, fn) or ())  # (see the module)


class HandBacks:
    """The hand-back of a name bound from an entry of a container field (mixin of the interpreter): ``batch =
    self._next[phase]`` holds the entry's tensor as it was when the name took it. The container is one storage in
    the interpreter (``storage.element_field_key``), so a later store of another entry on a side stream
    (``self._prefetch(...)`` queuing the next batch before ``return batch``) would read as a write of the tensor
    handed back; the hand-back is judged with the write the entry had when the name was bound (still unjoined at
    the return, or not), when the function binds that name once."""

    def bind(self, st, name: str, v: object, node) -> None:
        super().bind(st, name, v, node)  # type: ignore[misc]
        if self.depth or node is None or not isinstance(v, (TVal, KVal)):  # type: ignore[attr-defined]
            return
        base = family(normalized_code(self.cfile.code(_unviewed(node))))  # type: ignore[attr-defined]
        if base is None:
            return
        sid = v.sid if isinstance(v, TVal) else st.long.get(base)  # (a place no write has reached yet: none)
        S = st.stores.get(sid) if sid is not None else None
        if S is None or S.kind == "long" and S.name == base:
            self.__dict__.setdefault("entry_binds", {})[name] = (base, sid, S.last_write if S is not None else None)

    def seeded_hand_back(self, st, returned: object) -> bool:
        """A method its own class runs inline (``self._shard(sid)`` from ``lookup``: its end is judged in
        those callers) that returns a class protocol's pending field (seeded at its entry: ``shard =
        self.warm_shards.pop(sid)``), while no method calling it names that field: the callers run it inline unseeded
        (the protocol seeds only a method that reads the field itself), so the hand-back is judged here or nowhere."""
        sids = {tv.sid for tv in self.tensors(st, returned)} & set(self.protocol_sources)  # type: ignore[attr-defined]
        fields = {st.stores[sid].name for sid in sids if sid in st.stores}
        if not fields:
            return False
        cls = self.file.classes.get(self.fn.class_name or "")  # type: ignore[attr-defined]
        name = self.fn.node.name.value  # type: ignore[attr-defined]
        callers = [m for m in (cls.methods.values() if cls is not None else ()) if m is not self.fn  # type: ignore[attr-defined]
                   and any(s.method == name and isinstance(s.receiver, cst.Name) and s.receiver.value == "self"
                           for s in m.calls)]
        from streamlint.model.flow.joinowners import code_without_comments  # (a comment naming it is no mention)

        return not any(_mentions(code_without_comments(self.file.code(m.node.body)), f)  # type: ignore[attr-defined]
                       for m in callers for f in fields)

    def handed_write(self, S, node) -> object:
        """The write of ``S`` a hand-back at ``node`` hands the caller (see the class)."""
        handed = handed_value(node)
        if not isinstance(handed, cst.Name) or len(self.fn.name_assigns.get(handed.value, ())) != 1:  # type: ignore[attr-defined]
            return S.last_write
        bound = self.__dict__.get("entry_binds", {}).get(handed.value)
        if bound is None or S.kind != "long" or S.name != bound[0] or bound[1] not in (None, S.sid) \
                or _written_through(self.file, self.fn, handed.value, S.last_write):  # type: ignore[attr-defined]
            return S.last_write
        return bound[2]


def _unviewed(node):
    """The expression a chain of views is taken of (``self.bufs[slot].reshape(b, n)`` -> ``self.bufs[slot]``): a
    view of an entry shares the entry's storage, so the name holds the entry as it was when bound."""
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in VIEW_METHODS:
            node = node.func.value
        elif isinstance(node, cst.Attribute) and node.attr.value in VIEW_ATTRS:
            node = node.value
        else:
            return node


def _written_through(file: FileModel, fn: FunctionInfo, name: str, lw) -> bool:
    """Does the function write the entry through the name itself (``buf.copy_(src)``, ``buf[:n] = x``,
    ``out=buf``, ``buf += x``), or does its last write's statement name it (``fill(buf)``)? Then the write after
    the binding may be a write of the very tensor handed back: no stale entry."""
    ref = rf"(?<![\w.]){re.escape(name)}"
    if lw is not None and lw.node is not None and re.search(rf"{ref}\b", file.code(lw.node)):
        return True
    return re.search(rf"{ref}(?:\.\w+_\(|\[[^\]]*\]\s*=(?!=)|\s*[-+*/]=)|\bout\s*=\s*{re.escape(name)}\b",
                     file.code(fn.node.body)) is not None
