"""Graph replays in the dataflow: ``graph.replay()`` is device work queued on the replaying stream that
reads the graph's static inputs and writes its static outputs (the persistent buffers captured with it).
A mixin of the interpreter (see interp.Interp)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.apis import Role
from streamlint.model.captures import captured_host_outputs
from streamlint.model.flow.leaves import closure_container
from streamlint.model.flow.results import Race
from streamlint.model.flow.values import Access, State, TVal, ordered_before
from streamlint.model.streams import MAIN, derived

_WAITS = ("wait", "wait_event", "wait_stream")


class Replays:
    def replay(self, st: State, e: cst.Call | None = None) -> None:
        """``graph.replay()``: device work queued on the replaying stream. The captured kernels read the
        graph's static inputs, persistent buffers that existed at capture time (long-lived values,
        arguments), never a tensor allocated in this call. Which ones is not visible, so every such buffer
        written in this function on another stream and not ordered before the replay may be read too early
        (a race at medium confidence, reported as an assumption). Replayed on a side stream, they write the
        graph's static outputs: the long-lived buffers this function had not written before the replay (those
        it wrote are its inputs), including the ones it reaches only afterwards (:meth:`graph_output`); a read
        of one on another stream, or handing it back, must wait for the replaying stream. The host buffers the
        captured work copies into (:func:`~streamlint.model.captures.captured_host_outputs`) are filled again by
        the replay: pending on the replaying stream until a host synchronisation covers it (hostreads.py)."""
        if e is not None and isinstance(e.func, cst.Attribute) and self.anchor is not None \
                and self.cfg.mode in ("eager", "cuda"):
            self.replayed_host_outputs(st, self.cfile.code(e.func.value))
        if not self.cfg.raw:
            return
        know = st.know(st.cur)
        if self.anchor is not None:
            for S in list(st.stores.values()):
                lw = S.last_write
                if S.kind not in ("long", "arg") or lw is None or lw.time == 0 or lw.stream == st.cur \
                        or ordered_before(lw, know):
                    continue
                self.race(st, "read", S, lw, st.cur, self.label(st, S.sid), replay=True)
        t = self.tick()
        snap = dict(know)
        snap[st.cur] = t
        # (on the entry stream its outputs are where the caller reads them; a side stream reading one after it
        # without a fork would more often read a buffer the graph does not write, a weight: not assumed)
        st.replayed = Access(st.cur, t, self.anchor, snap) if st.cur != MAIN else None
        for S in st.stores.values() if st.replayed is not None else ():
            if S.kind == "long" and S.last_write is None and S.name \
                    and not self.is_global(S.name.split(".", 1)[0].split("[", 1)[0]):  # (not a module's)
                S.last_write = st.replayed
        st.last_op[st.cur] = st.work[st.cur] = t
        if st.cur != MAIN and self.anchor is not None:
            self.note_work(st.cur, t)

    def replayed_host_outputs(self, st: State, graph: str) -> None:
        """The replay re-runs the captured device-to-host copies: their pinned destinations are pending on the
        replaying stream (a host read of one before a synchronisation is SL201, the replay as the copy)."""
        t = self.tick()
        for name in captured_host_outputs(self.project, self.cfile, self.cfn, graph):
            S = self.new_storage(st, "host", st.cur, name, None)  # host memory the replay's copy fills
            S.d2h = Access(st.cur, t, self.anchor, {})
            st.env[name] = self.new_tensor(st, S.sid)  # (a field this call holds: hostreads.host_read)

    def inline_capture(self, st: State, name: str) -> None:
        """``g.capture_begin()`` .. ``g.capture_end()`` written out in the function: the work queued between them
        is captured, not run (it runs at replay, on the replaying stream), and capture_begin does not synchronise
        (a "deferred" region, as a capture object calling it: captures.py)."""
        if name == "capture_begin":
            st.regions.append((self.clock, st.cur, "deferred"))
        elif st.regions and st.regions[-1][2] == "deferred":
            self.captured_outputs(st, st.regions.pop()[0])

    def captured_outputs(self, st: State, start: int) -> None:
        """A capture without a synchronising entry ends: what it made lives in the graph's pool and is written
        when the graph is replayed, not by the captured work (which did not run): no stream has written it yet."""
        for S in st.stores.values():
            if S.kind == "pool" and S.last_write is not None and S.last_write.time >= start:
                S.last_write = None

    def graph_output(self, st: State, name: str) -> TVal | None:
        """A name of an enclosing function used by a function that replays a graph (``return tuple(o.detach()
        for o in static_outputs)`` in a graphed callable's ``forward``, ``g.copy_(grad)`` for ``g`` in
        ``static_grad_outputs`` before the replay: the buffers handed to the factory that made it): the
        persistent buffers captured with the graph, its static inputs before the replay and a place the replay
        wrote after it (:meth:`replay`). Otherwise untyped (None)."""
        replays = [site.node.func for site in self.cfn.calls if site.method == "replay" and not site.node.args]
        if not closure_container(self.cfn, name) or st.replayed is None and not replays \
                or any(isinstance(f.value, cst.Name) and f.value.value == name for f in replays) \
                or any(isinstance(site.node.func, cst.Name) and site.node.func.value == name for site in self.cfn.calls):
            return None  # (not the graph itself, nor a function the enclosing one made)
        return self.long_tensor(st, name)

    def graph_task(self, st: State, e: cst.Call, use) -> None:
        """torch_npu graph task groups (apis.GRAPH_TASK_ROLES). An update (``graph_task_update_begin(s, h)`` ...
        ``graph_task_update_end(s)``) is device work on ``s``: an event recorded on ``s`` before it does not
        cover it (the early record of :class:`~streamlint.model.flow.orderings.Orderings`). A task group
        captured on ``s`` whose handle the code keeps (to update it before each replay) is the consumer of
        that update, queued on another stream: the captured stream must wait for the event the updater records
        before the group begins (``event.wait(s)`` on an ``ExternalEvent``), else the replay may run the task
        on stale or half-written parameters (:meth:`unwaited_task_group`)."""
        expr = use.value("stream")
        stream = self.stream_key(st, self.ev(st, expr), expr) if expr is not None else st.cur
        if use.role is Role.GRAPH_TASK_UPDATE_BEGIN and use.value("handle") is not None:
            self.ev(st, use.value("handle"))
        if use.role is Role.GRAPH_TASK_UPDATE_END:
            t = self.tick()
            st.last_op[stream] = st.work[stream] = t
            if stream != MAIN and self.anchor is not None:
                self.note_work(stream, t)
        if use.role is Role.GRAPH_TASK_GROUP_BEGIN and expr is not None:
            self.unwaited_task_group(e, expr, stream)
        return None

    def unwaited_task_group(self, begin: cst.Call, expr: cst.BaseExpression, stream: str) -> None:
        """SL201 at ``graph_task_group_begin(s)`` when the group's handle is kept (the result of the
        ``graph_task_group_end(s)`` after it is used), the project updates task groups somewhere
        (``graph_task_update_begin``), and nothing in this function waits on ``s`` before the group begins.
        A group whose parameters are never updated needs no event."""
        if self.depth or self.anchor is None or not _updates_task_groups(self.project):
            return
        code, start = self.cfile.code(expr), self.cfile.span(begin).start_line
        ends = [site for site in self.cfn.calls if site.node.func is not None
                and self.cfile.code(site.node.func).endswith("graph_task_group_end")
                and self.cfile.span(site.node).start_line > start
                and [self.cfile.code(a.value) for a in site.node.args[:1]] == [code]]
        if not ends or not any(_kept(self.cfn, end.node) for end in ends[:1]):
            return
        for site in self.cfn.calls:
            if site.method not in _WAITS or self.cfile.span(site.node).start_line >= start:
                continue
            recv = self.cfile.code(site.node.func.value) if isinstance(site.node.func, cst.Attribute) else ""
            if recv == code or any(self.cfile.code(a.value) == code for a in site.node.args) \
                    or site.method == "wait" and not site.node.args and stream == MAIN:
                return
        key = (id(self.anchor), "task group", "read")
        self.races.setdefault(key, Race("read", self.anchor, self.cfile.code(ends[0].node), "<task update>", stream,
                                        None, False, self.cfg.mode, task=True))


def _kept(fn, end: cst.Call) -> bool:
    """Is the handle ``graph_task_group_end(...)`` returns used (assigned to a name the function reads again,
    passed on, stored)? A discarded handle cannot be updated."""
    for a in fn.assigns:
        if getattr(a, "value", None) is end:
            return True
    for site in fn.calls:
        if any(arg.value is end for arg in site.node.args):
            return True
    for ret in fn.returns:
        if ret.value is end:
            return True
    for name, values in fn.name_assigns.items():
        if any(v is end for v in values):
            return True
    return False


def _updates_task_groups(project) -> bool:
    """Does any file of the project update a captured task group (``graph_task_update_begin``)?"""
    memo = derived(project, "updates_task_groups")
    if "any" not in memo:
        memo["any"] = any(project.may_contain(path, (b"graph_task_update_begin",)) for path in project.all_files())
    return memo["any"]
