"""CI formats: GitHub Actions workflow-command annotations, GitLab Code Quality JSON and JUnit XML (one
test case per file)."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import TextIO
from xml.sax.saxutils import escape, quoteattr

from streamlint.finding import Finding, Severity
from streamlint.reporting import ReportContext

GITHUB_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _where(ctx: ReportContext, path: str, line: int, col: int) -> str:
    return f"{ctx.relpath(path)}:{line}:{col + 1}"


def _related_lines(ctx: ReportContext, f: Finding) -> list[str]:
    return [
        f"related: {_where(ctx, loc.path, loc.span.start_line, loc.span.start_col)}"
        + (f": {loc.message}" if loc.message else "")
        for loc in f.related
    ]


def _repo_path(ctx: ReportContext, path: str) -> str:
    """Repository-relative (annotations attach only to paths of the checked-out repository)."""
    rel = ctx.root_relative(path)
    return rel if rel is not None else os.path.abspath(path)


def render_github(ctx: ReportContext, out: TextIO) -> None:
    """``::error file=…,line=…,col=…,endLine=…,endColumn=…,title=SL201::message`` per finding; paths
    relative to the repository root (``ctx.source_root``), whatever the current directory."""
    for f in ctx.findings:
        s = f.span
        props = [
            f"file={_escape_property(_repo_path(ctx, f.path))}",
            f"line={s.start_line}",
            f"col={s.start_col + 1}",
            f"endLine={s.end_line}",
            f"endColumn={s.end_col + 1}",
            f"title={_escape_property(f'{f.code} ({f.name})')}",
        ]
        lines = [f"{_repo_path(ctx, f.path)}:{s.start_line}:{s.start_col + 1}: {f.code} {f.message}",
                 *(f"related: {_repo_path(ctx, loc.path)}:{loc.span.start_line}:{loc.span.start_col + 1}"
                   + (f": {loc.message}" if loc.message else "") for loc in f.related)]
        if f.fix is not None:
            lines.append(f"fix: {f.fix.title} ({f.fix.safety.value})")
        elif f.hint:
            lines.append(f"fix: {f.hint}")
        out.write(f"::{GITHUB_LEVELS[f.severity]} {','.join(props)}::{_escape_data(chr(10).join(lines))}\n")


GITLAB_SEVERITIES = {Severity.ERROR: "major", Severity.WARNING: "minor", Severity.INFO: "info"}


def render_gitlab(ctx: ReportContext, out: TextIO) -> None:
    """GitLab Code Quality (a JSON array of issues: description, check_name, fingerprint, severity,
    location.path relative to the repository root, location.lines.begin/end); the fingerprint is
    streamlint's (the baseline's), so an issue keeps its identity when lines move."""
    import hashlib
    import json

    issues = []
    for f in ctx.findings:
        fingerprint = ctx.fingerprint(f) or hashlib.sha256(
            f"{_repo_path(ctx, f.path)}\0{f.code}\0{f.span}\0{f.message}".encode()).hexdigest()[:32]
        issues.append({
            "description": f"{f.code} {f.message}",
            "check_name": f"{f.code} ({f.name})",
            "fingerprint": fingerprint,
            "severity": GITLAB_SEVERITIES[f.severity],
            "location": {"path": _repo_path(ctx, f.path),
                         "lines": {"begin": f.span.start_line, "end": max(f.span.end_line, f.span.start_line)}},
        })
    json.dump(issues, out, indent=2, ensure_ascii=False)
    out.write("\n")


def render_junit(ctx: ReportContext, out: TextIO) -> None:
    """One ``<testcase>`` per file checked (files without findings pass); findings become a failure."""
    by_file: dict[str, list[Finding]] = defaultdict(list)
    for f in ctx.findings:
        by_file[ctx.relpath(f.path)].append(f)
    files = sorted(set(by_file) | {ctx.relpath(p) for p in getattr(ctx, "files", ()) or ()})
    failures = sum(1 for name in files if by_file.get(name))
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(f'<testsuites name="streamlint" tests="{len(files)}" failures="{failures}" errors="0">\n')
    out.write(f'  <testsuite name="streamlint" tests="{len(files)}" failures="{failures}" errors="0" '
              f'skipped="0">\n')
    for name in files:
        findings = by_file.get(name, [])
        attrs = f"name={quoteattr(name)} classname={quoteattr(_classname(name))} file={quoteattr(name)}"
        if not findings:
            out.write(f"    <testcase {attrs}/>\n")
            continue
        out.write(f"    <testcase {attrs}>\n")
        count = f"{len(findings)} finding{'s' if len(findings) != 1 else ''}"
        body = []
        for f in findings:
            body.append(f"{_where(ctx, f.path, f.span.start_line, f.span.start_col)}: {f.code} "
                        f"[{f.severity.value}] {f.message}")
            body.extend("    " + line for line in _related_lines(ctx, f))
            if f.hint:
                body.append(f"    fix: {f.hint}")
        out.write(f"      <failure message={quoteattr(count)} type=\"streamlint\">"
                  f"{escape(_xml_safe(chr(10).join(body)))}</failure>\n")
        out.write("    </testcase>\n")
    out.write("  </testsuite>\n</testsuites>\n")


def _classname(rel: str) -> str:
    stem = rel[:-4] if rel.endswith(".pyi") else rel[:-3] if rel.endswith(".py") else rel
    return stem.replace(os.sep, ".").replace("/", ".")


def _xml_safe(text: str) -> str:
    """Drop characters XML 1.0 cannot carry (control characters from odd source lines)."""
    return "".join(ch for ch in text if ch in "\t\n\r" or ord(ch) >= 0x20)
