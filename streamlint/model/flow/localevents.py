"""Events that never leave the function that records them (issue 16, [caller-consumer]).

A hand-back of a side-stream result is excused when an event recorded after its write is handed over too: the
caller gets a handle to wait on (``HandOuts.event_handed_over``). An event the function keeps in a local name or
a local list, records on each side stream and waits on itself is no such handle::

    events = [torch.cuda.Event() for _ in streams]
    for i, s in enumerate(streams):
        with torch.cuda.stream(s):
            grad[idx[i]] = partial(i)
        events[i].record(s)
    for ev in events:
        main.wait_event(ev)        # without it, `grad` goes back to the caller with the side streams running
    return grad

:func:`stays_local` tells such an event apart: its key is rooted at a local name of the function (not ``self``,
not a parameter, not a global or a closure's name), and that name is never handed on: not returned or yielded
(in any expression), not passed to a call other than the event / stream ordering methods themselves
(``ev.record(s)``, ``s.wait_event(ev)``, ``ev.synchronize()``), not stored into an attribute or a slot of another
object, not captured by a nested function or lambda. Anything else may reach a waiter the analysis cannot see.
"""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.flow.droppedevents import fresh_event
from streamlint.model.flow.escapes import handed_value
from streamlint.model.syntax import ancestry, local_nodes, node_memo

# methods that use an event (or order a stream on one) without handing it to anyone
_ORDERING = frozenset({"record", "wait", "synchronize", "query", "wait_event", "record_event", "elapsed_time"})
_KEEPING = frozenset({"append", "appendleft", "extend", "insert"})  # into the receiver: handed on with it
_ROOT = re.compile(r"([A-Za-z_]\w*)")


def stays_local(file: FileModel, fn: FunctionInfo, key: str) -> bool:
    """Is the event ``key`` (``events[0]``, ``done``) rooted at a local name of ``fn`` that never leaves it?"""
    found = _ROOT.match(key)
    if found is None or found.end() < len(key) and key[found.end()] not in "[":
        return False  # (``self.done``, ``ctx.ev``, ``rec.ready``: a field of an object: anyone may wait on it)
    root = found.group(1)
    if root in ("self", "cls") or root in fn.all_params or root not in fn.name_assigns and root not in fn.locals:
        return False
    if not all(_fresh_events(file, fn, b) for b in fn.name_assigns.get(root, ())):
        return False  # (`ev = self._evs.setdefault(k, Event())`: an alias of an event another holder keeps)
    return root not in node_memo("handed_names", fn.node, _handed_names)[0]


def _fresh_events(file: FileModel, fn: FunctionInfo, e: cst.BaseExpression) -> bool:
    """A binding that makes new events (``Event()``, ``[Event() for _ in s]``, ``[None] * n``), no alias."""
    if isinstance(e, (cst.ListComp, cst.GeneratorExp)):
        return _fresh_events(file, fn, e.elt)
    if isinstance(e, (cst.List, cst.Tuple)):
        return all(_fresh_events(file, fn, el.value) for el in e.elements)
    if isinstance(e, cst.BinaryOperation):
        return _fresh_events(file, fn, e.left) and isinstance(e.right, cst.Integer | cst.Name | cst.Call)
    return fresh_event(file, fn, e) or isinstance(e, cst.Name) and e.value == "None"


def hands_event_holder(file: FileModel, fn: FunctionInfo, node: cst.CSTNode | None) -> bool:
    """Does the ``return`` / ``yield`` ``node`` hand back a local that holds events this function made
    (``done.append(ev)`` after ``ev = torch.cuda.Event()``, then ``return outs, done``)? The caller gets the
    handles to wait on, whatever the value the analysis keeps for the container."""
    value = handed_value(node)
    if value is None:
        return False
    flows = node_memo("handed_names", fn.node, _handed_names)[1]
    made = {name for name, bound in fn.name_assigns.items() if any(fresh_event(file, fn, b) for b in bound)}
    seen, stack = set(), [n for n in _names(value) if n in flows or n in made]
    while stack:
        name = stack.pop()
        if name in made:
            return True
        if name not in seen:
            seen.add(name)
            stack.extend(flows.get(name, ()))
    return False


def _handed_names(node: cst.FunctionDef) -> tuple[frozenset[str], dict[str, set[str]]]:
    """The names a function body hands on (see the module docstring), closed over local aliases: a name bound
    to (or put into) a local that is handed on is handed on (``done = ev; return done``, ``events.append(ev)``
    then ``return events``, ``rec.ready = ev`` then ``return rec``)."""
    params = {p.name.value for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)}
    out: set[str] = set()
    flows: dict[str, set[str]] = {}  # local name -> the names whose values it holds

    def into(target: cst.BaseExpression, names: set[str]) -> None:
        root = _root(target)
        if isinstance(root, cst.Name) and root.value not in ("self", "cls") and root.value not in params:
            flows.setdefault(root.value, set()).update(names)
        else:  # a field or a slot of an object the function was handed (or of ``self``)
            out.update(names)

    for n in local_nodes(node.body):
        if isinstance(n, (cst.Return, cst.Yield)) and n.value is not None:
            out |= _names(n.value)
        elif isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) and n is not node:
            out |= _names(n)  # (a closure may hand it on)
        elif isinstance(n, cst.Call):
            method = n.func.attr.value if isinstance(n.func, cst.Attribute) else None
            if method in _KEEPING and isinstance(n.func, cst.Attribute):
                into(n.func.value, {x for a in n.args for x in _names(a.value)})
            elif method not in _ORDERING:
                out |= {x for a in n.args for x in _names(a.value)}
        elif isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and n.value is not None:
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            for t in targets:
                for el in _flat(t):
                    into(el, _names(n.value))
        elif isinstance(n, (cst.For, cst.CompFor)):
            for el in _flat(n.target):
                into(el, _names(n.iter))
    changed = True
    while changed:
        changed = False
        for name, held in flows.items():
            if name in out and not held <= out:
                out |= held
                changed = True
    return frozenset(out), flows


def _flat(t: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(t, (cst.Tuple, cst.List)):
        return [x for el in t.elements for x in _flat(el.value)]
    return [t]


def _root(e: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(e, (cst.Attribute, cst.Subscript)):
        e = e.value
    return e


def _names(e: cst.CSTNode) -> set[str]:
    out, stack = set(), [e]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            out.add(n.value)
        stack.extend(n.children)
    return out


def join_gated_by_result(fn: FunctionInfo, file, node: cst.CSTNode | None, stream: str) -> bool:
    """The function does join ``stream`` (``stream.synchronize()``, ``current.wait_stream(stream)``), but under an
    ``if`` whose test is computed from the value the ``return`` ``node`` hands back (``should_sync = not
    all(done_event(r) is not None for r in results)``, then ``if should_sync: stream.synchronize()``): it
    inspects what it hands back for the caller's own handles and skips the join only when every part carries
    one. The path without the join is that hand-over, not a missing join."""
    value = handed_value(node)
    handed = _names(value) if value is not None else set()
    if not handed:
        return False
    for site in fn.calls:
        call = site.node
        if site.method not in ("synchronize", "wait_stream", "wait_event") or not isinstance(call.func, cst.Attribute):
            continue
        if stream not in (file.code(call.func.value), *(file.code(a.value) for a in call.args)):
            continue
        for up in ancestry(fn.node, call) or ():
            if isinstance(up, cst.If) and _derived_names(fn, up.test) & handed:
                return True
    return False


def _derived_names(fn: FunctionInfo, test: cst.BaseExpression) -> set[str]:
    """The names a test reads, closed over the local bindings it reads (``flag = not all(... for r in results)``)."""
    seen, stack = set(), list(_names(test))
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        for bound in fn.name_assigns.get(name, ()):
            stack.extend(_names(bound))
    return seen
