"""Which calls of a module's ``ast`` may resolve to a compile API (step 3 of :mod:`streamlint.model.summary`).

:func:`_may_call_compile` mirrors ``FileModel.resolve_dotted`` on the standard ``ast`` tree (scopes,
aliases, imports) and keeps every call that may name ``torch.compile`` / ``cache_compile``;
:func:`is_compile_api` says whether a qualified name is one. Also the summary's own fast traversal
(:func:`_walk`, :func:`_children`), which both use.
"""

from __future__ import annotations

import ast

from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.bytescan import COMPILE_LEAVES


_AST = ast.AST
_CONTEXT = ast.expr_context


def _walk(node: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(node))`` without the ``Load`` / ``Store`` / ``Del`` markers (no question here asks
    about them), in the same breadth-first order, about twice as fast: one list grown while it is read
    instead of a generator per node (``iter_child_nodes`` / ``iter_fields``)."""
    found = [node]
    add = found.append
    for item in found:
        for name in item._fields:
            value = getattr(item, name, None)
            if value.__class__ is list:
                for sub in value:
                    if isinstance(sub, _AST):
                        add(sub)
            elif isinstance(value, _AST) and not isinstance(value, _CONTEXT):
                add(value)
    return found


def _children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes(node)`` as a list, without the expression context markers."""
    found: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if value.__class__ is list:
            found.extend(sub for sub in value if isinstance(sub, _AST))
        elif isinstance(value, _AST) and not isinstance(value, _CONTEXT):
            found.append(value)
    return found


def _chain(expr: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return parts[::-1]


def _compile_spellings() -> frozenset[str]:
    """Every dotted name ``apis.lookup`` turns into a compile API: the canonical names, their exact
    aliases, and each spelled through a prefix alias (``torchair.npu_fx_compiler.inference.cache_compile``)."""
    roles = (Role.TORCH_COMPILE, Role.CACHE_COMPILE)
    found = {name for name, spec in apis.SPECS.items() if spec.role in roles}
    found |= {alias for alias, target in apis._EXACT_ALIASES.items()
              if apis.SPECS.get(target) is not None and apis.SPECS[target].role in roles}
    for name in list(found):
        for prefix, alias in apis._PREFIX_ALIASES.items():
            if name.startswith(alias + "."):
                found.add(prefix + name[len(alias):])
    return frozenset(found)


_SPELLINGS = _compile_spellings()
_MAYBE = object()  # the call may resolve to a compile API whatever the module is called


def is_compile_api(qualname: str) -> bool:
    spec = apis.lookup(apis.canonical(qualname))
    return spec is not None and spec.role in (Role.TORCH_COMPILE, Role.CACHE_COMPILE)


class _Scope:
    """What ``FileModel`` records of one function for name resolution (``FileModel.resolve_dotted``):
    its positional and keyword-only parameters, its plain locals, and the names that may be aliases
    (imported in it, assigned a name or attribute, a loop variable over attributes) with the last
    part of what they may stand for (None: unknown)."""

    def __init__(self, node: ast.FunctionDef | ast.AsyncFunctionDef, parent: "_Scope | None",
                 classes: tuple[str, ...]) -> None:
        args = node.args
        self.params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        self.parent = parent
        self.classes = classes  # enclosing class names (the model's class_name is one of them)
        self.locals: set[str] = set()
        self.aliases: dict[str, set[tuple]] = {}


def _may_call_compile(tree: ast.Module) -> tuple[bool, frozenset[str]]:
    """(may call a compile API whatever the module's name, names relative to the module that do when
    ``<module>.<name>`` is one). Mirrors ``FileModel.resolve_dotted`` on a call's dotted callee
    ``h.x.y``, keeping every call it may resolve to a compile API (a superset). Resolution keeps the
    last part of the callee (``y``), or, for a bare ``h``, of what ``h`` is bound to; it must be the last
    part of a compile API's name. Then:

    - in a function, innermost first: ``h`` imported there, assigned a name or attribute, or a loop
      variable may be an alias (kept); ``self`` in a method is ``<module>.<Class>.x.y`` (kept as a name
      relative to the module when a compile API's spelling ends so); a parameter or a plain local
      resolves to nothing;
    - at module level (class bodies included): plain absolute imports are followed (``import re``:
      ``re.compile`` is no compile); relative imports and assigned names are kept; a class or function
      defined there is ``<module>.<name>`` (relative); anything else resolves to nothing.

    Decorators, defaults and annotations are resolved in both the function's scope and the enclosing one."""
    imported: dict[str, set[str]] = {}  # module-level names -> absolute imported targets
    # names that may be aliases -> what they are bound to: ("import", absolute target), ("relative",
    # ".." dots + module + "." + name), ("chain", dotted name resolved where it is assigned), ("leaf", last part)
    maybe: dict[str, set[tuple]] = {}
    defined: set[str] = set()  # top-level classes and functions
    calls: list[tuple[ast.Call, tuple[_Scope | None, ...]]] = []

    def alias(scope: _Scope | None, name: str, bound: tuple) -> None:
        (scope.aliases if scope is not None else maybe).setdefault(name, set()).add(bound)

    def bind_import(node: ast.Import | ast.ImportFrom, scope: _Scope | None) -> None:
        for item in node.names:
            if isinstance(node, ast.Import):
                name = item.asname or item.name.split(".", 1)[0]
                target = item.name if item.asname else name
            else:
                if item.name == "*":
                    continue
                name = item.asname or item.name
                if node.level:
                    rel = "." * node.level + (f"{node.module}." if node.module else "") + item.name
                    alias(scope, name, ("relative", rel))
                    continue
                target = f"{node.module}.{item.name}" if node.module else None
                if target is None:
                    continue
            if scope is None:
                imported.setdefault(name, set()).add(target)
            else:
                alias(scope, name, ("import", target))

    def bind_assign(targets: list[ast.expr], value: ast.expr, scope: _Scope | None) -> None:
        chain = _chain(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
        for target in targets:
            if isinstance(target, ast.Name):
                if chain is not None:
                    alias(scope, target.id, ("chain", tuple(chain)))
                elif scope is not None:
                    scope.locals.add(target.id)
            elif isinstance(target, (ast.Tuple, ast.List)) and scope is not None:
                scope.locals.update(el.id for el in target.elts if isinstance(el, ast.Name))

    def visit(node: ast.AST, scope: _Scope | None, classes: tuple[str, ...]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = _Scope(node, scope, classes)
            if scope is not None:
                scope.locals.add(node.name)
            elif not classes:
                defined.add(node.name)
            both = (inner, scope)  # decorators, defaults, annotations: either scope
            for child in _children(node):
                if not isinstance(child, ast.stmt):
                    visit_expr(child, both)
            for stmt in node.body:
                visit(stmt, inner, classes)
            return
        if isinstance(node, ast.ClassDef):
            if scope is None and not classes:
                defined.add(node.name)
            for child in _children(node):
                if not isinstance(child, ast.stmt):
                    visit_expr(child, (scope,))
            for stmt in node.body:
                visit(stmt, scope, (*classes, node.name))
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bind_import(node, scope)
            return
        if isinstance(node, ast.Assign):
            bind_assign(node.targets, node.value, scope)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            bind_assign([node.target], node.value, scope)
        elif isinstance(node, (ast.For, ast.AsyncFor)) and scope is not None:
            leaves = {n.attr for n in _walk(node.iter) if isinstance(n, ast.Attribute)}
            for target in _walk(node.target):
                if isinstance(target, ast.Name):
                    for leaf in leaves:
                        alias(scope, target.id, ("leaf", leaf))
        visit_children(node, scope, classes)

    def visit_children(node: ast.AST, scope: _Scope | None, classes: tuple[str, ...]) -> None:
        for child in _children(node):
            if isinstance(child, ast.stmt):
                visit(child, scope, classes)
            elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                visit_children(child, scope, classes)
            else:
                visit_expr(child, (scope,))

    def visit_expr(node: ast.AST, scopes: tuple[_Scope | None, ...]) -> None:
        for sub in _walk(node):
            if isinstance(sub, ast.Call):
                calls.append((sub, scopes))

    for stmt in tree.body:
        visit(stmt, None, ())

    relative: set[str] = set()
    for node, scopes in calls:
        chain = _chain(node.func)
        if chain is None or (len(chain) > 1 and chain[-1] not in COMPILE_LEAVES):
            continue
        for scope in scopes:
            found = _resolve(chain, scope, imported, maybe, defined)
            if found is _MAYBE:
                return True, frozenset()
            if found:
                relative.update(n for n in found if n.rsplit(".", 1)[-1] in COMPILE_LEAVES)
    return False, frozenset(relative)


def _resolve(chain: list[str], scope: "_Scope | None", imported: dict[str, set[str]],
             maybe: dict[str, set[tuple]], defined: set[str], _depth: int = 0) -> object:
    """None / an empty list (no compile API), _MAYBE, or names the module's name decides
    (see :func:`_may_call_compile`; ``.``-prefixed: through a relative import)."""
    head, rest = chain[0], chain[1:]
    if _depth > 8:
        return _MAYBE

    def through(bindings: set[tuple], where: "_Scope | None") -> object:
        found: list[str] = []
        for kind, value in bindings:
            if kind == "import":  # followed as the model does
                if is_compile_api(".".join([value, *rest])):
                    return _MAYBE
            elif kind == "relative":
                found.append(".".join([value, *rest]))
            elif kind == "chain":  # `c = torch.compile`: what the assigned name resolves to, there
                inner = _resolve([*value, *rest], where, imported, maybe, defined, _depth + 1)
                if inner is _MAYBE:
                    return _MAYBE
                found.extend(inner or ())
            elif rest or value in COMPILE_LEAVES:  # a loop variable: the callee's or the alias's last part
                return _MAYBE
        return found

    while scope is not None:
        if head in scope.aliases:
            return through(scope.aliases[head], scope)
        if head == "self" and scope.classes and scope.params[:1] == ["self"]:
            if not rest:
                return None
            names = [".".join([cls, *rest]) for cls in scope.classes]
            return [n for n in names if any(s.endswith("." + n) for s in _SPELLINGS)]
        if head in scope.locals or head in scope.params:
            return None
        scope = scope.parent
    found: list[str] = []
    if head in maybe:
        inner = through(maybe[head], None)
        if inner is _MAYBE:
            return _MAYBE
        found.extend(inner or ())
    for target in imported.get(head, ()):
        if is_compile_api(".".join([target, *rest])):
            return _MAYBE
    if head in defined:
        name = ".".join(chain)
        if any(s.endswith("." + name) for s in _SPELLINGS):
            found.append(name)
    return found
