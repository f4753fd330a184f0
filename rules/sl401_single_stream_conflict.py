from streamlint.finding import Confidence, Location, Severity
from streamlint.model.apis import Role
from streamlint.model.compile import bool_literal, compiled_uses, enabling_flags, field_values, flags_under
from streamlint.rule import Invalid, Rule, RuleContext, Valid

_MULTI_STREAM = frozenset({Role.STREAM_SWITCH, Role.PREFETCH})
_FIELD = "ge_config.enable_single_stream"
_LESS_SURE = (Confidence.HIGH, Confidence.MEDIUM, Confidence.LOW)


class SingleStreamConflict(Rule):
    """## What it does
    Flags `ge_config.enable_single_stream = True` (attribute, subscript or `setattr` form) on a
    `CompilerConfig` used to compile code that switches streams (`npu_stream_switch`, directly or
    through wrappers, in any module the compiled model reaches) or calls `torch_npu.npu_prefetch`.
    Reported at the assignment, with a related location at one conflicting call.

    Not reported: `False`; a config compiling no multi-stream code; a config in another mode
    (`enable_single_stream` only applies to max-autotune); an assignment guarded by a condition
    exclusive with the stream switches (`if not enable_multistream:` when every switch is enabled by
    `enable_multistream`).

    ## Why is this bad?
    Single-stream execution is a static-shape GE option that conflicts with user stream switches and
    with `npu_prefetch`, which runs on its own stream: the overlap the model was written for is lost or
    the compile fails.

    ## Example
    ```python
    config = CompilerConfig()
    config.ge_config.enable_single_stream = True  # the model uses npu_stream_switch
    model = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=config))
    ```

    ## Use instead
    ```python
    config = CompilerConfig()
    if not enable_multistream:
        config.ge_config.enable_single_stream = True
    ```

    ## Fix safety
    No fix.

    ## References
    - TorchAir `docs/zh/ascend_ir/features/advanced/multi_stream.md`, `single_stream.md`
    """

    code = "SL401"
    name = "single-stream-conflict"
    severity = Severity.ERROR
    confidence = Confidence.HIGH
    markers = (b"enable_single_stream",)

    def check(self, ctx: RuleContext) -> None:
        if "enable_single_stream" not in ctx.file.source.text:
            return
        done: set[int] = set()
        for cs in ctx.project.compile_sites():
            config = cs.config
            if config is None or config.file is not ctx.file:
                continue
            for value in field_values(config, _FIELD):
                if id(value.node) in done or bool_literal(value.value) is not True:
                    continue
                _, off = flags_under(value.guards)
                conflicts, why = compiled_uses(ctx.project, cs, _MULTI_STREAM, "ge",
                                               keep=lambda u, off=off: not (off & enabling_flags(u)))
                if not conflicts:
                    continue
                done.add(id(value.node))
                use = conflicts[0]
                what = "npu_prefetch" if use.role is Role.PREFETCH else "stream switch"
                related = [
                    Location(use.file.path, use.file.span(use.node), f"{what} in the compiled code"),
                    Location(cs.file.path, cs.file.span(cs.node), "the compile that uses this config"),
                ]
                where = ctx.project.relative(use.file.path)
                line = use.file.span(use.node).start_line
                api = 'npu_prefetch' if use.role is Role.PREFETCH else 'npu_stream_switch'
                compiled = "compiled model" if not why else "compiled model may be code that"
                ctx.report(value.node,
                           f"`enable_single_stream = True` on a config whose {compiled} uses `{api}`",
                           related=related, confidence=_LESS_SURE[min(len(why), 2)],
                           hint=f"drop it, or set it only when multi-stream is disabled: GE single-stream mode "
                                f"conflicts with `{api}` ({where}:{line})"
                                + (f"; less sure: {'; '.join(why)}" if why else ""))

    VALID = [
        Valid(
            """
            import torch
            import torchair as tng

            class MoE(torch.nn.Module):
                def __init__(self, enable_multistream):
                    super().__init__()
                    self.enable_multistream = enable_multistream

                def forward(self, x):
                    if self.enable_multistream:
                        with tng.scope.npu_stream_switch("moe_shared"):
                            return x * 2
                    return x * 2

            def build(enable_multistream):
                config = tng.CompilerConfig()
                if not enable_multistream:
                    config.ge_config.enable_single_stream = True
                return torch.compile(MoE(enable_multistream), backend=tng.get_npu_backend(compiler_config=config))
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

            def build():
                config = tng.CompilerConfig()
                config.ge_config.enable_single_stream = True
                return torch.compile(MoE(), backend=tng.get_npu_backend(compiler_config=config))
            """,
            line=11,
        ),
    ]
