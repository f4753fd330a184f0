from __future__ import annotations

from streamlint._lazy import cst

from streamlint.finding import Confidence, FixSafety, Severity
from streamlint.model.apis import Role
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global wait_self_expr, statement_of
    from streamlint.model.dataflow import wait_self_expr
    from streamlint.model.waits import statement_of


class WaitRebindsName(Rule):
    """## What it does
    Flags `b = npu_wait_tensor(a, b)` — directly or through a wrapper that forwards to it: the call
    returns its *first* argument, so the name `b` now holds `a`.

    ## Why is this bad?
    `npu_wait_tensor(self, dependency)` returns `self`. Assigning the result to the dependency's name
    silently replaces that tensor with another one (omni-infer's `topk_ids = npu_wait_tensor(
    fake_topk_ids, topk_ids)` routes tokens with the fake ids).

    ## Example
    ```python
    kv = npu_wait_tensor(q, kv)
    ```

    ## Use instead
    ```python
    q = npu_wait_tensor(q, kv)
    ```

    ## Fix safety
    Rebinding the waited name instead is unsafe: it changes which tensor later code reads through `b`
    (back to the original `b`) and through `a`.
    """

    code = "SL203"
    name = "wait-rebinds-name"
    severity = Severity.WARNING
    confidence = Confidence.HIGH
    markers = (b"wait",)
    fix_safety = FixSafety.UNSAFE

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        file = ctx.file
        for fn in file.functions.values():
            for site in fn.calls:
                use = next((u for u in ctx.project.api_uses(file, site) if u.role is Role.WAIT_TENSOR), None)
                if use is None:
                    continue
                stmt = statement_of(fn, site.node)
                if not (isinstance(stmt, cst.Assign) and stmt.value is site.node and len(stmt.targets) == 1):
                    continue
                target = stmt.targets[0].target
                waited = wait_self_expr(ctx.project, file, use)
                dep = use.arg("dependency")
                if not (isinstance(target, cst.Name) and isinstance(dep, cst.Name) and isinstance(waited, cst.Name)):
                    continue
                if target.value != dep.value or waited.value == target.value:
                    continue
                fix = ctx.fix(f"Assign the result to `{waited.value}`", ctx.replace(target, waited.value))
                ctx.report(stmt, first_line(f"`npu_wait_tensor` returns its first argument, so `{target.value}` "
                                            f"now holds `{waited.value}`",
                                            "`npu_wait_tensor` returns its first argument: the name now holds it"),
                           fix=fix, hint=f"write `{waited.value} = npu_wait_tensor({waited.value}, {dep.value})`")

    VALID = [
        Valid(
            """
            from torchair.scope import npu_wait_tensor

            def f(a, b):
                a = npu_wait_tensor(a, b)
                return a + b
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            from torchair.scope import npu_wait_tensor

            def f(a, b):
                b = npu_wait_tensor(a, b)
                return a + b
            """,
            line=4,
            fixed="""
            from torchair.scope import npu_wait_tensor

            def f(a, b):
                a = npu_wait_tensor(a, b)
                return a + b
            """,
        ),
    ]
