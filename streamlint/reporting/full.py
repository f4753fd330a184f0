"""The default human format: source excerpt with the finding underlined, related locations, summary."""

from __future__ import annotations

from collections import Counter
from typing import TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from streamlint.finding import Severity
from streamlint.reporting import ReportContext
from streamlint.reporting.text import render_statistics

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow", Severity.INFO: "bold cyan"}


def render(ctx: ReportContext, out: TextIO) -> None:
    console = Console(file=out, force_terminal=ctx.color, no_color=not ctx.color, highlight=False,
                      width=120, soft_wrap=True)
    lines: list[Text] = []  # printed at once: one rich render per finding line was most of the report time
    for f in ctx.findings:
        header = Text()
        header.append(f"{ctx.relpath(f.path)}:{f.span.start_line}:{f.span.start_col + 1}: ", style="bold")
        header.append(f"{f.code} ", style=_STYLE[f.severity])
        header.append(f"[{f.severity.value}] ", style=_STYLE[f.severity])
        header.append(f.message)
        if f.fix is not None:
            header.append(" [*]", style="green")
        lines.append(header)
        lines.extend(_excerpt(ctx, f.path, f.span.start_line, f.span.start_col, f.span.end_line, f.span.end_col))
        for loc in f.related:
            rel = Text("  = related: ", style="bold blue")
            rel.append(f"{ctx.relpath(loc.path)}:{loc.span.start_line}:{loc.span.start_col + 1}")
            if loc.message:
                rel.append(f": {loc.message}")
            lines.append(rel)
        if f.fix is not None:
            hint = Text("  = fix: ", style="bold green")
            hint.append(f"{f.fix.title} ({f.fix.safety.value})")
            lines.append(hint)
        lines.append(Text())
    if lines:
        console.print(Text("\n").join(lines))
    counts = Counter(f.severity for f in ctx.findings)
    if ctx.statistics:
        render_statistics(ctx, out)
    if ctx.findings:
        parts = [f"{counts[s]} {s.value}{'s' if counts[s] != 1 else ''}" for s in Severity if counts[s]]
        fixable = sum(1 for f in ctx.findings if f.fix is not None)
        summary = Text(f"Found {len(ctx.findings)} finding{'s' if len(ctx.findings) != 1 else ''} "
                       f"({', '.join(parts)}) in {ctx.files_checked} file{'s' if ctx.files_checked != 1 else ''}.",
                       style="bold")
        console.print(summary)
        if fixable:
            console.print(Text(f"[*] {fixable} fixable with --fix (some may need --unsafe-fixes).", style="green"))
    else:
        console.print(Text(f"All checks passed ({ctx.files_checked} file{'s' if ctx.files_checked != 1 else ''}).",
                           style="bold green"))
    if ctx.fixed:
        console.print(Text(f"Fixed {ctx.fixed} finding{'s' if ctx.fixed != 1 else ''}.", style="green"))


def _excerpt(ctx: ReportContext, path: str, line: int, col: int, end_line: int, end_col: int) -> list[Text]:
    text = ctx.line_text(path, line)
    if not text:
        return []
    gutter = f"{line:>5} | "
    # terminal cells, not code points: tabs expand and CJK characters (comments, strings) are two cells wide
    end = end_col if end_line == line else len(text)
    before = cell_len(text[:col].expandtabs(4))
    width = max(1, cell_len(text[:max(end, col)].expandtabs(4)) - before)
    marker = " " * (len(gutter) - 2) + "| " + " " * before + "^" * width
    return [Text(gutter, style="blue") + Text(text.expandtabs(4)), Text(marker, style="bold red")]
