"""Execution paths: which of ge / reduce-overhead / npugraph_ex / eager / cuda a function runs on.

Resolution order (rules.md): configuration (``mode``, ``per-path-mode``) → compile sites reaching the
function through the call graph → the API family the function uses (``npu_stream_switch`` with no
compile site is GE, TorchAir's default) → unknown (an empty set).
"""

from __future__ import annotations

import os
import re


import pathspec

from streamlint.finding import Location
from streamlint.model import apis
from streamlint.model.apis import Family, Role
from streamlint.model.accelerators import device_generic
from streamlint.model.compile import CompileSite, compile_site
from streamlint.model.file import FileModel
from streamlint.model.filefacts import CallSite, FunctionInfo
from streamlint.model.reaching import reached_from, reaching_paths
from streamlint.model.wrappers import modes_under

from streamlint.model.queries import ExecutionPath, ProjectQueries

# The path of code that switches streams only through the device-generic API or an accelerator object:
# native, on a device chosen at run time. Waits skipped on devices that order their streams' data themselves
# are followed as on one that does not (apis.STREAM_ORDERING_DEVICE_QUERIES, flow/guards.ordering_query)
DEVICE_GENERIC = "device-generic"


def _word(name: bytes) -> "re.Pattern[bytes]":
    return re.compile(rb"(?<![A-Za-z0-9_])" + re.escape(name) + rb"(?![A-Za-z0-9_])")


# bytes read (and split in words) forwards from the modules that may reach a file, looking for the compile
# sites of their callees (PathIndex._partial_reach), for one project index: at most thirty times the bytes of
# the modules whose sites compile their callers' arguments, which it may spare parsing; past it, the whole reach
CALLER_BYTES = 4 << 20

_SWITCH_ROLES = frozenset({Role.STREAM_SWITCH, Role.NATIVE_STREAM_CONTEXT, Role.SET_STREAM})
_FAMILY_MODE = apis.FAMILY_MODE


# A function's key in facts that outlive its parse (PathIndex.carried): its module's path and its qualified name.
# A FunctionInfo has one only while it is the entry of its name in its module (``FileModel.functions``):
# an earlier definition under the same name (``if X: def f() ... else: def f()``) has none
FunctionKey = tuple[str, str]


def function_key(file: FileModel, fn: FunctionInfo) -> "FunctionKey | None":
    return (os.path.abspath(file.path), fn.qualname) if file.functions.get(fn.qualname) is fn else None


class ReachFacts:
    """What the compile sites reach and compile, keyed by :func:`function_key`: plain data that stays true
    while no file changes, so an engine that lets its parsed trees go (``Engine.release_models``) keeps it
    instead of parsing every compiling module and what it reaches again (issue 15's memory bound made
    that a re-parse of the compile index every few files on a large tree)."""

    def __init__(self, reached: dict[FunctionKey, tuple[set[str], list[Location]]],
                 entries: "set[FunctionKey] | None") -> None:
        self.reached = reached
        self.entries = entries


class PathIndex:
    """Project-wide compile facts, computed once per project on first use (or carried over from the index of
    the same unchanged project, :meth:`carried`)."""

    def __init__(self, project: ProjectQueries, carried: "ReachFacts | None" = None) -> None:
        self.project = project
        self._sites: list[CompileSite] | None = None
        # what the compile sites reach, by function_key; _reached_ids: a reached function without one
        self._reached: dict[FunctionKey, tuple[set[str], list[Location]]] | None = None
        self._reached_ids: dict[int, tuple[set[str], list[Location]]] = {}
        self._cache: dict[int, ExecutionPath] = {}
        # facts derived from several files (stream kinds, env settings, dispatch summaries…), keyed by
        # topic; they live here because the engine replaces the index whenever any file changes
        self.derived: dict[str, dict] = {}
        self._per_path = [
            (pathspec.GitIgnoreSpec.from_lines([pattern]), mode) for pattern, mode in project.options.per_path_mode
        ]
        self._mode = project.options.mode
        self._file_sites: dict[int, list[CompileSite]] = {}  # id(FileModel) -> its compile sites
        self._entries: set[FunctionKey] | None = None
        self._entry_ids: set[int] = set()  # graph entries without a function_key
        # what the compile sites of some modules reach (:meth:`_reach_of` before the whole reach is known):
        # those modules' paths, the facts as in _reached / _reached_ids, each site's reachable functions
        self._partial_paths: set[str] = set()
        self._partial: dict[FunctionKey, tuple[set[str], list[Location]]] = {}
        self._partial_ids: dict[int, tuple[set[str], list[Location]]] = {}
        self._site_reach: dict[int, list[tuple[FunctionKey | None, int]]] = {}
        self._reaching: dict[str, set[str] | None] = {}  # path -> reaching_paths() (None: too wide)
        self._budget: int | None = None  # _word_budget()
        self._spelling: dict[str, list[str]] = {}  # the word searches made (reaching_paths)
        self._forward_left: int | None = None  # bytes reached_from may still read
        if carried is not None:
            self._reached, self._entries = carried.reached, carried.entries

    def _sites_in(self, model: FileModel) -> list[CompileSite]:
        found = self._file_sites.get(id(model))
        if found is None:
            found = self._file_sites[id(model)] = [
                site for site in (compile_site(self.project, model, call) for call in model.calls) if site is not None]
        return found

    def compile_sites(self) -> list[CompileSite]:
        """Every compile site of the project (parses every module that may compile)."""
        self.project.note_wide_read()
        if self._sites is None:
            self._sites = [site for model in self.project.compiling_files() for site in self._sites_in(model)]
        return self._sites

    def sites_in(self, file: FileModel) -> list[CompileSite]:
        """The compile sites of one file (the same objects as in :meth:`compile_sites`)."""
        return self._sites_in(file)

    def _moded_sites(self) -> list[CompileSite]:
        """The compile sites that may have known execution paths, in :meth:`compile_sites` order: those of
        the modules whose summary says they may (the others have no modes: they reach no path)."""
        if self._sites is not None:
            return self._sites
        return [site for model in self.project.compiling_files(lambda _path, summary: summary.moded)
                for site in self._sites_in(model)]

    def all_sites_understood(self) -> bool:
        """The project has compile sites, and each has known targets and modes. Parses modules that may
        compile only up to the first site that is not understood."""
        self.project.note_wide_read()
        if self._sites is None:
            seen = False
            for model in self.project.compiling_files():
                for cs in self._sites_in(model):
                    if not (cs.targets and cs.modes):
                        return False
                    seen = True
            return seen
        return bool(self._sites) and all(cs.targets and cs.modes for cs in self._sites)

    def _graph_entries(self) -> set[FunctionKey]:
        """:func:`function_key` of every function a compile site compiles itself (its targets; the others'
        ``id`` in ``_entry_ids``)."""
        if self._entries is None:
            entries: set[FunctionKey] = set()
            for site in self.compile_sites():
                for fn, mod in site.targets:
                    key = function_key(mod, fn)
                    if key is None:
                        self._entry_ids.add(id(fn))
                    else:
                        entries.add(key)
            self._entries = entries
        return self._entries

    def in_graph_entries(self, file: FileModel, fn: FunctionInfo) -> bool:
        """Does a compile site compile ``fn`` itself (computes every compile site's targets)?"""
        key = function_key(file, fn)
        return id(fn) in self._entry_ids if key is None else key in self._graph_entries()

    def _reach_of(self, file: FileModel, fn: FunctionInfo) -> "tuple[set[str], list[Location]] | None":
        key = function_key(file, fn)
        if self._reached is None and self._partial_reach(file):
            return self._partial_ids.get(id(fn)) if key is None else self._partial.get(key)
        reached = self._reach()
        return self._reached_ids.get(id(fn)) if key is None else reached.get(key)

    def _partial_reach(self, file: FileModel) -> bool:
        """Make :attr:`_partial` hold what every compile site that may reach a function of ``file`` reaches
        (False: those are most of the project's, compute the whole reach). A site may reach ``file`` only
        from a module of :func:`~streamlint.model.reaching.reaching_paths` (its targets are resolved through
        its module's imports, and each call through the caller's), or when it compiles what its callers
        pass (``ModuleSummary.compiles_callers_args``: its targets come from any module). The facts of a
        function are then those of the whole reach: the same sites, in the same order (the evidence is the
        first three)."""
        path = os.path.abspath(file.path)
        moded = [(p, s) for p, s in self.project.compiling_paths() if s.moded]
        if path not in self._reaching:
            # (the budgets are for the index, whatever the number of files asked: a serial run of a whole tree
            # asks them all, and spends no more on searches than the whole reach would cost)
            budget = self._word_budget(moded)
            reaching = reaching_paths(self.project, path, budget, self._spelling) if budget else None
            if reaching is not None:
                # a site compiling what its callers pass: its targets are resolved in a caller, which reaches
                # ``file`` and calls, maybe through callers of its own, the site's function
                passed = {os.path.abspath(p) for p, s in moded if s.compiles_callers_args} - reaching
                if passed:
                    if self._forward_left is None:
                        self._forward_left = min(CALLER_BYTES, 30 * sum(
                            len(self.project.file_bytes(p) or b"") for p, s in moded if s.compiles_callers_args))
                    forward, read = reached_from(self.project, reaching, passed, self._forward_left)
                    self._forward_left -= read
                    reaching = None if forward is None else reaching | forward
            self._reaching[path] = None if reaching is None else {
                os.path.abspath(p) for p, _s in moded if os.path.abspath(p) in reaching}
        needed = self._reaching[path]
        if needed is None or len(needed) == len(moded):
            return False
        if not needed <= self._partial_paths:
            self._partial_paths |= needed
            self._partial, self._partial_ids = {}, {}
            for p, _summary in moded:
                model = self.project.file(p) if os.path.abspath(p) in self._partial_paths else None
                for cs in self._sites_in(model) if model is not None else ():
                    if cs.modes and cs.targets:
                        self._add_reach(cs, self._partial, self._partial_ids)
        return True

    def _word_budget(self, moded: list) -> int:
        """How many word searches :func:`reaching_paths` may make before the whole reach is computed instead.
        A search reads every file of the project (about 3 ns a byte here), a LibCST parse and model of a
        module costs about a thousand times more per byte (and the modules a site reaches come on top): the
        searches may read a hundred times the bytes of the modules that may compile with an execution path,
        and at most two per such module. In a densely connected release (vllm-ascend: 8 such modules, all
        reached backwards from any core module through ~700 files) that is none; in a repository of many
        small projects (this one: 46 of them in 4.5 MB) a few."""
        if self._budget is None:
            def size(path: str) -> int:
                try:
                    return os.path.getsize(path)
                except OSError:
                    return 0
            tree = sum(map(size, self.project.all_files())) or 1
            self._budget = min(2 * len(moded), 100 * sum(size(p) for p, _s in moded) // tree)
        return self._budget

    def _add_reach(self, cs: CompileSite, reached: dict, by_id: dict) -> None:
        """Add what compile site ``cs`` reaches to ``reached`` (by function_key) and ``by_id`` (the others)."""
        evidence = Location(cs.file.path, cs.file.span(cs.node), f"compiled here ({'/'.join(sorted(cs.modes))})")
        found = self._site_reach.get(id(cs))
        if found is None:  # (plain data: the trees may go)
            found = self._site_reach[id(cs)] = [(function_key(mod, fn), id(fn))
                                                for fn, mod in self.project.reachable(cs.targets)]
        for key, fn_id in found:
            modes, locs = by_id.setdefault(fn_id, (set(), [])) if key is None else reached.setdefault(key, (set(), []))
            modes |= cs.modes
            if len(locs) < 3:
                locs.append(evidence)

    def carried(self) -> ReachFacts | None:
        """The facts a new index of the same unchanged project can start from (None: none computed yet, or
        some reached function has no :func:`function_key`: its ``id`` would not survive)."""
        if self._reached is None or self._reached_ids or self._entry_ids:
            return None
        return ReachFacts(self._reached, self._entries)

    def is_graph_entry(self, file: FileModel, fn: FunctionInfo) -> bool:
        """Is ``fn`` a target of a compile site? The sites of :meth:`graph_entries`, but parsing only the
        modules that may compile it: a target is found (``compile._targets``) by resolving a name spelled
        in the compiling module (or, for a compiled parameter, in its callers'), which ends with a lookup
        of the function's or its class's own name in ``file``, reached through imports that may rename it
        (``from .x import Model as M``, ``M = Model``). So a module that may compile ``fn`` is ``file``
        itself, one that compiles its callers' arguments, or one whose bytes spell the name or a rename."""
        if self._entries is not None or fn.parent is not None:
            return self.in_graph_entries(file, fn) if self._entries is not None else any(
                target is fn for cs in self._sites_in(file) for target, _ in cs.targets)
        names = self.project.renames(fn.class_name or fn.node.name.value)
        path = os.path.abspath(file.path)

        def keep(other: str, summary) -> bool:
            if summary.compiles_callers_args or os.path.abspath(other) == path:
                return True
            data = self.project.file_bytes(other)
            return data is None or any(_word(name).search(data) for name in names)

        return any(target is fn for model in self.project.compiling_files(keep)
                   for cs in self._sites_in(model) for target, _ in cs.targets)

    def _reach(self) -> dict[FunctionKey, tuple[set[str], list[Location]]]:
        if self._reached is None:
            reached: dict[FunctionKey, tuple[set[str], list[Location]]] = {}
            for cs in self._moded_sites():
                if cs.modes and cs.targets:
                    self._add_reach(cs, reached, self._reached_ids)
            self._reached = reached
            self._partial, self._partial_ids, self._site_reach = {}, {}, {}
        return self._reached

    def prepare(self) -> None:
        """Compute the compile sites, what they reach and compile now (before worker processes fork: they
        inherit the result instead of each computing it)."""
        self.compile_sites()
        self._reach()
        self._graph_entries()

    def path_of(self, file: FileModel, fn: FunctionInfo | None) -> ExecutionPath:
        key = id(fn) if fn is not None else id(file)
        self.project.note_wide_read()  # compile sites anywhere in the project decide it
        if key not in self._cache:
            self._cache[key] = self._compute(file, fn)
        return self._cache[key]

    def _compute(self, file: FileModel, fn: FunctionInfo | None) -> ExecutionPath:
        rel = self.project.relative(file.path)
        for spec, mode in self._per_path:
            if spec.match_file(rel) and mode != "auto":
                return ExecutionPath(frozenset({mode}), "config")
        if self._mode != "auto":
            return ExecutionPath(frozenset({self._mode}), "config")
        outer = fn
        while outer is not None:
            hit = self._reach_of(file, outer)
            if hit is not None:
                return ExecutionPath(frozenset(hit[0]), "compile", tuple(hit[1]))
            outer = outer.parent
        if fn is None:
            return ExecutionPath(frozenset(), "unknown")
        families: set[Family] = set()
        switching: set[Family] = set()  # the families of the APIs that switch streams
        for site in fn.calls:
            for use in self.project.api_uses(file, site):
                if use.family is not None and use.modes is None and use.role not in (Role.CURRENT_STREAM,):
                    families.add(use.family)
                    if use.role in _SWITCH_ROLES:
                        switching.add(use.family)
        for scope in fn.scopes:
            for use in self.project.scope_use(file, scope).uses:
                if use.family is not None and use.modes is None:
                    families.add(use.family)
                    if use.role in _SWITCH_ROLES:
                        switching.add(use.family)
        modes = frozenset(_FAMILY_MODE[f] for f in families)
        if Family.TAGGED_EVENT in families:
            modes = frozenset({"reduce-overhead"})  # tagged events + npu_stream_switch: the documented combination
        elif len(modes) > 1 and len({_FAMILY_MODE[f] for f in switching}) == 1:
            # the stream switch selects the path (rules.md: each path has its own switch); an ordering API of
            # another family inside it (`npu_wait_tensor` under `torch.npu.stream(s)`) is unsupported there
            # (SL502), not a second path
            modes = frozenset({_FAMILY_MODE[next(iter(switching))]})
        if len(modes) == 1:
            return ExecutionPath(modes, "family")
        generic = self._generic_switch(file, fn) if not modes else set()
        if generic:  # one device behind every accelerator object: its native path, else the code's own
            mode = _FAMILY_MODE[next(iter(generic))] if None not in generic \
                and len({_FAMILY_MODE[f] for f in generic if f is not None}) == 1 \
                else native_mode(file, fn)
            return ExecutionPath(frozenset({mode}), DEVICE_GENERIC)
        return ExecutionPath(frozenset(), "unknown")

    def _generic_switch(self, file: FileModel, fn: FunctionInfo) -> set[Family | None]:
        """The device families (None: the device-generic API) ``fn`` switches streams with, when it does so
        only through an accelerator object (its ``stream(s)`` / ``set_stream``, wrapping one device's API or
        several) or ``torch.get_device_module().stream(s)``. That code runs natively, eagerly on whichever
        device the process has: no graph path applies."""
        uses = [u for scope in fn.scopes for u in self.project.scope_use(file, scope).uses
                if u.role in _SWITCH_ROLES] + [u for site in fn.calls for u in self.project.api_uses(file, site)
                                               if u.role is Role.SET_STREAM]
        return {u.family for u in uses if device_generic(u)}

    def scope_path(self, file: FileModel, site: CallSite) -> ExecutionPath:
        """For a call in a function whose path is undecided (it switches streams with both families): the
        path the innermost stream switch around the call selects, as for a whole function (rules.md: each
        path has its own switch) — a `with npu_stream_switch(tag):` body is GE code, a
        `with torch.npu.stream(s):` body native. Unknown outside such a scope, or under a mode-dispatching
        wrapper."""
        for scope in self.project.enclosing_scopes(file, site.scope):
            switches = [u for u in scope.uses if u.role in _SWITCH_ROLES and u.family is not None]
            if not switches:
                continue
            families = {u.family for u in switches}
            modes = {_FAMILY_MODE[f] for f in families if f is not None}
            if len(modes) == 1 and all(u.modes is None for u in switches):
                # one path: one family, or a device dispatch between families of one stream model (cuda / xpu)
                return ExecutionPath(frozenset(modes), "the enclosing stream switch")
            break
        return ExecutionPath(frozenset(), "unknown")

    def modes_at(self, file: FileModel, site: CallSite) -> frozenset[str]:
        path = self.path_of(file, site.function)
        guard = modes_under(site.guards)
        if guard is None:
            return path.modes
        if path.source in ("family", "unknown", DEVICE_GENERIC):
            # an explicit mode test in the code is stronger evidence than the API family around it
            return guard
        return path.modes & guard


def native_mode(file: FileModel, fn: FunctionInfo) -> str:
    """The native path of device-generic code: ``cuda`` when its function (else its module) names
    ``torch.cuda`` and not ``torch.npu`` / ``torch_npu``, else torch_npu ``eager``."""
    own = _named_mode(fn.calls)
    if own is not None:
        return own
    if "_native_mode" not in file.__dict__:  # (the module's answer, the same for each of its functions)
        file.__dict__["_native_mode"] = _named_mode(file.calls) or "eager"
    return file.__dict__["_native_mode"]


def _named_mode(sites) -> str | None:
    """``eager`` when a call names ``torch.npu`` / ``torch_npu`` / ``torchair``, else ``cuda`` when one names
    ``torch.cuda`` / ``torch.xpu``, else None."""
    targets = [site.target or "" for site in sites]
    if any(t.startswith(("torch.npu.", "torch_npu.", "torchair.")) for t in targets):
        return "eager"
    if any(t.startswith(("torch.cuda.", "torch.xpu.")) for t in targets):
        return "cuda"
    return None


__all__ = ["DEVICE_GENERIC", "ExecutionPath", "PathIndex", "apis"]
