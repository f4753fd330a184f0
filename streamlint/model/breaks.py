"""Graph-break analysis (domain.md §3): which statements of a function make Dynamo break the graph.

A *break* is a call from the catalogue (``print``, logging, ``warnings.warn``, ``time.*``, ``open``,
``torch.save``, ``torch._dynamo.graph_break`` … — :data:`apis.GRAPH_BREAK_CALLS`), a logger method, a
``Tensor.item()`` / ``.tolist()``, a call of a project function decorated with
``@torch.compiler.disable`` / ``@torch._dynamo.disable``, or data-dependent control flow: an
``if``/``while``/``assert``/ternary/``and``/``or`` whose tested value is a tensor.

Tensor-ness is a light, flow-insensitive inference (:class:`TensorTyper`): torch / torch_npu calls,
tensor methods, arithmetic and comparisons of tensors, parameters annotated ``torch.Tensor``,
tensor attributes (``nn.Parameter``, ``register_buffer``, tensor fields of annotated dataclasses),
outputs of ``nn.Module`` calls (``self.gate(x)``) and names assigned from any of these. Shape, dtype,
device, ``dim()``, ``numel()``, ``is_*`` and identity tests are never tensors. When unsure, an
expression is *not* a tensor (precision first).

Regions that Dynamo never traces are skipped: branches guarded off by ``torch.compiler.is_compiling()``
(and the other :data:`Role.IS_COMPILING` spellings), and calls of functions registered through
``torch._dynamo.config.reorderable_logging_functions.add(fn)`` in the same module or in a project module
that imports it (directly or transitively).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.finding import Location
from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import CallSite, FunctionInfo, ScopeSite
from streamlint.model.syntax import node_code
from streamlint.model.tensors import TensorTyper
from streamlint.model.uses import bind_arguments
from streamlint.model.walk import walk

if TYPE_CHECKING:
    from streamlint.model.project import Project
    from streamlint.model.uses import ScopeUse


# ---------------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Break:
    """One graph-breaking construct."""

    node: cst.CSTNode  # the call, or the if/while/assert statement, ternary, and/or expression
    what: str  # e.g. "`print()`", "data-dependent `if` on a tensor"
    file: FileModel
    function: FunctionInfo | None
    scope: ScopeSite | None  # innermost `with` item around it (same function)
    certain: bool = True  # False: the receiver of .item()/.tolist() is not known to be a tensor

    def location(self) -> Location:
        return Location(self.file.path, self.file.span(self.node), self.what)


@dataclass(frozen=True)
class LiveCall:
    """A call made in code Dynamo traces (not guarded off), with the `with` item around it."""

    site: CallSite
    scope: ScopeSite | None


@dataclass
class FunctionBreaks:
    function: FunctionInfo
    breaks: list[Break] = field(default_factory=list)
    calls: list[LiveCall] = field(default_factory=list)
    break_calls: set[int] = field(default_factory=set)  # id(call node) of calls that are breaks themselves


@dataclass(frozen=True)
class Reach:
    """A break reached from a function through project calls."""

    brk: Break
    via: tuple[str, ...]  # qualified names of the functions traversed, outermost first


_LOGGER_NAMES = apis.LOGGER_NAMES


# --------------------------------------------------------------------------------------- analysis


class BreakAnalysis:
    """Graph breaks of project functions, computed lazily and cached per project."""

    def __init__(self, project: "Project") -> None:
        self.project = project
        self._facts: dict[int, tuple[FunctionInfo, FunctionBreaks]] = {}
        self._reach: dict[int, tuple[FunctionInfo, Reach | None]] = {}
        self._param_breaks: dict[int, tuple[FunctionInfo, dict[str, Break]]] = {}
        self._sites: dict[int, tuple[FileModel, dict[int, CallSite]]] = {}
        self._loggers: dict[int, tuple[FileModel, frozenset[str]]] = {}
        self._typers: dict[int, tuple[FunctionInfo, "TensorTyper"]] = {}
        self._registrations: list[tuple[frozenset[str], frozenset[str]]] | None = None
        self._cuts = 0
        self.known: dict[str, FileModel | None] = {}  # project files seen when this analysis was current
        self._scopes: dict[int, tuple[ScopeSite, "ScopeUse | None"]] = {}

    # ---- per-file helpers
    def site(self, file: FileModel, call: cst.Call) -> CallSite | None:
        entry = self._sites.get(id(file))
        if entry is None or entry[0] is not file:
            entry = (file, {id(s.node): s for s in file.calls})
            self._sites[id(file)] = entry
        return entry[1].get(id(call))

    def typer(self, file: FileModel, fn: FunctionInfo) -> "TensorTyper":
        entry = self._typers.get(id(fn))
        if entry is None or entry[0] is not fn:
            entry = (fn, TensorTyper(self.project, file, fn))
            self._typers[id(fn)] = entry
        return entry[1]

    def module_loggers(self, file: FileModel) -> frozenset[str]:
        """Module-level names bound to a logger (``logger = logging.getLogger(__name__)``)."""
        entry = self._loggers.get(id(file))
        if entry is None or entry[0] is not file:
            names: set[str] = set()
            for stmt in file.module.body:
                if not isinstance(stmt, cst.SimpleStatementLine):
                    continue
                for small in stmt.body:
                    if isinstance(small, (cst.Assign, cst.AnnAssign)) and isinstance(small.value, cst.Call):
                        factory = file.resolve(small.value.func, None)
                        if factory is not None and apis.canonical(factory) in apis.LOGGER_FACTORIES:
                            targets = ([t.target for t in small.targets] if isinstance(small, cst.Assign)
                                       else [small.target])
                            names.update(t.value for t in targets if isinstance(t, cst.Name))
            entry = (file, frozenset(names))
            self._loggers[id(file)] = entry
        return entry[1]

    def reorderable(self, file: FileModel) -> frozenset[str]:
        """Qualified names registered in ``torch._dynamo.config.reorderable_logging_functions`` by a module
        that is ``file`` itself or imports it (directly or transitively) — registration is process-global
        but only happens when the registering module runs."""
        self.project.note_wide_read()
        if self._registrations is None:
            regs: list[tuple[frozenset[str], frozenset[str]]] = []
            for model in self.project.files_containing((b"reorderable_logging_functions",)):
                names: set[str] = set()
                for site in model.calls:
                    spec = apis.lookup(site.target)
                    if spec is None or spec.role is not Role.REORDERABLE_LOGGING:
                        continue
                    for arg in site.node.args:
                        name = model.resolve(arg.value, site.function)
                        if name is not None:
                            names.add(apis.canonical(name))
                if names:
                    regs.append((frozenset(names), self._import_closure(model)))
            self._registrations = regs
        path = os.path.abspath(file.path)
        found: set[str] = set()
        for names, closure in self._registrations:
            if path in closure:
                found |= names
        return frozenset(found)

    def _import_closure(self, root: FileModel, limit: int = 400) -> frozenset[str]:
        seen = {os.path.abspath(root.path)}
        queue = [root]
        while queue and len(seen) < limit:
            model = queue.pop()
            for qualname in dict.fromkeys(model.names.values()):  # source order: the limit cuts deterministically
                parts = qualname.split(".")
                for cut in range(len(parts), 0, -1):
                    mod = self.project.find_module(".".join(parts[:cut]), model)
                    if mod is not None:
                        key = os.path.abspath(mod.path)
                        if key not in seen:
                            seen.add(key)
                            queue.append(mod)
                        break
        return frozenset(seen)

    # ---- per-function facts
    def facts(self, file: FileModel, fn: FunctionInfo) -> FunctionBreaks:
        entry = self._facts.get(id(fn))
        if entry is None or entry[0] is not fn:
            walker = _Walker(self, file, fn)
            walker.run()
            entry = (fn, walker.out)
            self._facts[id(fn)] = entry
        return entry[1]

    def call_break(self, file: FileModel, site: CallSite, fn: FunctionInfo | None) -> tuple[str, bool] | None:
        """If this call is itself a graph break: (description, certain)."""
        target = site.target
        if target is not None:
            canon = apis.canonical(target)
            if canon in self.reorderable(file):
                return None
            if canon in apis.GRAPH_BREAK_CALLS:
                return f"`{apis.GRAPH_BREAK_CALLS[canon]}`", True
            if canon.startswith(apis.GRAPH_BREAK_MODULE_PREFIXES):
                return f"`{canon}()`", True
        method = site.method
        if method is not None and site.receiver is not None:
            if method in apis.LOGGER_METHODS and self._is_logger(file, site.receiver, fn):
                return f"`{file.code(site.node.func)}()` (logging)", True
            if method in apis.TENSOR_SYNC_METHODS and not site.node.args:
                receiver = site.receiver
                if isinstance(receiver, cst.Name) and receiver.value in ("self", "cls"):
                    return None
                if fn is not None and self.typer(file, fn).is_tensor(receiver):
                    return f"`Tensor{apis.TENSOR_SYNC_METHODS[method]}`", True
                if method != "item" or (fn is not None and self.typer(file, fn).known_non_tensor(receiver)):
                    return None  # `.tolist()` is common on numpy arrays and lists: only on known tensors
                return f"`{apis.TENSOR_SYNC_METHODS[method]}` (on a value that is probably a tensor)", False
        found = self.project.call_target(file, site)
        if found is not None:
            callee, mod = found
            for deco in callee.decorators:
                spec = apis.lookup(deco)
                if spec is not None and spec.role is Role.COMPILER_DISABLE:
                    return f"calling `{callee.qualname}` (decorated with `@{deco}`)", True
        return None

    def _is_logger(self, file: FileModel, receiver: cst.BaseExpression, fn: FunctionInfo | None) -> bool:
        if isinstance(receiver, cst.Call):
            factory = file.resolve(receiver.func, fn)
            return factory is not None and apis.canonical(factory) in apis.LOGGER_FACTORIES
        name = dotted(receiver)
        if name is None:
            return False
        last = name.rsplit(".", 1)[-1]
        if last in _LOGGER_NAMES:
            return True
        if "." in name:
            return False
        if name in self.module_loggers(file) and (fn is None or name not in fn.locals):
            return True
        imported = file.names.get(name)
        if imported and "." in imported:
            module, _, attr = imported.rpartition(".")
            mod = self.project.find_module(module, file)
            if mod is not None and attr in self.module_loggers(mod):
                return True
        return False

    # ---- transitive
    def reached(self, file: FileModel, fn: FunctionInfo, _active: set[int] | None = None) -> Reach | None:
        """The first graph break in ``fn`` or in a project function it calls (cycles handled)."""
        entry = self._reach.get(id(fn))
        if entry is not None and entry[0] is fn:
            return entry[1]
        active = _active if _active is not None else set()
        if id(fn) in active or len(active) > 24:
            self._cuts += 1
            return None
        cuts = self._cuts
        active.add(id(fn))
        facts = self.facts(file, fn)
        result: Reach | None = None
        if facts.breaks:
            certain = [b for b in facts.breaks if b.certain]
            if certain:
                result = Reach(certain[0], ())
        if result is None:
            for live in facts.calls:
                if id(live.site.node) in facts.break_calls:
                    continue
                found = self.project.call_target(file, live.site)
                if found is None:
                    continue
                callee, mod = found
                inner = self.reached(mod, callee, active)
                if inner is not None:
                    result = Reach(inner.brk, (f"{mod.module_name}.{callee.qualname}",) + inner.via)
                    break
        active.discard(id(fn))
        if result is not None or not active or cuts == self._cuts:
            self._reach[id(fn)] = (fn, result)
        return result

    # ---- callee parameter typing
    def param_breaks(self, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> dict[str, Break]:
        """Breaks that happen when a parameter holds a tensor: ``.item()`` / ``.tolist()`` on a parameter
        whose type ``fn`` cannot tell (``def to_list(t): return t.tolist()``), directly or passed on to a
        callee that does so. A caller that passes a tensor for that parameter reaches the break. Only
        unconditional calls count: a break under an ``if`` may be off whenever the caller's scope is on."""
        entry = self._param_breaks.get(id(fn))
        if entry is not None and entry[0] is fn:
            return entry[1]
        self._param_breaks[id(fn)] = (fn, {})  # recursion guard
        found: dict[str, Break] = {}
        params = set(_own_params(fn))
        typer = self.typer(file, fn)
        for live in self.facts(file, fn).calls:
            site = live.site
            if site.guards:
                continue
            receiver = site.receiver
            if site.method in apis.TENSOR_SYNC_METHODS and not site.node.args and isinstance(receiver, cst.Name) \
                    and receiver.value in params and receiver.value not in fn.name_assigns \
                    and not typer.is_tensor(receiver) and not typer.known_non_tensor(receiver):
                what = f"`Tensor{apis.TENSOR_SYNC_METHODS[site.method]}` on parameter `{receiver.value}`"
                found.setdefault(receiver.value, Break(site.node, what, file, fn, live.scope, True))
                continue
            target = self.project.call_target(file, site) if _depth < 4 else None
            if target is None:
                continue
            callee, mod = target
            inner = self.param_breaks(mod, callee, _depth + 1)
            if not inner:
                continue
            for param, arg in bind_arguments(_own_params(callee), site.node, callee.kwonly).items():
                if param in inner and isinstance(arg, cst.Name) and arg.value in params \
                        and arg.value not in fn.name_assigns:
                    found.setdefault(arg.value, inner[param])
        self._param_breaks[id(fn)] = (fn, found)
        return found

    def passed_tensor_break(self, file: FileModel, fn: FunctionInfo | None, site: CallSite,
                            callee: FunctionInfo, cmod: FileModel) -> Break | None:
        """The break a call reaches because it passes a tensor to a parameter the callee syncs on."""
        if fn is None:
            return None
        breaks = self.param_breaks(cmod, callee)
        if not breaks:
            return None
        typer = self.typer(file, fn)
        for param, arg in bind_arguments(_own_params(callee), site.node, callee.kwonly).items():
            if param in breaks and arg is not None and typer.is_tensor(arg):
                return breaks[param]
        return None

    # ---- scopes
    def no_break_scope(self, file: FileModel, site: ScopeSite | None) -> "ScopeUse | None":
        """The innermost enclosing TorchAir (no-graph-break) scope, if any."""
        if site is None:
            return None
        entry = self._scopes.get(id(site))
        if entry is not None and entry[0] is site:
            return entry[1]
        found = None
        for scope in self.project.enclosing_scopes(file, site):
            if any(is_no_break(use) for use in scope.uses):
                found = scope
                break
        self._scopes[id(site)] = (site, found)
        return found


def _own_params(fn: FunctionInfo) -> tuple[str, ...]:
    """The parameters a call binds (``self`` / ``cls`` of a method excluded), keyword-only ones last."""
    params = fn.params[1:] if fn.class_name is not None and fn.params[:1] in (("self",), ("cls",)) else fn.params
    return params + fn.kwonly


def is_no_break(use) -> bool:
    """An API use opening a scope in which Dynamo must not break (mode-dispatch: the TorchAir variant)."""
    return use.role in apis.NO_BREAK_SCOPE_ROLES and (
        use.modes is None or bool(use.modes - {"eager", "cuda"})
    )


def analysis(project: "Project") -> BreakAnalysis:
    """The project's BreakAnalysis (created on first use)."""
    found = getattr(project, "_break_analysis", None)
    files = getattr(project, "_files", {})
    if found is not None and any(files.get(path) is not model for path, model in found.known.items()):
        found = None  # a module was re-parsed (unsaved editor buffer): cached answers may be stale
    if found is None:
        found = BreakAnalysis(project)
        project._break_analysis = found  # type: ignore[attr-defined]
    found.known.update(files)
    return found


def describe_scope(scope: "ScopeUse") -> str:
    """``npu_stream_switch("moe_shared")`` / ``limit_core_num(...)`` / ``super_kernel("sk")``, for messages."""
    use = next((u for u in scope.uses if is_no_break(u) or u.role in apis.STREAM_SCOPE_ROLES), None)
    if use is None:
        return f"`{scope.file.code(scope.site.item.item)}`"
    name = use.spec.qualname.rsplit(".", 1)[-1]
    shown = {Role.STREAM_SWITCH: ("stream_tag",), Role.SUPER_KERNEL: ("scope",),
             Role.NATIVE_STREAM_CONTEXT: ("stream",), Role.LIMIT_CORE_NUM: ("op_aicore_num", "op_vectorcore_num"),
             Role.LIMIT_CORE_NUM_NPUGRAPH_EX: ("op_aicore_num", "op_vectorcore_num")}.get(use.role, ())
    args = [use.value(p) for p in shown]
    inner = ", ".join(_code(a) if a is not None else "…" for a in args) if any(a is not None for a in args) else ""
    via = f" (through `{use.wrappers[0]}`)" if use.wrappers else ""
    return f"`{name}({inner})`{via}"


def _code(node: cst.CSTNode) -> str:
    try:
        return node_code(node)
    except Exception:  # noqa: BLE001 - best effort for messages
        return "…"


# ----------------------------------------------------------------------------------- compile guards


def compile_value(expr: cst.BaseExpression, file: FileModel, fn: FunctionInfo | None) -> bool | None:
    """The value of a test while Dynamo traces (``is_compiling()`` is True), when it is decided."""
    if isinstance(expr, cst.Call):
        spec = apis.lookup(file.resolve(expr.func, fn))
        if spec is not None and spec.role is Role.IS_COMPILING:
            return True
        return None
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = compile_value(expr.expression, file, fn)
        return None if inner is None else not inner
    if isinstance(expr, cst.BooleanOperation):
        left = compile_value(expr.left, file, fn)
        right = compile_value(expr.right, file, fn)
        if isinstance(expr.operator, cst.And):
            if left is False or right is False:
                return False
            return True if left is True and right is True else None
        if left is True or right is True:
            return True
        return False if left is False and right is False else None
    return None


def _exits(block: cst.BaseSuite) -> bool:
    body = block.body if isinstance(block, cst.IndentedBlock) else []
    if isinstance(block, cst.SimpleStatementSuite):
        return any(isinstance(s, (cst.Return, cst.Raise)) for s in block.body)
    if not body:
        return False
    last = body[-1]
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)


# -------------------------------------------------------------------------------------- the walker


class _Walker:
    """Walks one function body (not nested definitions), tracking scope and guarded-off regions."""

    def __init__(self, analysis_: BreakAnalysis, file: FileModel, fn: FunctionInfo) -> None:
        self.an = analysis_
        self.file = file
        self.fn = fn
        self.out = FunctionBreaks(fn)
        self.typer = analysis_.typer(file, fn)
        self.sites = {id(s.item): s for s in fn.scopes}

    def run(self) -> None:
        self.suite(self.fn.node.body, False, None)

    # ---- statements
    def block(self, stmts, off: bool, scope: ScopeSite | None) -> None:
        for stmt in stmts:
            self.stmt(stmt, off, scope)
            if isinstance(stmt, cst.If) and stmt.orelse is None and _exits(stmt.body):
                if compile_value(stmt.test, self.file, self.fn) is True:
                    off = True  # `if is_compiling(): return ...` — the rest is eager only

    def suite(self, suite: cst.BaseSuite, off: bool, scope: ScopeSite | None) -> None:
        if isinstance(suite, cst.IndentedBlock):
            self.block(suite.body, off, scope)
        elif isinstance(suite, cst.SimpleStatementSuite):
            for small in suite.body:
                self.expr_small(small, off, scope)

    def stmt(self, stmt: cst.CSTNode, off: bool, scope: ScopeSite | None) -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self.expr_small(small, off, scope)
        elif isinstance(stmt, cst.If):
            self.test(stmt, stmt.test, "if", off, scope)
            value = compile_value(stmt.test, self.file, self.fn)
            self.suite(stmt.body, off or value is False, scope)
            if stmt.orelse is not None:
                if isinstance(stmt.orelse, cst.If):
                    self.stmt(stmt.orelse, off or value is True, scope)
                else:
                    self.suite(stmt.orelse.body, off or value is True, scope)
        elif isinstance(stmt, cst.While):
            self.test(stmt, stmt.test, "while", off, scope)
            self.suite(stmt.body, off, scope)
            if stmt.orelse is not None:
                self.suite(stmt.orelse.body, off, scope)
        elif isinstance(stmt, cst.For):
            self.expr(stmt.iter, off, scope)
            self.suite(stmt.body, off, scope)
            if stmt.orelse is not None:
                self.suite(stmt.orelse.body, off, scope)
        elif isinstance(stmt, cst.With):
            current = scope
            for item in stmt.items:
                self.expr(item.item, off, current)
                current = self.sites.get(id(item), current)
            self.suite(stmt.body, off, current)
        elif isinstance(stmt, cst.Try) or type(stmt).__name__ == "TryStar":
            self.suite(stmt.body, off, scope)
            for handler in stmt.handlers:
                self.suite(handler.body, off, scope)
            if stmt.orelse is not None:
                self.suite(stmt.orelse.body, off, scope)
            if stmt.finalbody is not None:
                self.suite(stmt.finalbody.body, off, scope)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return
        elif isinstance(stmt, cst.Match):
            self.expr(stmt.subject, off, scope)
            for case in stmt.cases:
                self.suite(case.body, off, scope)

    def expr_small(self, small: cst.CSTNode, off: bool, scope: ScopeSite | None) -> None:
        if isinstance(small, cst.Assert):
            self.test(small, small.test, "assert", off, scope)
            if small.msg is not None:
                self.expr(small.msg, off, scope)
            return
        self.expr(small, off, scope)

    def test(self, node: cst.CSTNode, test: cst.BaseExpression, kind: str, off: bool,
             scope: ScopeSite | None) -> None:
        consumed: set[int] = set()
        if not off and self.typer.truth_is_tensor(test, consumed):
            self.out.breaks.append(Break(node, f"data-dependent `{kind}` on a tensor value", self.file, self.fn, scope))
        self.expr(test, off, scope, consumed)

    # ---- expressions
    def expr(self, node: cst.CSTNode, off: bool, scope: ScopeSite | None, consumed: set[int] | None = None) -> None:
        _ExprVisitor(self, off, scope, consumed or set()).visit_root(node)


class _ExprVisitor:
    """Graph breaks in an expression; driven by :func:`walk` (visit_<Type> / leave_<Type>)."""

    def __init__(self, walker: _Walker, off: bool, scope: ScopeSite | None, consumed: set[int]) -> None:
        self.w = walker
        self.off = [off]
        self.scope = scope
        self.consumed = consumed
        self.inside_break = 0
        self._pops: dict[int, int] = {}

    def visit_root(self, node: cst.CSTNode) -> None:
        walk(node, self)  # read-only (model/walk.py)

    def _record(self, node: cst.CSTNode, what: str, certain: bool = True) -> None:
        if self.off[-1] or self.inside_break:
            return
        self.w.out.breaks.append(Break(node, what, self.w.file, self.w.fn, self.scope, certain))

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        site = self.w.an.site(self.w.file, node)
        broke = False
        if site is not None and not self.off[-1]:
            found = self.w.an.call_break(self.w.file, site, self.w.fn)
            if found is not None:
                what, certain = found
                self._record(node, what, certain)
                self.w.out.break_calls.add(id(node))
                broke = True
            self.w.out.calls.append(LiveCall(site, self.scope))
        if broke:
            self.inside_break += 1
            self._pops[id(node)] = self._pops.get(id(node), 0) + 1

    def leave_Call(self, original_node: cst.Call) -> None:
        if self._pops.get(id(original_node)):
            self._pops[id(original_node)] -= 1
            self.inside_break -= 1

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        consumed: set[int] = set()
        if not self.off[-1] and self.w.typer.truth_is_tensor(node.test, consumed):
            self._record(node, "data-dependent ternary on a tensor value")
        self.consumed |= consumed
        walk(node.test, self)
        value = compile_value(node.test, self.w.file, self.w.fn)
        self.off.append(self.off[-1] or value is False)
        walk(node.body, self)
        self.off[-1] = self.off[-2] or value is True
        walk(node.orelse, self)
        self.off.pop()
        return False

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if id(node) in self.consumed:
            return
        leaves: list[cst.BaseExpression] = []
        _bool_leaves(node, leaves, self.consumed)
        # every operand but the last is passed to bool(); the last is the value of the expression
        if not self.off[-1] and any(self.w.typer.is_tensor(leaf) for leaf in leaves[:-1]):
            op = "and" if isinstance(node.operator, cst.And) else "or"
            self._record(node, f"`{op}` on a tensor value (calls bool() on it)")


def _bool_leaves(node: cst.BaseExpression, out: list, consumed: set[int]) -> None:
    if isinstance(node, cst.BooleanOperation):
        consumed.add(id(node))
        _bool_leaves(node.left, out, consumed)
        _bool_leaves(node.right, out, consumed)
    else:
        out.append(node)


__all__ = ["Break", "BreakAnalysis", "FunctionBreaks", "LiveCall", "Reach", "TensorTyper", "analysis",
           "compile_value", "describe_scope", "is_no_break"]
