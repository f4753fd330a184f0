"""One traversal of one module: names, definitions, calls, `with` scopes and guards.

The collector resolves names with its own light import/alias table (no LibCST scope or
qualified-name providers); everything cross-module is answered later by :mod:`project`. The records it
fills (functions, classes, calls, ``with`` items, assignments, guards) are :mod:`.filefacts`'.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.finding import Span
from streamlint.model import apis
from streamlint.model.filefacts import AttrAssign, CallSite, ClassInfo, FunctionInfo, Guard, ScopeSite
from streamlint.model.syntax import contains
from streamlint.model.walk import walk
from streamlint.source import SourceFile

if TYPE_CHECKING:
    from streamlint.model.positions import PositionTable


def dotted(expr: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if isinstance(expr, cst.Name):
        parts.append(expr.value)
        return ".".join(reversed(parts))
    return None


def string_value(expr: cst.BaseExpression | None) -> str | None:
    """The value of a plain (non f-) string literal, concatenations included."""
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value if isinstance(expr.evaluated_value, str) else None
    if isinstance(expr, cst.ConcatenatedString):
        left, right = string_value(expr.left), string_value(expr.right)
        return left + right if left is not None and right is not None else None
    return None


def int_value(expr: cst.BaseExpression | None) -> int | None:
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = int_value(expr.expression)
        return -inner if inner is not None else None
    return None


class FileModel:
    """Facts about one module, from a single traversal of its CST."""

    def __init__(self, source: SourceFile, module: cst.Module, module_name: str, is_package: bool) -> None:
        self.source = source
        self.path = source.path
        self.module = module
        self.module_name = module_name
        self.is_package = is_package
        self._code: dict[int, tuple[cst.CSTNode, str]] = {}
        self.names: dict[str, str] = {}
        self.star_imports: list[str] = []  # modules of `from m import *`
        self.functions: dict[str, FunctionInfo] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.calls: list[CallSite] = []
        self.scopes: list[ScopeSite] = []
        self.assigns: list[AttrAssign] = []
        self.module_calls: list[CallSite] = []
        # id(statement or call) -> innermost with-item enclosing it
        self.scope_of: dict[int, ScopeSite | None] = {}
        self.function_of: dict[int, FunctionInfo | None] = {}
        walk(module, _Collector(self))  # read-only: no node rebuilding (see model/walk.py)
        # Resolve after the traversal: module-level names defined below their use count too.
        for call in self.calls:
            call.target = self.resolve(call.node.func, call.function)
        for fn in self.functions.values():
            fn.decorators = tuple(self._resolve_decorator(d, fn.parent) for d in fn.node.decorators)
        for cls in self.classes.values():
            cls.bases = tuple(self.resolve(b, None) or dotted(b) or "" for b in map(_generic_origin, cls.node.bases))
            for attr, (ctor, fn) in cls.raw_attr_types.items():
                resolved = self.resolve(ctor, fn)
                if resolved is not None:
                    cls.attr_types[attr] = resolved
            for attr, (ctors, fn) in cls.raw_attr_alternatives.items():
                resolved_all = tuple(r for r in (self.resolve(c, fn) for c in ctors) if r is not None)
                if len(resolved_all) > 1:
                    cls.attr_alternatives[attr] = resolved_all

    def call_site(self, call: cst.Call) -> "CallSite | None":
        """The CallSite recorded for a call node of this module."""
        index = self.__dict__.get("_call_index")
        if index is None:
            index = self.__dict__["_call_index"] = {id(site.node): site for site in self.calls}
        return index.get(id(call))

    def scope_site(self, item: cst.WithItem) -> "ScopeSite | None":
        """The ScopeSite recorded for a with-item of this module."""
        index = self.__dict__.get("_scope_index")
        if index is None:
            index = self.__dict__["_scope_index"] = {id(site.item): site for site in self.scopes}
        return index.get(id(item))

    def _resolve_decorator(self, decorator: cst.Decorator, function: "FunctionInfo | None") -> str:
        expr = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        return self.resolve(expr, function) or dotted(expr) or ""

    @cached_property
    def _positions(self) -> PositionTable:
        # LibCST's PositionProvider ranges, several times cheaper, computed as far as asked (model/positions.py)
        from streamlint.model.positions import PositionTable  # LibCST internals: on first use

        # the stdlib tree of the module, while the engine still holds it (see engine._lint_file): it lets
        # the table generate only the statement a node is in
        return PositionTable(self.module, self.__dict__.get("_ast_tree"), self.source.text)

    def span(self, node: cst.CSTNode) -> Span:
        pos = self._positions.get(node)
        if pos is None:
            return Span(1, 0, 1, 0)
        return Span(*pos)

    def region(self, node: cst.CSTNode, walk: bool = True) -> tuple[int, int | None] | None:
        """(top-level statement, statement of a top-level class's body or None) holding ``node``, from the position
        table's walk (:meth:`PositionTable.region`; ``walk=False``: only if met already, :meth:`~PositionTable.located`)."""
        return self._positions.region(node) if walk else self._positions.located(node)

    def lexical_index(self, root: cst.CSTNode) -> dict[int, tuple[int, int]]:
        """:func:`syntax.lexical_index` of a subtree of this module (a function), cached."""
        cache = self.__dict__.setdefault("_lexical", {})
        found = cache.get(id(root))
        if found is None or found[0] is not root:
            from streamlint.model.syntax import lexical_index

            found = cache[id(root)] = (root, lexical_index(root))
        return found[1]

    def local_nodes_of(self, root: cst.CSTNode) -> list[cst.CSTNode]:
        """``list(syntax.local_nodes(root))`` for a subtree of this module (a function body), cached."""
        cache = self.__dict__.setdefault("_local_nodes", {})
        found = cache.get(id(root))
        if found is None or found[0] is not root:
            from streamlint.model.syntax import local_nodes

            found = cache[id(root)] = (root, list(local_nodes(root)))
        return found[1]

    def code(self, node: cst.CSTNode) -> str:
        """The source text of ``node`` (generated once per node: the analysis asks the same tests and
        receivers again at every visit; the node is kept with its text, so an id never answers for another)."""
        held = self._code.get(id(node))
        if held is not None and held[0] is node:
            return held[1]
        text = self.module.code_for_node(node)
        self._code[id(node)] = (node, text)
        return text

    def resolve(self, expr: cst.BaseExpression, function: FunctionInfo | None) -> str | None:
        """Qualified name of a Name/Attribute chain, through imports and aliases."""
        name = dotted(expr)
        if name is None:
            return None
        return self.resolve_dotted(name, function)

    def resolve_dotted(self, name: str, function: FunctionInfo | None) -> str | None:
        head, _, rest = name.partition(".")
        fn = function
        while fn is not None:
            if head in fn.local_aliases:
                base = fn.local_aliases[head]
                return apis.canonical(f"{base}.{rest}" if rest else base)
            if head == "self" and fn.class_name is not None and fn.params[:1] == ("self",):
                return f"{self.module_name}.{fn.class_name}.{rest}" if rest else None
            if head in fn.locals or head in fn.all_params:
                return None
            fn = fn.parent
        if head in self.names:
            base = self.names[head]
            return apis.canonical(f"{base}.{rest}" if rest else base)
        if head in _BUILTINS:
            return name
        return None

    def iter_functions(self):
        return self.functions.values()


_BUILTINS = frozenset({"print", "input", "breakpoint", "open", "len", "isinstance", "super", "range"})


class _Collector:
    """Collects the facts of a FileModel; driven by :func:`walk` (visit_<Type> / leave_<Type>)."""

    def __init__(self, model: FileModel) -> None:
        self.m = model
        self.functions: list[FunctionInfo] = []
        self.classes: list[ClassInfo] = []
        self.scopes: list[ScopeSite | None] = [None]
        self.guards: list[Guard] = []
        self.loops = 0
        self.try_depth = 0
        self._block_guards: list[int] = []  # early-return guards pushed in each open block
        self._elifs: set[int] = set()

    # ---- helpers
    @property
    def fn(self) -> FunctionInfo | None:
        return self.functions[-1] if self.functions else None

    def _relative_base(self, level: int) -> str:
        parts = self.m.module_name.split(".")
        keep = len(parts) - level + (1 if self.m.is_package else 0)
        return ".".join(parts[: max(keep, 0)])

    def _bind(self, name: str, qualname: str) -> None:
        if self.fn is not None:
            self.fn.local_aliases[name] = qualname
        else:
            self.m.names.setdefault(name, qualname) if self.try_depth else self.m.names.__setitem__(name, qualname)

    # ---- imports and aliases
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self._bind(alias.asname.name.value, full)
            else:
                head = full.split(".")[0]
                self._bind(head, head)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = dotted(node.module) if node.module is not None else ""
        level = len(node.relative)
        if level:
            base = self._relative_base(level)
            module = f"{base}.{module}" if module and base else (module or base)
        if isinstance(node.names, cst.ImportStar) and module:
            self.m.star_imports.append(module)  # followed by the project (``Project.symbol``)
        if isinstance(node.names, cst.ImportStar) or not module:
            return
        for alias in node.names:
            name = dotted(alias.name)
            if name is None:
                continue
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            self._bind(local, f"{module}.{name}")

    def visit_Try(self, node: cst.Try) -> None:
        self._note_statement(node)
        self.try_depth += 1

    def leave_Try(self, node: cst.Try) -> None:
        self.try_depth -= 1

    # ---- definitions
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        info = ClassInfo(node.name.value, node, ())
        if not self.functions and not self.classes:
            self.m.classes[info.name] = info
            self.m.names[info.name] = f"{self.m.module_name}.{info.name}"
        self.classes.append(info)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        cls = self.classes[-1] if self.classes and (not self.functions or self.classes[-1].node is not self.functions[-1].node) else None
        in_class_body = cls is not None and (not self.functions or _directly_in(cls, self.functions[-1]))
        params = tuple(p.name.value for p in (*node.params.posonly_params, *node.params.params))
        kwonly = tuple(p.name.value for p in node.params.kwonly_params)
        decorators = ()  # resolved after the traversal
        parent = self.fn
        if in_class_body and cls is not None:
            qualname = f"{cls.name}.{node.name.value}"
            class_name = cls.name
        elif parent is not None:
            qualname = f"{parent.qualname}.<locals>.{node.name.value}"
            class_name = parent.class_name
        else:
            qualname = node.name.value
            class_name = None
        info = FunctionInfo(qualname, node, class_name if in_class_body or parent else None, params, kwonly,
                            decorators, parent)
        if parent is not None:
            parent.locals.add(node.name.value)
        elif not self.classes:
            self.m.names[node.name.value] = f"{self.m.module_name}.{node.name.value}"
        if in_class_body and cls is not None:
            cls.methods[node.name.value] = info
        self.m.functions.setdefault(qualname, info)
        self.functions.append(info)
        self.scopes.append(None)
        self._saved_guards = getattr(self, "_saved_guards", [])
        self._saved_guards.append((self.guards, self.loops))
        self.guards, self.loops = [], 0

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.pop()
        self.scopes.pop()
        self.guards, self.loops = self._saved_guards.pop()

    # ---- control flow context
    def visit_If(self, node: cst.If) -> bool:
        self._note_statement(node)
        walk(node.test, self)
        self.guards.append(Guard(node.test, False))
        walk(node.body, self)
        self.guards.pop()
        orelse = node.orelse
        if orelse is not None:
            if isinstance(orelse, cst.If):
                self._elifs.add(id(orelse))
            self.guards.append(Guard(node.test, True))
            walk(orelse, self)
            self.guards.pop()
        elif self._block_guards and id(node) not in self._elifs and _terminates(node.body):
            # `if mode == "ge_graph": return ...` — the rest of the block runs only when the test is false
            self.guards.append(Guard(node.test, True))
            self._block_guards[-1] += 1
        return False

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._block_guards.append(0)

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        for _ in range(self._block_guards.pop()):
            self.guards.pop()

    def visit_For(self, node: cst.For) -> None:
        self._note_statement(node)
        self.loops += 1
        fn = self.fn
        if fn:
            fn.has_loop = True
            # `for layer in self.layers:` / `for i, layer in enumerate(self.layers):` — the loop
            # variable stands for the elements of a submodule container on self.
            target, iterable = node.target, node.iter
            if isinstance(iterable, cst.Call) and dotted(iterable.func) == "enumerate" and iterable.args \
                    and isinstance(target, cst.Tuple) and len(target.elements) == 2:
                iterable, target = iterable.args[0].value, target.elements[1].value
            pairs = [(target, iterable)]
            # `for norm, layer in zip(self.norms, self.layers):` — one loop variable per container
            if isinstance(iterable, cst.Call) and dotted(iterable.func) == "zip" and isinstance(target, cst.Tuple) \
                    and len(target.elements) == len(iterable.args):
                pairs = [(t.value, a.value) for t, a in zip(target.elements, iterable.args)]
            for target, iterable in pairs:
                source = dotted(iterable)
                if isinstance(target, cst.Name) and fn.class_name and source and source.startswith("self.") \
                        and source.count(".") == 1:
                    fn.local_aliases[target.value] = f"{self.m.module_name}.{fn.class_name}.{source[5:]}"

    def leave_For(self, node: cst.For) -> None:
        self.loops -= 1

    def visit_While(self, node: cst.While) -> None:
        self._note_statement(node)
        self.loops += 1
        if self.fn:
            self.fn.has_loop = True

    def leave_While(self, node: cst.While) -> None:
        self.loops -= 1

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self.loops += 1

    def leave_CompFor(self, node: cst.CompFor) -> None:
        self.loops -= 1

    # The element of a comprehension is evaluated once per iteration but visited before its CompFor.
    def visit_ListComp(self, node: cst.ListComp) -> None:
        self.loops += 1

    def leave_ListComp(self, node: cst.ListComp) -> None:
        self.loops -= 1

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self.loops += 1

    def leave_SetComp(self, node: cst.SetComp) -> None:
        self.loops -= 1

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.loops += 1

    def leave_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.loops -= 1

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self.loops += 1

    def leave_DictComp(self, node: cst.DictComp) -> None:
        self.loops -= 1

    def visit_With(self, node: cst.With) -> bool:
        self._note_statement(node)
        pushed = 0
        for item in node.items:
            walk(item.item, self)
            calls = tuple(_scope_calls(item.item))
            if not calls and isinstance(item.item, cst.Name) and self.fn is not None:
                # `ctx = torch.cuda.stream(s) if c else nullcontext()` ... `with ctx:`: what it was built from
                calls = tuple(c for v in self.fn.name_assigns.get(item.item.value, ()) for c in _scope_calls(v))
            site = ScopeSite(item, node, calls, self.fn, self.scopes[-1], tuple(self.guards))
            self.m.scopes.append(site)
            if self.fn is not None:
                self.fn.scopes.append(site)
            self.scopes.append(site)
            pushed += 1
            if item.asname is not None:
                walk(item.asname, self)
        walk(node.body, self)
        for _ in range(pushed):
            self.scopes.pop()
        return False

    # ---- statements
    def _note_statement(self, node: cst.CSTNode) -> None:
        self.m.scope_of[id(node)] = self.scopes[-1]
        self.m.function_of[id(node)] = self.fn
        if self.fn is not None:
            self.fn.statement_count += 1

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._note_statement(node)
        for small in node.body:
            self.m.scope_of[id(small)] = self.scopes[-1]

    def visit_Return(self, node: cst.Return) -> None:
        if self.fn is not None:
            self.fn.returns.append(node)

    def visit_Yield(self, node: cst.Yield) -> None:
        if self.fn is not None:
            self.fn.yields.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._assign_target(target.target, node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assign_target(node.target, node.value, node)

    def _assign_target(self, target: cst.BaseExpression, value: cst.BaseExpression, node: cst.CSTNode) -> None:
        fn = self.fn
        if isinstance(target, cst.Name):
            name = target.value
            resolved = self.m.resolve(value, fn) if isinstance(value, (cst.Name, cst.Attribute)) else None
            if fn is not None:
                fn.name_assigns.setdefault(name, []).append(value)
                if resolved is not None and apis.lookup(resolved) is not None:
                    fn.local_aliases[name] = resolved
                else:
                    fn.locals.add(name)
            elif resolved is not None:
                self.m.names[name] = resolved
            elif name in self.m.names and not self.try_depth and not (isinstance(value, cst.Call) and (dotted(
                    value.func) or "").endswith("TypeAliasType")):  # (a runtime stand-in: keeps a TYPE_CHECKING import)
                self.m.names.pop(name, None)
        elif isinstance(target, (cst.Tuple, cst.List)):
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements) \
                    and not any(isinstance(el, cst.StarredElement) for el in (*target.elements, *value.elements)):
                # `state, b = self.state, x.shape[0]`: each name is bound to its own element
                for el, item in zip(target.elements, value.elements):
                    self._assign_target(el.value, item.value, node)
                return
            for el in target.elements:
                if isinstance(el.value, cst.Name) and fn is not None:
                    fn.locals.add(el.value.value)
        elif isinstance(target, (cst.Attribute, cst.Subscript)):
            key = _assign_key(target)
            if key is None:
                return
            assign = AttrAssign(key, node, value, fn, tuple(self.guards))
            self.m.assigns.append(assign)
            if fn is not None:
                fn.assigns.append(assign)
                cls_name = fn.class_name
                if key.startswith("self.") and key.count(".") == 1 and cls_name in self.m.classes:
                    ctor = _constructor(value)
                    if ctor is not None:
                        self.m.classes[cls_name].raw_attr_types.setdefault(key[5:], (ctor, fn))
                        self.m.classes[cls_name].raw_attr_alternatives.setdefault(
                            key[5:], (tuple(_constructors(value)), fn))

    # ---- calls
    def visit_Call(self, node: cst.Call) -> None:
        fn = self.fn
        func = node.func
        target = None  # resolved after the traversal
        receiver = method = None
        if isinstance(func, cst.Attribute):
            receiver, method = func.value, func.attr.value
        site = CallSite(node, target, fn, self.scopes[-1], tuple(self.guards), self.loops > 0, receiver, method)
        self.m.calls.append(site)
        self.m.scope_of[id(node)] = self.scopes[-1]
        if fn is not None:
            fn.calls.append(site)
        else:
            self.m.module_calls.append(site)


def _terminates(block: cst.BaseSuite) -> bool:
    """True when a block always leaves the function (its last statement returns or raises)."""
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)
    if isinstance(last, cst.SimpleStatementSuite):
        return any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)
    return False


def _directly_in(cls: ClassInfo, fn: FunctionInfo) -> bool:
    """True when ``cls`` is nested inside ``fn`` (so a def inside it is a method of cls)."""
    return fn.node is not cls.node and cls.node is not None and contains(fn.node, cls.node)


def _scope_calls(expr: cst.BaseExpression):
    if isinstance(expr, cst.Call):
        yield expr
    elif isinstance(expr, cst.IfExp):
        yield from _scope_calls(expr.body)
        yield from _scope_calls(expr.orelse)


def _constructor(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The class constructed by ``X(...)`` or ``nn.ModuleList([X(...) for ...])``."""
    found = _constructors(value)
    return found[0] if found else None


def _constructors(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """Every class ``value`` may construct: ``X(...)``, both arms of ``A(...) if c else B(...)``, and the
    elements of a container (``nn.ModuleList([X(...) for ...])``, a generator, a list literal)."""
    if isinstance(value, cst.IfExp):
        return _constructors(value.body) + _constructors(value.orelse)
    if not isinstance(value, cst.Call):
        return []
    if value.args and isinstance(value.args[0].value, (cst.ListComp, cst.GeneratorExp, cst.List)):
        inner = value.args[0].value
        elements = [e.value for e in inner.elements] if isinstance(inner, cst.List) else [inner.elt]
        found = [c for e in elements for c in _constructors(e)]
        if found:
            return found
    return [value.func]


def _assign_key(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Attribute):
        return dotted(target)
    if isinstance(target, cst.Subscript) and len(target.slice) == 1:
        base = dotted(target.value)
        idx = target.slice[0].slice
        if base is not None and isinstance(idx, cst.Index):
            key = string_value(idx.value) or dotted(idx.value)
            if key is not None:
                return f"{base}[{key}]"
    return None


def _generic_origin(arg: cst.Arg) -> cst.BaseExpression:
    """A base class as written, less its type arguments: ``Base`` of ``class Yolo(Base[Tensor, Meta])`` (the class
    derives from ``Base`` all the same)."""
    return arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value

