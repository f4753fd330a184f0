from streamlint.finding import Severity
from streamlint.rule import Rule


class InternalError(Rule):
    """## What it does
    Reports that a rule raised an exception while checking this file.

    ## Why is this bad?
    The crashed rule's findings for this file are missing. Other rules and files are still checked,
    and the run exits with status 2 so CI notices. Please report it with the file that triggers it.

    ## Example
    (produced by the engine, not by source code)

    ## Use instead
    Upgrade streamlint or report the bug; suppressions cannot hide this finding.
    """

    code = "SL000"
    name = "internal-error"
    severity = Severity.ERROR
    engine_emitted = True
