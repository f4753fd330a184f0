from __future__ import annotations

from streamlint.finding import Confidence, Location, Severity
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global file_flows
    from streamlint.model.dataflow import file_flows


class ViewEscapesWait(Rule):
    """## What it does
    Flags a view or alias of `x` (`view`, `reshape`, slicing, `split`/`chunk`, `transpose`, `detach`, …)
    created *before* `npu_wait_tensor(x, d)` and used after it.

    ## Why is this bad?
    `npu_wait_tensor` rewires the later consumers of the tensor object `x` to the wait's output. A view
    taken earlier is a different tensor object: its consumers are not rewired and are not ordered
    after `d`'s producer.

    ## Example
    ```python
    q_nope, q_pe = q.split([nope, rope], dim=-1)
    q = npu_wait_tensor(q, kv)
    q_rot = q_pe * cos  # q_pe is not ordered after kv
    ```

    ## Use instead
    ```python
    q = npu_wait_tensor(q, kv)
    q_nope, q_pe = q.split([nope, rope], dim=-1)
    q_rot = q_pe * cos
    ```
    """

    code = "SL204"
    name = "view-escapes-wait"
    severity = Severity.WARNING
    confidence = Confidence.HIGH
    markers = (b"wait",)

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        seen: set[int] = set()
        for _fn, flow in file_flows(ctx.project, ctx.file):
            for esc in flow.view_escapes:
                if id(esc.node) in seen:
                    continue
                seen.add(id(esc.node))
                ctx.report(esc.node, first_line(f"`{esc.alias}` is a view of `{esc.waited}` taken before its "
                                                "`npu_wait_tensor`: this use is not ordered",
                                                f"`{esc.alias}` is a view taken before the wait: this use is not "
                                                "ordered"),
                           hint=f"take the view `{esc.alias}` of `{esc.waited}` after the wait (line "
                                f"{ctx.file.span(esc.wait_node).start_line})",
                           related=[Location(ctx.file.path, ctx.file.span(esc.wait_node), "the wait")])

    VALID = [
        Valid(
            """
            from torchair.scope import npu_wait_tensor

            def f(x, dep):
                npu_wait_tensor(x, dep)
                flat = x.view(-1)
                return flat * 2
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            from torchair.scope import npu_wait_tensor

            def f(x, dep):
                flat = x.view(-1)
                npu_wait_tensor(x, dep)
                return flat * 2 + x
            """,
            line=6,
        ),
    ]
