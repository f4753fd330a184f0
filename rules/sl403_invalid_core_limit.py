from __future__ import annotations

import re

from streamlint._lazy import cst

from streamlint.finding import Confidence, Severity
from streamlint.model.apis import Role
from streamlint.model.file import int_value, string_value
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line

_LIMIT_ROLES = frozenset({Role.LIMIT_CORE_NUM, Role.LIMIT_CORE_NUM_NPUGRAPH_EX})
_AICORE_NUM = re.compile(r"^\s*\d+\s*\|\s*\d+\s*$")
_DEBUG_KEYS = {"debug-aic-num": ("op_aicore_num", "AI cores"), "debug-aiv-num": ("op_vectorcore_num", "vector cores")}


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global parse_super_kernel_options, string_constant
    from streamlint.model.scopes import parse_super_kernel_options, string_constant


class InvalidCoreLimit(Rule):
    """## What it does
    Flags core-count literals that cannot describe a usable limit:
    - `limit_core_num(op_aicore_num, op_vectorcore_num)` (TorchAir's `torchair.scope.limit_core_num`
      and npugraph_ex's `torch.npu.npugraph_ex.scope.limit_core_num`) with an AI-core count ≤ 0 or a
      negative vector-core count (a vector count of 0 is allowed: chips without Vector cores);
    - `ge_config.aicore_num` assigned anything but a `"<aicore>|<vectorcore>"` string;
    - a `super_kernel` options string whose `debug-aic-num` / `debug-aiv-num` exceeds the enclosing
      `limit_core_num`.

    ## Why is this bad?
    Core counts must lie in `[1, max]` (values above the maximum are clamped, values below are
    rejected or silently ignored). `ge_config.aicore_num` is passed to GE unvalidated as `ge.aicoreNum`,
    whose documented format is `"<aicore>|<vectorcore>"`. A SuperKernel cannot use more cores than the
    scope around it allows. Note that `-1` means "leave unchanged" only for `torch.npu.set_stream_limit`,
    not for `limit_core_num`.

    ## Example
    ```python
    with torchair.scope.limit_core_num(0, 8):
        shared = self.shared_experts(x)
    config.ge_config.aicore_num = 24
    ```

    ## Use instead
    ```python
    with torchair.scope.limit_core_num(4, 8):
        shared = self.shared_experts(x)
    config.ge_config.aicore_num = "24|48"
    ```

    ## Fix safety
    No fix: the intended counts are the author's choice.

    ## References
    - TorchAir `docs/zh/ascend_ir/features/advanced/limit_cores.md`, `api/scope/super_kernel.md`
    """

    code = "SL403"
    name = "invalid-core-limit"
    severity = Severity.ERROR
    confidence = Confidence.HIGH
    markers = (b"limit_core_num", b"aicore_num", b"debug-ai")

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        for use in ctx.project.uses_in(ctx.file, _LIMIT_ROLES):
            problems = []
            aic, aiv = _count(use.arg("op_aicore_num")), _count(use.arg("op_vectorcore_num"))
            if aic is not None and aic <= 0:
                problems.append(f"op_aicore_num={aic} (must be >= 1)")
            if aiv is not None and aiv < 0:
                problems.append(f"op_vectorcore_num={aiv} (must be >= 0)")
            if problems:
                ctx.report(use.node, first_line(f"invalid core limit: {', '.join(problems)}", "invalid core limit"),
                           hint="`limit_core_num` takes AI-core counts in [1, max] and vector-core counts in [0, max] "
                                "(-1 is not 'unchanged' here)")
        for assign in ctx.file.assigns:
            if assign.target.endswith("ge_config.aicore_num"):
                problem = _aicore_num_problem(assign.value)
                if problem is not None:
                    ctx.report(assign.node, first_line(f"`ge_config.aicore_num` is {problem}, not an "
                                                       '"<aicore>|<vectorcore>" string',
                                                       '`ge_config.aicore_num` is not an "<aicore>|<vectorcore>" '
                                                       'string'),
                               hint='write it as "<aicore>|<vectorcore>", such as "24|48"')
        for use in ctx.project.uses_in(ctx.file, {Role.SUPER_KERNEL}):
            self._check_super_kernel(ctx, use)

    def _check_super_kernel(self, ctx: RuleContext, use) -> None:
        options = string_constant(ctx.project, ctx.file, use.arg("options"), use.site.function)
        if not options:
            return
        parsed = parse_super_kernel_options(options)
        debug = {key: int(value) for key in _DEBUG_KEYS if (value := parsed.get(key)) is not None and value.isdigit()}
        if not debug:
            return
        limit = next((s for s in ctx.project.enclosing_scopes(ctx.file, use.site.scope)
                      if s.uses and all(u.role in _LIMIT_ROLES for u in s.uses)), None)
        if limit is None or len(limit.uses) != 1:
            return
        for key, requested in sorted(debug.items()):
            param, what = _DEBUG_KEYS[key]
            allowed = _count(limit.uses[0].value(param))
            if allowed is not None and allowed > 0 and requested > allowed:
                ctx.report(use.node, f"super_kernel option `{key}={requested}` asks for more {what} than the "
                           f"enclosing `limit_core_num` allows ({allowed})")


    VALID = [
        Valid(
            """
            import torchair as tng

            def configure(config, x, mlp, aic):
                config.ge_config.aicore_num = "24|48"
                with tng.scope.limit_core_num(8, 0):
                    y = mlp(x)
                with tng.scope.limit_core_num(aic, 16):
                    with tng.scope.super_kernel("sk", "debug-aic-num=32"):
                        y = mlp(y)
                return y
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torchair as tng
            def f(mlp, x):
                with tng.scope.limit_core_num(0, 8):
                    return mlp(x)
            """,
            line=3,
        ),
        Invalid(
            """
            def configure(config):
                config.ge_config.aicore_num = 24
            """,
            line=2,
        ),
        Invalid(
            """
            import torchair as tng
            def f(mlp, x):
                with tng.scope.limit_core_num(8, 16):
                    with tng.scope.super_kernel("sk", "debug-aic-num=16"):
                        return mlp(x)
            """,
            line=4,
        ),
    ]


def _count(expr: cst.BaseExpression | None) -> int | None:
    """A literal core count: an int literal, or a string holding one (the API str()s its arguments)."""
    value = int_value(expr)
    if value is None:
        text = string_value(expr)
        if text is not None and re.fullmatch(r"\s*-?\d+\s*", text):
            value = int(text)
    return value


def _aicore_num_problem(value: cst.BaseExpression) -> str | None:
    if int_value(value) is not None or isinstance(value, cst.Float):
        return "a number"
    text = string_value(value)
    if text is not None and not _AICORE_NUM.match(text):
        return f"{text!r}"
    return None
