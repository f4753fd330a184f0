"""Calls of known stream / event / tensor-wait APIs (:data:`~streamlint.model.apis.Role`) in the dataflow:
waits on tensors and events, records, tagged events and streams, device synchronisation, stream getters and
constructors, stream contexts built before their ``with``; anything else a known API does is generic tensor work.
A mixin of the interpreter (see interp.Interp), split from exprs.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.apis import GRAPH_TASK_ROLES, Role
from streamlint.model.file import string_value
from streamlint.model.flow.calls import wait_self_expr
from streamlint.model.flow.places import memoised
from streamlint.model.flow.values import CtxVal, CVal, EVal, SVal, State, TVal, TupVal, merge_clock
from streamlint.model.streams import MAIN, tagged_stream_key

if TYPE_CHECKING:
    from streamlint.model.uses import ApiUse


class ApiCalls:
    """Known-API dispatch (mixin of :class:`~streamlint.model.flow.interp.Interp`): ``api``."""

    def api(self, st: State, e: cst.Call, use: ApiUse) -> object:
        role = use.role

        def val(param: str) -> tuple[object, cst.BaseExpression | None]:
            expr = use.value(param)
            if expr is None:
                return None, None
            if use.arg(param) is None:  # a wrapper constant: render without evaluation
                sv = string_value(expr)
                return (CVal(sv) if sv is not None else None), expr
            return self.ev(st, expr), expr

        if role is Role.WAIT_TENSOR:
            target, texpr = val("self")
            if texpr is None:
                texpr = wait_self_expr(self.project, self.cfile, use)
                target = self.ev(st, texpr) if texpr is not None else None
            dep, _ = val("dependency")
            for tv in self.tensors(st, dep):
                lw = st.stores[tv.sid].last_write
                snap = dict(lw.snap) if lw is not None and lw.snap is not None else {}
                if lw is not None:
                    snap[lw.stream] = max(snap.get(lw.stream, -1), lw.time)
                for t in self.tensors(st, target):
                    st.deps.setdefault(t.vid, []).append(snap)
            if isinstance(target, TVal) and self.depth == 0:
                name = self.file.code(texpr) if texpr is not None else "tensor"
                st.waits.setdefault(target.vid, []).append((self.clock + 1, self.anchor or e, name))
            self.tick()
            return target
        if role is Role.OPS_WAIT:
            tensors, _ = val("tensors")
            items = tensors.items if isinstance(tensors, TupVal) else (tensors,)
            for item in items:
                if isinstance(item, EVal):
                    self.wait_event(st, st.cur, item.key)
                for tv in self.tensors(st, item):
                    lw = st.stores[tv.sid].last_write
                    if lw is not None and lw.stream != st.cur:
                        merge_clock(st.vc.setdefault(st.cur, {}), lw.snap or {lw.stream: lw.time})
            return None
        if role is Role.OPS_RECORD:
            key = self.anonymous_key("event", e)
            self.record(st, st.cur, key)
            return EVal(key)
        if role in (Role.TAGGED_EVENT_RECORD, Role.TAGGED_EVENT_WAIT):
            v, expr = val("event")
            key = self.event_key(st, v, expr)
            if role is Role.TAGGED_EVENT_RECORD:
                self.record(st, st.cur, key)
            else:
                self.wait_event(st, st.cur, key)
            return None
        if role is Role.RECORD_TAGGED_STREAM:
            v, _ = val("input")
            tag, texpr = val("tagged_stream")
            name = tag.value if isinstance(tag, CVal) and isinstance(tag.value, str) else None
            if name is None and texpr is not None:
                name = string_value(texpr)
            stream = MAIN if name == "default" else (tagged_stream_key(name) if name is not None else None)
            for tv in self.tensors(st, v):
                S = st.stores.get(tv.sid)
                if S is not None and stream is not None:
                    S.recorded.add(stream)
            return None
        if role is Role.DEVICE_SYNCHRONIZE:
            self.sync_all(st)
            return None
        if role is Role.CURRENT_STREAM:
            return SVal(st.cur)
        if role is Role.DEFAULT_STREAM:
            return SVal(self.default_key)
        if role is Role.STREAM_NEW:
            site = self.cfile.call_site(e)
            found = self.project.call_target(self.cfile, site) if site is not None else None
            key = self.memo_key(st, e, found[0]) if found is not None and memoised(found[0]) else None
            return SVal(key if key is not None else self.anonymous_key("stream", e))  # (a cached factory's stream)
        if role in (Role.EVENT_NEW, Role.TAGGED_EVENT_CREATE):
            key = self.anonymous_key("event", e)
            st.event_stamps[key] = (self.stamp(), -1)  # (a new object under the site's key: orderings.record)
            return EVal(key)
        if role is Role.PREFETCH:  # an L2 prefetch hint: moves no tensor data another stream could race with
            for arg in e.args:
                self.ev(st, arg.value)
            self.op(st, e, [], result=False)  # still work queued on this stream (matters for capture joins)
            return None
        if role is Role.NATIVE_STREAM_CONTEXT and (use.modes is None or self.cfg.mode in use.modes) \
                and not (isinstance(use.arg("stream"), cst.Name) and use.arg("stream").value == "None"):
            return CtxVal(self.scope_stream(st, use))  # entered later by `with ctx:` (control.with_item)
        if role is Role.SET_STREAM:
            self.thread_stream_set(st, e, use)  # the thread's current stream from here on (threadstreams.py)
            return None
        if role in (Role.NATIVE_STREAM_CONTEXT, Role.STREAM_SWITCH, Role.GRAPH_CAPTURE, Role.SET_STREAM,
                    Role.LIMIT_CORE_NUM, Role.SUPER_KERNEL, Role.OTHER_TORCHAIR_SCOPE, Role.NULL_CONTEXT,
                    Role.LIMIT_CORE_NUM_NPUGRAPH_EX):
            return None
        return self.graph_task(st, e, use) if role in GRAPH_TASK_ROLES else self.generic(st, e, use.spec.qualname)
