from streamlint.finding import Confidence, Severity
from streamlint.model.apis import Role
from streamlint.model.file import int_value
from streamlint.rule import Invalid, Rule, RuleContext, Valid


class ReservedStreamPriority(Rule):
    """## What it does
    Flags a non-zero literal `stream_priority` passed to `npu_stream_switch` — directly, through an
    alias or legacy spelling (`torchair.ops.NpuStreamSwitch`), or through a project wrapper that
    forwards its argument to the priority parameter.

    ## Why is this bad?
    `stream_priority` is a reserved parameter: TorchAir documents it as "keep 0" and it has no effect
    today. A non-zero value suggests the author expects a scheduling priority that does not exist,
    and the behaviour may change when the parameter is implemented.

    ## Example
    ```python
    with torchair.scope.npu_stream_switch("moe_shared", 3):
        shared = self.shared_experts(x)
    ```

    ## Use instead
    ```python
    with torchair.scope.npu_stream_switch("moe_shared"):
        shared = self.shared_experts(x)
    ```

    ## Fix safety
    The fix removes the argument. It is safe: the parameter has no effect.

    ## References
    - TorchAir `docs/zh/ascend_ir/api/scope/npu_stream_switch.md`
    """

    code = "SL104"
    name = "reserved-stream-priority"
    severity = Severity.INFO
    confidence = Confidence.HIGH
    markers = (b"npu_stream_switch", b"NpuStreamSwitch")

    def check(self, ctx: RuleContext) -> None:
        for use in ctx.project.uses_in(ctx.file, {Role.STREAM_SWITCH}):
            priority = use.arg("stream_priority")
            value = int_value(priority)
            if priority is None or value is None or value == 0:
                continue
            via = f" (through wrapper `{use.wrappers[0]}`)" if use.wrappers else ""
            ctx.report(
                priority,
                f"`stream_priority={value}` is reserved and has no effect{via}; TorchAir documents it as "
                "'keep 0' — drop the argument",
            )

    VALID = [
        Valid(
            """
            import torchair
            with torchair.scope.npu_stream_switch("1", 0):
                pass
            """
        ),
        Valid(
            """
            import torchair as tng
            def f(prio):
                with tng.scope.npu_stream_switch("1", prio):
                    pass
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            from torchair.scope import npu_stream_switch as sw
            with sw("1", 3):
                pass
            """,
            line=2,
        ),
        Invalid(
            """
            import torchair
            with torchair.ops.NpuStreamSwitch("1", stream_priority=2):
                pass
            """,
            line=2,
        ),
    ]
