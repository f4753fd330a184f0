from __future__ import annotations

from dataclasses import dataclass

from streamlint._lazy import cst
from streamlint.finding import Confidence, Location, Severity
from streamlint.model.apis import STREAM_WORD
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo, Guard, in_exclusive_branches
from streamlint.model.wrappers import modes_under
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line

_MAX_DEPTH = 6


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global ALL_PATHS, family_uses, mixing_modes, run_time_flag, supported_modes, _CONFLICTS
    from streamlint.model.families import ALL_PATHS, family_uses, mixing_modes, run_time_flag, supported_modes
    from streamlint.model.families import CONFLICTS as _CONFLICTS  # (the families that must not meet in one path)


@dataclass(frozen=True)
class _Entry:
    """A family reached at one call of the function: directly, or inside a callee."""

    group: str
    modes: frozenset[str]
    what: str
    file: FileModel
    node: cst.CSTNode  # where the family is used (or the call reaching it): the related location
    note: str
    guards: tuple[Guard, ...] = ()  # the `if` tests around the call: entries in opposite branches never meet
    callee: FunctionInfo | None = None
    flag: str | None = None  # the run-time condition selecting a wrapper's API (families.run_time_flag)

    @property
    def origin(self) -> Location:
        """Built only for a reported conflict: a position costs a code generation of the module."""
        return Location(self.file.path, self.file.span(self.node), self.note)


class MixedStreamApiStyle(Rule):
    """## What it does
    Flags one execution path — a function and what it calls — that mixes stream API families:
    TorchAir tagged events with native `Stream`/`Event` objects, or TorchAir GE scopes
    (`npu_stream_switch`, `npu_wait_tensor`) with native stream contexts and events. Reported once per
    function, at the first use of the second family, with a related location at the first family.

    Not reported: `npu_stream_switch` with tagged events (the documented reduce-overhead combination);
    mode-dispatching code whose branches (`if exe_mode == "ge_graph": ... else: ...`) or wrappers use
    one family each; wrappers that resolve to one family whatever their name; a caller that meets a family
    only through a helper's API unsupported on the helper's path (SL502's finding there, the one root cause).

    ## Why is this bad?
    Each execution path has its own stream model: GE takes string-tagged scopes and orders data edges
    itself, reduce-overhead takes tagged events, npugraph_ex and eager take native streams and events.
    Native events in a GE graph fail to synchronise or fail to compile; a mixed implementation is right
    on at most one path.

    ## Example
    ```python
    def forward(self, x):
        with torchair.scope.npu_stream_switch("moe_shared"):
            shared = self.shared_experts(x)
        with torch.npu.stream(self.comm_stream):
            dist.all_reduce(shared)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        with torchair.scope.npu_stream_switch("moe_shared"):
            shared = self.shared_experts(x)
        with torchair.scope.npu_stream_switch("comm"):
            dist.all_reduce(shared)
    ```

    ## Fix safety
    No fix.

    ## References
    - cann-recipes `docs/cann/zh/multi_stream_principles.md` (interfaces differ per mode and must not be mixed)
    """

    code = "SL501"
    name = "mixed-stream-api-style"
    severity = Severity.WARNING
    confidence = Confidence.HIGH
    mode_tagged = True
    markers = (b"npu_stream_switch", b"npu_wait_tensor", b"tagged", STREAM_WORD, b"Event")

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        summaries: dict[int, dict[str, frozenset[str]]] = {}
        for fn in ctx.file.functions.values():
            if ctx.project.wrapper(fn, ctx.file) is not None:
                continue  # a forwarding helper: its callers' paths decide
            path = ctx.project.execution_path(ctx.file, fn).modes or ALL_PATHS
            seen: dict[str, list[_Entry]] = {}
            for site, entries in _entries(ctx, ctx.file, fn, path, summaries):
                conflict = _first_conflict(entries, seen, ctx, summaries)
                if conflict is not None:
                    entry, other, common = conflict
                    line = other.origin.span.start_line
                    ctx.report(
                        site.node,
                        first_line(f"{entry.what} ({entry.group}) mixed with {other.what} ({other.group}, line {line}) "
                                   f"[{'/'.join(sorted(common))}]",
                                   f"{entry.group} mixed with {other.group} (line {line}) on one path "
                                   f"[{'/'.join(sorted(common))}]"),
                        related=[other.origin],
                        hint=f"use one stream API family per execution path: replace {entry.what} or {other.what} "
                             f"(line {line}), or dispatch on the execution mode",
                    )
                    break
                for entry in entries:
                    seen.setdefault(entry.group, []).append(entry)

    VALID = [
        Valid(
            """
            import torch
            import torchair as tng

            def stream_switch(stream, exe_mode):
                if exe_mode == "ge_graph":
                    return tng.scope.npu_stream_switch(stream)
                return torch.npu.stream(stream)

            class MoE(torch.nn.Module):
                def forward(self, x):
                    with stream_switch(self.side, self.exe_mode):
                        shared = self.shared(x)
                    return shared
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            import torchair as tng

            class MoE(torch.nn.Module):
                def forward(self, x):
                    with tng.scope.npu_stream_switch("moe_shared"):
                        shared = self.shared(x)
                    with torch.npu.stream(self.comm_stream):
                        out = shared * 2
                    return out
            """,
            line=8,
        ),
    ]


def _entries(ctx: RuleContext, file: FileModel, fn: FunctionInfo, path: frozenset[str],
             summaries: dict[int, dict[str, frozenset[str]]]):
    """(call site, family entries) for each call of ``fn`` in source order."""
    for site in fn.calls:
        uses = family_uses(ctx.project, file, site)
        if uses:
            # an API unsupported on a path is SL502's finding there: it mixes families only where it is supported
            # (in a function of undecided path, the path of the stream switch around the call, as SL502 sees it)
            here = path
            if path == ALL_PATHS:
                here = ctx.project.path_index.scope_path(file, site).modes or ALL_PATHS
            yield site, [_Entry(u.group, supported_modes(u) & here, u.describe(), u.file, u.site.node,
                                f"{u.describe()} ({u.group})", site.guards, flag=u.flag) for u in uses
                         if supported_modes(u) & here]
            continue
        guard = (modes_under(site.guards) or ALL_PATHS) & path
        entries = []
        for callee, cmod in _callees(ctx, file, site):
            for group, modes in _summary(ctx, callee, cmod, summaries, 0).items():
                if modes & guard:
                    entries.append(_Entry(group, modes & guard, f"`{callee.qualname}()`", file, site.node,
                                          f"{group} used inside `{callee.qualname}`", site.guards, callee))
        if entries:
            yield site, entries


def _summary(ctx: RuleContext, fn: FunctionInfo, file: FileModel, summaries: dict[int, dict[str, frozenset[str]]],
             depth: int) -> dict[str, frozenset[str]]:
    """Families a function uses (itself and through its callees), with the paths each is used on."""
    if id(fn) in summaries:
        return summaries[id(fn)]
    summaries[id(fn)] = {}
    found: dict[str, frozenset[str]] = {}
    for site in fn.calls:
        uses = family_uses(ctx.project, file, site)
        for use in uses:  # (an API unsupported where the callee runs is SL502's finding there, not the callers' mix)
            found[use.group] = found.get(use.group, frozenset()) | mixing_modes(ctx.project, file, use)
        if uses or depth >= _MAX_DEPTH:
            continue
        guard = modes_under(site.guards) or ALL_PATHS
        for callee, cmod in _callees(ctx, file, site):
            for group, modes in _summary(ctx, callee, cmod, summaries, depth + 1).items():
                if modes & guard:
                    found[group] = found.get(group, frozenset()) | (modes & guard)
    summaries[id(fn)] = found
    return found


def _callees(ctx: RuleContext, file: FileModel, site) -> list[tuple[FunctionInfo, FileModel]]:
    """Functions a call runs; constructing a module (`Block(config)`) does not run its forward, a wrapper called
    with its API disabled (`enabled=False`) runs none of it."""
    if run_time_flag(ctx.project, file, site) is False:
        return []
    found = ctx.project.call_targets(file, site)
    if site.target is not None and isinstance((ctx.project.symbol(site.target, file) or (None,))[0], ClassInfo):
        return []
    return found


def _mixes(summary: dict[str, frozenset[str]]) -> bool:
    return any(summary.get(g, frozenset()) & summary.get(h, frozenset())
               for g, others in _CONFLICTS.items() for h in others)


def _first_conflict(entries: list[_Entry], seen: dict[str, list[_Entry]], ctx: RuleContext,
                    summaries: dict[int, dict[str, frozenset[str]]]):
    for entry in entries:
        if entry.callee is not None and _mixes(summaries.get(id(entry.callee), {})):
            continue  # the callee mixes on its own and is reported there
        for other_group in _CONFLICTS[entry.group]:
            for other in seen.get(other_group, ()):
                if entry.modes & other.modes and not in_exclusive_branches(entry.guards, other.guards) \
                        and _may_meet(entry, other):
                    return entry, other, entry.modes & other.modes
    return None


def _may_meet(a: _Entry, b: _Entry) -> bool:
    """Whether two uses are known to run together. A use through a wrapper that picks its API at run time
    (``enabled=flag``) runs only when the flag holds; when the other use runs only under a condition of its
    own (an ``if`` that does not test that flag, another flag), nothing says both hold on one path."""
    for x, y in ((a, b), (b, a)):
        if x.flag is None:
            continue
        if y.flag is not None and y.flag != x.flag:
            return False
        if y.flag is None and y.guards and not any(x.flag in y.file.code(g.test) for g in y.guards):
            return False
    return True
