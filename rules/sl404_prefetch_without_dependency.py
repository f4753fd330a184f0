from __future__ import annotations

from streamlint._lazy import cst

from streamlint.finding import Confidence, Severity
from streamlint.model.apis import Role
from streamlint.model.file import int_value
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line

# Execution paths that trace the code into a graph (the dependency orders the prefetch there).
GRAPH_MODES = frozenset({"ge", "reduce-overhead", "npugraph_ex"})


class PrefetchWithoutDependency(Rule):
    """## What it does
    Flags `torch_npu.npu_prefetch(input, dependency, max_size, offset=0)` calls that graph mode
    rejects: a literal `None` dependency in code on a graph execution path (GE, reduce-overhead,
    npugraph_ex), a literal `max_size <= 0`, and a literal negative `offset`.

    ## Why is this bad?
    In a graph the dependency is what orders the prefetch: it may start once the dependency's
    producer has run, and `None` is rejected at trace time. `max_size` must be positive and `offset`
    non-negative (both validated when the op is traced). Eager code ignores the dependency, so `None`
    is accepted there and not reported.

    ## Example
    ```python
    def forward(self, x):
        torch_npu.npu_prefetch(self.mlp.down_proj.weight, None, 16 * 1024 * 1024)
        h = self.norm(x)
        return self.mlp(h)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        h = self.norm(x)
        torch_npu.npu_prefetch(self.mlp.down_proj.weight, h, 16 * 1024 * 1024)
        return self.mlp(h)
    ```

    ## Fix safety
    No fix: which tensor the prefetch should follow is the author's choice.

    ## References
    - `torch_npu.npu_prefetch` API documentation; cann-recipes `docs/cann/zh/prefetch_principles.md`
    """

    code = "SL404"
    name = "prefetch-without-dependency"
    severity = Severity.WARNING
    confidence = Confidence.HIGH
    markers = (b"npu_prefetch",)

    def check(self, ctx: RuleContext) -> None:
        for use in ctx.project.uses_in(ctx.file, {Role.PREFETCH}):
            modes = ctx.project.modes_of_use(use)
            problems, hints = [], []
            dependency = use.arg("dependency")
            if modes and modes <= GRAPH_MODES and _is_none(dependency):
                problems.append(f"`dependency=None` in graph code [{'/'.join(sorted(modes))}]")
                hints.append("pass the tensor the prefetch should follow as `dependency` (graph mode rejects None "
                             "and the prefetch is unordered)")
            if modes != frozenset({"eager"}):
                size = int_value(use.arg("max_size"))
                if size is not None and size <= 0:
                    problems.append(f"`max_size={size}` (must be > 0)")
                    hints.append("pass a positive `max_size` (bytes to prefetch)")
                offset = int_value(use.arg("offset"))
                if offset is not None and offset < 0:
                    problems.append(f"`offset={offset}` (must be >= 0)")
                    hints.append("pass a non-negative `offset`")
            if problems:
                path = ctx.project.execution_path(ctx.file, use.site.function)
                ctx.report(use.node, first_line("npu_prefetch: " + "; ".join(problems), "npu_prefetch: " + problems[0]),
                           related=path.evidence[:1], hint="; ".join(hints))

    VALID = [
        Valid(
            """
            import torch_npu

            def warm_up(weight):
                torch_npu.npu_prefetch(weight, None, 1 << 20)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            import torch_npu

            class MLP(torch.nn.Module):
                def forward(self, x):
                    torch_npu.npu_prefetch(self.w, None, 1 << 20)
                    return x @ self.w

            compiled = torch.compile(MLP(), backend="npu")
            """,
            line=6,
        ),
        Invalid(
            """
            import torch_npu

            def prefetch(weight, dep):
                torch_npu.npu_prefetch(weight, dep, 0)
            """,
            line=4,
        ),
    ]


def _is_none(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"
