"""Context managers that fork the stream they switch to (issue 16 §1, FP class wrapper-fork-unseen).

A project ``@contextmanager`` that switches the caller's with-body onto a stream of its own is a stream
scope for the flow (model/wrappers.py), which runs only the body. What the wrapper does before its
``yield`` is not run; when that prelude makes the very stream it then switches to wait on the current
stream (``side.wait_stream(torch.npu.current_stream())``, possibly under ``if current != side:``, the test
that skips only the wait on a stream already current), the with-body is ordered after everything the caller
queued before the ``with``: :func:`forks_on_entry` says so, and the flow starts the scope with that wait.

The prelude may instead make that stream wait on an event the object holds (``self.ready.wait(self.side)``,
``self.side.wait_event(self.ready)``) that the wrapper does not record first: :func:`entry_event_waits` names
those events in the caller's terms (the wrapper called on ``self`` or on a field ``self.node``), and the flow
starts the scope with the same event wait the caller's own code would make there (``wait_event``: an event
recorded outside the function covers the work queued before its entry, as where the wait is written inline).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.apis import DEVICE_CONTEXTS, STREAM_SCOPE_ROLES, Role
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.streams import derived, is_current_stream
from streamlint.model.syntax import lexical_index, local_nodes

if TYPE_CHECKING:
    from streamlint.model.project import Project
    from streamlint.model.uses import ApiUse


def forks_on_entry(project: Project, file: FileModel, use: ApiUse) -> bool:
    """Does the project context manager called by ``use`` (a stream scope reached through wrappers, in
    ``file``) make its scope stream wait on the entering current stream before it switches?"""
    return _summary(project, file, use)[0]


def joins_on_exit(project: Project, file: FileModel, use: ApiUse) -> bool:
    """Does it make the current stream wait on its scope stream after the ``yield``'s scope closes
    (``caller.wait_stream(side)`` after ``with torch.cuda.stream(side): yield``)? Then the caller's code
    after the ``with`` is ordered after the with-body."""
    return _summary(project, file, use)[1]


def yields_caller_stream(project: Project, file: FileModel, use: ApiUse) -> bool:
    """Does it yield the stream current at its entry (``with torch.cuda.stream(side): yield caller``)? The
    ``as`` name then is the caller's stream."""
    return _summary(project, file, use)[2]


def entry_event_waits(project: Project, file: FileModel, use: ApiUse) -> tuple[str, ...]:
    """The events (``self.<attr>`` of the wrapper, as ``<receiver>.<attr>`` in the caller: ``self.ready``,
    ``self.node.ready``) the wrapper called by ``use`` makes its scope stream wait on before it switches; () when
    none, or when the call's receiver is neither ``self`` nor a ``self.*`` field."""
    if not use.wrappers:
        return ()
    site = file.call_site(use.node)
    found = project.call_target(file, site) if site is not None else None
    if found is None or not isinstance(use.node, cst.Call) or not isinstance(use.node.func, cst.Attribute):
        return ()
    receiver = dotted(use.node.func.value)
    fn, model = found
    if receiver is None or not _SELF.fullmatch(receiver) or fn.class_name is None or fn.params[:1] != ("self",):
        return ()
    return tuple(f"{receiver}.{attr[5:]}" for attr in _summary(project, file, use)[3])


_SELF = re.compile(r"self(?:\.\w+)*")


def _summary(project: Project, file: FileModel, use: ApiUse) -> tuple[bool, bool, bool, tuple[str, ...]]:
    if not use.wrappers:
        return False, False, False, ()
    site = file.call_site(use.node)
    found = project.call_target(file, site) if site is not None else None
    if found is None:
        return False, False, False, ()
    fn, model = found
    memo, key = derived(project, "wrapper_forks_on_entry"), (model.path, fn.qualname)  # (not id(): a re-parsed
    if key not in memo:  # module's new functions may reuse a dead one's id)
        memo[key] = _forks(project, model, fn) + (_event_waits(project, model, fn),)
    return memo[key]


def _event_waits(project: Project, file: FileModel, fn: FunctionInfo) -> tuple[str, ...]:
    """The ``self.<attr>`` events the scope stream of the ``with`` holding the ``yield`` waits on before it, in the
    wrapper's prelude (outside every ``with``, on every path to the switch: no guard the switch lacks), none of them
    recorded in the wrapper before the wait."""
    order = lexical_index(fn.node)
    waits: list[tuple[str, str, object]] = []  # (stream text, event text, call site)
    recorded: dict[str, int] = {}
    for s in fn.calls:
        func = s.node.func
        if not isinstance(func, cst.Attribute) or s.scope is not None:
            continue
        if s.method == "record":
            recorded.setdefault(file.code(func.value), order[id(s.node)][0])
        elif s.method == "wait" and len(s.node.args) == 1 and s.node.args[0].keyword is None:
            waits.append((file.code(s.node.args[0].value), file.code(func.value), s))
        elif s.method == "wait_event" and len(s.node.args) == 1 and s.node.args[0].keyword is None:
            waits.append((file.code(func.value), file.code(s.node.args[0].value), s))
    waits = [w for w in waits if _SELF_FIELD.fullmatch(w[1])]
    if not waits:
        return ()
    found: list[str] = []
    for _, at, arg, shared in _yield_scopes(project, file, fn, order):
        for stream, event, w in waits:
            at_wait = order[id(w.node)][0]
            if stream == arg and at_wait < at and recorded.get(event, at) >= at_wait \
                    and all((id(g.test), g.negated) in shared for g in w.guards) and event not in found:
                found.append(event)
    return tuple(found)


def _yield_scopes(project: Project, file: FileModel, fn: FunctionInfo, order) -> list[tuple]:
    """(``with`` node, its lexical position, the stream's text, the switch's guards as (id(test), negated)) of
    every native stream scope entered by a ``with`` of ``fn`` holding its ``yield``."""
    out: list[tuple] = []
    for node in local_nodes(fn.node):
        if not isinstance(node, cst.With) or not any(isinstance(n, cst.Yield) for n in local_nodes(node.body)):
            continue
        for item in node.items:
            scope = file.scope_site(item)
            for u in project.scope_use(file, scope).uses if scope is not None else ():
                arg = u.arg("stream") if u.role is Role.NATIVE_STREAM_CONTEXT else None
                if arg is None:
                    continue
                inner = file.call_site(u.node)
                shared = [(id(g.test), g.negated) for g in inner.guards] if inner is not None else []
                out.append((node, order[id(node)][0], file.code(arg), shared))
    return out


_SELF_FIELD = re.compile(r"self\.\w+")


def _forks(project: Project, file: FileModel, fn: FunctionInfo) -> tuple[bool, bool, bool]:
    order = lexical_index(fn.node)
    waits: dict[str, list] = {}  # stream text -> the calls making it wait on the current stream
    joins: dict[str, list] = {}  # stream text -> the calls making the current stream wait on it
    for s in fn.calls:
        if s.method != "wait_stream" or not isinstance(s.node.func, cst.Attribute) or len(s.node.args) != 1 \
                or not _device_scopes_only(project, file, fn, s.scope):
            continue
        if is_current_stream(project, file, fn, s.node.args[0].value):
            waits.setdefault(file.code(s.node.func.value), []).append(s)
        elif is_current_stream(project, file, fn, s.node.func.value):
            joins.setdefault(file.code(s.node.args[0].value), []).append(s)
    yielded = [n.value for n in local_nodes(fn.node) if isinstance(n, cst.Yield) and n.value is not None]
    caller = bool(yielded) and all(isinstance(v, cst.Name) and is_current_stream(project, file, fn, v)
                                   for v in yielded if not (isinstance(v, cst.Name) and v.value == "None"))
    if not waits and not joins:
        return False, False, caller
    fork = join = False
    for node, at, arg, shared in _yield_scopes(project, file, fn, order):
        fork |= any(order[id(w.node)][0] < at and _guards_hold(file, w, shared) for w in waits.get(arg, ()))
        join |= any(order[id(j.node)][0] > at and not _in(j.node, node)
                    and all((id(g.test), g.negated) in shared for g in j.guards) for j in joins.get(arg, ()))
    return fork, join, caller


def _device_scopes_only(project: Project, file: FileModel, fn: FunctionInfo, scope) -> bool:
    """Is every ``with`` around a call (innermost first) a device context (resolved to ``torch.cuda.device(d)``,
    ``torch.npu.device(d)``, ``torch.xpu.device(d)``: apis.DEVICE_CONTEXTS; a project's own ``.device(...)`` is
    not): it switches the current device, not the stream, so a wait there on the current stream is still a fork from the stream current in that device? No enclosing ``with``: yes."""
    while scope is not None:
        item = scope.item.item
        if not (isinstance(item, cst.Call) and isinstance(item.func, cst.Attribute)
                and file.resolve(item.func, fn) in DEVICE_CONTEXTS) \
                or any(u.role in STREAM_SCOPE_ROLES for u in project.scope_use(file, scope).uses):
            return False
        scope = scope.parent
    return True


def _guards_hold(file: FileModel, wait, shared: list) -> bool:
    """The wait runs whenever the switch does: each of its guards also encloses the switching ``with``
    (``if device.type == "cuda":`` around both), or only skips the wait where no fork is needed."""
    return all((id(g.test), g.negated) in shared or _identity_guard(file, g.test, g.negated, wait.node)
               for g in wait.guards)


def _in(inner: cst.CSTNode, outer: cst.CSTNode) -> bool:
    return any(n is inner for n in local_nodes(outer))


def _identity_guard(file: FileModel, test: cst.BaseExpression, negated: bool, wait: cst.Call) -> bool:
    """``if current != side:`` (or the else of ``current == side``) around ``side.wait_stream(current)``: the
    wait is skipped only where the two are one stream, where no fork is needed."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    op = test.comparisons[0].operator
    differ = isinstance(op, (cst.NotEqual, cst.IsNot)) != negated
    if not differ or not isinstance(op, (cst.NotEqual, cst.IsNot, cst.Equal, cst.Is)):
        return False
    sides = {file.code(test.left), file.code(test.comparisons[0].comparator)}
    return sides == {file.code(wait.func.value), file.code(wait.args[0].value)}  # type: ignore[attr-defined]


__all__ = ["entry_event_waits", "forks_on_entry", "joins_on_exit", "yields_caller_stream"]
