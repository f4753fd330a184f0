"""Joins a caller's flag turns off: a lifetime hazard that exists only where the caller asked for no join.

A loader or offloader often takes a flag (``sync``, ``blocking``) that decides whether it joins its copy stream
before it returns: ``if sync: current.wait_stream(self.load_stream)``. With the flag set, the tensors it frees at
the end are safe; with it clear, the function leaves the join to its caller, which passes the flag clear exactly
when it joins later itself (the last of a batch of loads, an end-of-step synchronise). The hazard on the
flag-clear path rests on what that caller does next, which the function's own analysis does not see: SL301 on
it is medium, not high (issue 16: never report at high what depends on an unseen caller).

:func:`skipped_join_flag` names such a flag for the path a lifetime hazard is found on: a caller-supplied value
(a parameter, or a local the function binds once from a parameter's entry or field, ``sync = kwargs["sync"]``,
``kwargs.get("sync", True)``, ``opts.sync``) that this path took one arm of, whose other arm joins the stream the
hazard's use ran on (``wait_stream`` of it, its ``synchronize()``, an event's wait, a device-wide ``synchronize()``
unless the arm does nothing else but host I/O: a debugging aid) while this path's arm does not. A hazard also found on a path
that rests on no such flag keeps its confidence (:func:`merge_flag`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import dotted
from streamlint.model.flow.devicework import HOST_CALLS, HOST_ROOTS
from streamlint.model.syntax import local_nodes, node_code, node_memo, param_named

if TYPE_CHECKING:
    from streamlint.model.flow.results import Lifetime
    from streamlint.model.flow.values import State

_JOINS = frozenset({"wait_stream", "wait_event", "synchronize"})


def skipped_join_flag(fn: cst.FunctionDef, st: State, stream: str | None = None) -> str | None:
    """The caller-supplied flag whose arm this path took skips a join the other arm makes, if any. With ``stream``
    (the stream key the hazard's use ran on, not the entry stream) the join must be one of that stream
    (:func:`_stream_names`)."""
    if not st.assume:
        return None
    tests = node_memo("flag_ifs", fn, _flag_ifs)
    if not tests:
        return None
    names = _stream_names(fn, stream) if stream is not None and not stream.startswith("<") else None
    assumed = {_canonical(k): v for k, v in st.assume.items() if isinstance(v, bool)}
    for n, rest, name, positive, keys in tests:
        value = next((assumed[k] for k in keys if k in assumed), None)
        if value is None:
            continue
        taken, other = (n.body, n.orelse) if value == positive else (n.orelse, n.body)
        if _joins(taken, names):
            continue
        # an arm of host I/O besides a device-wide synchronize is a debugging aid only when the caller opts in to
        # it: not when the parameter's default takes it (`blocking: bool = True`: the caller's protocol)
        opt_in = _default(fn, name) == value
        if _joins(other, names, opt_in) or _leaves(taken) and any(_joins(r, names, opt_in) for r in rest):
            return name  # (`if not sync: return` before the join: the rest of the block is the other arm)
    return None


def assumed_flag(fn: cst.FunctionDef, st: State, name: str) -> bool | None:
    """The value this path assumed for the caller-supplied flag ``name`` (:func:`skipped_join_flag`'s), if any."""
    assumed = {_canonical(k): v for k, v in st.assume.items() if isinstance(v, bool)}
    for _n, _rest, flag, _positive, keys in node_memo("flag_ifs", fn, _flag_ifs):
        if flag == name:
            return next((assumed[k] for k in keys if k in assumed), None)
    return None


def _flag_ifs(fn: cst.FunctionDef) -> tuple:
    """Each ``if`` of the function testing a caller-supplied name (``if sync:``, ``if not blocking:``), with the
    statements after it in its block, the name, whether the test is positive and the keys the name goes by
    (syntax only: kept per function, asked at every path's report)."""
    params = _params(fn)
    out = []
    for n, rest in _ifs(fn.body):
        name, positive = _tested_name(n.test)
        if name is not None and (keys := _caller_supplied(fn, params, name)) is not None:
            out.append((n, rest, name, positive, keys))
    return tuple(out)


def _ifs(node: cst.CSTNode):
    """Each ``if`` statement of the function (not in nested functions) with the statements after it in its block."""
    if isinstance(node, cst.IndentedBlock):
        stmts = list(node.body)
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, cst.If):
                yield stmt, stmts[i + 1:]
            yield from _ifs(stmt)
        return
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return
    for child in node.children:
        if isinstance(child, (cst.IndentedBlock, cst.If, cst.Else, cst.For, cst.While, cst.With, cst.Try,
                              cst.ExceptHandler, cst.Finally)):
            yield from _ifs(child)


def _leaves(arm: cst.CSTNode | None) -> bool:
    """Does the arm end by leaving the function (its last statement a ``return`` / ``raise``)?"""
    if isinstance(arm, cst.Else):
        arm = arm.body
    if not isinstance(arm, cst.IndentedBlock):
        return False  # (no arm, or an `elif`)
    last = arm.body[-1] if arm.body else None
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)
    return False


def merge_flag(before: Lifetime | None, after: Lifetime | None, flag: str | None) -> Lifetime | None:
    """The lifetime to keep after a path reported it (``before``: what was kept, ``after``: what the report left):
    a new one carries this path's flag; one found again on a path resting on no flag keeps its confidence."""
    if after is None:
        return None
    if after is not before:
        return replace(after, flag=flag) if flag else after
    return replace(after, flag=None) if after.flag and not flag else after


def _tested_name(test: cst.BaseExpression) -> tuple[str | None, bool]:
    """``if key:`` -> (key, True), ``if not key:`` -> (key, False)."""
    if isinstance(test, cst.Name):
        return test.value, True
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) \
            and isinstance(test.expression, cst.Name):
        return test.expression.value, False
    return None, True


def _params(fn: cst.FunctionDef) -> frozenset[str]:
    p = fn.params
    named = [*p.posonly_params, *p.params, *p.kwonly_params]
    named += [a for a in (p.star_arg, p.star_kwarg) if isinstance(a, cst.Param)]
    return frozenset(a.name.value for a in named) - {"self", "cls"}


def _default(fn: cst.FunctionDef, name: str) -> bool | None:
    """The literal ``True`` / ``False`` default of parameter ``name``, if it has one."""
    a = param_named(fn, name)
    if a is not None and isinstance(a.default, cst.Name) and a.default.value in ("True", "False"):
        return a.default.value == "True"
    return None


def _joins(arm: cst.CSTNode | None, names: frozenset[str] | None = None, opt_in: bool = True) -> bool:
    """Does the arm join? With ``names`` (the texts the hazard's stream goes by), only a join of that stream counts:
    ``x.wait_stream(s)`` / ``s.synchronize()`` naming it, a wait on an event or its ``synchronize()`` (recorded where, not
    asked), or a device-wide ``synchronize()`` unless the arm does nothing else but host I/O (``if debug:
    torch.cuda.synchronize(); print(...)`` is a debugging aid, no caller protocol: review of life32) and the caller
    opts in to it (``opt_in``: the flag's default does not take that arm; ``blocking: bool = True`` is a protocol)."""
    if arm is None:
        return False
    calls = [n for n in local_nodes(arm) if isinstance(n, cst.Call)]
    joins = [c for c in calls if isinstance(c.func, cst.Attribute) and c.func.attr.value in _JOINS]
    if names is None:
        return bool(joins)
    for c in joins:
        attr, recv = c.func.attr.value, dotted(c.func.value) or ""
        device = recv.rsplit(".", 1)[-1] in _DEVICE_MODULES
        if attr == "wait_event" or attr == "synchronize" and (recv in names or not device and "stream" not in recv.lower()) \
                or attr == "wait_stream" and c.args and dotted(c.args[0].value) in names:
            return True  # (`done.synchronize()`: an event's, recorded where not asked)
        others = [d for d in calls if d is not c]
        if attr == "synchronize" and device and not (opt_in and others and all(
                (dotted(d.func) or "").split(".", 1)[0] in _HOST_IO for d in others)):
            return True
    return False


_DEVICE_MODULES = frozenset({m.rsplit(".", 1)[-1] for m in apis.STREAM_DEVICE_MODULES} | {"torch"})  # receivers' last names
_HOST_IO = HOST_CALLS | HOST_ROOTS | {"repr", "round"}  # (a call's head name: host I/O, what formats its arguments)


def _stream_names(fn: cst.FunctionDef, stream: str) -> frozenset[str]:
    """The texts the stream keyed ``stream`` goes by in the function: the key, and locals bound to exactly it."""
    names = {stream}
    for n in local_nodes(fn.body):
        if isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name) \
                and dotted(n.value) == stream:
            names.add(n.targets[0].target.value)
    return frozenset(names)


def _caller_supplied(fn: cst.FunctionDef, params: frozenset[str], name: str) -> tuple[str, ...] | None:
    """The keys a path's assumptions may hold a caller-supplied ``name`` under: a parameter (its name), or a local
    bound once from a parameter's entry / ``.get`` / field (its name and that expression, ``kwargs['sync']``)."""
    if name in params:
        return (name,)
    values = [n.value for n in local_nodes(fn.body) if isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None
              and any(isinstance(t, cst.Name) and t.value == name
                      for t in ([t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]))]
    if len(values) != 1:
        return None
    v = values[0]
    root = v.func.value if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "get" \
        else v.value if isinstance(v, cst.Subscript) else v if isinstance(v, cst.Attribute) else None
    head = dotted(root) if root is not None else None
    if head is None or head.split(".", 1)[0] not in params:
        return None
    keys = [name, _canonical(node_code(v))]
    if isinstance(v, cst.Call) and v.args:  # `kwargs.get("sync", True)`: tested as `kwargs['sync']`
        keys.append(_canonical(f"{node_code(root)}[{node_code(v.args[0].value)}]"))
    return tuple(keys)


def _canonical(text: str) -> str:
    return "".join(text.split()).replace('"', "'")
