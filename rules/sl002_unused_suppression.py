from streamlint.finding import Severity
from streamlint.rule import Rule


class UnusedSuppression(Rule):
    """## What it does
    Reports a `# noqa: SLxxx` or `# streamlint: ignore[SLxxx]` comment that suppressed nothing.
    Only `SL` codes are judged; other tools' codes in the same comment are left alone.

    ## Why is this bad?
    A stale suppression hides the next real defect on that line.

    ## Example
    ```python
    x = torch.add(a, b)  # noqa: SL201
    ```

    ## Use instead
    ```python
    x = torch.add(a, b)
    ```
    """

    code = "SL002"
    name = "unused-suppression"
    severity = Severity.WARNING
    engine_emitted = True
