"""Field families: a container field of ``self`` and its entries as one place of a class protocol (issue 16
§3, "Across the methods of one class", "Tensors in containers and objects").

Offloaders, prefetchers and KV-cache tiers hand device work between their methods through dict / list
fields: ``prefetch(key)`` copies a weight on ``self.stream`` and keeps it as ``self._gpu_cache[key] = w``
with ``self._events[key] = ev`` recorded after the copy; ``get(key)`` returns ``self._gpu_cache[key]``
after ``current_stream().wait_event(self._events[key])``. The *family* of a field ``self.F`` is the field
and every entry of it (``self.F[k]``, ``self.F.get(k)``, ``self.F.pop(k)``, ``self.F.setdefault(k, ..)``,
loops over ``self.F.values()`` / ``items()``; for a list / deque / queue filled by ``append`` / ``put``, its
takes ``pop()`` / ``pop(0)`` / ``popleft()`` / ``get()``, and each part of a tuple unpacked from one, ``kv, ev =
self.pending.popleft()``): one storage in the interpreter (``storage.element_field_key``).

:func:`family_pending` extends a producer's summary (:mod:`~streamlint.model.flow.protocols`): a fresh
local written on a side stream of the object and stored into an entry of ``self.F`` (the interpreter's
``kept_at``), unjoined at the producer's exit, is a pending write of ``self.F``; the events recorded on that
stream after it and stored into an entry of ``self.E`` (``field_events``, or ``self.E[k].record(s)``)
make ``self.E`` its event family. The consumer is seeded with ``self.F`` pending and each event family
recorded (:func:`seed_families`): a wait on *any* entry of ``self.E`` (by subscript, ``get`` / ``pop``, or
a local bound from one) is the join, since keys cannot be compared across methods. A consumer that waits on
something this cannot resolve to a family (a loop variable over another container, a parameter) is not
analysed with the family pending (:func:`unresolved_waits`): silence rather than a guess.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.values import KVal
from streamlint.model.syntax import node_code, normalized_code

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo

_ENTRY = re.compile(r"^(self\.\w+)(?:\[.*\]|\.(?:get|pop|setdefault|popleft|get_nowait)\(.*\))$", re.S)
_WAITS = ("wait_event", "wait", "synchronize", "query")
_STREAMISH = re.compile(r"(?<![a-z])stream", re.I)  # `self.io_stream`, `current_stream()`; not `upstream_ready`
_COPIES = ("to", "cuda", "npu")
_DTYPE = re.compile(r"dtype|float|half|bfloat|\bu?int\d|bool|complex")  # `.to(torch.float16)`: a cast, a kernel


class FieldFamilies:
    """The consumer's side (mixin of :class:`~streamlint.model.flow.interp.Interp`): ``self.F.get(k)`` /
    ``.pop(k)`` / ``.setdefault(k, d)`` of a seeded family reads the family's storage; a wait on an entry of a
    seeded event family, or on a local bound from one, waits on the family."""

    def family_receiver(self, st, recv) -> bool:
        sid = st.long.get(recv.key) if recv.key.startswith("self.") else None
        return sid is not None and sid in self.protocol_sources

    def family_seeded(self, key: str, sid: int | None) -> bool:
        """An event family seeded with a producer's pending entries (or an event recorded here and kept only in
        such families: ``self._fetch_next()`` queuing the next batch after the take): kept on the object for this
        consumer to wait on, not handed to its caller with what it returns."""
        if sid is None or sid not in self.family_sids:
            return False
        fields = self.field_events.get(key)  # (one recorded here for a later element, kept in that family only)
        return key in self.seeded_families or bool(fields) and all(f"self.{f}" in self.seeded_families for f in fields)

    def family_parts(self, st, v, n: int) -> list:
        """``v`` names an element taken from a seeded family (``self.pending[0]`` from ``self.pending.popleft()``):
        a part of a tuple unpacked from it (``t, ev = ...``) is that family's place (``v``) where a producer's
        appended tuple holds a side-stream tensor or an event (:func:`tuple_parts`), else unknown (``None``)."""
        base = family(v.key) if isinstance(v, KVal) else None
        if base is None or v.key == base or not self.family_receiver(st, KVal(base)):
            return [None] * n
        cls = self.cfile.classes.get(self.cfn.class_name or "") if self.cfn is not None else None
        mask = tuple_parts(self.cfile, cls, base, n) if cls is not None else ()
        return [v if i < len(mask) and mask[i] else None for i in range(n)]

    def family_event_key(self, st, key: str) -> str:
        if key in st.events or not self.family_events:
            return key
        base = family(key)
        return base if base in st.events else resolve_local_event(self, st, key)


def family(key: str) -> str | None:
    """``self.F[k]`` / ``self.F.get(k)`` / ``self.F.pop(k)`` / ``self.F.setdefault(k, d)`` -> ``self.F``."""
    m = _ENTRY.match(key)
    return m.group(1) if m is not None else None


def family_pending(interp, st, lw_ok) -> dict[str, tuple]:
    """The container fields (``self.F``) a producer's run left holding a local whose last write is pending on
    a side stream at the exit state ``st``: field -> (last write, event families recorded after it).
    ``lw_ok(S)`` gives the storage's last write when it is pending on a ``self.*`` side stream, ``()`` when it
    was not written on a side stream on this path, else None (the producer joined it: the field is then not
    pending)."""
    out: dict[str, tuple] = {}
    for (sid, field), _node in interp.__dict__.get("kept_at", {}).items():
        key = f"self.{field}"
        if key in interp.field_writes and any(s == sid for s in interp.field_writes[key]):
            continue  # `self.F = t`: the plain field (protocols.py)
        S = st.stores.get(sid)
        if S is None or S.kind == "host":
            continue
        lw = lw_ok(S)
        if lw == ():
            continue
        if lw is None:
            out[key] = None  # joined on this path
            continue
        if blocking_copy(lw.node):
            continue  # the host waited for the copy (a host source), or so we cannot tell: no pending write
        if key in out:
            old = out[key]
            if old is None or old[0].stream != lw.stream:
                out[key] = None
                continue
            if old[0].time >= lw.time:
                continue
        out[key] = (lw, *event_families(interp, st, lw))
    return out


def blocking_copy(node) -> bool:
    """The write statement copies with ``.to(device)`` / ``.cuda()`` and no ``non_blocking=True``: from host
    memory the host waits for it; its source is not resolved here, so as the single-field protocol, no
    pending write (precision first)."""
    if node is None:
        return False
    found = False
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _COPIES \
                and not any(_DTYPE.search(node_code(a.value)) for a in n.args if a.keyword is None):
            flag = next((a.value for a in n.args if a.keyword is not None and a.keyword.value == "non_blocking"),
                        None)
            if flag is not None and not (isinstance(flag, cst.Name) and flag.value == "False"):
                return False  # non_blocking=True (or a flag we cannot read): asynchronous
            found = True
        stack.extend(n.children)
    return found


def _polls(fn: FunctionInfo, site) -> bool:
    """``ev.query()`` outside a ``while`` test only polls (a metric, a fast path): it orders nothing; a spin
    ``while not ev.query(): ...`` waits."""
    if site.method != "query":
        return False
    stack = [fn.node.body]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.While):
            inner = [n.test]
            while inner:
                m = inner.pop()
                if m is site.node:
                    return False
                inner.extend(m.children)
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(n.children)
    return True


def event_families(interp, st, lw) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ``self.*`` events and event families recorded on ``lw``'s stream after it at ``st``, and the event
    families recorded on that stream only before it (``ev.record(s)`` moved above the copy: a consumer's wait
    on them does not cover the write)."""
    after: set[str] = set()
    before: set[str] = set()
    for k, snap in st.events.items():
        if lw.stream not in snap or k in interp.timing_events:
            continue
        covers = snap[lw.stream] >= lw.time
        names = {f"self.{field}" for field in interp.field_events.get(k, ()) if field}
        if k.startswith("self."):
            names.add(family(k) or k)
        if not covers:
            names = {n for n in names if n != k}  # (families only: a plain field's early record is records.py's)
        (after if covers else before).update(names)
    return tuple(sorted(after)), tuple(sorted(before - after))


def waits_on(file: FileModel, fn: FunctionInfo, families: tuple[str, ...]) -> bool:
    """Does ``fn`` wait on an entry of one of ``families`` (by subscript, ``get`` / ``pop``, a local bound
    from one, a loop over its values)?"""
    for site in fn.calls:
        if site.method not in _WAITS or _polls(fn, site):
            continue
        node = site.node
        expr = node.args[0].value if site.method == "wait_event" and node.args else \
            node.func.value if isinstance(node.func, cst.Attribute) and site.method != "wait_event" else None
        if expr is None:
            continue
        text = normalized_code(file.code(expr))
        if family(text) in families:
            return True
        if text.isidentifier():
            sources = [normalized_code(file.code(v)) for v in fn.name_assigns.get(text, ())]
            sources += [normalized_code(file.code(loop.iter)) for loop in _loops_binding(fn, text)]
            if any(family(v) in families or any(f"{f}." in v for f in families) for v in sources):
                return True
    return False


def resolve_local_event(interp, st, key: str) -> str:
    """A local bound from an entry of an event family (``ev = self._events.pop(k)``, ``for ev in
    self._events.values()``) waits on that family."""
    if not key.isidentifier():
        return key
    fn = interp.cfn
    for value in fn.name_assigns.get(key, ()):
        text = normalized_code(interp.cfile.code(value))
        base = family(text)
        if base is not None and base in st.events:
            return base
    for loop in _loops_binding(fn, key):
        text = normalized_code(interp.cfile.code(loop.iter))
        m = re.match(r"^(?:list\()?(self\.\w+)\.(?:values|items)\(\)\)?(?:\[.*\])?$", text)
        if m is not None and m.group(1) in st.events:
            return m.group(1)
    return key


def _loops_binding(fn: FunctionInfo, name: str) -> list:
    out = []
    stack = [fn.node.body]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.For,)):
            targets = [n.target] if not isinstance(n.target, (cst.Tuple, cst.List)) else [
                el.value for el in n.target.elements]
            if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                out.append(n)
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(n.children)
    return out


def unresolved_waits(file: FileModel, fn: FunctionInfo, families: set[str]) -> bool:
    """Does ``fn`` wait on an event it names otherwise than as an entry of one of ``families`` or a
    ``self.*`` field (a local bound elsewhere, a parameter, an attribute of another object)?"""
    for site in fn.calls:
        if site.method not in _WAITS:
            continue
        node = site.node
        if site.method == "wait_event" and node.args:
            expr = node.args[0].value
        elif isinstance(node.func, cst.Attribute) and site.method != "wait_event":
            expr = node.func.value
        else:
            continue
        text = normalized_code(file.code(expr))
        if text.startswith("self.") and text.count(".") == 1 and "[" not in text or family(text) in families:
            continue
        if site.method in ("synchronize", "query") and _STREAMISH.search(text):
            continue  # a stream's synchronize / query (the interpreter follows it); `.wait()` / `wait_event(e)`
            # always take an event, whatever its name (`upstream_ready.wait()`)
        if text.isidentifier():
            values = [normalized_code(file.code(v)) for v in fn.name_assigns.get(text, ())]
            loops = [normalized_code(file.code(loop.iter)) for loop in _loops_binding(fn, text)]
            if values and all(family(v) in families for v in values) and not loops:
                continue
            if loops and not values and all(any(f"{fam}." in it for fam in families) for it in loops):
                continue
            if any(_STREAMISH.search(v) for v in values):
                continue  # bound from a stream or an event recorded here: the interpreter follows it
        if "current_stream" in text:
            continue
        return True
    return False


def callers_join(project, file: FileModel, fn: FunctionInfo, stream: str) -> bool:
    """An entry of a family handed back by ``fn`` (``return self._w[k]``) while ``stream`` (``self.stream``)
    may still write it: does a caller join that stream of the object it calls ``fn`` on
    (``current_stream().wait_stream(self.store.stream)`` then ``self.store.get(k)``)? The caller owns the
    join then (on some caller: silence rather than a guess)."""
    from streamlint.model.flow.callers import callers_of

    if not stream.startswith("self.") or stream.count(".") != 1:
        return False
    attr = stream[5:]
    for model, site in callers_of(project, file, fn) or ():
        caller, recv = getattr(site, "function", None), getattr(site, "receiver", None)
        if caller is None or recv is None:
            continue
        wanted = normalized_code(f"{model.code(recv)}.{attr}")
        for other in caller.calls:
            node = other.node
            arg = node.args[0].value if node.args else None
            if other.method == "wait_stream" and arg is not None and normalized_code(model.code(arg)) == wanted \
                    or other.method == "synchronize" and isinstance(node.func, cst.Attribute) \
                    and normalized_code(model.code(node.func.value)) == wanted:
                return True
    return False


_PUTS = ("append", "appendleft", "put", "put_nowait")
_EVENTISH = re.compile(r"\brecord_event\(|\bEvent\(")


def tuple_parts(file: FileModel, cls, field: str, n: int) -> tuple[bool, ...]:
    """For each position of an ``n``-tuple a method of ``cls`` appends / puts into ``field``
    (``self.q.append((blk, ev, nbytes))``): does some producer put a side-stream tensor or an event there (a
    name bound under a stream scope of that method, or from ``record_event()`` / ``Event()``)? Host parts
    (``nbytes``, sizes) are not the family's place. ``()`` when no such tuple is visible."""
    memo = file.__dict__.setdefault("_tuple_parts", {})
    key = (id(cls), field, n)
    if key in memo:
        return memo[key]
    out = [False] * n
    seen = False
    for m in cls.methods.values():
        side = _side_names(file, m)
        for site in m.calls:
            func = site.node.func
            if site.method not in _PUTS or not isinstance(func, cst.Attribute) \
                    or normalized_code(file.code(func.value)) != field or len(site.node.args) != 1:
                continue
            item = site.node.args[0].value
            if not (isinstance(item, cst.Tuple) and len(item.elements) == n):
                continue
            seen = True
            for i, el in enumerate(item.elements):
                e = el.value
                out[i] |= isinstance(e, cst.Name) and e.value in side or bool(_EVENTISH.search(file.code(e)))
    memo[key] = tuple(out) if seen else ()
    return memo[key]


def _side_names(file: FileModel, fn: FunctionInfo) -> set[str]:
    """Names ``fn`` binds under a stream scope (``with torch.cuda.stream(self.s): kv = ...``) or from an event."""
    out: set[str] = set()
    stack: list = [(fn.node.body, False)]
    while stack:
        n, under = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        if isinstance(n, cst.With):
            under = under or any(_STREAMISH.search(file.code(it.item)) for it in n.items)
        if isinstance(n, cst.Assign):
            if under or _EVENTISH.search(file.code(n.value)):
                out |= {x.value for t in n.targets for x in _flat(t.target)}
        stack.extend((c, under) for c in n.children)
    return out


def _flat(t) -> list:
    if isinstance(t, cst.Name):
        return [t]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [x for el in t.elements for x in _flat(el.value)]
    return []
