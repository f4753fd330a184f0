"""Module summaries: the compact facts other files ask of a module, taken without LibCST.

A project-wide question ("which modules compile something?") used to parse, with LibCST, every file
whose bytes contain a marker: in a real Ascend repository that is most of the tree. The answer is
now narrowed in three steps, each a superset of the next, so the files that reach the full model are
exactly the ones that could matter:

1. a byte search (``Project.may_contain``), as before;
2. a byte-level pattern (:func:`streamlint.model.bytescan.may_compile_bytes`): the word ``compile`` /
   ``cache_compile`` where a call or an alias may use it (not in a comment, prose or a module path),
   other than ``re.compile`` in a file that never rebinds ``re``;
3. a summary from the standard ``ast`` module (:func:`summarize`, several times faster than LibCST),
   computed once per content and cached by the content's sha256 (:class:`SummaryStore`, kept in the
   project cache): does the module call a name that can resolve to a compile API? Names are resolved
   with the model's scoping rules (``FileModel.resolve_dotted``: a function's parameters and plain
   locals resolve to nothing, ``self`` in a method names the class); what depends on the module's own
   name (``self.compile`` in a class, a relative import) is kept as a relative name and decided by
   :meth:`ModuleSummary.may_compile` when the project asks.

Only modules whose summary says yes are parsed with LibCST and given to
:func:`streamlint.model.compile.compile_site`, which decides exactly as before. Step 3 is
conservative: a call resolves to a compile API (``FileModel.resolve`` then ``apis.canonical``) only
when the last part of its dotted callee, or of the import / assignment alias the callee names, is the
last part of such an API's name; the summary keeps every call of that shape.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from typing import Callable

from streamlint.model import apis
from streamlint.model.bytescan import COMPILE_LEAVES, may_call_bytes, may_compile_bytes
from streamlint.model.compilecalls import _may_call_compile, _walk, is_compile_api

SUMMARY_FORMAT = 6  # bump when what a summary holds or how it is computed changes


@dataclass(frozen=True)
class ModuleSummary:
    """The facts of one module's content that project-wide questions ask (see the module docstring).
    ``calls`` is None when the stdlib parser rejects the content: then nothing is excluded."""

    calls: frozenset[str] | None  # last parts of every name a call in the module may resolve to
    compiles: bool  # calls a name that may resolve to torch.compile / cache_compile, whatever the module
    # names relative to the module (``Runner.compile`` for ``self.compile(...)`` in class Runner) that a
    # call resolves to: a compile site when ``<module>.<name>`` is a compile API (see may_compile)
    compile_names: frozenset[str] = frozenset()
    # may a compile site of the module have known execution paths (``CompileSite.modes``)? False only when
    # every call that may compile is ``….compile(...)`` (``compile`` bound by no alias in the module) whose
    # ``backend=`` is absent or a string other than "npu" / "npugraph_ex": ``compile.compile_site`` gives
    # such a site no modes, so it reaches no execution path (``PathIndex._reach``)
    moded: bool = True
    # a call that may compile, inside a function, compiles something that may be one of the function's
    # parameters (``def compile_model(model): torch.compile(model)``): what is compiled is found in the
    # callers' modules (``compile.caller_arguments``), not named in this one (``PathIndex.is_graph_entry``)
    compiles_callers_args: bool = True
    # the names of every class-level annotated field (``name: T`` or ``name: T = v`` in a class body, any class of
    # the module, nested ones too): a superset of the fields ``syntax.class_field_annotation`` finds in it
    class_fields: frozenset[str] = frozenset()
    # the names of the functions the module defines at its top level (``def name(...)`` directly in the module
    # body, decorated or not, async or not): each one is a module function of the model (``FunctionInfo`` without
    # class or parent), whatever else the module defines under that name
    module_functions: frozenset[str] = frozenset()
    # every name the module may bind outside function bodies (see :func:`_bound_outside_functions`): a superset of the
    # names ``FileModel`` records for the module (``names``, its module functions and top-level classes)
    bound: frozenset[str] = frozenset()
    # the modules of its ``from m import *`` statements, in the order of the text, as written (``..m``: relative, see
    # :meth:`star_modules`), wherever they are: ``FileModel.star_imports`` before the module's name is applied
    stars: tuple[str, ...] = ()
    # last parts a call may also resolve to through a name bound to one element of a tuple / list assignment
    # (``make, b = build_a.Maker, 2``: ``FileModel`` binds ``make`` to ``build_a.Maker``), beyond ``calls``
    element_calls: frozenset[str] = frozenset()

    def may_call(self, leaf: str) -> bool:
        return self.calls is None or leaf in self.calls

    def may_annotate_field(self, name: str) -> bool:
        """May a class of the module annotate a class-level field ``name``? (``handoffs._field_recordable``
        asks before parsing a module that only spells ``name:``, as any signature or dict literal does)"""
        return self.calls is None or name in self.class_fields

    def defines_function(self, name: str) -> bool:
        """Does the module certainly define a module function ``name`` (``duckmethods.method_definitions`` asks
        before parsing a module whose bytes spell ``def name(``: one that does is not one class's method)?"""
        return self.calls is not None and name in self.module_functions

    def may_resolve_call(self, leaf: str) -> bool:
        """Could a call of the module resolve (``FileModel.resolve``) to a name whose last part is ``leaf``? (``calls``
        with the names bound to tuple / list elements: ``handedevents.constructions`` asks before parsing a module
        whose bytes spell ``Leaf(``, as every subclass statement of a base class does)"""
        return self.calls is None or leaf in self.calls or leaf in self.element_calls

    def may_bind(self, name: str) -> bool:
        """May the model of the module bind ``name`` (an import, assignment, ``def`` or ``class`` outside function
        bodies)? ``Project._star_binds_nothing`` asks before parsing a star-imported module that only spells the name
        (in a docstring: ``from_pretrained`` examples)."""
        return self.calls is None or name in self.bound

    def star_modules(self, module_name: str, is_package: bool) -> list[str]:
        """``FileModel.star_imports`` of the module under that name (``visit_ImportFrom``'s reading of a relative
        import; a star import naming no module, ``from . import *`` at the top, is not one)."""
        found = []
        for written in self.stars:
            level = len(written) - len(written.lstrip("."))
            module = written[level:]
            if level:
                parts = module_name.split(".")
                keep = len(parts) - level + (1 if is_package else 0)
                base = ".".join(parts[: max(keep, 0)])
                module = f"{base}.{module}" if module and base else (module or base)
            if module:
                found.append(module)
        return found

    def may_compile(self, module_name: str, is_package: bool = False) -> bool:
        """May the module, under that name, hold a compile site?"""
        if self.compiles:
            return True
        for name in self.compile_names:
            full = _absolute(name, module_name, is_package) if name.startswith(".") else f"{module_name}.{name}"
            if full is not None and is_compile_api(full):
                return True
        return False

    def to_json(self) -> list:
        return [None if self.calls is None else sorted(self.calls), int(self.compiles), sorted(self.compile_names),
                int(self.moded), int(self.compiles_callers_args), sorted(self.class_fields),
                sorted(self.module_functions), sorted(self.bound), list(self.stars),
                sorted(self.element_calls)]

    @classmethod
    def from_json(cls, value: object) -> "ModuleSummary | None":
        if not (isinstance(value, list) and len(value) == 10 and all(value[i] in (0, 1) for i in (1, 3, 4))):
            return None
        calls, names, fields, functions, bound, stars = value[0], value[2], value[5], value[6], value[7], value[8]
        elements = value[9]
        flags = (bool(value[3]), bool(value[4]))
        if not all(isinstance(v, list) and all(isinstance(n, str) for n in v)
                   for v in (names, fields, functions, bound, stars, elements)):
            return None
        rest = (frozenset(fields), frozenset(functions), frozenset(bound), tuple(stars), frozenset(elements))
        if calls is None:
            return cls(None, bool(value[1]), frozenset(names), *flags, *rest)
        if not isinstance(calls, list) or not all(isinstance(c, str) for c in calls):
            return None
        return cls(frozenset(calls), bool(value[1]), frozenset(names), *flags, *rest)


def _leaf(expr: ast.expr | None) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


# canonical spellings whose last part differs from the spelling's (`torchair.ops.NpuStreamSwitch`)
_RENAMES: dict[str, set[str]] = {}
for _alias, _target in apis._EXACT_ALIASES.items():
    _a, _t = _alias.rsplit(".", 1)[-1], _target.rsplit(".", 1)[-1]
    if _a != _t:
        _RENAMES.setdefault(_a, set()).add(_t)


def summarize(data: bytes, tree: ast.Module | None = None) -> ModuleSummary:
    """The summary of a module's content (never raises: content ``ast`` cannot parse keeps everything).
    ``tree``: the stdlib tree of exactly that content, parsed already (the linted file's own, from the
    engine's ``ast`` guard: the same tree, so it is not parsed again)."""
    if tree is None:
        found = _summarize_in_parts(data)
        if found is not None:
            return found
    try:
        if tree is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the linted code's own warnings (invalid escapes …)
                tree = ast.parse(data)
        nodes = _walk(tree)  # one walk, shared by the questions below
        called: set[str] = set()
        bindings: dict[str, set[str]] = {}
        elements: dict[str, set[str]] = {}
        _call_facts(nodes, called, bindings, elements)
        calls = _closed(set(called), bindings)
        element_calls = _element_calls(called, bindings, elements, calls)
        compiles, names = _may_call_compile(tree) if calls & COMPILE_LEAVES else (False, frozenset())
        bound = _aliases(nodes) if compiles or names else {}
        moded = (compiles or bool(names)) and _may_have_modes(nodes, bound)
        from_callers = (compiles or bool(names)) and _compiles_parameters(nodes, bound)
        fields = _class_fields(nodes)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ModuleSummary(None, True)
    return ModuleSummary(calls, compiles, names, moded, from_callers, fields, _module_functions(tree),
                         _bound_outside_functions(tree), _star_imports(nodes), element_calls)


def _class_fields(nodes: list[ast.AST]) -> frozenset[str]:
    return frozenset(stmt.target.id for node in nodes if isinstance(node, ast.ClassDef) for stmt in node.body
                     if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name))


def _module_functions(tree: ast.Module) -> frozenset[str]:
    return frozenset(node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))


_BINDING_PATTERNS = (ast.MatchAs, ast.MatchStar)


def _bound_outside_functions(tree: ast.AST) -> frozenset[str]:
    """Every name bound outside the bodies of functions: assignment, loop, ``with``, comprehension, walrus, ``except``
    and pattern targets, imported names (``import a.b``: ``a``), ``def`` and ``class`` names (methods and nested
    classes too), at any depth of statements and class bodies. A superset of what ``FileModel`` binds for the module
    (its module-level ``names``: imports and assignments outside functions, class bodies included; its module
    functions; its top-level classes): a name it binds is spelled at one of these places."""
    found: set[str] = set()
    stack = [tree]
    while stack:
        for child in ast.iter_child_nodes(stack.pop()):
            kind = child.__class__
            if kind is ast.Name:
                if isinstance(child.ctx, ast.Store):
                    found.add(child.id)
                continue
            if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                found.add(child.name)  # (its decorators, defaults and annotations run outside its body)
                stack.extend(child.decorator_list)
                stack.append(child.args)
                if child.returns is not None:
                    stack.append(child.returns)
                continue
            if kind is ast.ClassDef:
                found.add(child.name)
            elif kind is ast.alias:
                found.add((child.asname or child.name).partition(".")[0])
            elif kind is ast.ExceptHandler and child.name:
                found.add(child.name)
            elif isinstance(child, _BINDING_PATTERNS) and child.name:
                found.add(child.name)
            elif kind is ast.MatchMapping and child.rest:
                found.add(child.rest)
            stack.append(child)
    return frozenset(found)


def _element_calls(called: set[str], bindings: dict[str, set[str]], elements: dict[str, set[str]],
                   calls: frozenset[str]) -> frozenset[str]:
    """What the calls may also resolve to through the names bound to tuple / list elements (see ``element_calls``)."""
    if not elements:
        return frozenset()
    merged = {name: set(found) for name, found in bindings.items()}
    for name, found in elements.items():
        merged.setdefault(name, set()).update(found)
    return _closed(set(called), merged) - calls


def _star_imports(nodes: list[ast.AST]) -> tuple[str, ...]:
    """The modules of the ``from m import *`` statements among ``nodes`` (anywhere), in the order of the text."""
    found = [node for node in nodes if node.__class__ is ast.ImportFrom and node.names[0].name == "*"]
    found.sort(key=lambda node: (node.lineno, node.col_offset))
    return tuple("." * node.level + (node.module or "") for node in found)


def _summarize_in_parts(data: bytes) -> ModuleSummary | None:
    """:func:`summarize` of a large module without its whole stdlib tree (see :class:`SummaryParts`); None when not
    done: a small module, a text that ``ast.parse(data)`` might decode otherwise (a byte order mark or an encoding
    declaration: the parts are parsed from the UTF-8 text), not cut, or a module that may compile."""
    from streamlint import pieces

    if len(data) <= 2 * pieces.PIECE_CHARS or data.startswith(b"\xef\xbb\xbf") or b"coding" in b"\n".join(data.split(b"\n", 2)[:2]) \
            or may_compile_bytes(data):  # (would stop at its compile call: whole)
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    parts = SummaryParts()
    try:
        return parts.summary() if pieces.stdlib_skeleton(text, parts.add) is not None else None
    except MayCompile:
        return None


class MayCompile(Exception):
    """Raised by :meth:`SummaryParts.add`: the module may call a compile API (its summary needs the whole tree)."""


class SummaryParts:
    """:func:`summarize` of a module given as the stdlib trees of its top-level statements, part after part
    (``pieces.stdlib_skeleton``: a large module's whole stdlib tree is never held). Every fact of the summary is a
    node's own (a callee, an alias's binding, a class's annotated fields) and adds up over the parts, except what a
    module that may call a compile API asks of the whole tree: None for such a module (the caller parses it whole)."""

    def __init__(self) -> None:
        self.called: set[str] = set()
        self.bindings: dict[str, set[str]] = {}
        self.fields: set[str] = set()
        self.functions: set[str] = set()
        self.bound: set[str] = set()
        self.stars: list[str] = []
        self.elements: dict[str, set[str]] = {}

    def add(self, tree: ast.Module) -> None:
        """Take one part's facts; :class:`MayCompile` once a call names a compile leaf (the caller parses it whole)."""
        nodes = _walk(tree)
        _call_facts(nodes, self.called, self.bindings, self.elements)
        self.fields.update(_class_fields(nodes))
        self.functions.update(_module_functions(tree))  # (a part's body: top-level statements of the module)
        self.bound.update(_bound_outside_functions(tree))
        self.stars.extend(_star_imports(nodes))  # (the parts come in the order of the text)
        if self.called & COMPILE_LEAVES:
            raise MayCompile

    def summary(self) -> ModuleSummary | None:
        calls = _closed(set(self.called), self.bindings)
        if calls & COMPILE_LEAVES:
            return None
        elements = _element_calls(self.called, self.bindings, self.elements, calls)
        return ModuleSummary(calls, False, frozenset(), False, False, frozenset(self.fields), frozenset(self.functions),
                             frozenset(self.bound), tuple(self.stars), elements)


def _names_in(node: ast.AST | None) -> set[str]:
    return {n.id for n in _walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def _aliases(nodes: list[ast.AST]) -> dict[str, set[str]]:
    """Name -> last parts of what it may be bound to (import as, assignment, loop / comprehension / with
    target; ``""`` for an assignment from something else), anywhere in the module."""
    bound: dict[str, set[str]] = {}
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for item in node.names:
                if item.asname:
                    bound.setdefault(item.asname, set()).add(item.name.rsplit(".", 1)[-1])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            source = _leaf(node.value)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in (n.id for n in _walk(target) if isinstance(n, ast.Name)):
                    bound.setdefault(name, set()).add(source or "")
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.withitem)):
            target = node.optional_vars if isinstance(node, ast.withitem) else node.target
            source = node.context_expr if isinstance(node, ast.withitem) else node.iter
            sources = {n.attr for n in _walk(source) if isinstance(n, ast.Attribute)}
            sources |= {n.id for n in _walk(source) if isinstance(n, ast.Name)}
            for name in (n.id for n in _walk(target) if isinstance(n, ast.Name)) if target is not None else ():
                bound.setdefault(name, set()).update(sources)
    return bound


def _alias_leaves(bound: dict[str, set[str]]) -> set[str]:
    """The compile leaves and every alias that may name one, transitively (aliases of aliases, any order)."""
    leaves = set(COMPILE_LEAVES)
    changed = True
    while changed:
        changed = False
        for name, sources in bound.items():
            if name not in leaves and sources & leaves:
                leaves.add(name)
                changed = True
    return leaves


def _compiles_parameters(nodes: list[ast.AST], bound: dict[str, set[str]]) -> bool:
    """May a call that may compile (its callee, or what an alias of it names, ends in a compile leaf) compile
    one of its function's parameters? A superset of when ``compile._targets`` asks the callers
    (``caller_arguments``): the compiled expression (first positional argument, ``model=`` / ``func=``),
    widened through every assignment in the function to a name it mentions, mentions a parameter (the
    leading ``self`` / ``cls`` of a method excepted: its callers never bind it)."""
    leaves = _alias_leaves(bound)
    methods = {id(stmt) for cls in nodes if isinstance(cls, ast.ClassDef) for stmt in cls.body}
    for fn in nodes:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = fn.args
        params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        params += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        if id(fn) in methods and params[:1] in (["self"], ["cls"]):
            params = params[1:]
        if not params:
            continue
        inner = _walk(fn)
        if not any(isinstance(call, ast.Call) and _leaf(call.func) in leaves for call in inner):
            continue  # no call that may compile: nothing to widen
        assigns: list[tuple[set[str], set[str]]] = []
        for node in inner:
            if isinstance(node, ast.Assign):
                assigns.append((set().union(*map(_names_in, node.targets)), _names_in(node.value)))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                assigns.append((_names_in(node.target), _names_in(node.value)))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                assigns.append((_names_in(node.target), _names_in(node.iter)))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                assigns.append((_names_in(node.optional_vars), _names_in(node.context_expr)))
        for call in inner:
            if not isinstance(call, ast.Call) or _leaf(call.func) not in leaves:
                continue
            positional = [a for a in call.args if not isinstance(a, ast.Starred)]
            compiled = positional[0] if positional else next(
                (k.value for k in call.keywords if k.arg in ("model", "func")), None)
            if compiled is None:
                continue
            names = _names_in(compiled)
            grown = True
            while grown:
                grown = False
                for targets, values in assigns:
                    if targets & names and not values <= names:
                        names |= values
                        grown = True
            if names.intersection(params):
                return True
    return False


_MODED_BACKENDS = frozenset({"npu", "npugraph_ex"})  # compile._backend's string backends with a mode


def _may_have_modes(nodes: list[ast.AST], bound: dict[str, set[str]]) -> bool:
    """See :attr:`ModuleSummary.moded`. A call may compile when its callee's last part, or the last part
    of what an alias (import as, assignment, loop variable) of it names, transitively, is a compile
    leaf (the superset :func:`summarize` keeps)."""
    if "compile" in bound:
        return True  # `compile` itself rebound: it may name cache_compile
    leaves = _alias_leaves(bound)
    for call in nodes:
        if not isinstance(call, ast.Call) or _leaf(call.func) not in leaves:
            continue
        if _leaf(call.func) != "compile":
            return True  # cache_compile, or an alias: may have modes
        backend = next((k.value for k in call.keywords if k.arg == "backend"), None)
        if backend is None:
            continue
        if not (isinstance(backend, ast.Constant) and isinstance(backend.value, str)) \
                or backend.value in _MODED_BACKENDS:
            return True
    return False


def _absolute(name: str, module_name: str, is_package: bool) -> str | None:
    """``FileModel``'s reading of a relative import (``..pkg.name``) in module ``module_name``."""
    level = len(name) - len(name.lstrip("."))
    module, _, leaf = name[level:].rpartition(".")
    parts = module_name.split(".")
    keep = len(parts) - level + (1 if is_package else 0)
    base = ".".join(parts[: max(keep, 0)])
    module = f"{base}.{module}" if module and base else (module or base)
    return f"{module}.{leaf}" if module else None


_CALLED_KINDS = frozenset({ast.Call, ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.For,
                           ast.AsyncFor})


def _called_names(nodes: list[ast.AST]) -> frozenset[str]:
    """Last parts of every qualified name a call of the module may resolve to (``FileModel.resolve``):
    the callee's own last part, and through aliases (imports as, assignments of names, loop variables
    over attributes) the last part of what the alias is bound to, transitively."""
    bindings: dict[str, set[str]] = {}  # bound name -> last parts of what it may be bound to
    called: set[str] = set()
    _call_facts(nodes, called, bindings)
    return _closed(called, bindings)


def _call_facts(nodes: list[ast.AST], called: set[str], bindings: dict[str, set[str]],
                elements: "dict[str, set[str]] | None" = None) -> None:
    """What :func:`_called_names` reads of each node (each node's own: the facts of a module's parts add up);
    ``elements``: the names bound to an element of a tuple / list assignment (``FileModel._assign_target``)."""
    interesting = _CALLED_KINDS
    for node in nodes:
        kind = node.__class__
        if kind not in interesting:  # (a set test first: most nodes are none of these)
            continue
        if kind is ast.Call:
            leaf = _leaf(node.func)
            if leaf is not None:
                called.add(leaf)
        elif kind is ast.Import or kind is ast.ImportFrom:
            for alias in node.names:
                if alias.asname:
                    bindings.setdefault(alias.asname, set()).add(alias.name.rsplit(".", 1)[-1])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            source = _leaf(node.value)
            if elements is not None and kind is ast.Assign:
                for target in node.targets:
                    _element_bindings(target, node.value, elements)
            if source is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    bindings.setdefault(target.id, set()).add(source)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            sources = {n.attr for n in _walk(node.iter) if isinstance(n, ast.Attribute)}
            for target in _walk(node.target):
                if isinstance(target, ast.Name):
                    bindings.setdefault(target.id, set()).update(sources)


def _element_bindings(target: ast.expr, value: ast.expr, elements: dict[str, set[str]]) -> None:
    """``FileModel._assign_target``'s element-wise binding of a tuple / list target to a tuple / list value of the
    same length, neither starred: each name target to the last part of its element, nested ones too."""
    if not isinstance(target, (ast.Tuple, ast.List)) or not isinstance(value, (ast.Tuple, ast.List)) \
            or len(target.elts) != len(value.elts) \
            or any(isinstance(el, ast.Starred) for el in (*target.elts, *value.elts)):
        return
    for el, item in zip(target.elts, value.elts):
        if isinstance(el, ast.Name):
            leaf = _leaf(item)
            if leaf is not None:
                elements.setdefault(el.id, set()).add(leaf)
        else:
            _element_bindings(el, item, elements)


def _closed(called: set[str], bindings: dict[str, set[str]]) -> frozenset[str]:
    stack = list(called)
    while stack:  # aliases of aliases (`c = torch.compile; cc = c`), in any order
        for source in bindings.get(stack.pop(), ()):
            if source not in called:
                called.add(source)
                stack.append(source)
    for name in list(called):
        called.update(_RENAMES.get(name, ()))
    return frozenset(called)


class SummaryStore:
    """Summaries by content sha256: filled during a run, loaded from and saved to the project cache
    (:class:`streamlint.cache.SummaryCache`) so that a later run of any file reuses them."""

    def __init__(self, entries: dict[str, ModuleSummary] | None = None) -> None:
        self.entries: dict[str, ModuleSummary] = dict(entries or {})
        # reads the project cache's summaries, on the first question (a run that asks none reads nothing)
        self.source: Callable[[], dict[str, ModuleSummary]] | None = None
        self.used: set[str] = set()  # digests asked for in this run
        self.computed = 0  # summaries made in this run (not found in the store)
        self.dirty = False
        self._new: list[str] = []  # digests computed since the last take_new()
        # content sha256 -> its stdlib tree, parsed already (the file being linted: Engine._lint_file): the
        # summary of that content, if asked for, is taken from it instead of a parse of its own
        self.trees: dict[str, ast.Module] = {}
        # content sha256 -> its summary, taken already from such a tree before the tree went (a large module:
        # Engine._lighten); used like ``trees``, so a run counts and saves it as one it computed
        self.made: dict[str, ModuleSummary] = {}

    def get(self, digest: str, data: bytes) -> ModuleSummary:
        if self.source is not None:
            source, self.source = self.source, None
            self.merge(source())
        self.used.add(digest)
        found = self.entries.get(digest)
        if found is None:
            found = self.made.get(digest)
            if found is None:
                found = summarize(data, self.trees.get(digest))
            self.entries[digest] = found
            self.computed += 1
            self.dirty = True
            self._new.append(digest)
        return found

    def parsed_before(self, digest: str) -> bool:
        """Did the stdlib parser accept this content when its summary was made (in this run, or in an earlier one
        and kept in the project cache)? False when no summary of it is known: nothing is parsed to answer. The
        engine's ``ast`` guard of a module parsed only for another file's question is skipped when this is true
        (``Engine.parse``: the same content parses the same way). A summary found counts as used (the cache keeps
        it when it prunes)."""
        if self.source is not None:
            source, self.source = self.source, None
            self.merge(source())
        found = self.entries.get(digest)
        if found is None:
            return False
        self.used.add(digest)
        return found.calls is not None

    def learn(self, digest: str, data: bytes, tree: ast.Module) -> None:
        """The summary of a content whose stdlib tree the engine parsed anyway (a module parsed for another file's
        question), taken from that tree when none is known: saved with the run's, so that a later parse of the same
        content skips the ``ast`` guard (``parsed_before``); counted as used (the cache keeps it when it prunes)."""
        self.used.add(digest)
        if digest not in self.entries:
            self.entries[digest] = summarize(data, tree)
            self.computed += 1
            self.dirty = True
            self._new.append(digest)

    def take_new(self) -> dict[str, ModuleSummary]:
        """The summaries computed since the last call (a pool worker sends them to the parent, which
        saves them with its own)."""
        new, self._new = self._new, []
        return {digest: self.entries[digest] for digest in new}

    def merge(self, entries: dict[str, ModuleSummary]) -> None:
        """Summaries read from the project cache (the ones of this run win)."""
        for digest, summary in entries.items():
            self.entries.setdefault(digest, summary)

    def add(self, entries: dict[str, ModuleSummary]) -> None:
        """Summaries computed in this run by another process (a pool worker): saved with this store's."""
        for digest, summary in entries.items():
            if digest not in self.entries:
                self.entries[digest] = summary
                self.dirty = True
            self.used.add(digest)


__all__ = ["COMPILE_LEAVES", "ModuleSummary", "MayCompile", "SummaryParts", "SummaryStore", "may_call_bytes", "may_compile_bytes", "summarize"]
