"""streamlint's built-in rules (installed as ``streamlint_rules``), one module per rule.

Registered through the ``streamlint.rules`` entry point (prefix ``SL``) like any third-party pack.
"""
