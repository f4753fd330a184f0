from streamlint.finding import Severity
from streamlint.rule import Rule


class UnknownRuleCode(Rule):
    """## What it does
    Reports a suppression comment naming an `SL` code that does not exist.

    ## Why is this bad?
    A misspelt code suppresses nothing, so the finding it was meant for is still reported — or a
    renamed rule's suppression silently stopped working.

    ## Example
    ```python
    with npu_stream_switch("1", 3):  # noqa: SL1004
        ...
    ```

    ## Use instead
    ```python
    with npu_stream_switch("1", 3):  # noqa: SL104
        ...
    ```
    """

    code = "SL003"
    name = "unknown-rule-code"
    severity = Severity.WARNING
    engine_emitted = True
