"""A local closure that runs inside one stream scope of the function defining it.

``def trial(scale): ...`` defined in a function and called only under ``with torch.cuda.stream(side):`` of
that function runs its body with ``side`` current: its "current stream" IS ``side``. Interpreted on its own,
the closure would take its entry stream for some other stream than ``side`` and read a result a helper
made on ``side`` as crossing streams. When the closure cannot run anywhere else — it is not returned,
stored, handed to a call, decorated, rebound or declared ``nonlocal`` / ``global``, and every mention of
its name in the enclosing function is a direct call made by that function itself — and every such call
sits in a stream scope on one stream expression (same text, a name bound at most once there, the scope
unconditional), the closure's entry stream and that stream are one (:func:`closure_scope`). A closure
called outside the scope too, or under two different scopes, or escaping, keeps its own entry stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.syntax import descendants, local_nodes

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project


def _declared(fn_node: cst.FunctionDef, name: str) -> bool:
    """Is ``name`` declared ``nonlocal`` / ``global`` anywhere under ``fn_node``?"""
    return any(isinstance(n, (cst.Nonlocal, cst.Global)) and any(a.name.value == name for a in n.names)
               for n in descendants(fn_node))


def _stream_scope(project: Project, file: FileModel, site) -> tuple[str, cst.BaseExpression] | None:
    """(code, expression) of the stream of the innermost stream scope around a call site, when that scope
    switches unconditionally (its `with` item is the scope call itself) to a stream given as an argument."""
    for scope in project.enclosing_scopes(file, site.scope):
        use = next((u for u in scope.uses if u.role in apis.STREAM_SCOPE_ROLES), None)
        if use is None:
            if any(u.role in apis.NO_BREAK_SCOPE_ROLES for u in scope.uses):
                return None
            continue  # (another context manager: a timer, no_grad, a lock)
        if use.role is not apis.Role.NATIVE_STREAM_CONTEXT or use.node is not scope.site.item.item:
            return None  # a tag switch, a wrapper, or `ctx if flag else nullcontext()`: not followed
        expr = use.arg("stream")
        if expr is None or not isinstance(expr, (cst.Name, cst.Attribute)):
            return None
        return file.code(expr), expr
    return None


def _other_bindings(body: cst.CSTNode, name: str) -> bool:
    """Is ``name`` bound by a loop, a ``with ... as``, a walrus, an augmented assignment or an import?"""
    def binds(target) -> bool:
        return any(isinstance(n, cst.Name) and n.value == name for n in descendants(target))

    for n in descendants(body):
        if isinstance(n, (cst.For, cst.CompFor)) and binds(n.target) or isinstance(n, cst.AsName) and binds(n.name) \
                or isinstance(n, (cst.NamedExpr, cst.AugAssign)) and binds(n.target):
            return True
    return False


def closure_scope(project: Project, file: FileModel, fn: FunctionInfo) -> tuple[cst.BaseExpression, ...]:
    """The expressions naming the stream a local closure always runs on (the scope's stream expression, and
    the value its name is bound to in the enclosing function, if bound once there), or () when the closure
    may run elsewhere. Memoised per project."""
    memo = project.derived("closure_scope")
    if id(fn) not in memo:
        memo[id(fn)] = _closure_scope(project, file, fn)
    return memo[id(fn)]


def closure_calls(fn: FunctionInfo) -> list | None:
    """The call sites of a local closure in its enclosing function, when those are the only ways it can run:
    defined once, undecorated, never rebound nor declared ``nonlocal`` / ``global``, and every mention of its
    name a direct call by the enclosing function itself (not returned, stored, handed on as a callback, nor
    called from another nested def). None otherwise (some run of it is not seen there)."""
    parent = fn.parent
    if parent is None or fn.node.decorators or not any(n is fn.node for n in local_nodes(parent.node.body)):
        return None
    name = fn.node.name.value
    if name in parent.all_params or name in parent.name_assigns or _declared(parent.node, name):
        return None
    if sum(1 for n in local_nodes(parent.node.body) if isinstance(n, cst.FunctionDef) and n.name.value == name) != 1:
        return None  # defined twice (one per branch): not one closure
    sites = [s for s in parent.calls if isinstance(s.node.func, cst.Name) and s.node.func.value == name]
    called = {id(s.node.func) for s in sites}
    for n in descendants(parent.node.body):
        if isinstance(n, cst.Name) and n.value == name and id(n) not in called and n is not fn.node.name:
            return None  # mentioned otherwise (returned, stored, handed on, called from another nested def)
    return sites or None


def _closure_scope(project: Project, file: FileModel, fn: FunctionInfo) -> tuple[cst.BaseExpression, ...]:
    sites = closure_calls(fn)
    if sites is None:
        return ()
    parent = fn.parent
    name = fn.node.name.value
    found = {_stream_scope(project, file, s) for s in sites}
    if len(found) != 1 or None in found:
        return ()
    (code, expr), = found
    if isinstance(expr, cst.Name):
        if expr.value == name or _declared(parent.node, expr.value):
            return ()
        bindings = parent.name_assigns.get(expr.value, [])
        if expr.value in parent.all_params:
            return (expr,) if not bindings else ()
        if len(bindings) != 1 or _other_bindings(parent.node.body, expr.value):
            return ()  # rebound (or bound by a loop / a with): which stream each call sees is not one
        value = bindings[0]
        return (expr, value) if isinstance(value, cst.Call) else (expr,)
    return (expr,)


__all__ = ["closure_calls", "closure_scope"]
