"""Who consumes a side-stream allocation whose ownership leaves the function (SL301: escape hand-offs).

A tensor allocated on a side stream S (an upload ``host.to(dev, non_blocking=True)``, ``torch.empty`` and a
``copy_`` inside ``with torch.cuda.stream(S):``) belongs to S's pool in the caching allocator. When the function
hands it over (returns it, yields it, keeps it in a field of the object that another method drops, binds it as a
parameter's ``.data``), whoever receives it drops it later; the block then goes back to S's pool, and S's next
allocation (the next prefetch, issued while the current stream still reads the old block: the point of the
overlap) can overwrite it. A wait of the current stream on S orders the read after the write; it does not
protect the memory: only ``t.record_stream(current)`` does (or S waiting on the current stream before each of
its allocations).

An escape alone says nothing of who uses the tensor (SL301 leaves it to ``strict``). This module looks for the
evidence that the consumer is the current stream C and reports only then:

- the function itself joins S into C after the allocation (``C.wait_stream(S)``, ``C.wait_event(ev)`` of an
  event recorded on S): the author's own statement that C uses it (medium confidence: the use is inferred);
- or joins S into a stream it names (``compute.wait_stream(S)``, ``compute`` a parameter or field: a transfer
  helper handed both streams), which is then the consumer: only ``t.record_stream(compute)`` protects the block (a
  record on S itself is a no-op), unless S had waited on all of ``compute``'s work before the allocation;

and stays silent when the memory is safe: the tensor is recorded on a stream other than its own, here or by
a caller of the function (or every caller the project resolves keeps the returned result in a field of its
object); every entry onto S begins with a wait on the current stream (the entry discipline:
S cannot hand the block out before C's earlier reads); the field it is kept in is never dropped (a persistent
buffer, cache or workspace, reused rather than freed); it goes elsewhere (a callee, a container handed in).

Reported once per storage at the hand-over statement (the ``return`` / ``yield`` / the store), where the
record belongs: the consumer's use is not in this function. A local list the tensors were appended to and that
the function returns hands them over at the ``return``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.escapes import self_field
from streamlint.model.flow.flagjoins import assumed_flag, merge_flag, skipped_join_flag
from streamlint.model.flow.flagvalues import caller_flag_values
from streamlint.model.flow.foreignuses import foreign_only_use
from streamlint.model.flow.guessedresults import guess_of
from streamlint.model.flow.localstreams import fresh_local_stream
from streamlint.model.flow.results import Lifetime
from streamlint.model.heldslots import _INIT_METHODS, held_fields
from streamlint.model.streams import MAIN, derived
from streamlint.model.syntax import local_nodes

if TYPE_CHECKING:
    from streamlint.model.flow.values import State




def flag_taken(interp, st: State, flag: str) -> str | None:
    """Who hands the caller-supplied ``flag`` the value this path assumed (the path taking the arm of ``if sync:`` that
    skips the join): "never" when every seen caller hands it another literal (``sync=True`` everywhere), "tests" when
    only callers in test modules do, None when some package caller does or a value is unknown
    (:mod:`~streamlint.model.flow.flagvalues`)."""
    value = assumed_flag(interp.fn.node, st, flag)
    if value is None:
        return None
    passed = caller_flag_values(interp.project, interp.file, interp.fn, flag)
    if passed is None:
        return None
    taking = [test for v, test in passed if bool(v) == value]
    if not taking:
        return "never"
    return "tests" if all(taking) and any(not test for _v, test in passed) else None


class Consumers:
    """Escape hand-offs of side-stream allocations (mixin of :class:`~streamlint.model.flow.interp.Interp`).

    Interp state it uses: ``anchor``, ``clock``, ``cfg``, ``depth``, ``lifetimes``, ``project``, ``file``,
    ``fn``; it asks orderings (``next_entry_waits``)."""

    def new_storage(self, st: State, kind: str, stream: str, name: str | None, write):
        S = super().new_storage(st, kind, stream, name, write)  # type: ignore[misc]
        if kind == "local" and stream != MAIN:
            self.__dict__.setdefault("made_at", {})[S.sid] = self.clock
            self.__dict__.setdefault("made_knew", {})[S.sid] = (dict(st.know(stream)), dict(st.last_op))
            if self.depth:  # made by an inlined helper: which one (a join there is that helper's own)
                self.__dict__.setdefault("made_in", {})[S.sid] = id(self.frames[-1][1].node)
            if st.know(stream).get(MAIN, -1) >= st.last_op.get(MAIN, 0) \
                    and stream not in self.__dict__.get("absent_waited", ()):  # (not a record's absent token's wait)
                self.__dict__.setdefault("forked", set()).add(S.sid)  # this entry onto the stream began with a wait
                # on the current stream's work so far
        return S

    def wait_stream(self, st: State, waiter: str, producer: str) -> None:
        super().wait_stream(st, waiter, producer)  # type: ignore[misc]
        if waiter == MAIN and producer != MAIN:
            self._joined(producer, self.clock)
        elif producer == MAIN and waiter != MAIN:
            self.__dict__.setdefault("fork_streams", set()).add(waiter)
        elif waiter != producer and not waiter.startswith(("<", "tag")):
            joins = self.__dict__.setdefault("helper_named_joins" if self.depth else "named_joins", {})
            joins[(waiter, producer)] = self.clock  # `compute.wait_stream(upload)`: a stream the function is handed
            # (not its current one) takes the products; in a helper it inlines (a project `wait_stream(waiter,
            # wait_for)`), only for what the function itself made

    def wait_event(self, st: State, stream: str, key: str) -> None:
        super().wait_event(st, stream, key)  # type: ignore[misc]
        snap = st.events.get(key)  # (an event recorded in this function: what it covers is known)
        if stream == MAIN and snap is not None:
            for producer, time in snap.items():
                if producer != MAIN:
                    self._joined(producer, time)
        elif stream != MAIN and snap is not None and MAIN in snap:
            self.__dict__.setdefault("fork_streams", set()).add(stream)

    def _joined(self, producer: str, time: int) -> None:
        """The current stream explicitly joined ``producer`` up to ``time`` (in an inlined helper: noted apart)."""
        joins = self.__dict__.setdefault("explicit_joins", {})
        joins[producer] = max(joins.get(producer, -1), time)
        if self.depth:
            key = (producer, id(self.frames[-1][1].node))
            joins = self.__dict__.setdefault("helper_joins", {})
            joins[key] = max(joins.get(key, -1), time)

    def report_lifetime(self, st: State, S, u, how: str, node, end: bool = False) -> None:
        """Not the caller's use of a tensor a project helper it inlines allocated on a side stream, joined into the
        current stream and handed back: the helper's own analysis reports that hand-over (its return), where the
        record belongs (one finding per cause)."""
        made = self.__dict__.get("made_at", {}).get(S.sid)
        helper = self.__dict__.get("made_in", {}).get(S.sid)
        if made is not None and helper is not None and how == "function end" \
                and u.stream == MAIN and not self.depth and S.sid not in self.__dict__.get("forked", ()) \
                and self.__dict__.get("helper_joins", {}).get((S.alloc, helper), -1) >= made \
                and not self.next_entry_waits(st, S.alloc, S.origin):
            return  # (the same helper made it and joined its stream: it hands it back, and reports that)
        key = (id(u.node), S.name)
        before = self.lifetimes.get(key)
        super().report_lifetime(st, S, u, how, node, end)  # type: ignore[misc]
        if self.lifetimes.get(key) is not None and not self.depth:  # a join a caller's flag skipped (flagjoins.py)
            flag = skipped_join_flag(self.fn.node, st, u.stream)
            taken = flag_taken(self, st, flag) if flag and self.lifetimes[key] is not before else None
            if taken == "never":
                if before is None:  # no seen caller hands the flag this path's value (flagvalues.py): no hazard
                    del self.lifetimes[key]
                else:
                    self.lifetimes[key] = before
                return
            self.lifetimes[key] = merge_flag(before, self.lifetimes[key], flag)
            if taken == "tests" and self.lifetimes[key] is not before and self.lifetimes[key].flag:
                self.lifetimes[key] = replace(self.lifetimes[key], flag_tests=True)
            if self.lifetimes[key] is not before and (place := guess_of(self, S.sid)) is not None:
                self.lifetimes[key] = replace(self.lifetimes[key], guess=place)
            if self.lifetimes[key] is not before and (method := foreign_only_use(u.node, u.label or S.name)):
                self.lifetimes[key] = replace(self.lifetimes[key], foreign_use=method)  # (foreignuses.py)
            if self.lifetimes[key] is not before and S.sid in self.__dict__.get("assumed_records", ()):
                self.lifetimes[key] = replace(self.lifetimes[key], assumed=True)  # (recordresults.py)

    def note_kept(self, st: State, S, into: cst.BaseExpression | None) -> None:
        super().note_kept(st, S, into)  # type: ignore[misc]
        if self.depth or S.kind != "local" or S.alloc == MAIN or self.anchor is None:
            return
        self._hand(st, S, _destination(self.anchor, into))

    def escape(self, st: State, v: object, into: cst.BaseExpression | None = None) -> None:
        super().escape(st, v, into)  # type: ignore[misc]
        if into is None and not self.depth and isinstance(self.anchor, cst.Return) and self.anchor.value is not None:
            for name in _returned_names(self.anchor.value):  # `out.append(dev)` ... `return out`: a local list
                for sid in st.held.get(name, ()):  # handed back hands back what it holds
                    S = st.stores.get(sid)
                    if S is not None and S.kind == "local" and S.alloc != MAIN:
                        self._hand(st, S, "<return>")

    def _hand(self, st: State, S, dest: str | None) -> None:
        """``S`` is handed over to ``dest`` now: note the first such hand-over after a stream joined its allocating
        one (the current stream; or a stream the function names, `compute.wait_stream(upload)`: its consumer)."""
        made = self.__dict__.get("made_at", {}).get(S.sid)
        if dest is None or made is None or S.handed is not None:
            return
        joined = st.vc.get(MAIN, {}).get(S.alloc, -1) >= made \
            and self.__dict__.get("explicit_joins", {}).get(S.alloc, -1) >= made
        named = dict(self.__dict__.get("named_joins", {}))
        if S.sid not in self.__dict__.get("made_in", {}):
            named.update(self.__dict__.get("helper_named_joins", {}))
        consumer = MAIN if joined else next(
            (w for (w, p), t in named.items()
             if p == S.alloc and t >= made and st.vc.get(w, {}).get(S.alloc, -1) >= made), None)
        if consumer is not None:  # the consumer joined the allocating stream before the hand-over
            S.handed = (self.anchor, dest, consumer)  # (the first such one on this path)
            self.__dict__["handoffs"] = True

    def finalize(self, st: State) -> None:
        super().finalize(st)  # type: ignore[misc]
        if self.__dict__.get("handoffs") and not self.depth:
            self.check_handoffs(st)

    def check_handoffs(self, st: State) -> None:
        """At a function exit: side-stream allocations handed over after the function joined their stream
        into the current one, with no record and no entry discipline on the allocating stream."""
        if self.cfg.mode not in ("eager", "cuda"):
            return
        made_at = self.__dict__.get("made_at", {})
        for sid, S in st.stores.items():
            made = made_at.get(sid)
            if S.handed is None or S.kind != "local" or made is None or S.alloc.startswith(("tag", "<")):
                continue
            node, dest, consumer = S.handed
            if fresh_local_stream(self.fn, S.alloc):
                continue  # a stream this call makes for itself (`upload = torch.cuda.Stream()`): no later allocation
                # of this code can take the block back from it
            if S.recorded - {S.alloc} or any(streams - {S.alloc} for streams in st.loose_rec.values()):
                continue  # recorded for a consumer; or a record of values of untracked type on this path (`for c in
                # coefficients: c.record_stream(main)` over a helper's tuple): the author records what it hands on
            if dest.startswith("self.") and not self._dropped_unrecorded(dest[5:]):
                continue  # a field never dropped (a persistent buffer / cache, reused rather than freed), or one
                # whose readers record what they take
            if consumer != MAIN and self._forked_from(sid, consumer):
                continue  # the allocating stream had waited on all the consumer's work before the allocation
            if consumer == MAIN and (sid in self.__dict__.get("forked", ())
                                     or S.alloc in self.__dict__.get("fork_streams", ())
                                     or self.next_entry_waits(st, S.alloc, S.origin)):
                continue  # each entry onto the allocating stream waits on the current one first; or this function
                # forks it from the current stream (the author follows the fork discipline: the next entry onto
                # it, the first of some function, is presumed to wait too)
            if any(r.kind == "read" and r.src == MAIN and r.dst == S.alloc for r in self.races.values()):
                continue  # the allocating stream reads the current stream's work unforked here (SL201 there): the
                # fork wait it asks for, at every entry, also protects this memory (one finding per cause)
            if dest == "<return>" and callers_record(self.project, self.file, self.fn):
                continue  # a caller records what it is handed
            if dest == "<return>" and consumer != MAIN \
                    and callers_order(self.project, self.file, self.fn, S.alloc, consumer):
                continue  # every caller forks the allocating stream from the consumer before the call, or
                # synchronises the consumer (or the device) after it: the consumer's reads end before a drop
            if dest == "<return>" and callers_keep(self.project, self.file, self.fn):
                continue  # every caller keeps what it is handed in a field of its object (never dropped here)
            if any(u.stream != S.alloc for u in S.uses):
                if consumer == MAIN:
                    self._seen_consumer(S, dest, node)  # used here on another stream: the free-based analysis
                continue  # judged it (storage.py); after the join, its escape is no excuse
            key = (id(node), "handoff")
            if key not in self.lifetimes:
                self.lifetimes[key] = Lifetime(node, S.name or "tensor", S.alloc, consumer, dest, None, False,
                                               self.cfg.mode, kind="handoff")

    def _seen_consumer(self, S, dest: str, node: cst.CSTNode) -> None:
        """The storage is used here on the current stream, then handed over: the free-based analysis found the
        use unprotected but took the escape for an owner's (``strict`` only). The join says the current stream is
        its consumer: the use is reported by default, where it is."""
        for u in S.uses:
            key = (id(u.node), S.name)
            found = self.lifetimes.get(key)
            if u.stream == MAIN and found is not None and found.escaped and found.kind == "free":
                del self.lifetimes[key]  # (reported at the hand-over, the use shown: one finding per cause)
                self.lifetimes.setdefault((id(node), "handoff"), replace(
                    found, node=node, name=S.name or found.name, free=dest, free_node=u.node, escaped=False,
                    kind="handoff"))
                return

    def _forked_from(self, sid: int, consumer: str) -> bool:
        """Had the allocating stream, when ``sid`` was allocated, waited on all the work ``consumer`` had queued in
        this function so far (a fork from the consumer: its earlier reads are ordered before the allocation)?"""
        knew = self.__dict__.get("made_knew", {}).get(sid)
        return knew is not None and knew[0].get(consumer, -1) >= knew[1].get(consumer, 0)

    def _dropped_unrecorded(self, field: str) -> bool:
        return field_dropped_unrecorded(self.project, self.file, self.fn.class_name, field)


def field_dropped_unrecorded(project, file, class_name: str | None, field: str) -> bool:
    """Does some method of class ``class_name`` of ``file`` drop what field ``field`` holds (``pop``, ``del``,
    ``clear``, ``= None``, a rebinding outside the constructor), while no method reading it records what it reads?"""
    held = held_fields(project, file, class_name).get(field)
    if held is None or held.recorders:
        return False
    return bool(held.releases) or _taken_out(file.classes.get(class_name or ""), field)


def _destination(anchor: cst.CSTNode, into: cst.BaseExpression | None) -> str | None:
    """Where a hand-over statement sends a tensor: ``"<return>"`` (a ``return`` / ``yield`` to the caller),
    ``"self.<field>"`` (a field of the object, or a slot of one), ``"<data>"`` (``p.data = t``: bound in place of
    a parameter's storage); None elsewhere (a callee, a local container, a container handed in)."""
    if into is None:
        if isinstance(anchor, cst.Return) or isinstance(anchor, cst.Expr) and isinstance(anchor.value, cst.Yield):
            return "<return>"
        return None
    field = self_field(into)
    if field is not None:
        return f"self.{field}"
    if isinstance(into, cst.Attribute) and into.attr.value == "data":
        return "<data>"
    return None


def _returned_names(value: cst.BaseExpression) -> list[str]:
    """The local names a ``return`` hands back whole: ``return out``, ``return outs, spec``."""
    if isinstance(value, cst.Name):
        return [value.value]
    if isinstance(value, cst.Tuple):
        return [el.value.value for el in value.elements if isinstance(el.value, cst.Name)]
    return []


def _taken_out(cls, field: str) -> bool:
    """Does a method of the class take what the field holds out of it (``self.staged.pop(k)``, ``.popleft()``,
    ``.popitem()``), handing it on (a take returned to the caller is no release of the field's, but the field
    no longer keeps it alive)?"""
    for method in (cls.methods.values() if cls is not None else ()):
        for site in method.calls:
            func = site.node.func
            if site.method in ("pop", "popleft", "popitem") and isinstance(func, cst.Attribute) \
                    and self_field(func.value) == field:
                return True
    return False


def callers_record(project, file, fn) -> bool:
    """Does a caller of ``fn`` record a tensor on some stream (``t.record_stream(s)``)? Then the caller takes care
    of what it is handed. When the project resolves no call site, any function calling its name (``stager.get(...)``)
    counts, whatever object it is called on (precision first)."""
    memo = derived(project, "handoff_callers_record")
    held = memo.get(id(fn))
    if held is None or held[0] is not fn:  # (the function is kept with its answer: an id is never reused under it)
        memo[id(fn)] = (fn, False)  # (in progress)
        memo[id(fn)] = (fn, _callers_record(project, file, fn))
    return memo[id(fn)][1]


def _callers_record(project, file, fn) -> bool:
    name = fn.node.name.value
    sites = callers_of(project, file, fn)
    if sites:  # the call sites the project resolves to it
        return any(site.function is None or any(s.method == "record_stream" and len(s.node.args) <= 1
                                                for s in site.function.calls)
                   or _records_result(project, model, site) for model, site in sites)
    for path in project.paths_containing((b"record_stream",)):  # (few files: then the name's callers there)
        model = project.file(path) if project.may_contain(path, (f"{name}(".encode(),)) else None
        for other in (model.iter_functions() if model is not None else ()):
            if other.node is not fn.node and any(site.method == name or isinstance(site.node.func, cst.Name)
                                                 and site.node.func.value == name for site in other.calls) \
                    and any(site.method == "record_stream" for site in other.calls):
                return True
    return False


def _records_result(project, model, site) -> bool:
    """Does the caller hand what the call returns (a name bound from it, or from an expression of such a name)
    to a project helper that records it on a stream (``ledger.pin(t, src_stream, dst_stream)``,
    :mod:`~streamlint.model.flow.helperrecords`)? A tracker call recording some other tensor of the caller is no
    record of this result."""
    from streamlint.model.flow.helperrecords import helper_records

    caller = site.function
    names: set[str] = set()
    for name, values in caller.name_assigns.items():
        if any(v is site.node for v in values):
            names.add(name)
    for _ in range(2):  # the same tensors under another name: `label = tree_unflatten(flat, spec)`, `x = flat[0]`
        for name, values in caller.name_assigns.items():
            if any(_same_tensors(model, caller, v, names) for v in values):
                names.add(name)
    if not names:
        return False
    for s in caller.calls:
        for arg, _ in helper_records(project, model, caller, s) if s.node.args else ():
            root = arg
            while isinstance(root, (cst.Attribute, cst.Subscript)):
                root = root.value
            if isinstance(root, cst.Name) and root.value in names:
                return True
    return False


def _same_tensors(model, caller, value, names: set[str]) -> bool:
    """Does ``value`` hand on the tensors a name of ``names`` holds (the name, an item or field of it, a list /
    tuple of it, or a pytree repack of it), not new ones computed from them (``loss_fn(out, label)``)?"""
    from streamlint.model.tensorvocab import REPACKS

    while isinstance(value, (cst.Subscript, cst.Attribute)):
        value = value.value
    if isinstance(value, cst.Name):
        return value.value in names
    if isinstance(value, cst.Call) and value.args and (
            (dotted(value.func) or "") in ("list", "tuple") or model.resolve(value.func, caller) in REPACKS):
        return _same_tensors(model, caller, value.args[0].value, names)
    return False


def callers_keep(project, file, fn) -> bool:
    """Does every call site the project resolves to ``fn`` (there is one) keep the result in a field of its object
    (``self.cache[k] = f(...)``, ``self.bufs = f(...)``, ``self.bufs.append(f(...))``)? Such a block outlives
    the consumer's reads: nothing here drops it."""
    memo = derived(project, "handoff_callers_keep")
    held = memo.get(id(fn))
    if held is None or held[0] is not fn:
        memo[id(fn)] = (fn, _callers_keep(project, file, fn))
    return memo[id(fn)][1]


def _callers_keep(project, file, fn) -> bool:
    from streamlint.model.flow.argdrops import _path_to

    sites = [(model, site) for model, site in callers_of(project, file, fn) or ()
             if (project.call_target(model, site) or (None,))[0] is fn]
    for model, site in sites:
        path = _path_to(site.function.node, site.node) if site.function is not None else None
        parent = path[1] if path is not None and len(path) > 1 else None
        fields: list[str | None] = []
        if isinstance(parent, cst.Assign) and parent.value is site.node:
            fields = [None if isinstance(t.target, cst.Attribute) and site.function.node.name.value not in _INIT_METHODS
                      else self_field(t.target) for t in parent.targets]  # (`self.kv = f()` in a step: the previous
            # result is dropped at each call, a rebinding; only a constructor's store builds a lasting one)
        elif isinstance(parent, cst.Arg) and len(path) > 2 and isinstance(path[2], cst.Call) \
                and isinstance(path[2].func, cst.Attribute) and path[2].func.attr.value in ("append", "extend", "insert"):
            fields = [self_field(path[2].func.value)]
        if fields and all(f is not None and not field_dropped_unrecorded(project, model, site.function.class_name, f)
                          for f in fields):
            continue  # kept in a field its class never drops (a rebinding, a pop, ``= None`` is a drop)
        return False
    return bool(sites)


_DEVICE_SYNCS = frozenset({"torch.cuda.synchronize", "torch.npu.synchronize", "torch.accelerator.synchronize"})


def callers_order(project, file, fn, alloc: str, consumer: str) -> bool:
    """Does every call site the project resolves to ``fn`` (there is one), passing it both streams (parameters
    ``alloc`` and ``consumer``), make the allocating stream wait on the consumer before the call
    (``copy.wait_stream(compute)``: the caller's entry discipline) or synchronise the consumer or the device
    after it (``compute.synchronize()``)? Then the consumer's reads are over before anything drops the result."""
    from streamlint.model.flow.argdrops import _params
    from streamlint.model.uses import bind_arguments

    if alloc not in _params(fn) or consumer not in _params(fn):
        return False
    sites = [(model, site) for model, site in callers_of(project, file, fn) or ()
             if site.function is not None and (project.call_target(model, site) or (None,))[0] is fn]
    for model, site in sites:
        bound = bind_arguments(_params(fn), site.node, kwonly=fn.kwonly)
        a, c = bound.get(alloc), bound.get(consumer)
        if a is None or c is None:
            return False
        a, c = model.code(a), model.code(c)
        start, end = model.span(site.node).start_line, model.span(site.node).end_line
        ordered = False
        for other in site.function.calls:
            line = model.span(other.node).start_line
            receiver = model.code(other.receiver) if other.receiver is not None else None
            if other.method == "wait_stream" and line < start and receiver == a and other.node.args \
                    and model.code(other.node.args[0].value) == c:
                ordered = True  # the caller's fork of the allocating stream from the consumer
            elif other.method == "synchronize" and line > end \
                    and (receiver == c or dotted(other.node.func) in _DEVICE_SYNCS):
                ordered = True  # the consumer's work (or the device's) is over after the call
        if not ordered:
            return False
    return bool(sites)
