"""Records on the wrong stream: ``t.record_stream(s)`` where ``s`` is the stream ``t``'s memory belongs to.

The caching allocator keeps a block for the streams it was *recorded* on besides the one that allocated
it. Recording on the allocating stream itself (for a tensor handed in: the caller's current stream) is a
no-op, so a record there while the function uses the tensor on another stream protects nothing: when
the owner drops it, the block can go to new work on the allocating stream while that other stream still
reads it -- unless that other stream is the current one (or one it joined) and every entry onto the
allocating stream begins with a wait on the current stream (the entry discipline: its next work cannot
start before the use, whoever drops the tensor). The record is the author's statement that the free is not otherwise ordered after the other
stream's use (a join handed out, an event someone waits on later), so it is judged even for a tensor the
caller owns and even when an event is handed out. Not when the function joins the allocating stream on
that stream after the use (the record is then merely redundant), nor when the tensor is also recorded on
the using stream.

A local tensor that stays in the function is judged by its free (:meth:`Storages.free`); only tensors the
caller owns (parameters) or that leave the function are judged here, at the record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.entries import host_call
from streamlint.model.file import dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.placement import BLOCKING_HOST_READS
from streamlint.model.syntax import local_nodes, mentions_name
from streamlint.model.flow.entryctx import entry_of
from streamlint.model.flow.escapes import self_field
from streamlint.model.flow.recordkeeps import record_keeps
from streamlint.model.flow.results import Lifetime
from streamlint.model.heldslots import held_fields, result_fields
from streamlint.model.flow.sidecalls import side_entry
from streamlint.model.flow.values import Access
from streamlint.model.streams import MAIN

if TYPE_CHECKING:
    from streamlint.model.flow.values import State, TVal

_UNKNOWN = object()


def _names(S) -> tuple[str, ...]:
    """The parameter names a storage of the caller's is known by: its own, the collection it came from."""
    return tuple(n for n in (S.name, S.container) if n)


class Records:
    """Records on the allocating stream (mixin of :class:`~streamlint.model.flow.interp.Interp`).

    Interp state it uses: ``anchor``, ``depth``, ``lifetimes``, ``noop_records``, ``entry_uses``, ``side``,
    ``cfg``, ``project``, ``file``, ``fn``."""

    side: object = _UNKNOWN  # side_entry() of the function, asked once
    side_recorded: set[int]  # argument storages recorded on some path
    recorded_for: dict[str, dict[int, object]]  # side stream -> argument storages recorded on it (recorded_use)

    def note_record(self, st: State, held: list[TVal], stream: str, label: str) -> None:
        """``t.record_stream(stream)`` on each storage of ``held``."""
        for tv in held:
            S = st.stores.get(tv.sid)
            if S is None:
                continue
            S.recorded.add(stream)
            if S.kind == "arg":  # recorded on some path: the function takes care of its lifetime (others: host values)
                self.side_recorded.add(S.sid)
                self.lifetimes.pop(("side-entry", S.sid), None)
                if stream not in (MAIN, st.cur) and not self.depth:
                    self.recorded_for.setdefault(stream, {})[S.sid] = tv
            if stream == S.alloc and S.kind in ("arg", "local") and not self.depth and self.anchor is not None \
                    and S.sid not in self.__dict__.get("gradient_sids", ()):  # (a gradient stays its parameter's:
                self.noop_records.setdefault(S.sid, (self.anchor, label))  # its free is a rebinding, judged there)

    def recorded_use(self, st: State, e: cst.Call, site) -> None:
        """A call of a callable handed in inside a scope of a side stream the function recorded argument tensors on
        (``for t in (idx, *inputs): t.record_stream(stream)``) on this path: the record says that stream uses them,
        and the opaque call is the only work there that can, so it reads them on that stream (a missing fork from
        the caller's stream is then reported like any argument read there). The callable is a parameter called
        directly (``extend()``, ``step(*static)``: it may close over them; not one handed only literals, a message
        sink like ``log("warm-up")``), or a method reached from a parameter / ``self`` that the project never
        resolves handed the recorded tensors or the collection they came from (``self._dep.forward(ios)``): not
        ``self.alloc(n)`` or ``self.timer.start()``, which may serve a later method the record is made for. Not a
        host-only call (``self.logger.info``), nor a torch API."""
        recorded = self.recorded_for.get(st.cur)
        if not recorded or self.depth or site is None or self.project.call_target(self.cfile, site) is not None:
            return
        root = e.func
        while isinstance(root, (cst.Attribute, cst.Call, cst.Subscript)):
            root = root.func if isinstance(root, cst.Call) else root.value
        if not isinstance(root, cst.Name) or root.value not in self.cfn.all_params or host_call(e) \
                or any(True for _ in self.project.api_uses(self.cfile, site)):
            return
        held = [tv for sid, tv in recorded.items() if sid in st.stores and st.cur in st.stores[sid].recorded]
        if isinstance(e.func, cst.Name) and root.value not in ("self", "cls"):
            if e.args and all(isinstance(a.value, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString,
                                                   cst.Integer, cst.Float)) for a in e.args):
                return  # (`log("warming up")`: handed only literals)
        else:  # a method of an object: only when handed the recorded tensors (or their collection)
            held = [tv for tv in held if any(mentions_name(a.value, *_names(st.stores[tv.sid])) for a in e.args)]
        if held:
            self.op(st, e, held, result=False)  # type: ignore[attr-defined]

    def new_storage(self, st: State, kind: str, stream: str, name: str | None, write: Access | None):
        S = super().new_storage(st, kind, stream, name, write)  # type: ignore[misc]
        if self.depth:  # made by an inlined helper: its own analysis judges the uses the helper makes
            self.__dict__.setdefault("helper_made", set()).add(S.sid)
        return S

    def access(self, st: State, tv: TVal, s: str, t: int, know: dict[str, int], write: bool) -> None:
        super().access(st, tv, s, t, know, write)  # type: ignore[misc]
        S = st.stores.get(tv.sid)
        if not self.depth and S is not None and s != S.alloc:
            self.__dict__.setdefault("own_uses", set()).add(S.sid)
        if s == MAIN and not self.depth and S is not None and S.kind == "arg" and self.anchor is not None:
            self.entry_uses[S.sid] = Access(s, t, self.anchor, label=S.name)  # (the latest)

    def note_kept(self, st: State, S, into: cst.BaseExpression | None) -> None:
        """Where an escaping storage goes: a field of the object (``self.blocks[k] = t``), a local container
        (``moved.append(t)``), the function's result, or elsewhere (a callee, a container handed in: "")."""
        if S.kind != "local":
            return
        field = self_field(into) if into is not None else None
        inner = self.cfile.classes.get(self.cfn.class_name or "")  # (the class itself, not a namesake elsewhere)
        if field is not None and (self.depth == 0 or inner is not None
                                  and inner is self.file.classes.get(self.fn.class_name or "")):
            dest = field
            self.__dict__.setdefault("kept_at", {}).setdefault((S.sid, field), self.anchor)
        elif isinstance(into, cst.Name) and into.value in st.env and into.value not in self.fn.all_params:
            dest = "<local>"
        elif into is None and isinstance(self.anchor, cst.Return) and not self.depth:
            dest = "<return>"
        else:
            dest = ""
        self.__dict__.setdefault("kept", {}).setdefault(S.sid, set()).add(dest)

    def held_release(self, st: State, S, stored: bool = False) -> cst.CSTNode | None:
        """The unjoined release of the fields of the object an escaping local is kept in (directly or by the
        class's callers of this method, which store its result): then its escape is no hand-over, the object
        drops it (:mod:`~streamlint.model.heldslots`). None when it also goes elsewhere, or some field holding it
        is never released, or only after a join."""
        dests = set(self.__dict__.get("kept", {}).get(S.sid, ()))
        if not dests or "" in dests or self.fn.class_name is None:
            return None
        if not stored and S.sid in self.__dict__.get("helper_made", ()) \
                and S.sid not in self.__dict__.get("own_uses", ()):
            return None  # (the helper that made and used it is judged by itself: one finding per cause)
        if "<local>" in dests:  # a local container holding it, handed back (`moved.append(t)` ... `return moved`)
            names = [n for n, sids in st.held.items() if S.sid in sids]
            if names and any(isinstance(n, cst.Return) and n.value is not None and mentions_name(n.value, *names)
                             for n in local_nodes(self.fn.node.body)):
                dests.add("<return>")
        fields = {d for d in dests if not d.startswith("<")}
        if "<return>" in dests:
            kept = result_fields(self.project, self.file, self.fn)
            if not kept:
                return None
            fields |= kept
        held = held_fields(self.project, self.file, self.fn.class_name)
        releases = [held[f].unjoined_release() if f in held else None for f in fields]
        return releases[0].node if releases and all(r is not None for r in releases) else None

    def check_held(self, st: State) -> None:
        """At a function exit: locals stored into fields of the object that other methods read on another
        stream and that some method drops without a join, not recorded on that stream here."""
        for (sid, field), store in self.__dict__.get("kept_at", {}).items():
            S = st.stores.get(sid)
            if S is None or S.kind != "local" or store is None or self.held_release(st, S, True) is None:
                continue
            if S.alloc != MAIN and not S.alloc.startswith("self."):
                continue  # (an allocating stream the other methods cannot name)
            slot = held_fields(self.project, self.file, self.fn.class_name)[field]
            reads = [r for r in slot.reads if r.method != self.fn.node.name.value]
            if any(r.stream is None for r in reads):
                continue  # a user stream not resolved: stay silent
            late = next((r for r in reads if r.method not in slot.recorders and r.stream != S.alloc
                         and r.stream not in S.recorded), None)
            if late is None:
                continue
            noop = self.noop_records.get(sid)
            key = (id(noop[0] if noop else store), "held")
            if key in self.lifetimes:
                continue
            if noop is not None:
                self.lifetimes[key] = Lifetime(noop[0], noop[1], S.alloc, late.stream, "", late.node, False,
                                               self.cfg.mode, kind="noop-record")
            else:
                self.lifetimes[key] = Lifetime(store, S.name or "tensor", S.alloc, late.stream, "release",
                                               self.held_release(st, S, True), False, self.cfg.mode, kind="held")

    def finalize(self, st: State) -> None:
        super().finalize(st)  # type: ignore[misc]
        if st.kept_frees:
            self.owners_end(st)  # type: ignore[attr-defined]  (unsets.py)
        self.check_noop_records(st)
        if self.fn.class_name is not None and self.__dict__.get("kept_at"):
            self.check_held(st)
        if self.entry_uses:
            self.check_side_entry(st)

    def check_side_entry(self, st: State) -> None:
        """At a function exit: tensors handed in by callers that run this function on a side stream
        (:mod:`~streamlint.model.flow.sidecalls`), used here on that stream, neither recorded nor waited
        for by the host before the return, while some caller does not keep them alive."""
        if self.side is _UNKNOWN:
            self.side = side_entry(self.project, self.file, self.fn)
        if self.side is None:
            return
        stream, unkept, _ = self.side
        for sid, u in self.entry_uses.items():
            S = st.stores.get(sid)
            if S is None or S.kind != "arg" or S.name not in unkept or sid in self.side_recorded \
                    or st.host.get(MAIN, -1) >= u.time or not _tensor_param(self.fn, S.name) \
                    or _blocking_read(u.node):
                continue  # (an untyped parameter may be a process group, a metadata holder...: stay silent; a
                # last use that is a blocking host read has waited for the stream's work on it)
            key = ("side-entry", sid)
            old = self.lifetimes.get(key)
            if old is None or self.file.span(old.node).start_line < self.file.span(u.node).start_line:
                self.lifetimes[key] = Lifetime(u.node, S.name or "tensor", MAIN, stream, "", None, False,
                                               self.cfg.mode, kind="caller-drop")

    def check_noop_records(self, st: State) -> None:
        """At a function exit: the no-op records of storages used on another stream that is neither
        recorded nor joined back into the allocating stream."""
        for sid, (node, label) in self.noop_records.items():
            S = st.stores.get(sid)
            if S is None or (S.kind == "local" and not S.escaped):
                continue
            know = st.know(S.alloc)
            late = next((u for u in S.uses if u.stream != S.alloc and u.stream not in S.recorded
                         and know.get(u.stream, -1) < u.time and u.node is not None), None)
            key = (id(node), "noop-record")
            if late is not None and (late.stream == MAIN or st.know(MAIN).get(late.stream, -1) >= late.time) \
                    and self.next_entry_waits(st, S.alloc, S.origin):
                continue  # whoever drops it: the allocating stream's next work first waits on the current stream
            if late is not None and key not in self.lifetimes and not self.travels_with(st, sid, late):
                kept = record_keeps(self.project, self.file, self.fn, S.name or label, late.stream, S.kind == "arg",
                                    self.file.span(late.node).end_line) if S.name or label else None
                self.lifetimes[key] = Lifetime(node, label, S.alloc, late.stream, "", late.node, False,
                                               self.cfg.mode, kind="noop-record",
                                               entry=entry_of(self, S, late, S.alloc), kept_by_record=kept)


def _tensor_param(fn: FunctionInfo, name: str | None) -> bool:
    """Is parameter ``name`` annotated as a plain tensor (``torch.Tensor``, ``Optional[Tensor]``)? What a
    callers-side-stream finding needs as evidence that the helper's argument is device memory."""
    params = fn.node.params
    for p in (*params.posonly_params, *params.params, *params.kwonly_params):
        if p.name.value != name or p.annotation is None:
            continue
        ann = p.annotation.annotation
        if isinstance(ann, cst.Subscript) and dotted(ann.value) in ("Optional", "typing.Optional") and ann.slice \
                and isinstance(ann.slice[0].slice, cst.Index):
            ann = ann.slice[0].slice.value
        return (dotted(ann) or "") in ("Tensor", "torch.Tensor")
    return False


def _blocking_read(node: cst.CSTNode) -> bool:
    """Does the statement read a tensor on the host, blocking until the stream's work on it is done
    (``.tolist()``, ``.item()``, ``.cpu()``, ``.numpy()``)?"""
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in BLOCKING_HOST_READS
               for n in local_nodes(node))
