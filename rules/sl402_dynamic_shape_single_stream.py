from __future__ import annotations

from streamlint.finding import Confidence, Location, Severity
from streamlint.model.apis import Role
from streamlint.model.compile import compile_modes, reached_uses
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global DYNAMIC_SHAPE_MULTI_STREAM, sets_env
    from streamlint.model.environment import DYNAMIC_SHAPE_MULTI_STREAM, sets_env


class DynamicShapeSingleStream(Rule):
    """## What it does
    Flags a GE compile with dynamic shapes — `torch.compile(..., dynamic=True)` with a TorchAir GE
    backend (`get_npu_backend` in max-autotune, `backend="npu"`), or `torchair.inference.cache_compile`,
    whose `dynamic` defaults to `True` — of code that switches streams (`npu_stream_switch`, directly or
    through wrappers), when the project never sets `ENABLE_DYNAMIC_SHAPE_MULTI_STREAM`. Reported at the
    compile call, with a related location at one stream switch.

    The variable counts as set when the project assigns it in Python (`os.environ[...] = ...`,
    `os.environ.setdefault`, `os.putenv`, `os.environ.update`) or in its shell scripts, YAML or `.env`
    files (commented-out lines and the values `0` / `false` do not count).

    ## Why is this bad?
    Dynamic-shape GE graphs run on a single stream unless `ENABLE_DYNAMIC_SHAPE_MULTI_STREAM=1`: the
    stream switches are silently ignored and the overlap is lost.

    ## Example
    ```python
    model = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=config), dynamic=True)
    ```

    ## Use instead
    ```python
    os.environ.setdefault("ENABLE_DYNAMIC_SHAPE_MULTI_STREAM", "1")  # or export it in the launch script
    model = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=config), dynamic=True)
    ```

    ## Fix safety
    No fix.

    ## References
    - TorchAir `docs/zh/ascend_ir/features/advanced/multi_stream.md` (dynamic shape is single-stream)
    """

    code = "SL402"
    name = "dynamic-shape-single-stream"
    severity = Severity.WARNING
    confidence = Confidence.HIGH
    markers = (b"compile",)

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        sites = [cs for cs in ctx.project.path_index.sites_in(ctx.file)
                 if cs.dynamic is True and compile_modes(ctx.project, cs) == frozenset({"ge"})]
        if not sites or sets_env(ctx.project, DYNAMIC_SHAPE_MULTI_STREAM):
            return
        for cs in sites:
            switches = reached_uses(ctx.project, cs, {Role.STREAM_SWITCH}, "ge")
            if not switches:
                continue
            use = switches[0]
            how = "cache_compile: dynamic by default" if cs.role is Role.CACHE_COMPILE else "dynamic=True"
            ctx.report(
                cs.node,
                first_line(f"dynamic-shape GE compile ({how}) of multi-stream code without "
                           f"{DYNAMIC_SHAPE_MULTI_STREAM}",
                           f"dynamic-shape GE compile of multi-stream code without {DYNAMIC_SHAPE_MULTI_STREAM}"),
                related=[Location(use.file.path, use.file.span(use.node), "stream switch in the compiled code")],
                hint=f"export {DYNAMIC_SHAPE_MULTI_STREAM}=1 (launch script or os.environ) or compile with "
                     "dynamic=False: dynamic-shape graphs run on one stream without it (the stream switch is at "
                     f"{ctx.project.relative(use.file.path)}:{use.file.span(use.node).start_line})",
            )

    VALID = [
        Valid(
            """
            import os
            import torch
            import torchair as tng

            os.environ["ENABLE_DYNAMIC_SHAPE_MULTI_STREAM"] = "1"

            class MoE(torch.nn.Module):
                def forward(self, x):
                    with tng.scope.npu_stream_switch("moe_shared"):
                        return x * 2

            compiled = torch.compile(MoE(), backend="npu", dynamic=True)
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
                        return x * 2

            compiled = torch.compile(MoE(), backend="npu", dynamic=True)
            """,
            line=9,
        ),
    ]
