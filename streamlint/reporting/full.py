"""The default human format: source excerpt with the finding underlined, related locations, summary.

Lines are built as runs of (text, style). Without colour they are written as plain text (rich's import
and rendering were most of a warm run's report time); with colour, rich renders the same runs.
"""

from __future__ import annotations

from collections import Counter
from typing import TextIO

from rich.cells import cell_len

from streamlint.finding import Severity
from streamlint.reporting import ReportContext, fix_summary
from streamlint.reporting.text import render_statistics

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow", Severity.INFO: "bold cyan"}
# what rich's Text drops from any string it is given (rich.control.strip_control_codes)
_CONTROL = {7: None, 8: None, 11: None, 12: None, 13: None}

Line = list[tuple[str, str]]  # runs of (text, rich style or ""); a whole-line style is one run


def render(ctx: ReportContext, out: TextIO) -> None:
    lines: list[Line] = []
    for f in ctx.findings:
        header: Line = [(f"{ctx.relpath(f.path)}:{f.span.start_line}:{f.span.start_col + 1}: ", "bold"),
                        (f"{f.code} ", _STYLE[f.severity]), (f"[{f.severity.value}] ", _STYLE[f.severity]),
                        (f.message, "")]
        if ctx.fix_state(f) == "applicable":
            header.append((" [*]", "green"))
        lines.append(header)
        lines.extend(_excerpt(ctx, f.path, f.span.start_line, f.span.start_col, f.span.end_line, f.span.end_col))
        for loc in f.related:
            where = f"{ctx.relpath(loc.path)}:{loc.span.start_line}:{loc.span.start_col + 1}"
            lines.append([(f"  = related: {where}" + (f": {loc.message}" if loc.message else ""), "bold blue")])
        if f.fix is not None:
            lines.append([(f"  = fix: {f.fix.title} ({f.fix.safety.value})", "bold green")])
        elif f.hint:
            lines.append([(f"  = fix: {f.hint}", "bold green")])
        lines.append([])
    _write(ctx, out, lines)
    counts = Counter(f.severity for f in ctx.findings)
    if ctx.statistics:
        render_statistics(ctx, out)
    if ctx.quiet:
        return
    tail: list[Line] = []
    if ctx.findings:
        parts = [f"{counts[s]} {s.value}{'s' if counts[s] != 1 else ''}" for s in Severity if counts[s]]
        summary = fix_summary(*ctx.fix_counts())
        tail.append([(f"Found {len(ctx.findings)} finding{'s' if len(ctx.findings) != 1 else ''} "
                      f"({', '.join(parts)}) in {ctx.files_checked} file{'s' if ctx.files_checked != 1 else ''}.",
                      "bold")])
        if summary:
            tail.append([(summary, "green")])
    elif ctx.errors:  # a path could not be linted: nothing may read like success
        tail.append([(f"No findings in {ctx.files_checked} file{'s' if ctx.files_checked != 1 else ''}, but "
                      f"{ctx.errors} path{'s' if ctx.errors != 1 else ''} could not be linted (see the errors "
                      "above).", "bold red")])
    else:
        tail.append([(f"All checks passed ({ctx.files_checked} file{'s' if ctx.files_checked != 1 else ''}).",
                      "bold green")])
    if ctx.fixed:
        tail.append([(f"Fixed {ctx.fixed} finding{'s' if ctx.fixed != 1 else ''}.", "green")])
    _write(ctx, out, tail)


def _write(ctx: ReportContext, out: TextIO, lines: list[Line]) -> None:
    if not lines:
        return
    if not ctx.color:
        out.write("".join("".join(t for t, _ in line).translate(_CONTROL) + "\n" for line in lines))
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(file=out, force_terminal=True, highlight=False, width=120, soft_wrap=True)
    console.print(Text("\n").join(Text.assemble(*((t, s) if s else t for t, s in line)) for line in lines))


def _excerpt(ctx: ReportContext, path: str, line: int, col: int, end_line: int, end_col: int) -> list[Line]:
    text = ctx.line_text(path, line)
    if not text:
        return []
    gutter = f"{line:>5} | "
    # terminal cells, not code points: tabs expand and CJK characters (comments, strings) are two cells wide
    end = end_col if end_line == line else len(text)
    before = cell_len(text[:col].expandtabs(4))
    width = max(1, cell_len(text[:max(end, col)].expandtabs(4)) - before)
    marker = " " * (len(gutter) - 2) + "| " + " " * before + "^" * width
    return [[(gutter + text.expandtabs(4), "blue")], [(marker, "bold red")]]
