"""The concise one-line format and the statistics table."""

from __future__ import annotations

from collections import Counter
from typing import TextIO

from streamlint.reporting import ReportContext


def render_concise(ctx: ReportContext, out: TextIO) -> None:
    for f in ctx.findings:
        mark = " [*]" if ctx.fix_state(f) == "applicable" else ""
        related = ""
        if f.related:
            where = ", ".join(f"{ctx.relpath(loc.path)}:{loc.span.start_line}:{loc.span.start_col + 1}"
                              for loc in f.related)
            related = f" (related: {where})"
        out.write(f"{ctx.relpath(f.path)}:{f.span.start_line}:{f.span.start_col + 1}: {f.code} {f.message}"
                  f"{related}{mark}\n")
    if ctx.statistics:
        render_statistics(ctx, out)


def render_statistics(ctx: ReportContext, out: TextIO) -> None:
    counts = Counter((f.code, f.name) for f in ctx.findings)
    fixable = Counter(f.code for f in ctx.findings if ctx.fix_state(f) == "applicable")
    for (code, name), count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        mark = "[*]" if fixable[code] else "   "
        out.write(f"{count:>5}  {code}  {mark} {name}\n")
