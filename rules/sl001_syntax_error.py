from streamlint.finding import Severity
from streamlint.rule import Rule


class SyntaxErrorRule(Rule):
    """## What it does
    Reports a file that cannot be analysed: a syntax error (with the parser's line and column), bytes
    that do not decode in the file's declared encoding, a binary file, an unreadable file, or nesting
    too deep to analyse.

    ## Why is this bad?
    Nothing in the file is checked. Other files are still linted.

    ## Example
    ```python
    def forward(self, x)
        return x
    ```

    ## Use instead
    ```python
    def forward(self, x):
        return x
    ```
    """

    code = "SL001"
    name = "syntax-error"
    severity = Severity.ERROR
    engine_emitted = True
