from __future__ import annotations

from streamlint.finding import Confidence, Severity
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global Reach, analysis, describe_scope
    from streamlint.model.breaks import Reach, analysis, describe_scope


class GraphBreakInStreamScope(Rule):
    """## What it does
    Flags a Dynamo graph break inside a TorchAir scope — `npu_stream_switch`, `limit_core_num` (the
    torchair and the npugraph_ex one), `super_kernel` and the other `torchair.scope` context managers —
    written directly in the `with` block or reached through a project function called inside it (then
    the call is reported and the break's location is given). Graph breaks are `print`, logging,
    `warnings.warn`, `time.*`, file I/O, `torch._dynamo.graph_break()`, `Tensor.item()` / `.tolist()`,
    calls of `@torch.compiler.disable` functions, and data-dependent `if` / `while` / `assert` /
    ternary / `and` / `or` on tensor values. Scopes reached through project wrappers count; a wrapper
    resolving to `torch.npu.stream` does not (a native stream context is not a TorchAir scope).

    Not flagged: code guarded off by `torch.compiler.is_compiling()` / `torch._dynamo.is_compiling()`,
    shape / dtype / device / `dim()` / `numel()` tests, functions registered with
    `torch._dynamo.config.reorderable_logging_functions`, and names that merely look alike.

    ## Why is this bad?
    TorchAir scopes are ordinary context managers for Dynamo: a graph break inside one cannot be
    resumed, so Dynamo gives up on the whole function and runs it eagerly (an error under
    `fullgraph=True`). The ops then run on the default stream, `npu_wait_tensor` raises in eager mode,
    and core limits / SuperKernel attributes are silently lost.

    ## Example
    ```python
    with torchair.scope.npu_stream_switch("moe_shared"):
        shared = self.shared_experts(x)
        print("shared", shared.shape)
        if shared.abs().max() > 1e4:
            shared = shared.clamp(-1e4, 1e4)
    ```

    ## Use instead
    ```python
    with torchair.scope.npu_stream_switch("moe_shared"):
        shared = self.shared_experts(x)
        shared = shared.clamp(-1e4, 1e4)  # decide on device, no Python branch
    if not torch.compiler.is_compiling():
        print("shared", shared.shape)
    ```

    ## Fix safety
    No automatic fix: moving or removing the break changes behaviour.

    ## References
    - TorchAir `docs/zh/ascend_ir/api/scope/limit_core_num.md` ("no graph break inside the with")
    - PyTorch `programming_model.skipped_functions.md` (graph breaks under context managers)
    """

    code = "SL101"
    name = "graph-break-in-stream-scope"
    severity = Severity.ERROR
    confidence = Confidence.HIGH
    markers = (b"torchair", b"npu_stream_switch", b"NpuStreamSwitch", b"limit_core_num", b"super_kernel",
               b"SuperKernelScope", b"npugraph_ex")

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        an = analysis(ctx.project)
        file = ctx.file
        for fn in list(file.functions.values()):
            if not any(an.no_break_scope(file, site) is not None for site in fn.scopes):
                continue
            facts = an.facts(file, fn)
            for brk in facts.breaks:
                scope = an.no_break_scope(file, brk.scope)
                if scope is None:
                    continue
                where = describe_scope(scope)
                line = scope.file.span(scope.site.with_node).start_line
                ctx.report(
                    brk.node,
                    first_line(f"{brk.what} inside {where} is a Dynamo graph break",
                               f"{brk.what} inside a TorchAir scope is a Dynamo graph break"),
                    confidence=None if brk.certain else Confidence.MEDIUM,
                    hint=f"move it out of {where} (line {line}) or guard it with "
                         "`if not torch.compiler.is_compiling():`; a break inside a TorchAir scope cannot be "
                         "resumed, so the function falls back to eager and the scope is lost",
                )
            for live in facts.calls:
                if id(live.site.node) in facts.break_calls:
                    continue
                scope = an.no_break_scope(file, live.scope)
                if scope is None:
                    continue
                found = ctx.project.call_target(file, live.site)
                if found is None:
                    continue
                callee, mod = found
                reach = an.reached(mod, callee)
                if reach is None:
                    # callee parameter typing: a tensor passed to a parameter the callee syncs on
                    passed = an.passed_tensor_break(file, fn, live.site, callee, mod)
                    reach = Reach(passed, ()) if passed is not None else None
                if reach is None:
                    continue
                loc = reach.brk.location()
                where = f"{ctx.project.relative(loc.path)}:{loc.span.start_line}"
                chain = " → ".join((f"{mod.module_name}.{callee.qualname}", *reach.via))
                call = f"`{file.code(live.site.node.func)}(…)`"
                ctx.report(
                    live.site.node,
                    first_line(f"{call} inside {describe_scope(scope)} reaches a Dynamo graph break at {where}",
                               f"{call} inside a TorchAir scope reaches a Dynamo graph break at {where}",
                               f"a call inside a TorchAir scope reaches a Dynamo graph break at {where}"),
                    related=[loc],
                    hint=f"remove {reach.brk.what} from the callee (via {chain}), guard it with "
                         f"`torch.compiler.is_compiling()`, or call {call} outside the scope: the scope cannot be "
                         "resumed after a break",
                )

    VALID = [
        Valid(
            """
            import torch
            import torchair as tng
            def f(x: torch.Tensor):
                with tng.scope.npu_stream_switch("side"):
                    if x.shape[0] > 1 and x.dim() == 2:
                        x = x * 2
                    if not torch.compiler.is_compiling():
                        print("x", x.shape)
                print("done")
                return x
            """
        ),
        Valid(
            """
            import torch
            from contextlib import nullcontext
            def npu_stream_switch(stream, *, enabled=True):
                if not enabled:
                    return nullcontext()
                return torch.npu.stream(stream)
            def f(x: torch.Tensor, s):
                with npu_stream_switch(s):
                    print(x.sum().item())
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            import torchair as tng
            def f(x: torch.Tensor):
                with tng.scope.npu_stream_switch("side"):
                    print("x", x.shape)
            """,
            line=5,
        ),
        Invalid(
            """
            import torch
            import torchair
            def f(x: torch.Tensor):
                with torchair.scope.limit_core_num(8, 16):
                    if x.sum() > 0:
                        x = x * 2
                return x
            """,
            line=5,
        ),
        Invalid(
            """
            import logging
            import torch
            from torchair.scope import npu_stream_switch
            logger = logging.getLogger(__name__)
            def log_load(ids: torch.Tensor):
                logger.info("load %s", ids.tolist())
            def f(ids: torch.Tensor):
                with npu_stream_switch("side"):
                    log_load(ids)
            """,
            line=9,
        ),
    ]
