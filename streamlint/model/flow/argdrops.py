"""Tensors a function leaves in use on a side stream at its return, which a caller then drops.

A function that reads a tensor parameter (or a view of one) in work it queues on a side stream and returns
while that work may still run -- no join of the side stream into the current one, no host synchronisation
of it, no ``record_stream`` on it -- leaves the argument's lifetime to its callers. The caching allocator
only knows the caller's stream: when a caller drops its reference right after the call, the block goes
back to that stream's pool while the side stream still reads it. Nothing in the function says so; with
its call sites it does.

Two questions, one per side of the call:

- the callee (:class:`PendingArgs`, a mixin of the interpreter): at each exit, the tensor parameters read
  on another stream by the function's own statements (a helper it inlines counts at its call: the helper's
  own uses are its own analysis's), neither recorded there nor joined back / host-synchronised after the
  use (also through the helpers it calls: the flow inlines them);
- the caller (:func:`caller_drop`): some call site in the project drops the argument right after the call,
  before any join: a temporary argument (``f(a * b)``, ``f(torch.cat(xs))``, ``f(q.pop())``), an attribute
  of another object rebound or deleted after the call (``f(p.grad)`` ... ``p.grad = None``; also through a
  local ``g = p.grad``), a fresh local of the caller that it deletes, rebinds or lets die at its return.
  A caller keeps the tensor when the argument is (a view of) one of its object's fields, a local it stores
  on its object, records, returns, or that it got from somewhere unknown (a call, a loop over a container);
  it joins when it waits on a stream or event, synchronises, or calls a ``wait`` / ``sync`` / ``drain`` /
  ``finish`` method between the call and the drop. A caller that hands its own parameter on unchanged is a
  forwarder: its callers are asked in turn (a few levels up).

The finding is the callee's (the missing ``record_stream`` is its root cause), at its first pending use,
with the first dropping caller as related location; it depends on a caller, so it is never ``high``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, FunctionInfo, dotted
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.results import Lifetime
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.flow.values import State, TVal
    from streamlint.model.project import Project

_MAX_DEPTH = 3
# methods that hand back the receiver's memory, or may (``x.float()`` is ``x`` when it is float already): the
# argument then lives as long as the receiver does
_VIEWS = frozenset({
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "detach", "narrow", "split", "chunk",
    "unbind", "tensor_split", "squeeze", "unsqueeze", "t", "transpose", "permute", "expand", "expand_as",
    "as_strided", "contiguous", "float", "half", "bfloat16", "to", "type", "select", "movedim", "swapaxes",
    "diagonal", "view_as_real", "view_as_complex", "real", "imag", "hsplit", "vsplit", "squeeze_", "unsqueeze_"})
_HOST_FACTORIES = frozenset({"tensor", "as_tensor", "from_numpy", "asarray", "frombuffer", "Tensor", "empty_like",
                             "device", "Size", "Generator", "Stream", "Event"})
# method names of builtin containers: an untyped receiver calling one is not this function
_BUILTIN_METHODS = frozenset({"add", "append", "extend", "insert", "put", "put_nowait", "update", "get", "pop",
                              "remove", "discard", "set", "setdefault", "copy", "copy_", "write", "send", "submit"})
_DROP_LABEL = {"call end": "a temporary argument: dropped when the call returns",
               "unset": "the caller drops it here", "del": "the caller deletes it here",
               "rebinding": "the caller rebinds its name here", "function end": "the caller returns without keeping it"}


class PendingArgs:
    """Tensor parameters left in use on a side stream at the return (mixin of
    :class:`~streamlint.model.flow.interp.Interp`). Interp state it uses: ``depth``, ``anchor``, ``lifetimes``,
    ``side_recorded``, ``cfg``, ``project``, ``file``, ``fn``."""

    def access(self, st: State, tv: TVal, s: str, t: int, know: dict[str, int], write: bool) -> None:
        super().access(st, tv, s, t, know, write)  # type: ignore[misc]
        if self.depth or self.anchor is None:  # type: ignore[attr-defined]
            return
        S = st.stores.get(tv.sid)
        if S is not None and S.kind == "arg" and S.name and s != S.alloc and not s.startswith(("<", "tag")):
            self.__dict__.setdefault("arg_side_uses", []).append((tv.sid, s, t, self.anchor))  # type: ignore

    def finalize(self, st: State) -> None:
        super().finalize(st)  # type: ignore[misc]
        if self.__dict__.get("arg_side_uses") and not self.depth:  # type: ignore[attr-defined]
            self.check_pending_args(st)

    def check_pending_args(self, st: State) -> None:
        fn: FunctionInfo = self.fn  # type: ignore[attr-defined]
        recorded_somewhere: set[int] = self.side_recorded  # type: ignore[attr-defined]
        for sid, s, t, node in self.__dict__["arg_side_uses"]:
            S = st.stores.get(sid)
            if S is None or S.name not in fn.all_params or sid in recorded_somewhere or s in S.recorded \
                    or st.know(S.alloc).get(s, -1) >= t or any(st.loose_rec.values()):
                continue  # recorded (on some path, or values of untracked type recorded here), joined, synced
            key = ("caller-free", sid)
            if key in self.lifetimes:  # type: ignore[attr-defined]
                continue  # (the first pending use of this parameter is the one reported)
            drop = caller_drop(self.project, self.file, fn, S.name)  # type: ignore[attr-defined]
            if drop is None:
                continue
            self.lifetimes[key] = Lifetime(node, S.name, S.alloc, s, drop[2], None, False,  # type: ignore
                                           self.cfg.mode, kind="caller-free",  # type: ignore[attr-defined]
                                           entry=drop[:2] + drop[3:])


def _params(fn: FunctionInfo) -> tuple[str, ...]:
    method = fn.class_name is not None and fn.params[:1] in (("self",), ("cls",))
    return (fn.params[1:] if method else fn.params) + fn.kwonly


def caller_drop(project: Project, file: FileModel, fn: FunctionInfo, param: str, _depth: int = 0) \
        -> tuple | None:
    """(the caller's file, the statement that drops it, how, the call, the caller) for the first call site of ``fn`` in the project
    that drops what it binds to ``param`` right after the call with no join before; None when every caller
    keeps it, joins first, or the callers are not seen. Memoised per project."""
    memo = project.derived("caller_drop")
    key = (id(fn), param)
    if key in memo:
        return memo[key]
    memo[key] = None  # (a cycle adds nothing)
    found = None
    if _depth <= _MAX_DEPTH:
        found = _caller_drop(project, file, fn, param, _depth)
    memo[key] = found
    return found


def _caller_drop(project: Project, file: FileModel, fn: FunctionInfo, param: str, depth: int) \
        -> tuple | None:
    if param not in _params(fn):
        return None
    for model, site in _call_sites(project, file, fn):
        caller = site.function
        if caller is None or caller is fn:
            continue
        if project.call_target(model, site) is None and (site.method in _BUILTIN_METHODS or site.method is None):
            continue  # `seen.add(x)`: an untyped receiver's method of a common container name is not this one
        expr = bind_arguments(_params(fn), site.node, kwonly=fn.kwonly).get(param)
        if expr is None:
            continue
        found = _dropped(project, model, caller, site, expr, depth)
        if found is not None:
            return found if len(found) > 3 else (*found, site.node, caller)
    return None


def _call_sites(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FileModel, object]]:
    """The call sites of ``fn`` (:func:`~streamlint.model.flow.callers.callers_of`); for a method whose name is
    too common to search the whole project for (``add``, ``push``), the calls that resolve to it in the files
    that also name its class (where its objects are made or typed) and in its own file."""
    sites = callers_of(project, file, fn)
    if sites is not None:
        return sites
    name = fn.node.name.value
    if fn.class_name is None or fn.parent is not None or name.startswith("__"):
        return []
    paths = [p for p in project.paths_containing((f".{name}(".encode(),))
             if p == file.path or project.may_contain(p, (fn.class_name.encode(),))]
    if len(paths) > MAX_CALLER_FILES:
        return []
    found = []
    for path in paths:
        model = project.file(path) if project.may_call(path, name) else None
        for site in model.calls if model is not None else ():
            target = project.call_target(model, site) if site.method == name else None
            if target is not None and target[0] is fn:
                found.append((model, site))
    return found


def _dropped(project: Project, model: FileModel, caller: FunctionInfo, site, expr: cst.BaseExpression,
             depth: int) -> tuple | None:
    """Does ``caller`` drop the argument ``expr`` of the call ``site`` right after the call?"""
    base = _base(expr)
    call_end = model.span(site.node).end_line
    joins = _join_lines(model, caller, call_end)
    first_join = min(joins, default=None)
    if _self_rooted(base):
        return None  # (a view of) a field of the caller's object: long-lived
    if _fresh(base):
        return model, site.node, "call end"
    if isinstance(base, cst.Attribute) and isinstance(base.value, cst.Name):
        return _unset_after(model, caller, site.node, base, first_join)
    if not isinstance(base, cst.Name):
        return None
    name = base.value
    if _kept(model, caller, name, site.node):
        return None
    if name in caller.all_params:
        if joins or name == "self":
            return None
        outer = caller_drop(project, model, caller, name, depth + 1)
        return outer
    value = _binding(model, caller, name, call_end)
    if value is None:
        return None
    value = _base(value)
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and not _self_rooted(value):
        return _unset_after(model, caller, site.node, value, first_join)
    if not _fresh(value):
        return None
    end = _name_dropped_after(model, caller, site.node, name, first_join)
    if end is not None:
        return end
    if joins:
        return None
    return model, caller.node.name, "function end"


def _base(expr: cst.BaseExpression) -> cst.BaseExpression:
    """What the argument's memory belongs to: the receiver of a view (``g.view(-1)``, ``x[:n]``,
    ``x.split(k)[0]``)."""
    for _ in range(8):
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _VIEWS:
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            expr = expr.value
        else:
            break
    return expr


def _self_rooted(expr: cst.BaseExpression) -> bool:
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value in ("self", "cls")


def _fresh(expr: cst.BaseExpression) -> bool:
    """Is ``expr`` evidently a tensor nobody else holds: arithmetic, a clone, a torch op that allocates, an
    element taken out of a container (``q.pop(0)``)?"""
    if isinstance(expr, cst.BinaryOperation):
        return not isinstance(expr.left, (cst.SimpleString, cst.FormattedString))
    if isinstance(expr, cst.UnaryOperation):
        return not isinstance(expr.operator, cst.Not)
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("clone", "pop", "popleft"):
        return True
    name = dotted(func) or ""
    head, _, op = name.partition(".")
    return head == "torch" and "." not in op and op not in _HOST_FACTORIES and op not in _VIEWS and op[:1].islower()


def _join_lines(model: FileModel, caller: FunctionInfo, after: int) -> list[int]:
    """The lines after ``after`` where the caller may join a side stream: a wait, a synchronisation, a
    ``record_stream``, a method named for waiting / draining / finishing queued work."""
    lines = []
    for site in caller.calls:
        name = site.method or (dotted(site.node.func) or "").rsplit(".", 1)[-1]
        lower = name.lower()
        if any(w in lower for w in ("wait", "sync", "record_stream", "drain", "finish", "flush", "join")):
            line = model.span(site.node).start_line
            if line > after:
                lines.append(line)
    return lines


def _unset_after(model: FileModel, caller: FunctionInfo, call: cst.Call, place: cst.Attribute,
                 first_join: int | None) -> tuple | None:
    """``p.grad = <new>`` (not made from the old value) or ``del p.grad`` after the call on its path (in its block
    or an enclosing one, not in a branch of its own), before any join."""
    text = model.code(place)
    for node in _following(caller, call):
        if first_join is not None and model.span(node).start_line >= first_join:
            break
        if isinstance(node, cst.Assign) and any(model.code(t.target) == text for t in node.targets) \
                and text not in model.code(node.value):
            return model, node, "unset"
        if isinstance(node, cst.Del) and _names_target(model, node.target, text):
            return model, node, "unset"
    return None


def _name_dropped_after(model: FileModel, caller: FunctionInfo, call: cst.Call, name: str,
                        first_join: int | None) -> tuple | None:
    for node in _following(caller, call):
        if first_join is not None and model.span(node).start_line >= first_join:
            break
        if isinstance(node, cst.Del) and _names_target(model, node.target, name):
            return model, node, "del"
        if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                for t in node.targets):
            return model, node, "rebinding"
    return None


def _following(caller: FunctionInfo, call: cst.Call) -> list[cst.CSTNode]:
    """The small statements that run after the one holding ``call`` on every path through it: those after it in
    its block, then after the enclosing compound statement in its block, up to the function body (none inside
    a later branch or loop: a conditional drop is not one every run makes)."""
    path = _path_to(caller.node.body, call)
    if path is None:
        return []
    out: list[cst.CSTNode] = []
    for child, parent in zip(path, path[1:]):  # (innermost first)
        body = getattr(parent, "body", None)
        if isinstance(parent, (cst.IndentedBlock, cst.Module)) and isinstance(body, (list, tuple)) and child in body:
            for stmt in body[body.index(child) + 1:]:
                if isinstance(stmt, cst.SimpleStatementLine):
                    out.extend(stmt.body)
        if isinstance(parent, cst.SimpleStatementLine) and child in parent.body:
            out[:0] = list(parent.body[parent.body.index(child) + 1:])
    return out


def _path_to(root: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The nodes from ``target`` up to ``root`` (``target`` first; nested functions are not entered)."""
    stack = [(root, [root])]
    while stack:
        node, path = stack.pop()
        if node is target:
            return list(reversed(path))
        for child in node.children:
            if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            stack.append((child, path + [child]))
    return None


def _names_target(model: FileModel, target: cst.BaseExpression, text: str) -> bool:
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_names_target(model, e.value, text) for e in target.elements)
    return model.code(target) == text


def _binding(model: FileModel, caller: FunctionInfo, name: str, before: int) -> cst.BaseExpression | None:
    """The value of the last plain ``name = value`` before line ``before``; None when the name is bound
    otherwise there (a loop target, an unpacking, a ``with`` item) or not at all."""
    found = None
    for node in _statements(caller.node.body):
        if model.span(node).start_line >= before:
            continue
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                found = node.value if not isinstance(node, cst.AugAssign) else None
            elif any(_binds(t, name) for t in targets):
                found = None
        elif isinstance(node, (cst.For, cst.With)) and _binds_in(node, name):
            found = None
    return found


def _binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(e.value, name) for e in target.elements)
    if isinstance(target, cst.StarredElement):
        return _binds(target.value, name)
    return False


def _binds_in(node: cst.For | cst.With, name: str) -> bool:
    if isinstance(node, cst.For):
        return _binds(node.target, name)
    return any(i.asname is not None and _binds(i.asname.name, name) for i in node.items)


def _kept(model: FileModel, caller: FunctionInfo, name: str, call: cst.Call) -> bool:
    """Does the caller keep what ``name`` holds past the call: stored on an object or in a container,
    recorded on a stream, returned or yielded, captured by a nested function?"""
    for node in _statements(caller.node.body):
        if isinstance(node, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(not isinstance(t, cst.Name) for t in targets) and node.value is not None \
                    and _mentions(node.value, name):
                return True  # `self.x = g`, `d[k] = (g, ev)`
        elif isinstance(node, cst.Return) and node.value is not None and _mentions(node.value, name):
            return True
        elif isinstance(node, (cst.FunctionDef, cst.Lambda)) and _mentions(node, name):
            return True
    for site in caller.calls:
        if site.node is call:
            continue
        if site.method in ("record_stream", "append", "extend", "insert", "put", "put_nowait", "add", "update",
                           "setdefault", "appendleft") and any(_mentions(a.value, name) for a in site.node.args):
            return True
        if site.method == "record_stream" and site.receiver is not None and _mentions(site.receiver, name):
            return True
    return any(isinstance(n, (cst.Yield, cst.Lambda)) and _mentions(n, name) for n in _walk(caller.node.body))


def _mentions(node: cst.CSTNode, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in _walk(node))


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)


def _statements(body: cst.CSTNode):
    """The small statements and compound statements of a function body, in source order, not entering
    nested functions or classes (their bodies run elsewhere)."""
    stack = [body]
    out = []
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.ClassDef,)) or (isinstance(n, cst.FunctionDef) and n is not body):
            out.append(n)
            continue
        if isinstance(n, cst.BaseSmallStatement) or isinstance(n, cst.BaseCompoundStatement):
            out.append(n)
        if isinstance(n, (cst.BaseExpression,)):
            continue
        stack.extend(reversed(n.children))
    return out


__all__ = ["PendingArgs", "caller_drop"]
