"""Execution paths: which of ge / reduce-overhead / npugraph_ex / eager / cuda a function runs on.

Resolution order (rules.md): configuration (``mode``, ``per-path-mode``) → compile sites reaching the
function through the call graph → the API family the function uses (``npu_stream_switch`` with no
compile site is GE, TorchAir's default) → unknown (an empty set).
"""

from __future__ import annotations


import pathspec

from streamlint.finding import Location
from streamlint.model import apis
from streamlint.model.apis import Family, Role
from streamlint.model.compile import CompileSite, compile_site
from streamlint.model.file import CallSite, FileModel, FunctionInfo
from streamlint.model.wrappers import modes_under

from streamlint.model.queries import ExecutionPath, ProjectQueries

# The path of code that switches streams only through the device-generic API: native, on a device
# chosen at run time (some order their streams' data themselves), see dataflow.function_flow
DEVICE_GENERIC = "device-generic"
_SWITCH_ROLES = frozenset({Role.STREAM_SWITCH, Role.NATIVE_STREAM_CONTEXT, Role.SET_STREAM})
_FAMILY_MODE = {
    Family.TAGGED_EVENT: "reduce-overhead",
    Family.GE_SCOPE: "ge",
    Family.NATIVE_NPU: "eager",
    Family.CUDA: "cuda",
}


class PathIndex:
    """Project-wide compile facts, computed once per project on first use."""

    def __init__(self, project: ProjectQueries) -> None:
        self.project = project
        self._sites: list[CompileSite] | None = None
        self._reached: dict[int, tuple[set[str], list[Location]]] | None = None
        self._cache: dict[int, ExecutionPath] = {}
        # facts derived from several files (stream kinds, env settings, dispatch summaries…), keyed by
        # topic; they live here because the engine replaces the index whenever any file changes
        self.derived: dict[str, dict] = {}
        self._per_path = [
            (pathspec.GitIgnoreSpec.from_lines([pattern]), mode) for pattern, mode in project.options.per_path_mode
        ]
        self._mode = project.options.mode

    def compile_sites(self) -> list[CompileSite]:
        self.project.note_wide_read()
        if self._sites is None:
            sites: list[CompileSite] = []
            for model in self.project.compiling_files():
                for call in model.calls:
                    found = compile_site(self.project, model, call)
                    if found is not None:
                        sites.append(found)
            self._sites = sites
        return self._sites

    def _reach(self) -> dict[int, tuple[set[str], list[Location]]]:
        if self._reached is None:
            reached: dict[int, tuple[set[str], list[Location]]] = {}
            for cs in self.compile_sites():
                if not cs.modes or not cs.targets:
                    continue
                evidence = Location(cs.file.path, cs.file.span(cs.node), f"compiled here ({'/'.join(sorted(cs.modes))})")
                for fn, _mod in self.project.reachable(cs.targets):
                    modes, locs = reached.setdefault(id(fn), (set(), []))
                    modes |= cs.modes
                    if len(locs) < 3:
                        locs.append(evidence)
            self._reached = reached
        return self._reached

    def prepare(self) -> None:
        """Compute the compile sites and what they reach now (before worker processes fork: they
        inherit the result instead of each computing it)."""
        self._reach()

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
            hit = self._reach().get(id(outer))
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
        elif len(modes) > 1 and len(switching) == 1:
            # the stream switch selects the path (rules.md: each path has its own switch); an ordering API of
            # another family inside it (`npu_wait_tensor` under `torch.npu.stream(s)`) is unsupported there
            # (SL502), not a second path
            modes = frozenset({_FAMILY_MODE[next(iter(switching))]})
        if len(modes) == 1:
            return ExecutionPath(modes, "family")
        if not modes and self._generic_switch(file, fn):
            return ExecutionPath(frozenset({_native_mode(file, fn)}), DEVICE_GENERIC)
        return ExecutionPath(frozenset(), "unknown")

    def _generic_switch(self, file: FileModel, fn: FunctionInfo) -> bool:
        """Does ``fn`` switch streams only through the device-generic API (an accelerator object's
        ``stream(s)`` / ``set_stream``, ``torch.get_device_module().stream(s)``)? That code runs natively,
        eagerly on whichever device the process has: no graph path applies."""
        return any(u.family is None and u.role in _SWITCH_ROLES for scope in fn.scopes
                   for u in self.project.scope_use(file, scope).uses) \
            or any(u.family is None and u.role is Role.SET_STREAM for site in fn.calls
                   for u in self.project.api_uses(file, site))

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
            if len(families) == 1 and all(u.modes is None for u in switches):
                return ExecutionPath(frozenset({_FAMILY_MODE[families.pop()]}), "the enclosing stream switch")
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


def _native_mode(file: FileModel, fn: FunctionInfo) -> str:
    """The native path of device-generic code: ``cuda`` when its function (else its module) names
    ``torch.cuda`` and not ``torch.npu`` / ``torch_npu``, else torch_npu ``eager``."""
    for sites in (fn.calls, file.calls):
        targets = [site.target or "" for site in sites]
        if any(t.startswith(("torch.npu.", "torch_npu.", "torchair.")) for t in targets):
            return "eager"
        if any(t.startswith("torch.cuda.") for t in targets):
            return "cuda"
    return "eager"


__all__ = ["DEVICE_GENERIC", "ExecutionPath", "PathIndex", "apis"]
