"""Stream API uses of a function grouped by API family (domain C7-C10), with their mode restrictions.

Three families must not be mixed in one execution path and each is supported only on some paths:

- ``GE``: TorchAir GE scopes ``npu_stream_switch`` / ``npu_wait_tensor``;
- ``TAGGED``: TorchAir tagged events ``npu_tagged_event_record/wait``, ``npu_record_tagged_stream``;
- ``NATIVE``: native streams and events (``torch.npu.stream(s)``, ``set_stream``, ``Event.record/wait``,
  ``Stream.wait_stream/wait_event/record_event``, ``Tensor.record_stream``), NPU or CUDA.

A use carries the execution paths it is restricted to: a mode-dispatching wrapper's variant
(:attr:`ApiUse.modes`) narrowed by the mode guards around the call (``if exe_mode == "ge_graph":``).
Object construction (``Stream()``, ``Event()``, ``npu_create_tagged_event``) and queries
(``current_stream()``) are not uses: they are neutral, usually in ``__init__``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.finding import Location
from streamlint.model.apis import EXECUTION_PATHS, Role
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import CallSite, FunctionInfo
from streamlint.model.streams import (
    EVENT,
    EVENT_LIST,
    STREAM,
    STREAM_LIST,
    attr_kind,
    kind_of_call,
    local_kind,
)
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.calls import switch_condition
from streamlint.model.uses import bind_arguments
from streamlint.model.wrappers import modes_under

if TYPE_CHECKING:
    from streamlint.model.paths import ExecutionPath
    from streamlint.model.project import Project

GE = "TorchAir GE scope"
TAGGED = "TorchAir tagged event"
NATIVE = "native stream/event"

ALL_PATHS = frozenset(EXECUTION_PATHS)

_ROLE_GROUP = {
    Role.STREAM_SWITCH: GE,
    Role.WAIT_TENSOR: GE,
    Role.TAGGED_EVENT_RECORD: TAGGED,
    Role.TAGGED_EVENT_WAIT: TAGGED,
    Role.RECORD_TAGGED_STREAM: TAGGED,
    Role.NATIVE_STREAM_CONTEXT: NATIVE,
    Role.SET_STREAM: NATIVE,
}
_EVENT_METHODS = frozenset({"record", "wait"})
_STREAM_METHODS = frozenset({"wait_stream", "wait_event", "record_event"})


@dataclass(frozen=True)
class FamilyUse:
    """One call that uses a stream API family (directly, through a wrapper, or as a native method)."""

    site: CallSite
    file: FileModel
    what: str  # e.g. "npu_wait_tensor", "torch.npu.stream", "Event.record()", "wait_stream()"
    role: Role | None  # the API role; None for native methods
    group: str  # GE / TAGGED / NATIVE
    modes: frozenset[str]  # execution paths the call is restricted to (ALL_PATHS: unrestricted)
    wrappers: tuple[str, ...] = ()
    flag: str | None = None  # a wrapper choosing its API at run time: the call-site condition that selects it

    @property
    def node(self) -> cst.Call:
        return self.site.node

    def describe(self) -> str:
        """`` `npu_wait_tensor` (through wrapper `utils.npu_wait_tensor`) `` for messages."""
        via = f" (through wrapper `{self.wrappers[0]}`)" if self.wrappers else ""
        return f"`{self.what}`{via}"

    def location(self, message: str = "") -> Location:
        return Location(self.file.path, self.file.span(self.site.node), message)


def native_method(project: "Project", file: FileModel, site: CallSite) -> str | None:
    """``Event.record()``, ``wait_stream()``, ``record_stream()``, … when a method call is one of the
    native stream/event operations (receiver typed through :mod:`streams`), else None."""
    method = site.method
    if method is None or site.receiver is None:
        return None
    if site.target is not None and project.function(site.target, file) is not None:
        return None  # a project function (`utils.record_event(...)`)
    if method == "record_stream":
        return "record_stream()"
    kind = receiver_kind(project, file, site)
    if method in _STREAM_METHODS and (kind in (STREAM, None) and not _is_module(file, site)):
        return f"{method}()"
    if method in _EVENT_METHODS and kind == EVENT:
        return f"Event.{method}()"
    return None


def receiver_kind(project: "Project", file: FileModel, site: CallSite) -> str | None:
    receiver = site.receiver
    fn = site.function
    if isinstance(receiver, cst.Call):
        return kind_of_call(project, file, receiver)
    if isinstance(receiver, cst.Subscript):
        inner = _value_kind(project, file, fn, receiver.value)
        return {EVENT_LIST: EVENT, STREAM_LIST: STREAM}.get(inner or "")
    return _value_kind(project, file, fn, receiver)


def _value_kind(project: "Project", file: FileModel, fn: FunctionInfo | None,
                expr: cst.BaseExpression) -> str | None:
    name = dotted(expr)
    if name is None:
        return None
    if name.startswith("self.") and name.count(".") == 1 and fn is not None and fn.class_name:
        return attr_kind(project, file, file.classes.get(fn.class_name), name[5:])
    if "." not in name and fn is not None:
        return local_kind(project, file, fn, name)
    return None


def _is_module(file: FileModel, site: CallSite) -> bool:
    """`torch.npu.wait_stream(...)`-style calls on a module name, not on an object."""
    head = (dotted(site.receiver) or "").split(".")[0] if site.receiver is not None else ""
    return bool(head) and head in file.names and head != "self"


def family_uses(project: "Project", file: FileModel, site: CallSite) -> list[FamilyUse]:
    """The family uses of one call (one per wrapper variant), with their mode restrictions."""
    base = _site_modes(project, file, site)
    uses = [u for u in _raw_uses(project, file, site) if u.modes & base]
    flag = run_time_flag(project, file, site) if any(u.wrappers for u in uses) else None
    if flag is False:
        return []  # `enabled=False` at the call site: the wrapper runs no stream API
    return [FamilyUse(u.site, u.file, u.what, u.role, u.group, u.modes & base, u.wrappers,
                      flag if isinstance(flag, str) and u.wrappers else None) for u in uses]


def run_time_flag(project: "Project", file: FileModel, site: CallSite) -> str | bool | None:
    """A call of a wrapper that chooses its API at run time by an enable flag (domain §1.16: the real scope
    or ``nullcontext()``), its argument evaluated at the call site, the wrapper's default included: False
    when the wrapper runs no stream API there, None when it always does, else the condition (source text)
    under which it does. A flag that is a parameter of the calling function defaulting to false is the
    caller's choice: still a condition."""
    found = project.call_target(file, site)
    if found is None:
        return None
    wfn, wmod = found
    if project.wrapper(wfn, wmod) is None:
        return None
    cond = switch_condition(project, wmod, wfn, frozenset(_ROLE_GROUP))
    if cond is None:
        return None
    param, positive = cond
    params = wfn.params[1:] if wfn.class_name and wfn.params[:1] == ("self",) else wfn.params
    expr = bind_arguments(params + wfn.kwonly, site.node, kwonly=wfn.kwonly).get(param)
    if expr is None:
        default = next((p.default for p in (*wfn.node.params.params, *wfn.node.params.kwonly_params)
                        if p.name.value == param), None)
        expr = default
    if expr is None:
        return None
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return None if (expr.value == "True") == positive else False
    text = file.code(expr)
    return text if positive else f"not ({text})"


def _raw_uses(project: "Project", file: FileModel, site: CallSite) -> list[FamilyUse]:
    """Family uses of a call restricted by wrapper variants only (no guards)."""
    found: list[FamilyUse] = []
    for use in project.api_uses(file, site):
        group = _ROLE_GROUP.get(use.role)
        if group is None:
            continue
        modes = ALL_PATHS if use.modes is None else ALL_PATHS & use.modes
        if modes:
            found.append(FamilyUse(site, file, _api_name(use.spec.qualname), use.role, group, modes, use.wrappers))
    if not found:
        what = native_method(project, file, site)
        if what is not None:
            found.append(FamilyUse(site, file, what, None, NATIVE, ALL_PATHS))
    return found


_NOT_GE = frozenset({"eager", "reduce-overhead", "npugraph_ex"})


def unsupported(use: FamilyUse) -> tuple[frozenset[str], str]:
    """(execution paths among the use's own on which its API is not supported, why) (C8-C10):
    ``npu_wait_tensor`` outside GE, tagged events and native stream/event operations in GE. A use is
    one root cause on those paths (SL502); it takes part in a family mix (SL501) only on the others."""
    if use.role is Role.WAIT_TENSOR:
        return use.modes & _NOT_GE, ("its kernel raises NotImplementedError outside GE; use tagged events / "
                                     "native events there")
    if use.group == TAGGED:
        return use.modes & {"ge"}, ("GE has no converter for tagged-event ops (the compile fails); GE orders "
                                    "data edges itself")
    if use.role is None:
        return use.modes & {"ge"}, ("native stream/event operations do not enter a GE graph; use "
                                    "npu_wait_tensor / torchair.ops.wait")
    return frozenset(), ""


def supported_modes(use: FamilyUse) -> frozenset[str]:
    """The execution paths of the use on which its API is supported (where it can be part of a mix)."""
    return use.modes - unsupported(use)[0]


CONFLICTS = {NATIVE: (TAGGED, GE), TAGGED: (NATIVE,), GE: (NATIVE,)}  # families that must not meet on one path (SL501;
# npu_stream_switch with tagged events is the documented reduce-overhead combination, GE with tagged events SL502's)


def folded_callers(project: "Project", file: FileModel, use: FamilyUse,
                   limit: int = 3) -> list[tuple[FileModel, CallSite]]:
    """Calls of the function holding ``use`` (an API unsupported on its path: SL502's finding) made by functions that
    use a family it would mix with themselves (a native stream context around or beside the call): the mix there
    exists only through this call, one cause, reported once as the SL502 with these calls as related locations."""
    fn = use.site.function
    if fn is None:
        return []
    found = []
    for cfile, site in callers_of(project, file, fn) or ():
        caller = site.function
        if caller is not None and caller is not fn and any(
                u.group in CONFLICTS[use.group] for s in caller.calls for u in family_uses(project, cfile, s)):
            found.append((cfile, site))
            if len(found) >= limit:
                break
    return found


def judged_path(project: "Project", file: FileModel, site: CallSite) -> "ExecutionPath":
    """The execution path a call's API uses are judged on (SL502): its function's, or, for a function whose path
    is undecided, the one the innermost stream switch around the call selects (empty when neither is known)."""
    path = project.execution_path(file, site.function)
    return path if path.modes else project.path_index.scope_path(file, site)


def mixing_modes(project: "Project", file: FileModel, use: FamilyUse) -> frozenset[str]:
    """The paths on which ``use`` takes part in a mix of families seen from a caller of its function: where its API
    is supported, and, when the API is unsupported on the path it is judged on there (SL502's finding, the one
    root cause), only on that path's other modes (none when the path is that mode alone)."""
    modes = supported_modes(use)
    bad = unsupported(use)[0]
    if bad:
        judged = judged_path(project, file, use.site).modes
        if judged & bad:
            modes &= judged
    return modes


def _site_modes(project: "Project", file: FileModel, site: CallSite) -> frozenset[str]:
    """Paths a call can run on given its guards: mode comparisons (``exe_mode == "ge_graph"``), and
    flag tests that dispatch between families (``if self.torchair_graph_enabled:`` with the GE API in
    one branch and native streams / tagged events in the other)."""
    guard = modes_under(site.guards)
    modes = guard if guard is not None else ALL_PATHS
    if site.function is not None and site.guards:
        dispatch = _dispatching_tests(project, file, site.function)
        for g in site.guards:
            modes &= dispatch.get((id(g.test), g.negated), ALL_PATHS)
    return modes


def _dispatching_tests(project: "Project", file: FileModel, fn: FunctionInfo) -> dict[tuple[int, bool], frozenset[str]]:
    """(id(test), negated) -> paths, for `if` tests of ``fn`` whose branches use the GE family on one side
    and another family on the other: the GE side runs on ``ge``, the other side everywhere else."""
    cache: dict[int, tuple[FunctionInfo, dict]] = project.path_index.derived.setdefault("dispatch", {})
    entry = cache.get(id(fn))
    if entry is not None and entry[0] is fn:
        return entry[1]
    branches: dict[tuple[int, bool], set[str]] = {}
    for site in fn.calls:
        groups = {u.group for u in _raw_uses(project, file, site)}
        for g in site.guards:
            branches.setdefault((id(g.test), g.negated), set()).update(groups)
    found: dict[tuple[int, bool], frozenset[str]] = {}
    for (test, negated), groups in branches.items():
        other = branches.get((test, not negated), set())
        if groups == {GE} and len(other) == 1 and other != {GE}:
            found[(test, negated)] = frozenset({"ge"})
            found[(test, not negated)] = ALL_PATHS - {"ge"}
    cache[id(fn)] = (fn, found)
    return found


def _api_name(qualname: str) -> str:
    """`torchair.scope.npu_stream_switch` → `npu_stream_switch`; `torch.npu.stream` stays whole."""
    return qualname if qualname.startswith(("torch.npu.", "torch.cuda.", "torch.xpu.")) else qualname.rsplit(".", 1)[-1]


__all__ = ["ALL_PATHS", "CONFLICTS", "GE", "NATIVE", "TAGGED", "FamilyUse", "family_uses", "folded_callers",
           "judged_path", "mixing_modes",
           "native_method", "receiver_kind", "run_time_flag", "supported_modes", "unsupported"]
