"""Join helpers: project functions that only join the stream or event they are handed (issue 16,
[cross-method]: "a stream of the object handed to a helper").

Class protocols (:mod:`~streamlint.model.flow.protocols`) stay silent when the object's side stream or event
is reached outside the class (``return self.stream``, ``helper(self.stream)``): whoever holds it may join it,
and the order is then unknowable here. A helper the project defines may only *join* what it is handed::

    def synchronize_transfer_stream(stream):
        try:
            stream.synchronize()
        except Exception as error:
            raise TransferError(str(error)) from error

``synchronize_transfer_stream(self.transfer_stream)`` in ``shutdown()`` is then ``self.transfer_stream.
synchronize()`` written once for the package: a join by that method (a join step of the protocol, or a
consumer joining before its reads), not a hand-out of the stream to unknown code.

:func:`join_helper_keys` gives the ``self.*`` streams and events a method joins through such helpers. A helper
qualifies when the project resolves the call, the argument binds a plain parameter (by position or keyword), and every
mention of that parameter in the helper's body is a join on it (``p.synchronize()``, ``p.wait()``,
``cur.wait_stream(p)`` / ``cur.wait_event(p)`` on a stream the helper names itself: ``current_stream()``, a
parameter or a local; not ``p.query()``, which only polls); any other use (stored, returned, handed on,
recorded, a scope) and it is an unknown hand-out, as before.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, normalized_code

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

_RECEIVER_JOINS = ("synchronize", "wait")
_ARG_JOINS = ("wait_stream", "wait_event")


def only_joins(project: Project, file: FileModel, fn: FunctionInfo, param: str) -> bool:
    """Is every mention of ``param`` in ``fn``'s body (as a name: not in a string, a comment, an attribute) a
    join on it, and is there one?"""
    memo = derived(project, "join_helper_params")
    key = (id(fn), param)
    if key not in memo:
        mentions = joins = 0
        stack: list = [fn.node.body]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Name):
                mentions += n.value == param
                continue
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute):
                recv, attr = n.func.value, n.func.attr.value
                if attr in _RECEIVER_JOINS and isinstance(recv, cst.Name) and recv.value == param and not n.args:
                    joins += 1
                elif attr in _ARG_JOINS and len(n.args) == 1 and isinstance(n.args[0].value, cst.Name) \
                        and n.args[0].value.value == param and _own_stream(fn, recv):
                    joins += 1  # (not `_COMM.wait_stream(p)`: a global side stream joins, the current one does not)
            if isinstance(n, cst.Attribute):
                stack.append(n.value)  # (``x.stream``: an attribute, not the name)
                continue
            if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                mentions += 1  # a nested scope may capture it: not a plain join helper
                continue
            stack.extend(n.children)
        memo[key] = joins > 0 and joins == mentions
    return memo[key]


def _own_stream(fn: FunctionInfo, recv) -> bool:
    """The receiver of a ``wait_stream`` / ``wait_event`` in a helper: a call (``torch.cuda.current_stream()``),
    a parameter or a local of the helper; not a module global."""
    return isinstance(recv, cst.Call) or isinstance(recv, cst.Name) and (
        recv.value in (*fn.params, *fn.kwonly) or recv.value in fn.locals)


def join_helper_keys(project: Project | None, file: FileModel, fn: FunctionInfo, only=None) -> set[str]:
    """The ``self.*`` streams / events ``fn`` hands to a project function that only joins them (at the call
    site ``only``, when given)."""
    out: set[str] = set()
    if project is None:
        return out
    for site in fn.calls:
        if only is not None and site is not only:
            continue
        node = site.node
        if not node.args or any(a.star for a in node.args) or site.method in ("wait_stream", "wait_event"):
            continue
        texts = [normalized_code(file.code(a.value)) for a in node.args]
        wanted = [i for i, t in enumerate(texts) if t.startswith("self.") and t.count(".") == 1 and "[" not in t]
        if not wanted:
            continue
        found = _callee_params(project, file, site)
        if found is None:
            continue
        callee, model, params = found
        for i in wanted:  # (a keyword argument binds its parameter by name: `join(self.s, blocking=True)`)
            p = _bound_param(node.args[i], i, params)
            if p is not None and p in (*callee.params, *callee.kwonly) and only_joins(project, model, callee, p):
                out.add(texts[i])
    return out


def join_helper_names(project: Project | None, file: FileModel, cls, attr: str) -> set[str]:
    """The names of the calls by which methods of ``cls`` hand ``self.attr`` to a join helper
    (``synchronize_transfer_stream``): a hand-out to them keeps the stream / event inside the class."""
    out: set[str] = set()
    if project is None:
        return out
    key = f"self.{attr}"
    for m in cls.methods.values():
        if key not in file.code(m.node.body):
            continue
        for site in m.calls:
            func = site.node.func
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) \
                else None
            if name is None or not any(normalized_code(file.code(a.value)) == key for a in site.node.args):
                continue
            helpers = join_helper_keys(project, file, m, site)
            (out.add if key in helpers else out.discard)(name)
            if key not in helpers:
                out.add(f"!{name}")  # (the same name also hands it elsewhere: not a helper's)
    return {n for n in out if not n.startswith("!") and f"!{n}" not in out}


def waits_param(project: Project, file: FileModel, fn: FunctionInfo, param: str) -> bool:
    """Does ``fn`` join what ``param`` is handed (a wait on it, or on a name unpacked / indexed from it:
    ``_, ev = item; ev.wait()``)? Other uses may come along: it only has to be able to be the join."""
    memo = derived(project, "waits_param")
    key = (id(fn), param)
    if key not in memo:
        names = {param}
        for node in local_nodes(fn.node.body):  # `t, ev = param` / `ev = param[1]`: one level of parts
            if isinstance(node, cst.Assign) and param in _names_in(node.value):
                for t in node.targets:
                    names |= _names_in(t.target)
        found = False
        for node in local_nodes(fn.node.body):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                recv, attr = node.func.value, node.func.attr.value
                if attr in (*_RECEIVER_JOINS, "query") and isinstance(recv, cst.Name) and recv.value in names:
                    found = True
                elif attr in _ARG_JOINS and node.args and names & _names_in(node.args[0].value):
                    found = True
        memo[key] = found
    return memo[key]


def handed_to_join(project: Project | None, file: FileModel, fn: FunctionInfo, name: str) -> bool:
    """Is the local ``name`` (an event or element taken from a container field) an argument of a project
    function / method of ``fn`` that can join it (:func:`waits_param` on the parameter it binds)? A container
    method (``self._free.append(ev)``), a logger, ``print``, an unresolved callee or one that only reads the
    data part is no join."""
    if project is None:
        return False
    for site in fn.calls:
        node = site.node
        hit = [i for i, a in enumerate(node.args) if isinstance(a.value, cst.Name) and a.value.value == name]
        if not hit:
            continue
        found = _callee_params(project, file, site)
        if found is None:
            continue
        callee, model, params = found
        for i in hit:
            a = node.args[i]
            if a.star:
                continue
            p = _bound_param(a, i, params)
            if p is not None and waits_param(project, model, callee, p):
                return True
    return False


def _names_in(e) -> set[str]:
    return {n.value for n in local_nodes(e) if isinstance(n, cst.Name)}


def _bound_param(arg: cst.Arg, i: int, params) -> str | None:
    """The parameter the ``i``-th argument of a call binds: its keyword, else the ``i``-th positional one."""
    return arg.keyword.value if arg.keyword is not None else params[i] if i < len(params) else None


def _callee_params(project, file, site):
    """The project function a call resolves to, its module, and the parameters its arguments bind (a method
    called on a receiver: the receiver binds the first one)."""
    found = project.call_target(file, site)
    if found is None:
        return None
    callee, model = found
    params = list(callee.params)
    if params[:1] in (["self"], ["cls"]) and isinstance(site.node.func, cst.Attribute):
        params = params[1:]
    return callee, model, params
