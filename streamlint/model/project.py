"""The project index: modules named from paths, imports resolved across modules, loaded lazily.

A :class:`Project` answers cross-module questions (what does this call really invoke, is this
function a stream wrapper, which scopes are active where) and caches every answer. Files are parsed on
demand through a loader, so linting one file parses only the modules its questions lead to.
"""

from __future__ import annotations

import builtins
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from streamlint._lazy import cst

from streamlint.model import apis
from streamlint.model.accelerators import accelerator_uses
from streamlint.model.ctxfactories import factory_uses, guarded_method_uses
from streamlint.model.apis import Role
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import CallSite, ClassInfo, FunctionInfo, ScopeSite
from streamlint.model.modpaths import ModulePaths
from streamlint.model.modvalues import module_target
from streamlint.model.options import ModelOptions
from streamlint.model.projectscans import ProjectScans
from streamlint.model.paths import ExecutionPath, PathIndex
from streamlint.model import bytescan
from streamlint.model.summary import ModuleSummary, SummaryStore
from streamlint.model.uses import ApiUse, ScopeUse, bind_arguments
from streamlint.model.wrappers import WrapperSpec, infer_wrapper, local_def

if TYPE_CHECKING:
    from streamlint.model.compile import CompileSite
    from streamlint.model.wordindex import WordSearch
    from streamlint.profile import Profiler

_PY_BUILTINS = frozenset(dir(builtins))
_SYMBOL_STEPS = 256  # names one symbol() question may follow through re-exports and star imports

Loader = Callable[[str, str, bool], "FileModel | None"]  # (path, module name, is_package)


@dataclass(frozen=True)
class _Context:
    path: str  # (what module resolution reads of a FileModel: ModulePaths.module_path)


@dataclass(eq=False)
class Project(ProjectScans, ModulePaths):
    root: Path
    loader: Loader
    scope: frozenset[str] | None = None  # when set, only these files belong to the project
    options: ModelOptions = ModelOptions()
    _files: dict[str, FileModel | None] = field(default_factory=dict)
    # the paths of _files, least recently asked first (Engine.release_models keeps the most recent ones)
    _recent: dict[str, None] = field(default_factory=dict)
    _wrappers: dict[tuple[str, str], WrapperSpec | None] = field(default_factory=dict)
    _uses: dict[int, tuple[ApiUse, ...]] = field(default_factory=dict)
    _all_files: list[str] | None = None
    # file contents kept for the byte searches of project-wide scans, up to SCAN_BYTES_KEPT in all: past
    # that a search reads the file again, so what a run holds does not grow with the tree
    _scan_bytes: dict[str, bytes] = field(default_factory=dict)
    _scan_kept: int = 0
    _packages: dict[str, tuple[str, str]] = field(default_factory=dict)  # directory -> (package, root)
    _modules: dict[tuple[str, str], str | None] = field(default_factory=dict)  # (module, root) -> path
    _source_roots: dict[str, str] = field(default_factory=dict)  # file path -> its source root
    _named_roots: dict[tuple[str, str], str | None] = field(default_factory=dict)  # (package, source root) -> (see _named_root)
    _checkout_dirs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # source root -> _checkouts()
    _symbols: dict[tuple[str, str | None], object] = field(default_factory=dict)  # symbol() answers
    _symbol_seen: set = field(default_factory=set)  # the names one symbol() question followed
    _summary_digests: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # path -> (bytes, sha256)
    reader: "Callable[[str], bytes] | None" = None
    _paths: "PathIndex | None" = None
    wide_reads: int = 0  # reads of project-wide facts so far (note_wide_read)
    # (files done, files in total) while the project index scans for compile sites (progress display)
    index_progress: "Callable[[int, int], None] | None" = None
    # module summaries by content sha256 (streamlint.model.summary), shared with the project cache
    summaries: SummaryStore = field(default_factory=SummaryStore)
    profiler: "Profiler | None" = None
    _compiling: "list[tuple[str, ModuleSummary]] | None" = None  # compiling_paths()
    _renames: dict[str, frozenset[bytes]] = field(default_factory=dict)  # renames()
    _marker_paths: dict[tuple[bytes, ...], list[str]] = field(default_factory=dict)  # paths_containing()
    # (the all_files() list it was built from, their contents joined): paths_containing's searches (_joined)
    _blob: "tuple[list[str], bytescan.JoinedTree | None] | None" = None
    words: "WordSearch | None" = None  # the project cache's word index (model/wordindex.py; None: files scanned)

    # ---- execution paths (streamlint.model.paths)
    @property
    def path_index(self) -> PathIndex:
        if self._paths is None:
            self._paths = PathIndex(self)
        return self._paths

    def execution_path(self, file: FileModel, fn: FunctionInfo | None) -> ExecutionPath:
        """The ExecutionPath of a function (config → compile sites → API family → unknown)."""
        return self.path_index.path_of(file, fn)

    def modes_at(self, file: FileModel, site: CallSite) -> frozenset[str]:
        """Execution paths of a call: its function's path narrowed by enclosing mode guards."""
        return self.path_index.modes_at(file, site)

    def modes_of_use(self, use: ApiUse) -> frozenset[str]:
        """Execution paths on which an API use runs: its call's paths, narrowed to the modes of the
        wrapper variant it goes through."""
        modes = self.modes_at(use.file, use.site)
        return modes & use.modes if use.modes is not None else modes

    def derived(self, topic: str) -> dict:
        """The cache of one project-wide derived fact (stream kinds, caller arguments…): it lives with
        the path index, which the engine replaces whenever any file changes."""
        return self.path_index.derived.setdefault(topic, {})

    def compile_sites(self) -> list[CompileSite]:
        return self.path_index.compile_sites()

    def relative(self, path: str) -> str:
        try:
            return Path(os.path.abspath(path)).relative_to(self.root.absolute()).as_posix()
        except ValueError:
            return Path(path).as_posix()

    def file(self, path: str) -> FileModel | None:
        path = os.path.abspath(path)
        recent = self._recent
        if path not in self._files:
            self._files[path] = None  # guards against re-entrant loading
            name, is_pkg, _ = self.module_name(path)
            self._files[path] = self.loader(path, name, is_pkg)
        elif path in recent:
            del recent[path]
        recent[path] = None
        return self._files[path]

    def loaded(self, path: str) -> FileModel | None:
        """The model of ``path`` if it is loaded already (never loads it: a byte-level scan may use a tree the run
        holds anyway instead of parsing the file again)."""
        return self._files.get(os.path.abspath(path))

    def add(self, model: FileModel) -> None:
        path = os.path.abspath(model.path)
        self._files[path] = model
        self._recent.pop(path, None)
        self._recent[path] = None

    def in_project(self, path: str) -> bool:
        return self.scope is None or os.path.abspath(path) in self.scope

    def note_wide_read(self) -> None:
        """Count a read of a project-wide fact (file list, compile sites, environment settings…): an
        analysis that made one depends on every file of the project (see parallel.Result)."""
        self.wide_reads += 1

    def all_files(self) -> list[str]:
        """Every Python file of the project (for project-wide facts such as compile sites)."""
        self.note_wide_read()
        if self._all_files is None:
            if self.scope is not None:
                self._all_files = sorted(self.scope)
            else:
                from streamlint.discovery import iter_python_files

                self._all_files = sorted(iter_python_files(self.root))
        return self._all_files

    # ---- symbols
    def symbol(self, qualname: str, context: FileModel | None, _depth: int = 0):
        """The project definition (FunctionInfo/ClassInfo with its FileModel) a qualified name denotes."""
        key = (qualname, context.path if context is not None else None)
        if _depth == 0:
            if key not in self._symbols:
                self._symbol_seen = set()  # (one question: each (name, module) is followed once)
                self._symbols[key] = self._symbol(qualname, context, 0)
            return self._symbols[key]
        if key in self._symbols:
            return self._symbols[key]
        # re-exports and star imports branch: a package that re-exports a submodule's class under the
        # submodule's own name (`from pkg.mod import mod` in pkg/__init__) made every cut of a longer name
        # follow again, exponentially in the depth; a name followed once in this question is not again
        if not self._may_follow(key):
            return None
        self._symbol_seen.add(key)
        return self._symbol(qualname, context, _depth)

    def _symbol(self, qualname: str, context: FileModel | None, _depth: int):
        parts = qualname.split(".")
        if _depth > 8 or not all(parts):  # (`pkg.mod.`: no name)
            return None
        for cut in range(len(parts) - 1, 0, -1):
            modname = ".".join(parts[:cut])
            if context is not None and modname == context.module_name:
                mod = context
            else:
                mod = self.find_module(modname, context)
            if mod is None:
                continue
            rest = parts[cut:]
            found = _lookup_in_module(mod, rest)
            if found is not None:
                return found, mod
            # re-export: `from .utils import switch` in a package __init__
            if rest[0] in mod.names and mod.names[rest[0]] != qualname:
                target = ".".join([mod.names[rest[0]], *rest[1:]])
                if target != qualname:
                    return self.symbol(target, mod, _depth + 1)
            # `from .common import *` in a package __init__
            if rest[0] not in mod.names:
                for star in getattr(mod, "star_imports", ()):
                    if star != modname and self._star_may_bind(star, rest, mod):
                        followed = ".".join([star, *rest])
                        key = (followed, mod.path)
                        if key not in self._symbols and not self._may_follow(key):
                            continue  # (symbol() would answer None at once)
                        if key not in self._symbols and self._star_finds_nothing(star, rest, mod.path, set()):
                            self._follow_unparsed(star, rest, mod, _depth + 1)
                            continue
                        found = self.symbol(followed, mod, _depth + 1)
                        if found is not None:
                            return found
            return None
        return None

    def _may_follow(self, key: tuple[str, str | None]) -> bool:
        """Does :meth:`symbol` follow ``key`` in the current question (neither followed yet nor past the budget)?"""
        return key not in self._symbol_seen and len(self._symbol_seen) <= _SYMBOL_STEPS

    def _star_finds_nothing(self, module: str, rest: list[str], context: str, visiting: set[str]) -> bool:
        """Is following ``rest`` into the star-imported ``module`` (from the file ``context``) certain to find
        nothing, whatever the question's budget? Decided from bytes and stdlib summaries (``ast``, cached by
        content), without parsing: no longer cut of the name is a module, the module is not loaded yet, its summary
        binds no ``rest[0]`` outside function bodies (no definition, no import, no assignment of it), and the same
        holds of every module it star-imports that :meth:`_star_may_bind` lets :meth:`_symbol` follow. Following it
        would parse each of them with LibCST only to find that. A package re-exporting every model of a model zoo
        (``from .models import *``, each model package ``from .modeling_x import *``, each modelling module spelling
        ``AutoBackbone`` in a docstring) made one name inherited by a class (``AutoBackbone.from_config``) parse
        ~270 modules, once per file that asked it (transformers). (The summary's parser accepting a text stands
        for LibCST's building a model of it, as for the ``ast`` guard: ``Engine.parse``.)"""
        for cut in range(len(rest) - 1, 0, -1):
            if self.module_path(".".join([module, *rest[:cut]]), _Context(context)) is not None:
                return False
        path = self.module_path(module, _Context(context))
        if path is None:
            return False
        path = os.path.abspath(path)
        if path in self._files or path in visiting:
            return path in visiting  # (loaded or failed to load: followed as before; a star cycle adds nothing)
        summary = self.summary(path) if self._bytes(path) is not None else None
        if summary is None or summary.calls is None or summary.may_bind(rest[0]):
            return False
        visiting.add(path)
        name, is_package, _ = self.module_name(path)
        inner = _Context(path)
        return all(self._star_finds_nothing(star, rest, path, visiting)
                   for star in summary.star_modules(name, is_package)
                   if star != module and self._star_may_bind(star, rest, inner))

    def _follow_unparsed(self, module: str, rest: list[str], context: "FileModel | _Context", depth: int) -> None:
        """What ``self.symbol(module.rest, context, depth)`` notes while it follows a name :meth:`_star_finds_nothing`
        says leads nowhere (the steps of the question's budget, in the same order), without parsing: the question's
        later steps are the same as if it had followed it."""
        key = (".".join([module, *rest]), context.path)
        if key in self._symbols or not self._may_follow(key):
            return
        self._symbol_seen.add(key)
        if depth > 8:
            return
        path = os.path.abspath(self.module_path(module, context) or "")
        summary = self.summary(path)
        if summary is None:
            return
        name, is_package, _ = self.module_name(path)
        inner = _Context(path)
        for star in summary.star_modules(name, is_package):
            if star != module and self._star_may_bind(star, rest, inner):
                self._follow_unparsed(star, rest, inner, depth + 1)

    def _star_may_bind(self, module: str, rest: list[str], context: FileModel) -> bool:
        """Could ``from module import *`` give ``rest[0]``? A byte test before the module is parsed: a module
        binds only names it spells (``_lookup_in_module``, ``FileModel.names``) or takes from a star import of
        its own. A package re-exporting every model of a large tree by star imports (``from .bert import *``
        in each model package) made one unresolved name parse every modelling file of the tree."""
        if not rest[0].isascii() or (len(rest) > 1 and self.module_path(f"{module}.{rest[0]}", context)):
            return True  # (``module.rest[0]`` is a submodule: found by path, whatever the package spells)
        path = self.module_path(module, context)
        data = self._bytes(os.path.abspath(path)) if path is not None else None
        if data is None:
            return path is not None  # (unreadable: as before, find_module decides)
        return bytescan.spells(data, rest[0]) or bytescan.has_star_import(data)

    def function(self, qualname: str | None, context: FileModel | None) -> tuple[FunctionInfo, FileModel] | None:
        if qualname is None:
            return None
        found = self.symbol(qualname, context)
        if found is None:
            return None
        info, mod = found
        if isinstance(info, FunctionInfo):
            return info, mod
        if isinstance(info, ClassInfo):
            init = info.methods.get("forward") or info.methods.get("__call__")
            return (init, mod) if init is not None else None
        return None

    # ---- APIs through wrappers
    def wrapper(self, fn: FunctionInfo, file: FileModel) -> WrapperSpec | None:
        key = (file.path, fn.qualname)
        if key not in self._wrappers:
            self._wrappers[key] = None  # recursion guard
            declared = f"{file.module_name}.{fn.qualname}"
            self._wrappers[key] = infer_wrapper(
                self,
                fn,
                file,
                declared_switch=declared in self.options.stream_switch_wrappers,
                declared_wait=declared in self.options.wait_wrappers,
            )
        return self._wrappers[key]

    def reexported(self, qualname: str, context: FileModel | None, _depth: int = 0) -> str | None:
        """The outside name a project path stands for when a module re-exports an import
        (``from pkg.moe import torch`` makes ``pkg.moe.torch.npu.current_stream`` torch's), else None."""
        parts = qualname.split(".")
        if _depth > 8 or not all(parts):  # (`pkg.mod.`: no name)
            return None
        for cut in range(len(parts) - 1, 0, -1):
            modname = ".".join(parts[:cut])
            mod = context if context is not None and modname == context.module_name \
                else self.find_module(modname, context)
            if mod is None:
                continue
            rest = parts[cut:]
            target = mod.names.get(rest[0])
            if target is None or _lookup_in_module(mod, rest) is not None:
                return None
            full = ".".join([target, *rest[1:]])
            if full == qualname:
                return None
            return self.reexported(full, mod, _depth + 1) or full
        return None

    def api_uses(self, file: FileModel, site: CallSite) -> tuple[ApiUse, ...]:
        """What API a call invokes: directly, or through (possibly nested) project wrappers."""
        key = id(site.node)
        if key in self._uses:
            return self._uses[key]
        self._uses[key] = ()
        spec = apis.lookup(site.target)
        if spec is None and site.target is not None and self.function(site.target, file) is None:
            spec = apis.lookup(self.reexported(site.target, file))
        if spec is None:  # `self._torch.npu.stream(s)`, `self._torch = load_torch_npu()`: like the module itself
            spec = apis.lookup(module_target(self, file, site))  # (modvalues.py)
        if spec is not None:
            uses: tuple[ApiUse, ...] = (ApiUse(spec, site, file, bind_arguments(spec.params, site.node)),)
        else:
            uses = guarded_method_uses(self, file, site, self.wrapper_uses(file, site)) \
                or accelerator_uses(self, file, site) or factory_uses(self, file, site)
        self._uses[key] = uses
        return uses

    def wrapper_uses(self, file: FileModel, site: CallSite) -> tuple[ApiUse, ...]:
        target = self.function(site.target, file) if site.target else local_def(file, site.function, site.node.func)
        if target is not None and target[0].node.name.value in ("forward", "__call__") \
                and not (site.target or "").endswith(("." + target[0].node.name.value)):
            target = None  # `Model(...)` constructs a module; it does not run its forward
        if target is None:
            declared = site.target in self.options.stream_switch_wrappers or site.target in self.options.wait_wrappers
            if declared and site.target is not None:
                role = "torchair.scope.npu_stream_switch" if site.target in self.options.stream_switch_wrappers else "torchair.scope.npu_wait_tensor"
                spec = apis.SPECS[role]
                return (ApiUse(spec, site, file, bind_arguments(spec.params, site.node), (site.target,)),)
            return ()
        fn, mod = target
        spec = self.wrapper(fn, mod)
        if spec is None:
            return ()
        params = fn.params[1:] if fn.class_name and fn.params[:1] == ("self",) else fn.params
        wrapper_bind = bind_arguments(params + fn.kwonly, site.node, kwonly=fn.kwonly)
        defaults = _param_defaults(fn)
        uses: list[ApiUse] = []
        for variant in spec.variants:
            if variant.mode_param is not None:
                value = wrapper_bind.get(variant.mode_param) or defaults.get(variant.mode_param)
                literal = _literal_mode(value)
                if literal is not None and literal not in variant.modes:
                    continue
            bind: dict[str, cst.BaseExpression | None] = {}
            constants: dict[str, cst.BaseExpression] = {}
            own: dict[str, cst.BaseExpression] = {}
            current = tuple(p for p, src in variant.param_map.items() if src.current)
            for api_param, source in variant.param_map.items():
                if source.param is not None:
                    if wrapper_bind.get(source.param) is not None:
                        bind[api_param] = wrapper_bind[source.param]
                    elif source.param in defaults:
                        constants[api_param] = defaults[source.param]
                elif source.constant is not None:
                    constants[api_param] = source.constant
                elif source.receiver is not None:
                    own[api_param] = source.receiver
            uses.append(
                ApiUse(variant.spec, site, file, bind, (f"{mod.module_name}.{fn.qualname}",) + variant.via,
                       variant.modes, constants, own, at_current=current)
            )
        return tuple(uses)

    def scope_use(self, file: FileModel, site: ScopeSite) -> ScopeUse:
        uses: list[ApiUse] = []
        for call in site.calls:
            cs = file.call_site(call)
            if cs is not None:
                uses.extend(self.api_uses(file, cs))
        return ScopeUse(site, file, tuple(uses))

    def uses_in(self, file: FileModel, roles: "frozenset[Role] | set[Role]") -> Iterator[ApiUse]:
        """Every API use with one of ``roles`` in a file, in source order."""
        for site in file.calls:
            for use in self.api_uses(file, site):
                if use.role in roles:
                    yield use

    def enclosing_scopes(self, file: FileModel, site: ScopeSite | None) -> Iterator[ScopeUse]:
        """Classified scopes around a statement, innermost first."""
        while site is not None:
            yield self.scope_use(file, site)
            site = site.parent

    # ---- call graph
    def callees(self, file: FileModel, fn: FunctionInfo) -> Iterator[tuple[CallSite, FunctionInfo, FileModel]]:
        """Project functions called by ``fn`` (functions, methods through ``self``, submodules)."""
        for site in fn.calls:
            for found in self.call_targets(file, site):
                yield (site, *found)

    def call_targets(self, file: FileModel, site: CallSite) -> list[tuple[FunctionInfo, FileModel]]:
        """Every project function a call may run: :meth:`call_target`, plus the other classes a
        submodule attribute may hold (``A(...) if c else B(...)`` in ``__init__``)."""
        first = self.call_target(file, site)
        found = [first] if first is not None else []
        fn = site.function
        if site.target is None or fn is None or not fn.class_name \
                or not site.target.startswith(f"{file.module_name}.{fn.class_name}."):
            return found
        head, _, method = site.target[len(file.module_name) + len(fn.class_name) + 2:].partition(".")
        cls = file.classes.get(fn.class_name)
        for ctor in cls.attr_alternatives.get(head, ()) if cls is not None else ():
            sym = self.symbol(ctor, file)
            if sym is not None and isinstance(sym[0], ClassInfo):
                m = sym[0].methods.get(method or "forward") or sym[0].methods.get("__call__")
                if m is not None and all(m is not f for f, _ in found):
                    found.append((m, sym[1]))
        return found

    def call_target(self, file: FileModel, site: CallSite) -> tuple[FunctionInfo, FileModel] | None:
        if site.target is None:
            return self._star_target(file, site)
        found = self.function(site.target, file)
        if found is not None:
            return found
        # self.attr(...) where self.attr = SubModule(...) in __init__ → SubModule.forward
        fn = site.function
        if fn is not None and fn.class_name and site.target.startswith(f"{file.module_name}.{fn.class_name}."):
            attr = site.target[len(file.module_name) + len(fn.class_name) + 2:]
            cls = file.classes.get(fn.class_name)
            head, _, method = attr.partition(".")
            if cls is not None:
                if head in cls.methods and not method:
                    return cls.methods[head], file
                ctor = cls.attr_types.get(head)
                if ctor is not None:
                    sym = self.symbol(ctor, file)
                    if sym is not None and isinstance(sym[0], ClassInfo):
                        target_cls, mod = sym
                        m = target_cls.methods.get(method or "forward") or target_cls.methods.get("__call__")
                        if m is not None:
                            return m, mod
                # inherited method
                for base in cls.bases:
                    sym = self.symbol(base, file)
                    if sym is not None and isinstance(sym[0], ClassInfo) and head in sym[0].methods and not method:
                        return sym[0].methods[head], sym[1]
        return None

    def _star_target(self, file: FileModel, site: CallSite) -> tuple[FunctionInfo, FileModel] | None:
        """``async_h2d(...)`` in a module that takes it from ``from pkg.transfer import *``: a name (or a
        ``name.attr`` chain) no scope of the call binds (no local, parameter, alias, module name or builtin) is
        looked up in the last module the file star-imports that may bind it (the project follows their own star
        imports): when that module binds it to something other than a function, the name stays unknown."""
        name = dotted(site.node.func) if file.star_imports else None
        head = name.partition(".")[0] if name is not None else ""
        if not head or head in _PY_BUILTINS or head in file.names:
            return None
        fn = site.function
        while fn is not None:
            if head in fn.local_aliases or head in fn.locals or head in fn.all_params or head in ("self", "cls"):
                return None
            fn = fn.parent
        for star in reversed(file.star_imports):  # (a later star import rebinds the name)
            if star != file.module_name and self._star_may_bind(star, name.split("."), file):
                return self.function(f"{star}.{name}", file)  # (not a function there: unknown, not an earlier one)
        return None

    def instance_method(self, file: FileModel, site: CallSite) -> tuple[FunctionInfo, FileModel] | None:
        """``obj.method(...)`` where the calling function binds ``obj`` once, to a project class's constructor
        (``builder = IndexBuilder(...)``): that class's method, inherited ones included."""
        func, fn = site.node.func, site.function
        if fn is None or not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name) \
                or func.value.value in fn.all_params:
            return None
        values = fn.name_assigns.get(func.value.value, [])
        ctor = file.call_site(values[0]) if len(values) == 1 and isinstance(values[0], cst.Call) else None
        sym = self.symbol(ctor.target, file) if ctor is not None and ctor.target is not None else None
        for _ in range(4):
            if sym is None or not isinstance(sym[0], ClassInfo):
                return None
            cls, mod = sym
            if func.attr.value in cls.methods:
                return cls.methods[func.attr.value], mod
            sym = self.symbol(cls.bases[0], mod) if len(cls.bases) == 1 else None
        return None

    def reachable(self, roots: Iterable[tuple[FunctionInfo, FileModel]], limit: int = 2000):
        """Functions reachable from ``roots`` through the call graph (cycles handled)."""
        seen: dict[int, tuple[FunctionInfo, FileModel]] = {}
        stack = list(roots)
        while stack and len(seen) < limit:
            fn, mod = stack.pop()
            if id(fn) in seen:
                continue
            seen[id(fn)] = (fn, mod)
            for _, callee, cmod in self.callees(mod, fn):
                if id(callee) not in seen:
                    stack.append((callee, cmod))
            # nested functions defined inside run as part of the caller
            for other in mod.functions.values():
                if other.parent is fn and id(other) not in seen:
                    stack.append((other, mod))
        return list(seen.values())


def _lookup_in_module(mod: FileModel, rest: list[str]):
    if len(rest) == 1:
        if rest[0] in mod.functions:
            return mod.functions[rest[0]]
        if rest[0] in mod.classes:
            return mod.classes[rest[0]]
    elif len(rest) == 2 and rest[0] in mod.classes:
        return mod.classes[rest[0]].methods.get(rest[1])
    return None



def _param_defaults(fn: FunctionInfo) -> dict[str, cst.BaseExpression]:
    p = fn.node.params
    return {
        param.name.value: param.default
        for param in (*p.posonly_params, *p.params, *p.kwonly_params)
        if param.default is not None
    }


def _literal_mode(expr: cst.BaseExpression | None) -> str | None:
    from streamlint.model.file import string_value

    value = string_value(expr) if expr is not None else None
    return apis.MODE_LITERALS.get(value) if value is not None else None


__all__ = ["ApiUse", "Project", "ScopeUse", "bind_arguments", "dotted"]
