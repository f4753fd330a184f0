from __future__ import annotations

from streamlint._lazy import cst

from streamlint.finding import Confidence, FixSafety, Severity
from streamlint.model.apis import Role
from streamlint.model.file import int_value, string_value
from streamlint.rule import Invalid, Rule, RuleContext, Valid


class InvalidStreamTag(Rule):
    """## What it does
    Flags a stream tag literal that is not a non-empty `str`: `npu_stream_switch(1)`,
    `npu_stream_switch(None)`, `npu_stream_switch("")`, a bytes literal — directly, through aliases and
    legacy spellings, or through project wrappers (e.g. cann-recipes' `npu_stream_switch(flag, tag)`).

    ## Why is this bad?
    The tag is written into the GE attribute `_user_stream_label` and mapped to a stream by string
    identity; the scope op's schema takes strings. A non-string tag fails at compile time or silently
    maps to a different stream than intended.

    ## Example
    ```python
    with npu_stream_switch(1):
        shared = self.shared_experts(x)
    ```

    ## Use instead
    ```python
    with npu_stream_switch("1"):
        shared = self.shared_experts(x)
    ```

    ## Fix safety
    Quoting an integer tag is unsafe: another scope may use the tag `"1"` and would now share the
    stream.
    """

    code = "SL105"
    name = "invalid-stream-tag"
    severity = Severity.ERROR
    confidence = Confidence.HIGH
    markers = (b"npu_stream_switch", b"NpuStreamSwitch")
    fix_safety = FixSafety.UNSAFE

    def check(self, ctx: RuleContext) -> None:
        for use in ctx.project.uses_in(ctx.file, {Role.STREAM_SWITCH}):
            tag = use.arg("stream_tag")
            problem = _problem(tag)
            if tag is None or problem is None:
                continue
            fix = None
            if isinstance(tag, cst.Integer):
                fix = ctx.fix(f'Quote the tag: "{int_value(tag)}"', ctx.replace(tag, f'"{int_value(tag)}"'))
            ctx.report(tag, f"stream tag {ctx.file.code(tag)} is {problem}; tags must be non-empty strings", fix=fix)

    VALID = [
        Valid(
            """
            import torchair as tng
            SIDE = "moe_shared"
            def f(i):
                with tng.scope.npu_stream_switch(SIDE):
                    pass
                with tng.scope.npu_stream_switch(f"layer{i}"):
                    pass
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torchair as tng
            with tng.scope.npu_stream_switch(1):
                pass
            """,
            line=2,
            fixed="""
            import torchair as tng
            with tng.scope.npu_stream_switch("1"):
                pass
            """,
        ),
        Invalid(
            """
            from torchair.scope import npu_stream_switch
            with npu_stream_switch(""):
                pass
            """,
            line=2,
        ),
    ]


def _problem(tag: cst.BaseExpression | None) -> str | None:
    if isinstance(tag, cst.Integer):
        return "an int"
    if isinstance(tag, cst.Float):
        return "a float"
    if isinstance(tag, cst.UnaryOperation) and isinstance(tag.expression, (cst.Integer, cst.Float)):
        return "a number"
    if isinstance(tag, cst.Name) and tag.value in ("None", "True", "False"):
        return f"`{tag.value}`"
    if isinstance(tag, cst.SimpleString):
        if "b" in tag.prefix.lower():
            return "a bytes literal"
        if string_value(tag) == "":
            return "an empty string"
    return None
