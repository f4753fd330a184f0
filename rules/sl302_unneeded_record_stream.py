from __future__ import annotations

from streamlint.finding import Confidence, Severity
from streamlint.model.apis import Role
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global persistent_kind
    from streamlint.model.lifetimes import persistent_kind


class UnneededRecordStream(Rule):
    """## What it does
    Flags `record_stream` (or `npu_record_tagged_stream`) on a long-lived object: a parameter, a
    registered buffer, a submodule's weight, a `self.*` tensor allocated once in `__init__`, a module
    global — directly, through a local alias, or in a loop over `self.parameters()`.

    ## Why is this bad?
    `record_stream` protects short-lived allocations from being reused while another stream still uses
    them. Long-lived objects are never freed during the step, so the call protects nothing; it only
    adds allocator bookkeeping and can delay reuse of their blocks when they finally are freed.

    ## Example
    ```python
    self.weight.record_stream(self.side)
    ```

    ## Use instead
    ```python
    # nothing: parameters outlive every stream's work
    ```
    """

    code = "SL302"
    name = "unneeded-record-stream"
    severity = Severity.INFO
    confidence = Confidence.HIGH
    markers = (b"record_stream", b"record_tagged_stream")

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        file = ctx.file
        for fn in file.functions.values():
            for site in fn.calls:
                target = None
                if site.method == "record_stream" and site.receiver is not None:
                    target = site.receiver
                else:
                    use = next((u for u in ctx.project.api_uses(file, site) if u.role is Role.RECORD_TAGGED_STREAM),
                               None)
                    target = use.arg("input") if use is not None else None
                if target is None:
                    continue
                what = persistent_kind(file, fn, target)
                if what is not None:
                    ctx.report(site.node, first_line(f"`{file.code(target)}` is {what}: `record_stream` protects "
                                                     "nothing here", f"`record_stream` on {what} protects nothing"),
                               hint=f"remove `{_short(file.code(site.node))}` at line "
                                    f"{file.span(site.node).start_line}: {what} outlives every stream's work")

    VALID = [
        Valid(
            """
            import torch

            class M(torch.nn.Module):
                def forward(self, x):
                    h = self.norm(x)
                    h.record_stream(self.side)
                    return h
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class M(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.weight = torch.nn.Parameter(torch.randn(4, 4))
                    self.side = torch.npu.Stream()

                def forward(self, x):
                    self.weight.record_stream(self.side)
                    return x @ self.weight
            """,
            line=10,
        ),
    ]


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 6] + "…)"
