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


def _reachable(S) -> bool:
    """Storage other code may reach without being handed its name: not the function's own, or stored away."""
    return S.kind != "local" or S.escaped


def event_waited_outside(project, fn, key: str) -> bool:
    """Does a function of the project other than ``fn`` wait on (or otherwise consume) an event named like
    ``key``'s field (``self.free[slot]`` / ``ring.free[slot]`` -> ``free``): the container of a
    ``wait_event`` / ``elapsed_time`` argument, of the receiver of ``wait()`` / ``synchronize()`` / ``query()``,
    or an argument of any call but a record (a helper that may wait it)? Its waiters are not seen here, so
    what they rely on is unknown. The variant of :func:`~streamlint.model.flow.joinsteps.event_waited_elsewhere`
    that leaves out the current function. Past the caller-file bound the answer is yes."""
    from streamlint.model.waits import consumes_event
    from streamlint.model.options import MAX_CALLER_FILES

    attr = key.split("[", 1)[0].rsplit(".", 1)[-1].strip()
    memo = project.path_index.derived.setdefault("event_waited_outside", {})
    if (id(fn), attr) in memo:
        return memo[(id(fn), attr)]
    paths = project.paths_containing((attr.encode(),))
    found = len(paths) > MAX_CALLER_FILES
    for model in filter(None, map(project.file, paths if not found else ())):
        for other in model.iter_functions():
            if other is fn or found:
                continue
            found = any(consumes_event(site, lambda e: _tail(e) == attr) for site in other.calls)
    memo[(id(fn), attr)] = found
    return found


def _tail(expr: cst.BaseExpression) -> str | None:
    """The last name of what an expression takes its element from (``x.free[i]``, ``x.free.pop(k)`` -> free)."""
    from streamlint.model.flow.calls import container_of

    expr = container_of(expr)
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return expr.value if isinstance(expr, cst.Name) else None


__all__ = ["GuardedWork", "event_waited_outside"]
