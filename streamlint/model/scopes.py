"""What runs inside a scope: transitive searches through the call graph, SuperKernel options, constants.

Helpers shared by the SL1 rules and ``streamlint graph``:

- :func:`search_calls` — depth-first search from a function through project calls (cycles handled) for
  the first function a predicate accepts, returning the chain of callees traversed;
- :func:`string_constant` — the value of a string expression: literals, concatenations, module-level
  constants (also imported from another project module);
- :func:`parse_super_kernel_options` — ``k=v:k=v`` option strings of ``super_kernel`` (domain.md §1.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, TypeVar

from streamlint._lazy import cst

from streamlint.model.apis import Role
from streamlint.model.file import FileModel, int_value, string_value
from streamlint.model.filefacts import CallSite, FunctionInfo, ScopeSite

if TYPE_CHECKING:
    from streamlint.model.project import Project
    from streamlint.model.uses import ScopeUse

T = TypeVar("T")

# Option keys of torchair.scope.super_kernel (domain.md §1.5).
SUPER_KERNEL_OPTION_KEYS = (
    "stream-fusion", "feed-sync-all", "strict-scope-check", "dcci-before-kernel-start", "dcci-after-kernel-end",
    "dcci-disable-on-kernel", "debug-aic-num", "debug-aiv-num",
)


def search_calls(
    project: "Project",
    file: FileModel,
    fn: FunctionInfo,
    found: Callable[[FunctionInfo, FileModel], T | None],
    follow: Callable[[CallSite, FileModel], bool] | None = None,
    limit: int = 24,
) -> tuple[T, tuple[str, ...]] | None:
    """The first answer of ``found`` in ``fn`` or in a project function it calls (depth-first, in source
    order), with the qualified names of the callees traversed (empty when ``fn`` itself answers).
    ``follow`` chooses which call sites are followed; cycles and depth beyond ``limit`` stop the search."""
    seen: set[int] = set()

    def visit(f: FunctionInfo, mod: FileModel, depth: int) -> tuple[T, tuple[str, ...]] | None:
        if id(f) in seen or depth > limit:
            return None
        seen.add(id(f))
        answer = found(f, mod)
        if answer is not None:
            return answer, ()
        for site in f.calls:
            if follow is not None and not follow(site, mod):
                continue
            target = project.call_target(mod, site)
            if target is None:
                continue
            callee, cmod = target
            inner = visit(callee, cmod, depth + 1)
            if inner is not None:
                return inner[0], (f"{cmod.module_name}.{callee.qualname}",) + inner[1]
        return None

    return visit(fn, file, 0)


def string_constant(project: "Project", file: FileModel, expr: cst.BaseExpression | None,
                    fn: FunctionInfo | None = None, _depth: int = 0) -> str | None:
    """The string an expression always evaluates to, when statically known."""
    if expr is None or _depth > 8:
        return None
    value = string_value(expr)
    if value is not None:
        return value
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        left = string_constant(project, file, expr.left, fn, _depth + 1)
        right = string_constant(project, file, expr.right, fn, _depth + 1)
        return left + right if left is not None and right is not None else None
    if isinstance(expr, cst.Name):
        if fn is not None and (expr.value in fn.locals or expr.value in fn.all_params):
            return None
        return module_string(project, file, expr.value, _depth + 1)
    return None


def module_string(project: "Project", file: FileModel, name: str, _depth: int = 0) -> str | None:
    """A module-level ``NAME = "..."`` assigned exactly once (or imported from a project module)."""
    value, where = _module_value(project, file, name, _depth)
    return string_constant(project, where, value, None, _depth + 1) if value is not None else None


def module_int(project: "Project", file: FileModel, expr: cst.BaseExpression | None, _depth: int = 0) -> int | None:
    """The integer ``expr`` always is: a literal, or a module-level ``NAME = 2`` assigned exactly once (in this
    module or a project module it is imported from: ``from .backend import BATCH_SIZE``)."""
    value = int_value(expr)
    if value is not None or not isinstance(expr, cst.Name) or _depth > 8:
        return value
    found, where = _module_value(project, file, expr.value, _depth)
    return module_int(project, where, found, _depth + 1) if found is not None else None


def _module_value(project: "Project", file: FileModel, name: str, _depth: int) -> tuple[cst.BaseExpression | None,
                                                                                        FileModel]:
    """The one value a module-level name is assigned in ``file`` (followed through a project import), and the
    file it is written in; None when assigned more than once or unseen."""
    values: list[cst.BaseExpression] = []
    for stmt in file.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign):
                    if any(isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets):
                        values.append(small.value)
                elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                        and small.target.value == name and small.value is not None:
                    values.append(small.value)
    if len(values) == 1:
        return values[0], file
    if values:
        return None, file
    imported = file.names.get(name)
    if imported and "." in imported and _depth < 8:
        module, _, attr = imported.rpartition(".")
        mod = project.find_module(module, file)
        if mod is not None and mod is not file:
            return _module_value(project, mod, attr, _depth + 1)
    return None, file


@dataclass(frozen=True)
class SuperKernelOptions:
    entries: tuple[tuple[str, str], ...]  # (key, value) in order

    def get(self, key: str) -> str | None:
        for k, v in self.entries:
            if k == key:
                return v
        return None

    @property
    def stream_fusion(self) -> bool:
        return self.get("stream-fusion") == "1"

    def unknown_keys(self) -> list[str]:
        return [k for k, _ in self.entries if k not in SUPER_KERNEL_OPTION_KEYS]


def parse_super_kernel_options(text: str) -> SuperKernelOptions:
    entries = []
    for item in text.split(":"):
        item = item.strip()
        if not item:
            continue
        key, _, value = item.partition("=")
        entries.append((key.strip(), value.strip()))
    return SuperKernelOptions(tuple(entries))


@dataclass(frozen=True)
class SuperKernelRegion:
    """A ``with super_kernel(...)`` item, classified."""

    scope: "ScopeUse"
    excluded: bool  # super_kernel(None, ...): removes SuperKernel attributes for the region
    options_expr: cst.BaseExpression | None
    options: SuperKernelOptions | None  # None: not statically resolvable

    @property
    def single_stream(self) -> bool:
        """Resolved options without ``stream-fusion=1`` (and not an excluded region)."""
        return not self.excluded and self.options is not None and not self.options.stream_fusion


def super_kernel_region(project: "Project", file: FileModel, site: ScopeSite) -> SuperKernelRegion | None:
    scope = project.scope_use(file, site)
    use = next((u for u in scope.uses if u.role is Role.SUPER_KERNEL), None)
    if use is None:
        return None
    scope_arg = use.value("scope")
    excluded = isinstance(scope_arg, cst.Name) and scope_arg.value == "None"
    expr = use.value("options")
    options: SuperKernelOptions | None
    if expr is None:
        # the API default is '' — but a wrapper may build the options itself: then unknown
        options = parse_super_kernel_options("") if not use.wrappers else None
    else:
        home = file if use.arg("options") is not None else _defining_file(project, use) or file
        text = string_constant(project, home, expr, site.function if home is file else None)
        options = parse_super_kernel_options(text) if text is not None else None
    return SuperKernelRegion(scope, excluded, expr, options)


def _defining_file(project: "Project", use) -> FileModel | None:
    if not use.wrappers:
        return None
    found = project.function(use.wrappers[0], use.file)
    return found[1] if found is not None else None


def enclosing_super_kernel(project: "Project", file: FileModel, site: ScopeSite | None) -> SuperKernelRegion | None:
    """The innermost ``super_kernel`` region around a ``with`` item or statement (same function)."""
    while site is not None:
        region = super_kernel_region(project, file, site)
        if region is not None:
            return region
        site = site.parent
    return None


def is_stream_switch(scope: "ScopeUse") -> bool:
    """A TorchAir stream switch (directly or through a wrapper; mode-dispatch: the TorchAir variant)."""
    return any(u.role is Role.STREAM_SWITCH and (u.modes is None or bool(u.modes - {"eager", "cuda"}))
               for u in scope.uses)


def scope_factory_calls(fn: FunctionInfo) -> set[int]:
    """id() of the calls that build a `with` item's context manager in ``fn``."""
    return {id(call) for site in fn.scopes for call in site.calls}


__all__ = ["SUPER_KERNEL_OPTION_KEYS", "SuperKernelOptions", "SuperKernelRegion", "enclosing_super_kernel",
           "is_stream_switch", "module_int", "module_string", "parse_super_kernel_options", "scope_factory_calls",
           "search_calls", "string_constant", "super_kernel_region"]
