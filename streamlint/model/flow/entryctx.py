"""Call-site context: the abstract state every project caller hands a function (issue 16 §3, "effects
through helpers", "caller protocols").

A function's own body does not say what its callers did just before the call: a caller may have written
a tensor argument on a side stream it has not joined, recorded an event argument on that stream after the
work, allocated an argument on a side stream, passed its current stream (or a stream it forked), or called
the function inside a stream scope (the function's entry stream is then not the device's default stream).
The callers' own interpretation knows all of it at the call: while a caller is interpreted, each call that
runs a project function inline records, per parameter, a compact hashable fact in the callee's terms
(:func:`site_facts`), with the caller's streams renamed:

- the caller's current stream at the call is the callee's entry stream (``MAIN``);
- a stream the caller also passes as an argument is that parameter;
- a ``self.*`` stream of the same object (``self.method(...)``) keeps its name;
- any other stream is the callers' stream (``<caller's stream>``).

The callee's entry is seeded (:func:`entry_context`, :meth:`Interp.run`) with the facts that hold at
EVERY call site the project has for it (the meet), and only when every site was seen: each is a call the
caller's interpretation reached and ran inline, and the function has at most ``MAX_SITES`` of them
(:func:`~streamlint.model.flow.callers.callers_of`: none for public entry points, dunders, callbacks,
common names). A site whose caller does no stream work hands nothing (the meet is then empty: no seed).

The callers are interpreted for this on their own (a collecting run, not seeded by their own callers:
the answer is the same whichever file is linted first), memoised per project and mode. Findings that
depend on a seeded fact carry the call site (medium confidence: they assume the callers shown).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.callers import bound_by_partial, callers_of
from streamlint.model.flow.inflight import asked, finished, note, started
from streamlint.model.flow.settledargs import kept_to_itself, settled
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.flow.values import CVal, EVal, KVal, SVal, TVal, ordered_before
from streamlint.model.streams import EVENT, MAIN, STREAM
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.flow.values import State

CALLERS = "<caller's stream>"  # a stream of the caller the callee cannot name
DEFAULT = "<default stream>"  # the device's default stream when every caller runs the callee on a side stream
MAX_SITES = 8
_FAILED = object()
_RUNNING = object()


class InCycle(Exception):
    """A caller's collection asked, through its own analysis, for what its callers hand a callee."""


_RUNNER: list = []  # the collecting run of a caller (registered by flow/interp.py: no import cycle)


def register_runner(runner) -> None:
    _RUNNER[:] = [runner]


def site_facts(interp, st: State, fn, env: dict, inlined: bool = True) -> frozenset:
    """What the caller hands ``fn`` at this call (state ``st`` after its arguments were evaluated, ``env``
    the callee's parameters bound to them), in the callee's terms. Facts:
    ``("entry", "side")`` the caller's current stream is a side stream of its own;
    ``(p, "stream", "current")`` / ``(p, "stream", "forked")`` a stream argument that is the current stream (also
    the very place the caller's scope entered, ``with stream(streams[i]): f(x, streams[i])``) /
    a side stream that has waited for everything the current stream did;
    ``(p, "event", streams, covers)`` an event recorded on those (callee-named) streams after work the
    current stream has not joined, covering the writes of the tensor parameters ``covers``;
    ``(p, "tensor", written, allocated)`` a tensor last written on stream ``written`` unjoined into the
    current stream, and / or allocated on stream ``allocated`` (``MAIN`` when not);
    ``(p, "settled")`` long-lived memory nothing in the step wrote (:func:`settled`: a setup-time weight, also a
    ``self.*`` field or an element of one at a plain index): the callee has no producer to wait for."""
    cur = st.cur
    know = st.know(cur)
    same_object = env.get("self") is not None and getattr(env.get("self"), "key", None) == "self"
    named: dict[str, str] = {}
    for p, v in env.items():
        if isinstance(v, SVal) and p != "self":
            named.setdefault(v.key, p)

    def rel(key: str) -> str:
        if key == cur or st.same.get(key) == cur:
            return MAIN
        if key in named:
            return named[key]
        if same_object and key.startswith("self."):
            return key
        return CALLERS

    facts: set[tuple] = set()
    if cur != MAIN:
        facts.add(("entry", "side"))
    covered: set[str] = set()
    writes: dict[str, tuple] = {}  # tensor parameter -> (stream, time) of its unjoined write
    for p, v in env.items():
        if isinstance(v, KVal) and p != "self" and v.key == cur and cur != MAIN:
            facts.add((p, "stream", "current"))  # the place the caller's scope entered (`streams[i]`), passed on
        elif isinstance(v, KVal) and p != "self" and cur not in (v.key, st.same.get(v.key)) \
                and interp.kind_of(st, v) == STREAM:
            facts.add((p, "stream-other"))  # (a stream field not entered here: taken for another stream)
        elif isinstance(v, SVal):
            if rel(v.key) == MAIN:
                facts.add((p, "stream", "current"))
            elif st.know(v.key).get(cur, -1) >= max(st.last_op.get(cur, 0), 1):
                facts.add((p, "stream", "forked"))
            else:  # another stream, not ordered after the current one (no seed: only read by current_at_some_site)
                facts.add((p, "stream-other"))
        elif isinstance(v, KVal) and p != "self" and v.key.startswith("self.") and not v.opaque:
            held = interp.tensors(st, v)  # a field of the object read as a tensor (`self.layer_weights[i]`)
            S = st.stores.get(held[0].sid) if len(held) == 1 else None
            if S is not None and settled(S) and kept_to_itself(interp, S.name, fn):
                facts.add((p, "settled"))
        elif isinstance(v, TVal):
            S = st.stores.get(v.sid)
            if S is None or S.kind not in ("arg", "local", "long"):
                continue
            lw = S.last_write
            written = MAIN
            if lw is not None and lw.stream != cur and not ordered_before(lw, know):
                written = rel(lw.stream)
                if written != MAIN:
                    writes[p] = (lw.stream, lw.time)
            allocated = rel(S.alloc) if S.kind == "local" else MAIN
            if written != MAIN or allocated != MAIN:
                facts.add((p, "tensor", written, allocated))
            elif settled(S) and kept_to_itself(interp, S.name, fn):
                facts.add((p, "settled"))  # long-lived storage no step writes (setup-time weights): no producer
    for p, v in env.items():
        if not isinstance(v, EVal):
            continue
        snap = st.events.get(v.key)
        if not snap:
            continue
        if _covers_arguments(st, env, snap, cur):
            facts.add((p, "event", "current"))
        streams = tuple(sorted({rel(s) for s, t in snap.items() if know.get(s, -1) < t} - {MAIN}))
        if streams:
            covers = tuple(sorted(q for q, (s, t) in writes.items() if snap.get(s, -1) >= t))
            facts.add((p, "event", streams, covers))
            covered.update(covers)
    if not inlined:  # the caller judges a callee it does not run inline as reading its arguments at the call
        # (one finding there), unless an event handed with them says the callee waits (syncops.handoff)
        facts = {f for f in facts if not (f[1] == "tensor" and f[2] != MAIN and f[0] not in covered)}
    return frozenset(facts)


def _covers_arguments(st: State, env: dict, snap: dict, cur: str) -> bool:
    """Is the event (its record snapshot ``snap``) recorded on the caller's current stream after every write
    there of the tensors it hands the callee (the pre-event protocol: ``cur.record_event(ev)`` right after
    producing the arguments, then ``helper(rows, stream, pre_event=ev)`` waits ``ev`` before reading them)?
    A tensor argument last written on another stream is judged by its own fact, not covered here."""
    at = max((t for s, t in snap.items() if s == cur or st.same.get(s) == cur), default=-1)
    if at < 0:
        return False
    for p, v in env.items():
        if p == "self" or isinstance(v, (SVal, EVal, CVal)):
            continue
        if not isinstance(v, TVal):
            if v is None or isinstance(v, KVal) and v.opaque and not v.key.startswith("self.") and not v.glob:
                return False  # a value of the caller the flow cannot date (an opaque call's result): not known covered
            continue
        S = st.stores.get(v.sid)
        lw = S.last_write if S is not None else None
        if lw is not None and (lw.stream == cur or st.same.get(lw.stream) == cur) and lw.time > at:
            return False  # produced after the record: the event does not cover it
        if lw is None and S is not None and S.kind == "local":
            return False  # made in the caller by a call the flow does not see into: when is not known
    return True


_CALLED = re.compile(rb"(\w+)\s*\(")
_MARK = re.compile(rb"stream|Stream|Event|\.record\(")
_DEF = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]", re.M)
_DEF_NAME = re.compile(rb"[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)")


def _calls_by_segment(data: bytes, into: tuple[set, set]) -> None:
    """Add the names called in the function bodies (from one ``def`` line to the next) that name a stream or
    an event to ``into[0]``, those called elsewhere (other bodies, module level) to ``into[1]``; a function's
    own name on its ``def`` line is no call. Byte level, no parsing."""
    starts = [0, *(m.start() for m in _DEF.finditer(data))]
    for a, b in zip(starts, [*starts[1:], len(data)]):
        own = _DEF_NAME.match(data, a)
        names = set(_CALLED.findall(data, a, b))
        if own is not None and data.count(own.group(1) + b"(", a, b) == 1:
            names.discard(own.group(1))
        into[0 if a and _MARK.search(data, a, b) else 1].update(names)


def _called_near_streams(project, name: str) -> bool:
    """Is ``name`` called only in function bodies that name streams or events (a byte pass over the few
    files calling it: the ones :func:`callers_of` would parse, per-file results memoised per project)? A
    function also called from a body (or module code) that names none has a caller doing no stream work
    of its own, so no fact every caller hands it (a caller whose only stream work is a helper's is not
    followed: the cost of parsing the callers of every function)."""
    paths = project.paths_containing((f"{name}(".encode(),))
    if not paths or len(paths) > MAX_CALLER_FILES:
        return False
    memo = project.derived("entry_called_names")
    near = False
    for path in paths:
        if path not in memo:
            data = project.file_bytes(path)
            into: tuple[set, set] = (set(), set())
            if data is not None:
                _calls_by_segment(data, into)
            memo[path] = (frozenset(into[0]), frozenset(into[1]))
        stream, plain = memo[path]
        key = name.encode()
        if key in plain:
            return False
        near = near or key in stream
    return near


def _takes_event(project, file, fn) -> bool:
    from streamlint.model.tensors import may_have_event_params, param_kinds

    params = fn.node.params
    every = (*params.posonly_params, *params.params, *params.kwonly_params)
    if any(p.annotation is None and "event" in p.name.value.lower() for p in every):
        return True
    if not may_have_event_params(fn):  # (no parameter can be an EVENT: the parameter kinds need not be asked)
        return False
    kinds = param_kinds(project, file, fn)
    return any(kinds.get(p.name.value) == EVENT for p in every)


def collected(project, model, caller, mode: str) -> dict | None:
    """The facts of every call site a caller's interpretation reached ((call node id, callee id) -> the meet over the
    visits), from a run of its own (memoised per project and mode); None when the analysis gave up."""
    memo = project.derived("entry_sites")
    key = (id(caller), mode)
    found = memo.get(key)
    if found is _RUNNING:
        raise InCycle  # the caller is being collected: no answer yet (never memoised, see entry_context)
    if found is None:
        memo[key] = _RUNNING
        try:
            interp = _RUNNER[0](project, model, caller, mode) if _RUNNER else None
        finally:
            del memo[key]
        found = _FAILED if interp is None else interp.collect
        memo[key] = found
    return None if found is _FAILED else found


def entry_context(project, file, fn, mode: str, plain: bool = False) -> tuple[frozenset, object] | None:
    """(the facts every caller of ``fn`` hands it, the first call site as (file model, call node)) or None
    (no caller, too many, one unseen, or nothing they all agree on). Memoised per function and mode.
    ``plain``: ``fn`` does no stream work; the only fact that can matter to it is a tensor handed with the
    event recorded after its write (the callers judge the other arguments at the call, syncops.handoff), so
    it is asked only of functions taking an event (by kind, or an unannotated ``*event*`` parameter: a
    deleted wait leaves no use to type it by)."""
    if mode not in ("eager", "cuda") or not fn.all_params:
        return None
    if plain and not _takes_event(project, file, fn):
        return None
    name = fn.class_name if fn.node.name.value == "__init__" else fn.node.name.value
    if not _called_near_streams(project, name):
        return None  # (no file that names streams or events calls it: a byte-level superset, memoised)
    memo = project.derived("entry_context")
    key = (id(fn), mode)
    if key in memo:
        asked(project, "entry_context", key)
        return memo[key]
    memo[key] = None
    started(project, "entry_context", key)
    try:
        return _agreed(project, file, fn, mode, memo, key)
    finally:
        finished(project, "entry_context", key)


def _agreed(project, file, fn, mode: str, memo: dict, key: tuple) -> tuple[frozenset, object] | None:
    """:func:`entry_context` once its memo holds its placeholder."""
    sites = callers_of(project, file, fn)
    if not sites or len(sites) > MAX_SITES:
        return None
    from streamlint.model.flow.calls import _relevant

    meet: frozenset | None = None
    for model, site in sites:
        caller = site.function
        if caller is None or caller is fn or not _relevant(project, model, caller):
            return None  # a module-level call, a recursion, a caller without stream work: nothing to agree on
    for model, site in sites:
        try:
            facts = (collected(project, model, site.function, mode) or {}).get((id(site.node), id(fn)))
        except InCycle:  # asked while one of its callers is being collected: unknown now, asked again later
            note(project)
            del memo[key]
            return None
        if facts is None:
            return None  # a call its caller's analysis did not reach (or could not run inline)
        facts = frozenset(f for f in facts if f[1] != "stream-other")
        meet = facts if meet is None else meet & facts
        if not meet:
            return None
    found = (meet, sites[0]) if meet else None
    memo[key] = found
    return found


def note_site(interp, st: State, e, fn, env: dict, inlined: bool = True) -> None:
    """In a collecting run, at a call the caller makes itself (not inside an inlined helper): meet this
    visit's facts with the earlier visits' of the same call."""
    if interp.collect is None or interp.depth:
        return
    facts = site_facts(interp, st, fn, env, inlined)
    old = interp.collect.get((id(e), id(fn)))
    interp.collect[(id(e), id(fn))] = facts if old is None else old & facts | {
        f for f in old | facts if f[1] == "stream-other"}  # (another stream on one visit is one on that path)


def entry_of(interp, S, earlier, stream: str) -> tuple | None:
    """(file model, call node, the event parameter handed with it or None): the call site a hazard between ``earlier`` (an access to storage ``S``) and an access on ``stream``
    rests on, when it rests on the callers' facts: the storage's write was seeded, or one side is the
    default stream, told apart from the entry stream only because every caller runs this on a side stream."""
    if S.last_write is earlier and S.sid in interp.entry_sources:
        return interp.entry_sources[S.sid]
    if interp.default_key != MAIN and interp.default_key in (earlier.stream, stream):
        return (*interp.entry_site, None)
    return None


def current_call(expr) -> bool:
    """Is ``expr`` a call of a ``current_stream`` getter (``torch.cuda.current_stream(self.device)``,
    ``get_accelerator().current_stream()``)?"""
    return isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Attribute, cst.Name)) and (
        expr.func.attr.value if isinstance(expr.func, cst.Attribute) else expr.func.value) == "current_stream"


def _plain(expr) -> bool:
    """Is ``expr`` evaluated without effects: a name, an attribute chain, an element of one at a plain index
    (``self.layer_weights[i + 1]``), the current stream (``torch.cuda.current_stream(t.device)``)?"""
    if isinstance(expr, cst.Name):
        return True
    if isinstance(expr, cst.Attribute):
        return _plain(expr.value)
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        return _plain(expr.value) and _index(expr.slice[0].slice.value)
    return current_call(expr) and all(not a.star and _plain(a.value) for a in expr.args)  # (no effects)


def _index(expr) -> bool:
    if isinstance(expr, (cst.Name, cst.Integer, cst.SimpleString)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return _index(expr.expression)
    return isinstance(expr, cst.BinaryOperation) and _index(expr.left) and _index(expr.right)


def note_call(interp, st: State, e, site) -> None:
    """In a collecting run, at a call of a project function it does not run inline (no stream work of its
    own): the facts its plain arguments (names, attribute chains: evaluated without effects) carry."""
    found = interp.project.call_target(interp.cfile, site) or interp.annotated_method(e.func) \
        or interp.inline_target(site)  # (`self.comm.gather(...)`, a held object's method it runs inline)
    if found is None:
        return
    fn = found[0]
    method = fn.class_name is not None and fn.params[:1] == ("self",)
    params = fn.params[1:] if method else fn.params
    env: dict = {}
    if method:
        receiver = e.func.value if isinstance(e.func, cst.Attribute) else None
        env["self"] = KVal("self" if isinstance(receiver, cst.Name) and receiver.value == "self" else "<object>")
    for name, expr in bind_arguments(params + fn.kwonly, e, kwonly=fn.kwonly).items():
        if _plain(expr):
            v = interp.ev(st, expr)
            if not isinstance(v, EVal) and interp.kind_of(st, v) == EVENT:  # (`self.ready`: an event field)
                v = EVal(interp.event_key(st, v, expr))
            env[name] = v
    from streamlint.model.flow.calls import _relevant

    note_site(interp, st, e, fn, env, _relevant(interp.project, found[1], fn))


def seed_entry(interp, st: State, kinds: dict) -> None:
    """Seed the entry with the facts every caller hands the function (:func:`entry_context`)."""
    found = entry_context(interp.project, interp.file, interp.fn, interp.cfg.mode)
    if found is None:
        return
    facts, (model, site) = found
    interp.entry_site = (model, site.node)
    from streamlint.model.flow.values import Access
    from streamlint.model.streams import STREAM

    by_param: dict[str, tuple] = {}
    current: set[str] = set()
    settled_params: set[str] = set()
    for f in facts:
        if f == ("entry", "side"):
            interp.default_key = DEFAULT
        elif f[1:] == ("event", "current"):
            current.add(f[0])
        elif f[1:] == ("settled",):
            settled_params.add(f[0])
        else:
            by_param[f[0]] = f[1:]
    params = set(interp.fn.all_params) - {"self"}
    for p, f in sorted(by_param.items()):
        if p not in params:
            continue
        if f[0] == "stream" and kinds.get(p) in (STREAM, None):
            if f[1] == "current":
                st.env[p] = SVal(MAIN)
            elif isinstance(st.env.get(p), SVal) and st.env[p].key == p:
                interp.wait_stream(st, p, MAIN)
    if settled_params:
        from streamlint.model.flow.fieldfacts import _referenced

        name = interp.fn.node.name.value
        if _referenced(interp.project, name, interp.file.path):
            settled_params = set()  # (also handed on by reference, `hooks = {"tokens": self.on_tokens}`: a caller
            # not seen may hand it anything)
    for p in sorted(settled_params):
        if p in params and p not in by_param and kinds.get(p) in ("tensor", None) and isinstance(st.env.get(p), TVal):
            # every caller hands long-lived memory no step wrote (a setup-time weight): no producer to wait for
            st.env[p] = interp.new_tensor(st, interp.new_storage(st, "long", MAIN, p, None).sid)
    for p in sorted(current):
        if p in params and p not in by_param and kinds.get(p) in (EVENT, None):
            # every caller hands an event it recorded on its current stream after producing the arguments: not
            # None here, and a wait on it orders this function's work after those productions
            interp.given_events.add(p)
            st.env[p] = EVal(p)
            st.events[p] = {MAIN: 0}
    covered = {q for f in by_param.values() if f[0] == "event" for q in f[2]}
    seeded: dict[str, int] = {}
    for phase in (True, False):  # covered writes, then the events after them, then the writes after those
        if not phase:
            for p, f in sorted(by_param.items()):
                if p in params and f[0] == "event" and kinds.get(p) in (EVENT, None):
                    t = interp.tick()
                    st.env[p] = EVal(p)
                    st.events[p] = {s: t for s in f[1]}
        for p, f in sorted(by_param.items()):
            if p not in params or f[0] != "tensor" or (p in covered) != phase or kinds.get(p) not in ("tensor", None):
                continue
            written, allocated = f[1], f[2]
            t = interp.tick()
            w = Access(written, t, None, {written: t}, label=p) if written != MAIN else Access(MAIN, 0, None, {})
            S = interp.new_storage(st, "arg", allocated, p, w)
            if written != MAIN:
                st.last_op[written] = max(st.last_op.get(written, 0), t)
                st.work[written] = max(st.work.get(written, 0), t)
            st.env[p] = interp.new_tensor(st, S.sid)
            seeded[p] = S.sid
            handle = next((q for q, g in sorted(by_param.items()) if g[0] == "event" and p in g[2]), None)
            interp.entry_sources[S.sid] = (model, site.node, handle)


__all__ = ["CALLERS", "DEFAULT", "MAX_SITES", "InCycle", "collected", "current_call", "entry_context", "entry_of", "note_call", "note_site",
           "seed_entry", "settled", "site_facts"]
