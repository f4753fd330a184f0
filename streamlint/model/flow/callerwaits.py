"""Caller protocols where the caller does the wait (issue 16): effect summaries of the call sites of a function
that leaves side-stream work for its caller to join.

Two shapes, each judged from the seen call sites (:func:`~streamlint.model.flow.callers.callers_of`):

* :func:`joined_before_calls` - a *mark* step: a method that clears a pending flag (``self._ready = False``) while
  every caller has already made its current stream wait for the stream the flag marks (``current_stream().
  wait_stream(stream)`` then ``for b in self.buckets: b.mark_done()``). The join precedes the clear on every path
  of each caller: a statement of the caller (not under an ``if``, not in a nested function) before the call, in the
  call's block or an enclosing one. The joined stream must be the producer's: the last field name of the argument
  (through one local: ``stream = self._comm_stream``) equals the handle's (``self._comm_stream``), or the caller
  synchronises that stream or the whole device. A caller that waits on another stream, or only on one branch, does
  not count; no seen caller: no (the clear's finding stays).

  :func:`class_step_joined` names such a method of a class for a finding elsewhere in it that rests on the same
  stream being joined by its users (SL301's field dropped unjoined: low, the protocol's join may precede the drop).

* :func:`returned_handle_waits` - a hand-back of ``(views, ready)`` whose ``ready`` the caller is meant to wait on: each
  seen caller binds the returned tuple (``views, ready = buf.upload(...)``) and the first later call of its
  function naming any bound part hands ``ready`` to a wait: ``ready.wait()`` / ``ready.synchronize()`` /
  ``current_stream().wait_event(ready)``, or a project function that waits on the parameter it binds
  (``p.wait*(...)``, ``p.synchronize()``, ``x.wait_event(p)``, ``p.x.wait*(...)``). ``"joined"`` when every caller
  does and each helper waits on every path (the ``p is None`` exit apart); ``"maybe"`` when every caller that unpacks
  the tuple does but a helper waits only on some paths (a type dispatch), or some call sites of that name do not
  unpack it (another class's method, maybe): positive evidence of the protocol, not proof. A caller that unpacks it
  and uses another part first, or never waits: None (the finding stays).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.callers import _StepScan, _chain, callers_of, calls_after, calls_in
from streamlint.model.streams import derived
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

_JOINS = ("wait_stream", "wait_event")


def _last_field(model: FileModel, fn: FunctionInfo, expr: cst.BaseExpression | None) -> str | None:
    """The last attribute name of ``expr`` (``self._comm_stream`` -> ``_comm_stream``), through a local bound once."""
    if isinstance(expr, cst.Name) and len(bound := fn.name_assigns.get(expr.value, ())) == 1:
        expr = bound[0]
    return expr.attr.value if isinstance(expr, cst.Attribute) else None


def _joins_into_current(project: Project, model: FileModel, fn: FunctionInfo, call: cst.Call, field: str) -> bool:
    """Does ``call`` make the current stream (or the host) wait for the stream / event field ``field``?"""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in _JOINS and call.args:
        return "current_stream" in model.code(func.value) and _last_field(model, fn, call.args[0].value) == field
    if isinstance(func, cst.Attribute) and func.attr.value == "synchronize" and not call.args \
            and _last_field(model, fn, func.value) == field:
        return True
    return _StepScan(project, model, frozenset()).syncs(call)  # (a device-wide synchronize, or a helper doing one)


def _join_before(project: Project, model: FileModel, caller: FunctionInfo, call: cst.Call, field: str) -> bool:
    body = list(caller.node.body.body) if isinstance(caller.node.body, cst.IndentedBlock) else []
    chain = _chain(body, call, None) or []
    for block, i, _owner in chain:
        for stmt in block[:i]:
            if isinstance(stmt, cst.SimpleStatementLine) and any(
                    isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)
                    and _joins_into_current(project, model, caller, s.value, field) for s in stmt.body):
                return True
    return False


def joined_before_calls(project: Project, file: FileModel, fn: FunctionInfo, handle: str) -> bool:
    """Has every seen caller of ``fn`` joined the stream / event ``handle`` (a ``self.`` field of the producer)
    into its current stream before the call, on every path (module docstring)?"""
    field = handle.rsplit(".", 1)[-1]
    memo = derived(project, "joined_before_calls")
    key = (id(fn), field)
    if key not in memo:
        sites = callers_of(project, file, fn) or []
        memo[key] = bool(sites) and all(
            site.function is not None and site.function is not fn
            and _join_before(project, model, site.function, site.node, field) for model, site in sites)
    return memo[key]


def class_step_joined(project: Project, file: FileModel, fn: FunctionInfo, stream: str) -> str | None:
    """A method of ``fn``'s class whose every seen caller joins ``stream`` (a ``self.`` field) before the call
    (:func:`joined_before_calls`): positive evidence that the class's users join that stream as a protocol (the
    caller of its mark step), though not proof that a drop elsewhere in the class comes after that join."""
    cls = file.classes.get(fn.class_name or "")
    if cls is None or not stream.startswith("self.") or stream.count(".") != 1:
        return None
    return next((name for name, m in cls.methods.items()
                 if m is not fn and joined_before_calls(project, file, m, stream)), None)


# ---- a returned join handle the caller waits on

def _waits_on(call: cst.Call, name: str) -> bool:
    """``name.wait*()`` / ``name.synchronize()`` / ``name.x.wait*(...)`` / ``x.wait_event(name)``."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    method = func.attr.value
    if method in _JOINS:
        return bool(call.args) and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == name
    if not (method.startswith("wait") or method == "synchronize"):
        return False
    root = func.value
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        root = root.value
    return isinstance(root, cst.Name) and root.value == name


def _helper_waits(project: Project, model: FileModel, caller: FunctionInfo, call: cst.Call, name: str) -> str | None:
    """``"always"`` / ``"some"`` when ``call`` runs a project function that waits on the parameter ``name`` binds
    (on every path but its ``None`` exit / on some path), else None."""
    from streamlint.model.flow.duckmethods import distinctive, only_definition
    from streamlint.model.flow.objeffects import object_method

    site = model.call_site(call)
    found = project.call_target(model, site) if site is not None else None
    if found is None and (typed := object_method(project, model, caller, call.func)) is not None and typed.exact:
        found = (typed.method, typed.module)  # (``self.fence.wait_ready(h)``, the field's class known)
    guessed = found is None and isinstance(call.func, cst.Attribute) and distinctive(call.func.attr.value)
    if guessed:  # (``self.store.wait_for_ready(h)`` on a receiver not typed: the project's only method of that name)
        only = only_definition(project, call.func.attr.value)
        found = (only[0], only[2]) if only is not None else None
    if found is None:
        return None
    callee, callee_model = found
    params = callee.params
    if params[:1] in (("self",), ("cls",)) and isinstance(call.func, cst.Attribute):
        params = params[1:]
    bound = bind_arguments(params + callee.kwonly, call, kwonly=callee.kwonly)
    param = next((p for p, e in bound.items() if isinstance(e, cst.Name) and e.value == name), None)
    if param is None or param in callee.name_assigns:
        return None
    waits = [s for s in callee.calls if s.function is callee and _waits_on(s.node, param)]
    if not waits:
        return None
    plain = [s for s in waits if not s.in_loop and all(_none_exit(callee_model, g, param) for g in s.guards)]
    return "always" if plain and not guessed else "some"


def _none_exit(model: FileModel, guard, param: str) -> bool:
    """Is ``guard`` only the ``None`` exit of ``param`` (``if p is None: return`` before the wait, ``if p is not
    None:`` around it)?"""
    code = " ".join(model.code(guard.test).split())
    return code == f"{param} is None" and guard.negated or code == f"{param} is not None" and not guard.negated


def _returned_part(node: cst.CSTNode, name: str) -> int | None:
    """The position of ``name`` in the tuple ``node`` (a return) hands back; None when it is not such a part."""
    value = getattr(node, "value", None)
    if isinstance(value, cst.Tuple):
        for i, el in enumerate(value.elements):
            if isinstance(el.value, cst.Name) and el.value.value == name:
                return i
    return None


def returned_handle_waits(project: Project, file: FileModel, fn: FunctionInfo, node: cst.CSTNode,
                          name: str) -> str | None:
    """``"joined"`` / ``"maybe"`` when every seen caller of ``fn`` waits on the part ``name`` of the tuple the return
    ``node`` hands back before it uses any other part (module docstring); None otherwise."""
    memo = derived(project, "returned_handle_waits")
    key = (id(node), name)
    if key not in memo:
        memo[key] = _returned_handle_waits(project, file, fn, node, name)
    return memo[key]


def _returned_handle_waits(project: Project, file: FileModel, fn: FunctionInfo, node: cst.CSTNode,
                           name: str) -> str | None:
    index = _returned_part(node, name)
    sites = callers_of(project, file, fn) if index is not None else None
    if not sites:
        return None
    verdicts, unknown = [], False
    for model, site in sites:
        caller = site.function
        parent = _assign_of(caller, site.node) if caller is not None else None
        target = parent.targets[0].target if parent is not None and len(parent.targets) == 1 else None
        if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) <= index \
                or not isinstance(handle := target.elements[index].value, cst.Name):
            unknown = True  # (a caller that does not unpack the tuple: maybe another class's method of that name)
            continue
        parts = [el.value.value for el in target.elements if isinstance(el.value, cst.Name)]
        verdict = None
        for call, _ in calls_after(site):
            if not any(isinstance(n, cst.Name) and n.value in parts for n in _names(call)):
                continue
            verdict = "always" if _waits_on(call, handle.value) else _helper_waits(project, model, caller, call, handle.value)
            break
        if verdict is None:
            return None  # (a caller unpacking it uses the rest first, or never waits: the finding stays)
        verdicts.append(verdict)
    if not verdicts:
        return None
    return "joined" if not unknown and all(v == "always" for v in verdicts) else "maybe"


def _assign_of(caller: FunctionInfo, call: cst.Call) -> cst.Assign | None:
    for stmt in calls_in_statements(caller):
        if isinstance(stmt, cst.Assign) and stmt.value is call:
            return stmt
    return None


def calls_in_statements(caller: FunctionInfo):
    stack = [caller.node.body]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.Lambda)):
            continue
        yield n
        stack.extend(n.children)


def _names(node: cst.CSTNode):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)


__all__ = ["class_step_joined", "joined_before_calls", "returned_handle_waits"]
