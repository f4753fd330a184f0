"""Caller protocols that fork a stream before a call (issue 16 §3): which streams a function reads are
ordered after its caller's earlier work when it runs, because every caller makes them wait on its current
stream first (``s.wait_stream(current_stream())``, a helper such as ``fork_stats_stream(s)``, a companion
method of the object holding the stream such as ``tier.fence_start()``), or because the class only ever
parks a stream on ``self`` right after forking it; and which arguments a caller produces after that
fork, so that the fork does not cover them."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.closures import closure_calls
from streamlint.model.flow.places import caching_stream_getter
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.streams import derived, is_current_stream
from streamlint.model.uses import bind_arguments
from streamlint.model.syntax import contains, is_none, local_nodes, param_named
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project


def forked_stream_params(project: Project, file: FileModel, fn: FunctionInfo, candidates: set[str],
                         _depth: int = 0) -> dict[str, frozenset[str]]:
    """Stream parameters (among ``candidates``) that every caller forks before the call: earlier in the
    calling function it makes the stream it passes wait on its current stream (``s.wait_stream(
    current_stream())``, or a project helper doing that to its parameter: ``fork_stats_stream(s)``), or it
    passes its own parameter that its callers fork (the caller protocol, issue 16 §3). Inside ``fn`` such
    a stream starts ordered after the caller's earlier work. Each maps to the parameters whose argument
    some caller produces after that fork (assigned or written in place after it, computed in the call,
    or produced by a caller that was itself forked before it ran): the fork does not cover those."""
    method = fn.class_name is not None and fn.params[:1] == ("self",)
    all_params = (fn.params[1:] if method else fn.params) + fn.kwonly
    result = {}
    for name in all_params:
        if name in candidates:
            late = _caller_forks(project, file, fn, name, _depth)
            if late is not None:
                result[name] = late
    return result


def forked_self_streams(project: Project, file: FileModel, fn: FunctionInfo) -> dict[str, frozenset[str]]:
    """The streams a method reads from its object (``self._stream``, ``self.tier.stream``) that are ordered
    after the caller's earlier work when it runs: every caller forks them before the call (``obj.stream.
    wait_stream(current)``, or a companion method of the object that does, ``obj.fence_start()``; also
    the caller's own caller), or the class only ever parks a stream there right after forking it
    (``side.wait_stream(current); self._pending = side``). Mapped like :func:`forked_stream_params`."""
    cls = file.classes.get(fn.class_name or "")
    if cls is None or fn.params[:1] != ("self",) or cls.methods.get(fn.node.name.value) is not fn:
        return {}
    memo = derived(project, "self_fork_candidates")
    if id(cls) not in memo:
        memo[id(cls)] = _self_fork_candidates(project, file, cls)
    result = {}
    for code, armed in memo[id(cls)].items():
        late = frozenset() if armed else _caller_forks(project, file, fn, code, 0)
        if late is not None:
            result[code] = late
    return result


def _self_fork_candidates(project: Project, file: FileModel, cls: ClassInfo) -> dict[str, bool]:
    """``self.*`` streams some method of ``cls`` forks from the current stream -> whether they are armed
    (every ``self.x = s`` of the class stores ``None`` or a stream it has just forked)."""
    found: dict[str, bool] = {}
    for m in cls.methods.values():
        for site in m.calls:
            node = site.node
            if site.method == "wait_stream" and node.args and isinstance(node.func, cst.Attribute):
                code = file.code(node.func.value)
                if code.startswith("self.") and is_current_stream(project, file, m, node.args[0].value):
                    found.setdefault(code, False)
        for a in m.assigns:  # `side.wait_stream(current); self._pending = side`
            if a.target.startswith("self.") and isinstance(a.value, (cst.Name, cst.Attribute)) \
                    and _fork_nodes(project, file, m, file.code(a.value)):
                found.setdefault(a.target, False)
    for code in list(found):
        stores = [(m, a) for m in cls.methods.values() for a in m.assigns if a.target == code
                  and not (isinstance(a.value, cst.Name) and a.value.value == "None")]
        found[code] = bool(stores) and all(
            isinstance(a.value, (cst.Name, cst.Attribute)) and any(
                _written_after(file, m, fork, a.node) is not None
                for fork in _fork_nodes(project, file, m, file.code(a.value))) for m, a in stores)
    return found


def _caller_forks(project: Project, file: FileModel, fn: FunctionInfo, code: str, depth: int) -> frozenset[str] | None:
    """Does every caller of ``fn`` fork the stream ``fn`` knows as ``code`` (a parameter, or ``self.*``
    read from its object) before the call? The parameters some caller produces after the fork, or None."""
    memo = derived(project, "caller_forks")
    key = (id(fn), code, depth)
    if key in memo:
        return memo[key]
    memo[key] = None
    method = fn.class_name is not None and fn.params[:1] == ("self",)
    all_params = (fn.params[1:] if method else fn.params) + fn.kwonly
    sites = callers_of(project, file, fn) if depth < 3 else None
    late: set[str] = set()
    for model, site in sites or ():
        bound = bind_arguments(all_params, site.node, kwonly=fn.kwonly)
        if code.startswith("self."):
            func = site.node.func
            there = f"{model.code(func.value)}{code[4:]}" if isinstance(func, cst.Attribute) else None
        elif "." in code:  # a field of a parameter (paramfields.py): that field of the caller's argument
            head, _, attr = code.partition(".")
            expr = bound.get(head)
            there = f"{model.code(expr)}.{attr}" if isinstance(expr, (cst.Name, cst.Attribute)) else None
        else:
            expr = bound.get(code)
            if _none_stream(fn, code, expr):
                continue  # `torch.cuda.stream(None)` switches nothing: that caller's copies run on its own stream
            there = model.code(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        after = _forked_before(project, model, site, there, depth) if there is not None else None
        if after is None:
            return None
        late |= {p for p, e in bound.items() if p != code and e is not None and _produced_in(model, e, after)}
    if sites:
        memo[key] = frozenset(late)
    return memo[key]


def caller_forks(project: Project, file: FileModel, fn: FunctionInfo, code: str) -> frozenset[str] | None:
    """Does every seen caller of ``fn`` fork the stream ``fn`` knows as ``code`` (a parameter, a field of one,
    ``self.*``) before the call? The parameters some caller produces after the fork, or None."""
    return _caller_forks(project, file, fn, code, 0)


def _none_stream(fn: FunctionInfo, param: str, expr: cst.BaseExpression | None) -> bool:
    """Is the stream parameter ``param`` of ``fn`` handed ``None`` at a call (literally, or left to its ``None``
    default), with ``fn`` never rebinding it (``stream = stream or self.side`` would pick a side stream)?"""
    if param in fn.name_assigns:
        return False
    if expr is None:
        declared = param_named(fn.node, param)
        expr = declared.default if declared is not None else None
    return is_none(expr)


def _base(model: FileModel, expr: cst.BaseExpression) -> str | None:
    """The variable a target or argument names (``x``, ``self.buf``; ``self.buf[i]`` -> ``self.buf``)."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return model.code(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None


def _produced_in(model: FileModel, expr: cst.BaseExpression, late: set[str]) -> bool:
    """Is the argument ``expr`` one of the ``late`` variables (or part of / holder of one), or computed in
    the call itself (after any fork before it)? Literals and views of variables are not computed."""
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)) or (
            isinstance(expr, cst.Name) and expr.value in ("None", "True", "False")):
        return False
    code = _base(model, expr)
    if code is None:
        return True
    return any(code == v or code.startswith(v + ".") or v.startswith(code + ".") for v in late)


def _written_after(model: FileModel, caller: FunctionInfo, start: cst.CSTNode | None, stop: cst.CSTNode) -> set[str] | None:
    """The variables ``caller`` assigns or writes in place (``x.add_(...)``) after ``start`` (from its
    entry when None) and before it reaches ``stop``; None when ``start`` is not met before ``stop``."""
    late: set[str] = set()
    seen = start is None
    items: dict[str, str] = {}  # `for w in weights:` -> writing `w` in place writes `weights`
    stack: list = [caller.node.body]
    while stack:
        node = stack.pop()
        if isinstance(node, tuple):  # an assignment's targets, bound after its value ran
            if seen:
                late |= {c for t in node for c in [_base(model, t)] if c is not None}
            continue
        if node is stop:
            return late if seen else None
        if node is start:
            seen, late = True, set()
        elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            if not (isinstance(node, (cst.Assign, cst.AnnAssign)) and _empty_container(node.value)):  # `outs = []`:
                stack.append(tuple(t.target for t in node.targets) if isinstance(node, cst.Assign) else (node.target,))
            # a fresh empty container holds nothing produced after the fork (the callee fills it)
        elif isinstance(node, cst.For) and isinstance(node.target, cst.Name):
            held = _base(model, node.iter)
            if held is not None:
                items[node.target.value] = held
        elif seen and isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value.endswith("_") and not node.func.attr.value.startswith("_"):
            code = _base(model, node.func.value)
            if code is not None:
                late.add(code)
                if code in items:
                    late.add(items[code])
        stack.extend(reversed(children(node)))
    return None


def _empty_container(value: cst.BaseExpression | None) -> bool:
    """``[]``, ``{}``, ``()``, ``list()``, ``dict()``: a fresh container holding nothing yet."""
    if isinstance(value, (cst.List, cst.Dict, cst.Tuple)):
        return not value.elements
    return isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Name) \
        and value.func.value in ("list", "dict", "tuple")


def _fork_nodes(project: Project, model: FileModel, caller: FunctionInfo, there: str) -> list[cst.Call]:
    """The calls of ``caller`` that make the stream ``there`` wait on its current stream: ``there.
    wait_stream(current)``, a helper doing that to the parameter it is handed (``fork(s)``), or a method of
    the object holding the stream doing it to its own attribute (``tier.fence_start()`` for
    ``tier._stream``)."""
    forks = []
    for other in caller.calls:
        node = other.node
        if other.method == "wait_stream" and model.code(node.func.value) == there and node.args \
                and is_current_stream(project, model, caller, node.args[0].value):
            forks.append(node)
            continue
        found = project.call_target(model, other)
        if found is None or found[0] is caller:
            continue
        g, gmod = found
        own = g.class_name is not None and g.params[:1] == ("self",)
        gparams = (g.params[1:] if own else g.params) + g.kwonly
        bound = bind_arguments(gparams, node, kwonly=g.kwonly)
        current = {q for q, e in bound.items() if e is not None and is_current_stream(project, model, caller, e)}
        if any(e is not None and model.code(e) == there and _waits_on_current(project, gmod, g, p, current)
               for p, e in bound.items()):
            forks.append(node)
        elif own and isinstance(node.func, cst.Attribute):
            holder = model.code(node.func.value)
            if there.startswith(holder + ".") and _waits_on_current(project, gmod, g, "self" + there[len(holder):]):
                forks.append(node)
    return forks


def _forked_before(project: Project, model: FileModel, site, there: str, depth: int) -> set[str] | None:
    """Does the caller fork the stream it knows as ``there`` before the call at ``site``? The variables it
    produces after the fork (every one it produces, when its own caller forked the stream before it
    ran), or None."""
    caller = site.function
    if caller is None:
        return None
    best = None
    for fork in _fork_nodes(project, model, caller, there):
        after = _written_after(model, caller, fork, site.node)
        if after is not None and (best is None or len(after) <= len(best)):
            best = after  # the last fork before the call
    if best is None:
        best = _event_forked(project, model, caller, there, site.node)
    if best is not None:
        return best
    root = there.split(".")[0]
    inherited = None
    if root in caller.all_params and root not in caller.name_assigns and (
            root == there or (root == "self" and caller.params[:1] == ("self",))):
        inherited = _caller_forks(project, model, caller, there, depth + 1)
    elif root in caller.all_params and root not in caller.name_assigns and there.count(".") == 1 and root != "self":
        inherited = _record_field_forked(project, there.split(".")[1])
    if inherited is None:
        return None
    return set(inherited) | (_written_after(model, caller, None, site.node) or set())


def _event_forked(project: Project, model: FileModel, caller: FunctionInfo, there: str,
                  call: cst.Call) -> set[str] | None:
    """Does ``caller`` make the stream ``there`` wait on an event before ``call``, the event covering the
    caller's current stream? The variables that event does not cover (produced after its fork point), or None.

    * The event recorded in ``caller`` itself: its last record before the wait is on the current stream
      (``cur.record_event(ev)``, ``ev.record()``) on every path to the call; the record is the fork point:
      what the caller produces after it (before or after the wait) is not ordered.
    * The event recorded only elsewhere (``state.step_done``, another thread's signal: ``self.step_done.
      record()`` after the serving step): every record of that field in the project is on its function's
      current stream. When it ran relative to the caller's own producers is not known: only the arguments
      the caller does not produce at all (state it reads) are covered.

    An event recorded on the side stream itself, or before the producer, orders nothing (the fork point
    says so); a wait through a project wrapper counts when the wrapper waits its own event on the stream
    it is handed (``signal.wait(stream=s)`` doing ``self._event.wait(stream)``)."""
    best = None
    for wait, event in _event_waits(project, model, caller, there):
        if _written_after(model, caller, wait, call) is None:
            continue  # (not before the call)
        records = _event_records(model, caller, event)
        if records:
            last = [r for r in records if _written_after(model, caller, r, wait) is not None]
            last = last[-1:] if last else []
            if not last or last[0] not in _current_records(project, model, caller, event) \
                    or not _on_every_path(caller.node.body, last[0], call):
                continue
            after = _written_after(model, caller, last[0], call)
        elif "." in event and _records_elsewhere_current(project, event.rsplit(".", 1)[1]):
            after = _written_after(model, caller, None, call)
        else:
            continue
        if after is not None and (best is None or len(after) <= len(best)):
            best = after
    return best


def _event_waits(project: Project, model: FileModel, caller: FunctionInfo, there: str) -> list[tuple[cst.Call, str]]:
    """The calls of ``caller`` making the stream ``there`` wait on an event, with the event's text:
    ``there.wait_event(ev)``, ``ev.wait(there)`` / ``ev.wait(stream=there)`` (a torch event, or a project
    wrapper waiting its own event on the stream it is handed)."""
    out = []
    for site in caller.calls:
        node = site.node
        if not isinstance(node.func, cst.Attribute):
            continue
        positional = [a.value for a in node.args if a.keyword is None]
        if site.method == "wait_event" and positional and model.code(node.func.value) == there:
            out.append((node, model.code(positional[0])))
            continue
        if site.method != "wait":
            continue
        streams = [a.value for a in node.args if a.keyword is not None and a.keyword.value == "stream"]
        handed = (positional or streams)[:1]
        if not handed or model.code(handed[0]) != there:
            continue
        found = project.call_target(model, site)
        if found is not None and not _wrapper_waits(found[1], found[0]):
            continue
        out.append((node, model.code(node.func.value)))
    return out


def _stream_param(fn: FunctionInfo) -> str | None:
    """The stream parameter of a method of an event wrapper (``wait(self, stream=None)``): its first one."""
    params = fn.params[1:] if fn.params[:1] == ("self",) else fn.params
    return params[0] if params else None


def _wrapper_waits(file: FileModel, fn: FunctionInfo) -> bool:
    """Does the project method ``fn`` (``wait(self, stream)``) make its stream parameter wait on an event of its
    object (``self._event.wait(stream)``, ``stream.wait_event(self._event)``), never rebinding it?"""
    param = _stream_param(fn)
    if param is None or param in fn.name_assigns:
        return False
    for site in fn.calls:
        node = site.node
        if not isinstance(node.func, cst.Attribute):
            continue
        args = [a.value for a in node.args if a.keyword is None or a.keyword.value == "stream"]
        if site.method == "wait" and file.code(node.func.value).startswith("self.") and args \
                and file.code(args[0]) == param:
            return True
        if site.method == "wait_event" and file.code(node.func.value) == param and args \
                and file.code(args[0]).startswith("self."):
            return True
    return False


def _event_records(model: FileModel, caller: FunctionInfo, event: str) -> list[cst.Call]:
    """Every call of ``caller`` recording the event ``event`` (on whichever stream), in source order."""
    out = [site.node for site in caller.calls if _records_event(model, site, event)]
    return sorted(out, key=lambda n: (model.span(n).start_line, model.span(n).start_col))


def _records_event(model: FileModel, site, event: str) -> bool:
    """Does the call ``site`` record the event ``event``: ``event.record(...)``, ``s.record_event(event)``?"""
    node = site.node
    if not isinstance(node.func, cst.Attribute):
        return False
    positional = [a.value for a in node.args if a.keyword is None]
    return site.method == "record" and model.code(node.func.value) == event or \
        site.method == "record_event" and bool(positional) and model.code(positional[0]) == event


def _records_elsewhere_current(project: Project, field: str) -> bool:
    """Is every record in the project of an event held in the field ``field`` (``x.field.record(...)``,
    ``s.record_event(x.field)``) on the current stream of its function, outside every stream scope, with one
    at least? A project wrapper's ``record(stream=None)`` counts when it records its own event on the stream
    it is handed (or on the current one) and the call hands none. Memoised per project and field."""
    memo = derived(project, "event_field_records")
    if field in memo:
        return memo[field]
    memo[field] = False
    paths = project.paths_containing((f".{field}.record(".encode(), f".{field})".encode()))
    if not paths or len(paths) > MAX_CALLER_FILES:
        return False
    found = 0
    for path in paths:
        model = project.file(path)
        for site in (model.calls if model is not None else ()):
            node = site.node
            if not isinstance(node.func, cst.Attribute) or site.method not in ("record", "record_event"):
                continue
            positional = [a.value for a in node.args if a.keyword is None]
            receiver = model.code(node.func.value)
            named = receiver if site.method == "record" else (model.code(positional[0]) if positional else "")
            if not named.endswith(f".{field}"):
                continue
            fn = site.function
            if fn is None or any(use.roles() & apis.STREAM_SCOPE_ROLES
                                 for use in project.enclosing_scopes(model, site.scope)):
                return False
            if site.method == "record_event":
                if not is_current_stream(project, model, fn, node.func.value):
                    return False
            else:
                streams = [a.value for a in node.args if a.keyword is not None and a.keyword.value == "stream"]
                handed = (positional or streams)[:1]
                if handed and not is_current_stream(project, model, fn, handed[0]):
                    return False
                target = project.call_target(model, site)
                if target is not None and (handed or not _wrapper_records_handed(target[1], target[0])):
                    return False
            found += 1
    memo[field] = found > 0
    return memo[field]


def _wrapper_records_handed(file: FileModel, fn: FunctionInfo) -> bool:
    """Does the project method ``fn`` (``record(self, stream=None)``) record its object's events only on the
    stream it is handed, with a ``None`` default (``self._event.record(stream)``), or on the current one?"""
    param = _stream_param(fn)
    if param is not None and (param in fn.name_assigns or not _none_stream(fn, param, None)):
        return False
    seen = False
    for site in fn.calls:
        node = site.node
        if site.method not in ("record", "record_event") or not isinstance(node.func, cst.Attribute):
            continue
        args = [a.value for a in node.args if a.keyword is None or a.keyword.value == "stream"]
        if site.method == "record_event" or (args and file.code(args[0]) != param):
            return False
        seen = True
    return seen


def _record_field_forked(project: Project, field: str) -> frozenset[str] | None:
    """``state.stats_stream`` read from a record object handed in: every construction of a project class in
    the project with that field (``ReadState(..., stats_stream=stream)``) stores a stream its function has
    just forked (``fork_stats_stream(stream)`` before it). The stream is then ordered after the work the
    record's builder queued before it; None when some construction is not forked, or there is none."""
    memo = derived(project, "record_field_forks")
    if field in memo:
        return memo[field]
    memo[field] = None
    marker = (f"{field}=".encode(),)
    found = 0
    paths = project.paths_containing(marker)
    if len(paths) > MAX_CALLER_FILES:  # a common field: not followed
        return None
    for path in paths:
        model = project.file(path)
        for site in (model.calls if model is not None else ()):
            arg = next((a for a in site.node.args if a.keyword is not None and a.keyword.value == field), None)
            if arg is None or site.target is None:
                continue
            sym = project.symbol(site.target, model)
            if sym is None or not isinstance(sym[0], ClassInfo):
                continue  # (a function's keyword argument: its own parameter, followed by its callers)
            if site.function is None or not isinstance(arg.value, (cst.Name, cst.Attribute)) or not any(
                    _written_after(model, site.function, fork, site.node) is not None
                    for fork in _fork_nodes(project, model, site.function, model.code(arg.value))):
                return None
            found += 1
    memo[field] = frozenset() if found else None
    return memo[field]


def _waits_on_current(project: Project, file: FileModel, fn: FunctionInfo, stream: str,
                      current: set[str] | frozenset[str] = frozenset()) -> bool:
    """Does ``fn`` make the stream ``stream`` (its parameter, or ``self.x``) wait on the current stream
    (``stream.wait_stream(cur)``), or on one of its parameters ``current`` the caller binds to its current
    stream (``stage(xs, stream=side, stream_to_wait_on=current_stream)`` doing ``stream.wait_stream(
    stream_to_wait_on)``)?"""
    def waited(e: cst.BaseExpression) -> bool:
        if isinstance(e, cst.Name) and e.value in current and e.value not in fn.name_assigns:
            return True
        return is_current_stream(project, file, fn, e)

    return any(site.method == "wait_stream" and isinstance(site.node.func, cst.Attribute)
               and file.code(site.node.func.value) == stream and site.node.args
               and waited(site.node.args[0].value) for site in fn.calls)


def recorded_event_params(project: Project, file: FileModel, fn: FunctionInfo, candidates: set[str]) -> set[str]:
    """Event parameters (among ``candidates``) every caller hands an event it recorded on its current stream
    before the call, producing none of the other arguments after that record (the pre-event protocol:
    ``cur.record_event(self.ev_ready); helper(rows, side, pre_event=self.ev_ready)``, the helper making its
    stream wait on ``pre_event`` before reading ``rows``). Inside ``fn`` such an event is not None and covers
    the arguments' production. The syntactic form of the entry fact (``entryctx``), for callers whose own
    analysis gives up (a long step function)."""
    out: set[str] = set()
    method = fn.class_name is not None and fn.params[:1] == ("self",)
    all_params = (fn.params[1:] if method else fn.params) + fn.kwonly
    names = [p for p in all_params if p in candidates]
    if not names:
        return out
    sites = callers_of(project, file, fn)
    if not sites or len(sites) > MAX_CALLER_FILES:
        return out
    for name in names:
        ok = True
        for model, site in sites:
            caller = site.function
            bound = bind_arguments(all_params, site.node, kwonly=fn.kwonly)
            expr = bound.get(name)
            if caller is None or caller is fn or not isinstance(expr, (cst.Name, cst.Attribute)):
                ok = False
                break
            there = model.code(expr)
            late = None
            for rec in _current_records(project, model, caller, there):
                if not _on_every_path(caller.node.body, rec, site.node):
                    continue  # (recorded under a flag or in a loop the call is not in: not every time)
                after = _written_after(model, caller, rec, site.node)
                if after is not None and (late is None or len(after) < len(late)):
                    late = after
            if late is None or any(p != name and e is not None and _produced_in(model, e, late)
                                   for p, e in bound.items()):
                ok = False
                break
        if ok:
            out.add(name)
    return out


def _on_every_path(body: cst.CSTNode, rec: cst.CSTNode, call: cst.CSTNode) -> bool:
    """Does every branch or loop of ``body`` holding ``rec`` hold ``call`` too (``rec`` runs on every path that
    reaches ``call``, when it comes first)?"""
    node = body
    while node is not rec:
        inner = next((c for c in children(node) if contains(c, rec)), None)
        if inner is None:
            return False
        if isinstance(inner, (cst.If, cst.Else, cst.For, cst.While, cst.Try, cst.ExceptHandler, cst.Finally,
                              cst.IfExp, cst.BooleanOperation)) and not contains(inner, call):
            return False
        node = inner
    return True


def _current_records(project: Project, model: FileModel, caller: FunctionInfo, there: str) -> list[cst.Call]:
    """The calls of ``caller`` recording the event ``there`` on its current stream: ``cur.record_event(E)``,
    ``E.record()``, ``E.record(cur)`` (``cur`` the stream current outside every stream scope)."""
    out = []
    for site in caller.calls:
        node = site.node
        if not _records_event(model, site, there) or any(
                use.roles() & apis.STREAM_SCOPE_ROLES for use in project.enclosing_scopes(model, site.scope)):
            continue  # (inside a stream scope the current stream is that scope's)
        positional = [a.value for a in node.args if a.keyword is None]
        streams = [a.value for a in node.args if a.keyword is not None and a.keyword.value == "stream"]
        if site.method == "record_event":
            if is_current_stream(project, model, caller, node.func.value):
                out.append(node)
        elif not (positional or streams) or is_current_stream(project, model, caller, (positional or streams)[0]):
            target = project.call_target(model, site)  # a project wrapper: only one recording where it is told
            if target is None or _wrapper_records_handed(target[1], target[0]):
                out.append(node)
    return out


# ---- callers already on the helper's own stream

def _canon(project: Project, model: FileModel, fn: FunctionInfo, expr: cst.BaseExpression | None,
           depth: int = 0) -> str | None:
    """A text of ``expr`` in terms of ``fn``'s parameters (``$p``): its locals replaced by the one value
    every assignment gives them (``devices = cfg["devices"]``), a closure's free names by the enclosing
    function's, string keys by their value, a caching stream getter's call by its qualified name and its
    arguments' texts. None for anything else (a call of another function, an expression, a loop variable)."""
    if expr is None or depth > 6:
        return None
    if isinstance(expr, cst.Name):
        name = expr.value
        values = fn.name_assigns.get(name)
        if values:
            texts = {_canon(project, model, fn, v, depth + 1) for v in values}
            return texts.pop() if len(texts) == 1 and None not in texts and name not in _loop_names(fn) else None
        if name in fn.all_params:
            return f"${name}" if fn.parent is None else f"<{fn.qualname}>.{name}"
        if fn.parent is not None:
            return _canon(project, model, fn.parent, expr, depth + 1)
        return None
    if isinstance(expr, cst.Attribute):
        inner = _canon(project, model, fn, expr.value, depth + 1)
        return f"{inner}.{expr.attr.value}" if inner is not None else None
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        inner = _canon(project, model, fn, expr.value, depth + 1)
        key = _canon(project, model, fn, expr.slice[0].slice.value, depth + 1)
        return f"{inner}[{key}]" if inner is not None and key is not None else None
    if isinstance(expr, cst.Integer):
        return repr(int(expr.value, 0))
    if isinstance(expr, cst.SimpleString):
        from streamlint.model.file import string_value

        value = string_value(expr)
        return repr(value) if value is not None else None
    if isinstance(expr, cst.Call):
        site = model.call_site(expr)
        found = project.call_target(model, site) if site is not None else None
        if found is None or not caching_stream_getter(project, found[1], found[0]):
            return None
        args = []
        for a in expr.args:
            text = _canon(project, model, fn, a.value, depth + 1)
            if a.star or text is None:
                return None
            args.append(f"{a.keyword.value}={text}" if a.keyword is not None else text)
        return f"{found[1].module_name}.{found[0].qualname}({', '.join(args)})"
    return None


def _loop_names(fn: FunctionInfo) -> frozenset[str]:
    """The names ``fn`` binds as loop variables (each round rebinds them: no one value)."""
    out: set[str] = set()
    for n in local_nodes(fn.node.body):
        if isinstance(n, (cst.For, cst.CompFor)):
            out |= {t.value for t in local_nodes(n.target) if isinstance(t, cst.Name)}
    return frozenset(out)


def _current_at(project: Project, model: FileModel, caller: FunctionInfo, site, depth: int = 0) -> str | None:
    """The text (:func:`_canon`, in ``caller``'s terms) of the stream current at the call ``site``: the
    stream of the innermost stream scope around it; for a call outside every scope of a local closure
    (not handed away), the stream current at every call of the closure in its enclosing function."""
    for scope in project.enclosing_scopes(model, site.scope):
        for use in scope.uses:
            if use.role is apis.Role.NATIVE_STREAM_CONTEXT and not use.wrappers:
                return _canon(project, model, caller, use.bind.get("stream"))
        if scope.roles() & apis.STREAM_SCOPE_ROLES:
            return None  # (a wrapper, a TorchAir switch: a stream the getter's text does not name)
    parent = caller.parent
    if parent is None or depth > 1:
        return None
    calls = closure_calls(caller)
    if calls is None:
        return None  # handed away (stored, returned, passed as a callback): its calls are not all seen
    found = {_current_at(project, model, parent, s, depth + 1) for s in calls}
    return found.pop() if len(found) == 1 and None not in found else None


def callers_current_getters(project: Project, file: FileModel, fn: FunctionInfo) -> frozenset[int]:
    """The calls of a caching stream getter in ``fn`` (``home = worker_stream(cfg["devices"][0])``) whose
    stream every caller in the project already has current at the call: it calls ``fn`` inside ``with
    torch.cuda.stream(worker_stream(cfg["devices"][0]))`` with ``fn``'s parameters bound to the same values
    (a quantizer's inner search called only from loops running on the thread's cached stream). In ``fn``
    that stream is the entry stream: the arguments were produced on it and the results are used on it,
    with no fork or join. Ids of the call nodes; empty when some caller is not seen, or runs elsewhere."""
    memo = derived(project, "callers_current_getters")
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = frozenset()
    getters: dict[int, str] = {}
    for site in fn.calls:
        text = _canon(project, file, fn, site.node) if site.target is not None else None
        if text is not None:
            getters[id(site.node)] = text
    sites = callers_of(project, file, fn) if getters else None
    if not sites or len(sites) > MAX_CALLER_FILES:
        return memo[id(fn)]
    method = fn.class_name is not None and fn.params[:1] == ("self",)
    all_params = (fn.params[1:] if method else fn.params) + fn.kwonly
    for model, site in sites:
        caller = site.function
        if caller is None or caller is fn:
            return memo[id(fn)]
        current = _current_at(project, model, caller, site)
        if current is None:
            return memo[id(fn)]
        bound = {p: _canon(project, model, caller, e) if e is not None else None
                 for p, e in bind_arguments(all_params, site.node, kwonly=fn.kwonly).items()}
        for key, text in list(getters.items()):
            unbound = [p for p in re.findall(r"\$(\w+)", text) if bound.get(p) is None]
            if unbound or re.sub(r"\$(\w+)", lambda m: bound[m.group(1)], text) != current:
                del getters[key]
        if not getters:
            return memo[id(fn)]
    memo[id(fn)] = frozenset(getters)
    return memo[id(fn)]
