from streamlint.finding import Confidence, FixSafety, Severity
from streamlint.model.apis import Role
from streamlint.model.file import int_value
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line


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
    The fix removes the argument (and its comma). It is safe: the parameter has no effect. It is offered
    only on direct calls of the API, where the parameter defaults to 0, and not when the removed text
    holds a comment.

    ## References
    - TorchAir `docs/zh/ascend_ir/api/scope/npu_stream_switch.md`
    """

    code = "SL104"
    name = "reserved-stream-priority"
    severity = Severity.INFO
    confidence = Confidence.HIGH
    markers = (b"npu_stream_switch", b"NpuStreamSwitch")
    fix_safety = FixSafety.SAFE

    def check(self, ctx: RuleContext) -> None:
        for use in ctx.project.uses_in(ctx.file, {Role.STREAM_SWITCH}):
            priority = use.arg("stream_priority")
            value = int_value(priority)
            if priority is None or value is None or value == 0:
                continue
            via = f" (through wrapper `{use.wrappers[0]}`)" if use.wrappers else ""
            fix = None
            if not use.wrappers:
                # direct call: the API's parameter defaults to 0, so dropping the argument is exact
                arg = next((a for a in use.node.args if a.value is priority), None)
                later_positional = arg is not None and arg.keyword is None and any(
                    a.keyword is None for a in use.node.args[list(use.node.args).index(arg) + 1:])
                if arg is not None and not later_positional:
                    fix = ctx.fix("Remove the reserved `stream_priority` argument", ctx.remove_arg(use.node, arg))
            ctx.report(
                priority,
                first_line(f"`stream_priority={value}` is reserved and has no effect{via}",
                           f"`stream_priority={value}` is reserved and has no effect"),
                hint="drop the argument (TorchAir documents it as 'keep 0')",
                fix=fix,
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
            fixed="""
            from torchair.scope import npu_stream_switch as sw
            with sw("1"):
                pass
            """,
        ),
        Invalid(
            """
            import torchair
            with torchair.ops.NpuStreamSwitch("1", stream_priority=2):
                pass
            """,
            line=2,
            fixed="""
            import torchair
            with torchair.ops.NpuStreamSwitch("1"):
                pass
            """,
        ),
    ]
