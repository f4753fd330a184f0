"""Helpers their callers run on a side stream: the caller's tensors are used there through the call.

A helper does its device work on the stream current at its entry. When a caller calls it inside a
stream scope on another stream (``with torch.cuda.stream(copy_stream): out = to_host(x)``, a project
context manager switching streams, or a caller that is itself run on such a stream), its reads of the
tensors it is handed there are uses on that side stream of memory the caller allocated on its own stream.
Nothing in the helper's own body says so; combined with its call sites it does:

- the side stream the helper runs on: a stream parameter every such caller binds to the scope's stream
  (so a ``x.record_stream(copy_stream)`` in the helper records the right one), else an anonymous one;
- the tensor parameters such a caller hands in without keeping them alive: a parameter of the caller (all
  the way up a chain of forwarders) that the caller neither stores on its object, nor records after the
  call, nor joins after the scope (a wait or synchronize after it). A caller's own local is judged by the
  caller's analysis (it inlines the helper); a persistent tensor or one kept on ``self`` needs no record.

Callers that run the helper on their own stream add nothing (its reads are ordinary there).

A scope whose stream is provably the caller's current stream is not a side stream.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model.apis import FAMILY_MODE, Role
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.streams import is_current_stream
from streamlint.model.syntax import mentions_name
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.project import Project

ANONYMOUS = "<callers' side stream>"
_OPEN: tuple = ("", frozenset(), "")  # being summarised
_JOINS = frozenset({"wait_stream", "wait_event", "synchronize"})
_MAX_DEPTH = 4


def side_entry(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) \
        -> tuple[str, frozenset[str], str] | None:
    """(the side stream ``fn`` runs on at entry, the tensor parameters some caller running it there hands in
    unkept, the callers' execution path: ``cuda`` for ``torch.cuda`` scopes, else ``eager``) when some caller
    runs it on a side stream; None otherwise. Memoised per project."""
    if _depth > _MAX_DEPTH:
        return None  # (not memoised: the same function asked nearer the top is searched)
    memo = project.derived("side_entry")
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = _OPEN  # (a call from a function being summarised: a cycle, it adds no caller)
    found = _side_entry(project, file, fn, _depth)
    memo[id(fn)] = found
    return found


def _params(fn: FunctionInfo) -> tuple[str, ...]:
    method = fn.class_name is not None and fn.params[:1] in (("self",), ("cls",))
    return (fn.params[1:] if method else fn.params) + fn.kwonly


_CALLED = re.compile(rb"(\w+)\s*\(")


def _called_in_stream_scope(project: Project, name: str) -> bool:
    """May ``name`` be called somewhere in the project inside a ``with`` whose item mentions a stream? A
    byte-level superset (no parsing): one pass over the files that mention streams, collecting the names
    called on the lines indented under such a ``with``; memoised per project. Asked as a project-wide
    question (``Project.ask``): a result cached with its observations depends on this answer, not on the
    bytes of every file that mentions a stream (streamlint/observed.py)."""
    return project.ask("stream-scoped", (name,), lambda: stream_scoped(project, name))


def stream_scoped(project: Project, name: str) -> bool:
    """:func:`_called_in_stream_scope`'s answer, computed (or from the project's memo)."""
    memo = project.derived("side_scoped_names")
    if "names" not in memo:
        names: set[bytes] = set()
        for path in project.paths_containing((b"stream",)):
            data = project.file_bytes(path)
            if data is not None:
                names |= _names_under_stream_withs(data)
        memo["names"] = frozenset(n.decode("ascii", "replace") for n in names)
    return name in memo["names"]


# a line that may open a stream `with` (checked as the line loop checks it; only the lines under a stream
# `with` are walked one by one)
_STREAM_WITH = re.compile(rb"with [^\n]*(?i:stream)")


def _names_under_stream_withs(data: bytes) -> set[bytes]:
    found: set[bytes] = set()
    size = len(data)
    pos = 0
    while True:
        m = _STREAM_WITH.search(data, pos)
        if m is None:
            return found
        start = data.rfind(b"\n", 0, m.start()) + 1
        end = data.find(b"\n", m.start())
        end = size if end < 0 else end
        line = data[start:end]
        text = line.lstrip()
        pos = end + 1
        if not (text.startswith((b"with ", b"async with ")) and b"stream" in text.lower()):
            continue
        scope = len(line) - len(text)  # the indentation of the open stream `with`
        found.update(_CALLED.findall(text.partition(b":")[2]))  # (`with s: f(x)` on one line)
        while pos <= size:
            end = data.find(b"\n", pos)
            end = size if end < 0 else end
            line = data[pos:end]
            text = line.lstrip()
            if text and not text.startswith(b"#"):
                if len(line) - len(text) <= scope:
                    break  # the scope closes: this line may open the next one
                found.update(_CALLED.findall(text))
            pos = end + 1


def _side_entry(project: Project, file: FileModel, fn: FunctionInfo, depth: int) \
        -> tuple[str, frozenset[str], str] | None:
    """Over the call sites that run ``fn`` on a side stream (others run it on their own stream, where its
    reads are ordinary): the side stream's name, the parameters handed in unkept, the path."""
    name = fn.class_name if fn.node.name.value == "__init__" else fn.node.name.value
    if not fn.all_params or (depth == 0 and not _called_in_stream_scope(project, name)):
        return None
    sites = callers_of(project, file, fn)
    if not sites:
        return None
    params = _params(fn)
    names: set[str] = set()
    unkept: set[str] = set()
    modes: set[str] = set()
    for model, site in sites:
        caller = site.function
        if caller is None:
            continue
        bound = bind_arguments(params, site.node, kwonly=fn.kwonly)
        scoped = [(scope, use) for scope in project.enclosing_scopes(model, site.scope) for use in scope.uses
                  if use.role in (Role.NATIVE_STREAM_CONTEXT, Role.STREAM_SWITCH)]
        if scoped:
            scope, use = scoped[0]
            stream = use.value("stream") if use.role is Role.NATIVE_STREAM_CONTEXT else None
            if stream is None or (isinstance(stream, cst.Name) and stream.value == "None") \
                    or is_current_stream(project, model, caller, stream) or _default_stream(stream):
                continue  # the innermost scope's stream decides; the caller's current one (or the device's
                # default stream, the current one unless some caller switched) is no side stream
            text = model.code(stream)
            modes.add(FAMILY_MODE[use.spec.family] if use.spec.family is not None else "eager")
            names.add(next((p for p, e in bound.items() if e is not None and model.code(e) == text), ANONYMOUS))
            after = _joined_after(model, caller, scope.site.with_node)
            outer = None
        else:
            outer = side_entry(project, model, caller, depth + 1)
            if outer is _OPEN or outer is None:
                continue  # a recursive call (a helper walking nested containers), or run on the caller's stream
            modes.add(outer[2])
            names.add(next((p for p, e in bound.items() if isinstance(e, cst.Name) and e.value == outer[0]),
                           ANONYMOUS))
            after = False
        for param, expr in bound.items():
            if expr is None or after:
                continue
            base = expr
            while isinstance(base, (cst.Attribute, cst.Subscript)):
                base = base.value
            if not isinstance(base, cst.Name) or base.value not in caller.all_params or base.value == "self":
                continue
            if outer is not None and base is expr and base.value not in outer[1]:
                continue  # handed on by a forwarder whose own callers keep it
            if outer is None and _kept(model, caller, base.value, site.node):
                continue
            unkept.add(param)
    if not names:
        return None
    if len(names) != 1:
        names = {ANONYMOUS}
    return names.pop(), frozenset(unkept), "cuda" if modes == {"cuda"} else "eager"


def _default_stream(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and (dotted(expr.func) or "").rsplit(".", 1)[-1] == "default_stream"


def _kept(model: FileModel, caller: FunctionInfo, name: str, call: cst.Call) -> bool:
    """Does the caller keep what ``name`` holds past its return (stored on its object, ``self.x = name``, or
    in a container of it), or record it on a stream itself (before the scope or after the call)?"""
    if any(site.method == "record_stream" and site.receiver is not None
           and mentions_name(site.receiver, name) for site in caller.calls):
        return True
    for assign in caller.assigns:
        if assign.target.startswith("self.") and _holds(assign.value, name):
            return True
    for site in caller.calls:
        if site.method in ("append", "extend", "__setitem__", "update", "setdefault", "put") \
                and (dotted(site.receiver) or "").startswith("self.") \
                and any(_holds(a.value, name) for a in site.node.args):
            return True
    return False


def _holds(value: cst.BaseExpression | None, name: str, depth: int = 0) -> bool:
    """Does ``value`` hold the object ``name`` (itself, a view or element of it, a container or an object
    built from it); not a test or a metadata read of it (``name is not None``, ``name.shape[0]``)?"""
    if value is None or depth > 4:
        return False
    if isinstance(value, cst.Name):
        return value.value == name
    if isinstance(value, cst.Subscript):
        return _holds(value.value, name, depth + 1)
    if isinstance(value, (cst.Tuple, cst.List, cst.Set)):
        return any(_holds(e.value, name, depth + 1) for e in value.elements)
    if isinstance(value, cst.Dict):
        return any(_holds(getattr(e, "value", None), name, depth + 1) for e in value.elements)
    if isinstance(value, cst.IfExp):
        return _holds(value.body, name, depth + 1) or _holds(value.orelse, name, depth + 1)
    if isinstance(value, cst.Call):  # a view (`name.view(...)`), or an object built around it (`Entry(name)`)
        func = value.func
        called = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        return (isinstance(func, cst.Attribute) and _holds(func.value, name, depth + 1)) \
            or (called[:1].isupper() and any(_holds(a.value, name, depth + 1) for a in value.args))
    return False


def _joined_after(model: FileModel, caller: FunctionInfo, with_node: cst.With) -> bool:
    """Does the caller wait on a stream or event, or synchronize, after the scope (a join of the side
    stream before it returns: whatever it hands in is then no longer used there when its caller drops it)?"""
    end = model.span(with_node).end_line
    return any(site.method in _JOINS and model.span(site.node).start_line > end
               for site in caller.calls)


__all__ = ["ANONYMOUS", "side_entry"]
