from streamlint.finding import Confidence, Severity
from streamlint.model.apis import Role
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line

_NON_GE = frozenset({"reduce-overhead", "npugraph_ex"})


class InnerParallelWithoutMaxAutotune(Rule):
    """## What it does
    Flags an explicit `enable_inner_parallel=` argument of `npu_stream_switch` (directly, or through a
    project wrapper that forwards it) in code whose execution path is `reduce-overhead` or `npugraph_ex`.
    The mode usually comes from a compile site in another module (`CompilerConfig.mode`,
    `backend="npugraph_ex"`) that reaches the function through the call graph.

    Not flagged: code on the `ge` path (max-autotune, `backend="npu"`, `cache_compile`, or
    `npu_stream_switch` with no compile site), code whose path is unknown (e.g. the mode is read from a
    user configuration at runtime), and calls that do not pass the argument.

    ## Why is this bad?
    `enable_inner_parallel` sets the GE attribute `_enable_inner_parallel`, which only the GE
    (max-autotune) compiler reads. In reduce-overhead and npugraph_ex the tag is mapped to a real stream
    and the argument has no effect (domain C3): the code suggests a parallelism that does not happen.

    ## Example
    ```python
    cfg = torchair.CompilerConfig()
    cfg.mode = "reduce-overhead"
    ...
    with torchair.scope.npu_stream_switch("kv", 0, enable_inner_parallel=True):
        kv = self.kv_proj(x)
    ```

    ## Use instead
    ```python
    with torchair.scope.npu_stream_switch("kv", 0):
        kv = self.kv_proj(x)
    ```

    ## Fix safety
    No automatic fix.

    ## References
    - TorchAir `docs/zh/ascend_ir/api/scope/npu_stream_switch.md`
    """

    code = "SL103"
    name = "inner-parallel-without-max-autotune"
    severity = Severity.WARNING
    confidence = Confidence.HIGH
    mode_tagged = True
    markers = (b"enable_inner_parallel",)

    def check(self, ctx: RuleContext) -> None:
        project, file = ctx.project, ctx.file
        for use in project.uses_in(file, {Role.STREAM_SWITCH}):
            if use.arg("enable_inner_parallel") is None:
                continue
            modes = project.modes_of_use(use)
            if not modes or not modes <= _NON_GE:
                continue
            path = project.execution_path(file, use.site.function)
            via = f" (through wrapper `{use.wrappers[0]}`)" if use.wrappers else ""
            ctx.report(
                use.node,
                first_line(f"`enable_inner_parallel=` passed to `npu_stream_switch`{via} has no effect on this path "
                           f"[{'/'.join(sorted(modes))}]",
                           f"`enable_inner_parallel=` has no effect on this path [{'/'.join(sorted(modes))}]"),
                hint="drop the argument, or compile this code in max-autotune: only GE (max-autotune) reads it "
                     f"(execution path: {path.describe()})",
                related=list(path.evidence),
                confidence=Confidence.HIGH if path.source in ("config", "compile") else Confidence.MEDIUM,
            )

    VALID = [
        Valid(
            """
            import torchair as tng
            def f(x):
                with tng.scope.npu_stream_switch("side", 0, enable_inner_parallel=True):
                    return x * 2
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            import torchair as tng
            from torch import nn
            class M(nn.Module):
                def forward(self, x):
                    with tng.scope.npu_stream_switch("side", 0, enable_inner_parallel=True):
                        return x * 2
            def build():
                cfg = tng.CompilerConfig()
                cfg.mode = "reduce-overhead"
                return torch.compile(M(), backend=tng.get_npu_backend(compiler_config=cfg))
            """,
            line=6,
        ),
    ]
