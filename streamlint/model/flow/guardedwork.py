"""What an event recorded on a stream guards, seen from its waiters in the function (issue 16,
[event-guards-earlier-use]).

An event recorded on a stream before more work on that stream is early only if its waiters rely on that later
work (:meth:`~streamlint.model.flow.orderings.Orderings.uncovered_records`). When the function itself waits on
the event (a ring slot's ``free[slot]``: the copy stream waits it before refilling the slot, the update stream
records it after its last read of the slot), what the waiters do after the wait is seen: the storages they
touch. If the work queued after the record touches none of them -- no tracked access (an opaque call
``self.final(p)`` is taken to touch the tensors it is given, as everywhere in the flow), and no untracked helper
work unless the guarded tensors are the function's own locals, never stored away, and the helper is given none
of their names -- the record guards everything its waiters use, and the later work is not what they wait for.
Every work item after the record must be one of these (else the finding stands), and no other function of the
project may wait on (or be handed) an event of that field name (:func:`event_waited_outside`): its waiters, unseen,
may rely on the later work."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.counters import names_in
from streamlint.model.syntax import local_nodes, mentions_name

if TYPE_CHECKING:
    from streamlint.model.flow.values import State, TVal


class GuardedWork:
    """Logs of accesses, event waits and untracked helper work (mixin of
    :class:`~streamlint.model.flow.interp.Interp`). Interp state it uses: ``clock``, ``op_sites``; it asks
    storage (access, tensors), orderings (wait_event, helper_work)."""

    def access(self, st: State, tv: TVal, s: str, t: int, know: dict[str, int], write: bool) -> None:
        super().access(st, tv, s, t, know, write)  # type: ignore[misc]
        self.__dict__.setdefault("access_log", []).append((s, t, tv.sid))

    def wait_event(self, st: State, stream: str, key: str) -> None:
        super().wait_event(st, stream, key)  # type: ignore[misc]
        self.__dict__.setdefault("event_waits", {}).setdefault(key, []).append((stream, self.clock))
        snap = st.events.get(key)
        if snap is not None:  # (the record this path's wait sees: its key and snapshot, shared by the paths after it)
            self.__dict__.setdefault("record_waits", {}).setdefault((key, frozenset(snap.items())), []).append(self.clock)

    def helper_work(self, st: State, site) -> None:
        before = st.work.get(st.cur)
        super().helper_work(st, site)  # type: ignore[misc]
        if st.work.get(st.cur) != before:
            self.__dict__.setdefault("helper_log", []).append((st.cur, st.work[st.cur], site.node, dict(st.env)))

    def spares_waiters(self, st: State, key: str, stream: str, time: int, last: int) -> bool:
        """Do the waiters of ``key`` seen in this function touch only the function's own tensors, none of which
        the work queued on ``stream`` after the record (``time``; the last work at ``last``) touches?"""
        waits = self.__dict__.get("event_waits", {}).get(key)
        log = self.__dict__.get("access_log", [])
        if not waits or event_waited_outside(self.project, self.fn, key):  # type: ignore[attr-defined]
            return False  # (another function's waiter may rely on the work after the record)
        guarded = {sid for s, t, sid in log for w, wt in waits if s == w and t > wt and w != stream}
        if not guarded or any(st.stores.get(sid) is None for sid in guarded):
            return False
        after = {t for s, t, _ in log if s == stream and time < t <= last}
        if any(sid in guarded for s, t, sid in log if s == stream and time < t <= last):
            return False
        helpers = [(t, node, env) for s, t, node, env in self.__dict__.get("helper_log", [])
                   if s == stream and time < t <= last]
        if helpers and any(_reachable(st.stores[sid]) for sid in guarded):
            return False  # (a helper the flow does not follow may reach a field through any object it is given)
        for _t, node, env in helpers:
            for name in set(names_in(node)):
                if any(tv.sid in guarded for tv in self.tensors(st, env.get(name))):  # type: ignore[attr-defined]
                    return False
        known = after | {t for t, _n, _e in helpers}
        return last in known and all(t in known for t, _ in self.op_sites.get(stream, ()) if time < t <= last)

    def waits_precede_work(self, st: State, key: str, stream: str, time: int) -> bool:
        """Is every wait on ``key`` after its record (at ``time``) issued before any work ``stream`` queues after
        that record, the event being the function's own (made here, never stored on an object, put in a container
        or handed to a call, and no other function of the project waits on one of its name)? A wait orders the
        waiter after what the record covers, and no waiter of it is left to come after the later work: moving
        the record later cannot cover that work (the wait would then run first), so the record is not early
        (a staging loop recording ``queued`` on the compute stream and waiting on it at once, then queueing the
        next element's copy on the compute stream in a later round). A wait at the same time as the work or after
        it, a path's waits interleaved with another path's work (the clock counts every path: a wait of one path
        after a work of another keeps the finding), an event kept or handed: early as before."""
        snap = st.events.get(key)
        if snap is None or snap.get(stream) != time:
            return False
        waits = self.__dict__.get("record_waits", {}).get((key, frozenset(snap.items())), ())  # (of every path)
        after = [t for t, _n in self.work_sites.get(stream, ()) if t > time]  # type: ignore[attr-defined]
        if not waits or not after or max(waits) >= min(after) or key.startswith("self.") \
                or key in self.handed_events or key in self.field_events:  # type: ignore[attr-defined]
            return False
        names = [n for n, v in st.env.items() if getattr(v, "key", None) == key] + [key] * key.isidentifier()
        if not names or _closed_over(self.fn.node, *names):  # type: ignore[attr-defined]  (the locals bound to it)
            return False  # (a nested function may wait on it later: `def finish(): copy.wait_event(queued)`)
        return not event_waited_outside(self.project, self.fn, key)  # type: ignore[attr-defined]


def _closed_over(fn: cst.FunctionDef, *names: str) -> bool:
    """Does a function or lambda nested in ``fn`` mention one of ``names`` (the event may be waited on when it runs)?"""
    return any(isinstance(n, (cst.FunctionDef, cst.Lambda)) and n is not fn and mentions_name(n, *names)
               for n in local_nodes(fn))


def _reachable(S) -> bool:
    """Storage other code may reach without being handed its name: not the function's own, or stored away."""
    return S.kind != "local" or S.escaped


def event_waited_outside(project, fn, key: str) -> bool:
    """Does a function of the project other than ``fn`` wait on (or otherwise consume) an event named like
    ``key``'s field (``self.free[slot]`` / ``ring.free[slot]`` -> ``free``): the container of a
    ``wait_event`` / ``elapsed_time`` argument, of the receiver of ``wait()`` / ``synchronize()`` / ``query()``,
    or an argument of any call but a record (a helper that may wait it)? Its waiters are not seen here, so
    what they rely on is unknown. The variant of :func:`~streamlint.model.flow.joinsteps.event_waited_elsewhere`
    that leaves out the current function. When ``key``'s holder has a known class here (``ring: _Ring``,
    ``self`` of a method), a waiter whose holder -- the name directly in front of the field -- is of another
    known class, unrelated by inheritance (``self.free`` in a method of another optimizer, ``pool.free[slot]``
    for ``pool: _Pool``), reads another object's event and does not count (``self.ring.free[0]``: the holder
    ``self.ring`` has no known class here, the waiter counts); nor does a local of the waiter's own that is no read of the field (``free, _ =
    mem_get_info()``). Past the caller-file bound the answer is yes."""
    from streamlint.model.waits import consumes_event
    from streamlint.model.options import MAX_CALLER_FILES

    attr = key.split("[", 1)[0].rsplit(".", 1)[-1].strip()
    chain = key.split("[", 1)[0].strip().split(".")
    mine = _holder_class(fn, chain[0]) if len(chain) == 2 else None  # (`ring.free`; `self.ring.free`: unknown)
    memo = project.path_index.derived.setdefault("event_waited_outside", {})
    if (id(fn), attr, mine) in memo:
        return memo[(id(fn), attr, mine)]
    # (bytes first: the field read `.free`, or a name indexed or called on like one, `free[slot]` / `free.wait`)
    paths = project.paths_containing((f".{attr}".encode(), f"{attr}[".encode(), f"{attr}.".encode()))
    found = len(paths) > MAX_CALLER_FILES
    for model in filter(None, map(project.file, paths if not found else ())):
        for other in model.iter_functions():
            if other is fn or found:
                continue

            def same(e, other=other) -> bool:
                if _tail(e) != attr:
                    return False
                if _holder_root(e) is None and not _bound_to_field(other, e, attr):
                    return False  # (a local of its own, `free, _ = mem_get_info()`, is no object's event)
                theirs = _holder_class(other, _direct_holder(e)) if mine is not None else None
                return theirs is None or _related(project, mine, theirs)

            found = any(consumes_event(site, same) for site in other.calls)
    memo[(id(fn), attr, mine)] = found
    return found


def _holder_root(expr: cst.BaseExpression) -> str | None:
    """The name an event field expression is read from (``ring.free[slot]``, ``self.free.pop(k)`` -> ring,
    self); None when it is a bare name or not read through a name."""
    from streamlint.model.flow.calls import container_of

    expr = container_of(expr)
    if not isinstance(expr, cst.Attribute):
        return None
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _direct_holder(expr: cst.BaseExpression) -> str | None:
    """The name directly in front of an event field (``ring.free[slot]`` -> ring); None when the object holding
    the field is reached through more (``self.ring.free[0]``: the type of ``self.ring`` is not known here, so
    the waiter may read this very object's event)."""
    from streamlint.model.flow.calls import container_of

    expr = container_of(expr)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        return expr.value.value
    return None


def _bound_to_field(fn, expr: cst.BaseExpression, attr: str) -> bool:
    """For an event read through a bare name (``free[slot]``, ``ev``): is that name a parameter of ``fn`` (it
    may be handed the field), or is every assignment of it in ``fn`` a read of the field ``attr``
    (``free = ring.free``)? Anything but a bare name: yes."""
    from streamlint.model.flow.calls import container_of

    expr = container_of(expr)
    if not isinstance(expr, cst.Name):
        return True
    if expr.value in fn.all_params:
        return True
    values = fn.name_assigns.get(expr.value, ())
    return bool(values) and all(_tail(v) == attr for v in values)


def _holder_class(fn, name: str | None) -> str | None:
    """The class name of ``name`` in ``fn``: ``self`` of a method, or a parameter annotated with a plain class
    name (``ring: "_Ring"``, ``pool: _Pool``); None when unknown."""
    if name is None:
        return None
    if name == "self" and fn.class_name and fn.params[:1] == ("self",):
        return fn.class_name.rsplit(".", 1)[-1]
    params = fn.node.params
    for p in (*params.posonly_params, *params.params, *params.kwonly_params):
        if p.name.value == name and p.annotation is not None:
            ann = p.annotation.annotation
            if isinstance(ann, cst.SimpleString):
                text = ann.evaluated_value if isinstance(ann.evaluated_value, str) else ""
                return text if text.isidentifier() else None
            return ann.value if isinstance(ann, cst.Name) else None
    return None


def _related(project, a: str, b: str) -> bool:
    """Are classes named ``a`` and ``b`` the same or one a base of the other (by name, through the bases the
    project declares, four levels)?"""
    if a == b:
        return True
    return b in _bases(project, a) or a in _bases(project, b)


def _bases(project, name: str, depth: int = 0) -> set[str]:
    out: set[str] = set()
    if depth > 4:
        return out
    for model in filter(None, map(project.file, project.paths_containing((f"class {name}".encode(),)))):
        cls = model.classes.get(name)
        if cls is None:
            continue
        for base in cls.bases:
            short = base.rsplit(".", 1)[-1]
            out |= {short} | _bases(project, short, depth + 1)
    return out


def _tail(expr: cst.BaseExpression) -> str | None:
    """The last name of what an expression takes its element from (``x.free[i]``, ``x.free.pop(k)`` -> free)."""
    from streamlint.model.flow.calls import container_of

    expr = container_of(expr)
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return expr.value if isinstance(expr, cst.Name) else None


__all__ = ["GuardedWork", "event_waited_outside"]
