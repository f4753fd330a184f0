from __future__ import annotations

from streamlint.finding import Confidence, Location, Severity
from streamlint.model.apis import Role
from streamlint.model.filefacts import CallSite, FunctionInfo
from streamlint.model.paths import ExecutionPath
from streamlint.model.wrappers import modes_under
from streamlint.rule import Invalid, Rule, RuleContext, Valid

_TORCHAIR_SCOPES = frozenset({Role.STREAM_SWITCH, Role.LIMIT_CORE_NUM, Role.SUPER_KERNEL})


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global ALL_PATHS, TAGGED, family_uses, folded_callers, judged_path, unsupported
    from streamlint.model.families import ALL_PATHS, TAGGED, family_uses, folded_callers, judged_path, unsupported


class ApiUnsupportedInMode(Rule):
    """## What it does
    Flags a stream API called on an execution path that does not support it:
    - `npu_wait_tensor` reachable in `eager`, `reduce-overhead` or `npugraph_ex` code;
    - tagged events (`npu_tagged_event_record/wait`, `npu_record_tagged_stream`) in `ge` code;
    - native `Event.record/wait`, `wait_stream`, `wait_event`, `record_event`, `record_stream` in
      `ge`-compiled code;
    - `torchair.scope.limit_core_num` in `npugraph_ex` code, and npugraph_ex's `limit_core_num` in `ge`
      code;
    - (info) TorchAir scopes in code that only runs eagerly (no compile reaches it, or `force_eager`).

    The execution path comes from the compile sites that reach the function (`mode`, `per-path-mode`
    override it); calls behind a mode guard (`if exe_mode == "ge_graph":`) or through a mode-dispatching
    wrapper count only on the paths the guard admits. Reported at the call, with a related location at
    the compile site that puts the code on that path.

    ## Why is this bad?
    `npu_wait_tensor`'s eager/aclgraph kernel raises `NotImplementedError`; GE has no converter for
    tagged-event ops and fails to compile; native events and `wait_stream` do not enter a GE graph (the
    synchronisation silently disappears or compilation fails); each core-limit scope is implemented for
    one backend only; TorchAir scopes do nothing in eager code.

    ## Example
    ```python
    # compiled with cfg.mode = "reduce-overhead"
    with torchair.scope.npu_stream_switch("moe_shared"):
        torchair.scope.npu_wait_tensor(x, logits)
        shared = self.shared_experts(x)
    ```

    ## Use instead
    ```python
    record = torchair.ops.npu_create_tagged_event("logits_ready")  # in __init__
    torchair.ops.npu_tagged_event_record(record)
    with torchair.scope.npu_stream_switch("moe_shared"):
        torchair.ops.npu_tagged_event_wait(record)
        shared = self.shared_experts(x)
    ```

    ## Fix safety
    No fix: the replacement API depends on the path.

    ## Options
    The execution path can be set with the `mode` / `per-path-mode` settings when the compile
    configuration is built at run time (from YAML, command-line flags) and cannot be followed.

    ## References
    - TorchAir `python/torchair/scope/_wait_tensor.py`, `python/torchair/ops/_tagged_event.py`
    - cann-recipes `docs/cann/zh/multi_stream_principles.md` (the three modes' APIs must not be mixed)
    """

    code = "SL502"
    name = "api-unsupported-in-mode"
    severity = Severity.ERROR
    confidence = Confidence.HIGH
    mode_tagged = True
    markers = (b"npu_wait_tensor", b"tagged", b"Event", b"wait_stream", b"record_stream", b"limit_core_num",
               b"npu_stream_switch", b"super_kernel", b"wait_event", b"record_event")

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        project, file = ctx.project, ctx.file
        forwarding: dict[int, frozenset[int] | None] = {}  # id(fn) -> ids of the calls it forwards
        for site in file.calls:
            fn = site.function
            if fn is None:
                continue
            if id(fn) not in forwarding:
                spec = project.wrapper(fn, file)
                forwarding[id(fn)] = None if spec is None else frozenset(
                    id(v.call) if v.call is not None else 0 for v in spec.variants)
            calls = forwarding[id(fn)]
            if calls is not None and (0 in calls or id(site.node) in calls):
                continue  # a call a forwarding helper makes for its callers: reported there, on their paths
            path = judged_path(project, file, site)  # (undecided: the path of the stream switch around the call)
            if not path.modes:
                continue
            reported: set[str] = set()
            for what, bad, why, remedy, use in _problems(ctx, site, path.modes):
                if what in reported:
                    continue
                reported.add(what)
                where = "/".join(sorted(bad))
                reason = why.split("; ")[0]
                message, hint = f"{what} is unsupported on this path: {reason} [{where}]", remedy
                if len(message) > 120:
                    message, hint = f"{what} is unsupported on this path [{where}]", f"{remedy} ({reason})"
                if not path.evidence:  # else the related location shows the compile
                    hint += f"; {_origin(ctx, path)}"
                related = list(path.evidence[:1])
                for cfile, caller in folded_callers(project, file, use) if use is not None else ():
                    related.append(Location(cfile.path, cfile.span(caller.node), "called here by code using another "
                                            "stream API family: its mix with this call is this one cause"))
                ctx.report(site.node, message, related=related, hint=hint)
            self._eager_scopes(ctx, site, fn, path)

    def _eager_scopes(self, ctx: RuleContext, site: CallSite, fn: FunctionInfo, path) -> None:
        """Info: a TorchAir scope in code that runs only eagerly does nothing (C7)."""
        eager_only = path.source in ("compile", "config") and path.modes == frozenset({"eager"})
        if not eager_only and not (path.source == "family" and _unreached(ctx, fn)):
            return
        for use in ctx.project.api_uses(ctx.file, site):
            if use.role in _TORCHAIR_SCOPES and (use.modes is None or "eager" in use.modes):
                guard = modes_under(site.guards)
                if guard is not None and "eager" not in guard:
                    continue
                why = _origin(ctx, path) if eager_only else "no compile reaches it"
                scope = use.spec.qualname.rsplit('.', 1)[-1]
                ctx.report(site.node, f"TorchAir scope `{scope}` has no effect in code that runs eagerly [eager]",
                           severity=Severity.INFO, confidence=Confidence.MEDIUM, related=path.evidence[:1],
                           hint=f"remove `{_call_text(ctx, site)}` at line {ctx.file.span(site.node).start_line}, or "
                                f"compile this code with a TorchAir backend ({why}): outside a TorchAir graph the "
                                "scope does nothing")
                return

    VALID = [
        Valid(
            """
            import torch
            import torchair as tng

            class MoE(torch.nn.Module):
                def forward(self, x, logits):
                    with tng.scope.npu_stream_switch("moe_shared"):
                        tng.scope.npu_wait_tensor(x, logits)
                        return x * 2

            compiled = torch.compile(MoE(), backend="npu")
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            import torchair as tng

            class MoE(torch.nn.Module):
                def forward(self, x, logits):
                    with tng.scope.npu_stream_switch("moe_shared"):
                        tng.scope.npu_wait_tensor(x, logits)
                        return x * 2

            def build():
                config = tng.CompilerConfig()
                config.mode = "reduce-overhead"
                return torch.compile(MoE(), backend=tng.get_npu_backend(compiler_config=config))
            """,
            line=7,
        ),
    ]


def _problems(ctx: RuleContext, site: CallSite, path_modes: frozenset[str]):
    """(what, unsupported paths, why, what to do, the family use or None) for each API use of the call on a path
    without support."""
    for use in family_uses(ctx.project, ctx.file, site):
        unsupported_on, why = unsupported(use)
        bad = path_modes & unsupported_on
        if bad:
            yield use.describe(), bad, why, _remedy(ctx, site, use.role, use.group, use.what, bad), use
    guard = modes_under(site.guards) or ALL_PATHS
    for use in ctx.project.api_uses(ctx.file, site):
        if use.role not in (Role.LIMIT_CORE_NUM, Role.LIMIT_CORE_NUM_NPUGRAPH_EX):
            continue
        # (the call's line only now: a position costs a code generation of its statement, most calls have none)
        call = f"`{_call_text(ctx, site)}` at line {ctx.file.span(site.node).start_line}"
        modes = path_modes & guard & (use.modes if use.modes is not None else ALL_PATHS)
        if use.role is Role.LIMIT_CORE_NUM and "npugraph_ex" in modes:
            yield ("`torchair.scope.limit_core_num`", {"npugraph_ex"},
                   "it is the GE scope; npugraph_ex has its own (stream-level)",
                   f"replace {call} with `torch.npu.npugraph_ex.scope.limit_core_num(...)` (same arguments)", None)
        elif use.role is Role.LIMIT_CORE_NUM_NPUGRAPH_EX and "ge" in modes:
            yield ("`npugraph_ex.scope.limit_core_num`", {"ge"}, "it is the npugraph_ex scope; GE has its own",
                   f"replace {call} with `torchair.scope.limit_core_num(...)` (same arguments)", None)


def _call_text(ctx: RuleContext, site: CallSite, limit: int = 60) -> str:
    """The call as written (shortened), so the hint names the exact call to remove or replace."""
    text = " ".join(ctx.file.code(site.node).split())
    return text if len(text) <= limit else text[: limit - 6] + "…)"


def _arg_text(ctx: RuleContext, site: CallSite, index: int) -> str | None:
    args = [a for a in site.node.args if a.keyword is None]
    if index < len(args):
        return " ".join(ctx.file.code(args[index].value).split())
    return None


def _remedy(ctx: RuleContext, site: CallSite, role: Role | None, group: str, what: str, bad) -> str:
    """Which call to remove or replace, and by what, naming the tensors/events/streams of the call."""
    call = f"`{_call_text(ctx, site)}` at line {ctx.file.span(site.node).start_line}"
    if role is Role.WAIT_TENSOR:
        # npu_wait_tensor(x, dep): x waits for dep; a wrapper may put a flag first: name the last two
        args = [a for a in site.node.args if a.keyword is None]
        waited = _arg_text(ctx, site, len(args) - 2) if len(args) >= 2 else None
        dep = _arg_text(ctx, site, len(args) - 1) if len(args) >= 2 else None
        order = (f"so that `{waited}` is used only after `{dep}` is produced" if waited and dep
                 else "to order the two tensors")
        if bad <= {"reduce-overhead"}:
            event = ("a tagged event (`npu_tagged_event_record` after the producer, `npu_tagged_event_wait` before "
                     "the use)")
        elif "reduce-overhead" in bad:
            event = "an event (tagged events in reduce-overhead, `torch.npu.Event` record/wait otherwise)"
        else:
            event = "a `torch.npu.Event` (`record()` after the producer, `wait()` before the use)"
        return f"replace {call} with {event} {order}, or guard it to run only in GE code"
    if group == TAGGED:
        if "record_tagged_stream" in what:
            return f"remove {call}: GE manages tensor memory itself"
        return (f"remove {call}: GE orders data edges itself; for an order without a data edge use "
                "`npu_wait_tensor(consumer, producer)` in the consumer's `npu_stream_switch` scope")
    if "record_stream" in what:
        return f"remove {call}: GE manages tensor memory itself"
    return (f"remove {call} (or guard it to the eager path): GE orders data edges itself; for an order without a "
            "data edge use `npu_wait_tensor` / `torchair.ops.wait`")


def _origin(ctx: RuleContext, path: ExecutionPath) -> str:
    """Where the execution path comes from, for the message (the related location repeats it)."""
    if path.source == "compile" and path.evidence:
        loc = path.evidence[0]
        return f"compiled at {ctx.project.relative(loc.path)}:{loc.span.start_line}"
    return f"execution path {path.describe()}"


def _unreached(ctx: RuleContext, fn: FunctionInfo) -> bool:
    """No compile reaches ``fn`` although the project's compile sites are all understood."""
    if fn.class_name is None or fn.node.name.value not in ("forward", "__call__"):
        return False
    return ctx.project.path_index.all_sites_understood()

