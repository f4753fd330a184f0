"""Reporters: findings → text. Each format is one module; all receive the same ReportContext."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, TextIO

from streamlint.finding import Finding
from streamlint.registry import Registry


def relative_to_root(path: str, root: str) -> str | None:
    """``path`` relative to the directory ``root`` in POSIX form, or None outside it."""
    import os

    absolute = os.path.abspath(path)
    prefix = root if root.endswith(os.sep) else root + os.sep
    if not absolute.startswith(prefix):
        return None
    rel = absolute[len(prefix):]
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


@dataclass
class ReportContext:
    findings: list[Finding]
    registry: Registry
    line_text: Callable[[str, int], str]  # (path, 1-based line) -> source line
    relpath: Callable[[str], str]
    files_checked: int = 0
    fixed: int = 0
    color: bool = False
    show_fixes: bool = False
    statistics: bool = False
    fingerprints: dict[int, str] = field(default_factory=dict)
    unsafe_fixes: bool = False
    files: list[str] = field(default_factory=list)  # every file checked (junit: one test case each)
    # the repository root: SARIF's %SRCROOT% and the base of the `github` format's paths ("" = cwd)
    source_root: str = ""
    quiet: bool = False  # -q: the findings only, no summary lines
    errors: int = 0  # paths that could not be linted (reported on stderr): no "All checks passed"

    def root(self) -> str:
        import os

        return os.path.abspath(self.source_root or ".")

    def root_relative(self, path: str) -> str | None:
        """``path`` relative to :meth:`root` in POSIX form, or None outside it."""
        return relative_to_root(path, self.root())

    # "applicable" (--fix applies it with the options given), "hidden" (only with --unsafe-fixes), or
    # None (no fix, or its rule is not fixable): what `[*]` and the fix counts mean, as in ruff
    fix_state: Callable[[Finding], "str | None"] = lambda f: "applicable" if f.fix is not None else None

    def fingerprint(self, finding: Finding) -> str:
        return self.fingerprints.get(id(finding), "")

    def fix_counts(self) -> tuple[int, int]:
        """(fixes --fix applies, hidden fixes that need --unsafe-fixes) among the findings."""
        states = [self.fix_state(f) for f in self.findings]
        return states.count("applicable"), states.count("hidden")


def fix_summary(applicable: int, hidden: int) -> str:
    """ruff's wording: "[*] 2 fixable with the `--fix` option (1 hidden fix can be enabled with the
    `--unsafe-fixes` option)."; empty when there is nothing to say."""
    extra = (f"{hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the `--unsafe-fixes` option"
             if hidden else "")
    if applicable:
        return f"[*] {applicable} fixable with the `--fix` option" + (f" ({extra})." if extra else ".")
    return f"No fixes available ({extra})." if extra else ""


# format -> (module, function): only the module of the requested format is imported (the CI formats pull
# in xml.sax and urllib, ~20 ms of every run when imported eagerly)
_RENDERERS = {
    "full": ("full", "render"),
    "concise": ("text", "render_concise"),
    "json": ("machine", "render_json"),
    "json-lines": ("machine", "render_json_lines"),
    "sarif": ("sarif", "render"),
    "github": ("ci", "render_github"),
    "junit": ("ci", "render_junit"),
    "gitlab": ("ci", "render_gitlab"),
}


def render(fmt: str, ctx: ReportContext, out: TextIO) -> None:
    import importlib

    module, function = _RENDERERS[fmt]
    getattr(importlib.import_module(f"streamlint.reporting.{module}"), function)(ctx, out)
