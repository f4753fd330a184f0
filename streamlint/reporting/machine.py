"""JSON and JSON-lines output (schema: streamlint/schemas/findings.schema.json). File names are
absolute (as ruff's), so the output means the same whichever directory the run started from."""

from __future__ import annotations

import json
import os
from typing import Any, TextIO

from streamlint.finding import Finding
from streamlint.reporting import ReportContext


def _absolute(path: str) -> str:
    return path if path == "-" else os.path.abspath(path)


def finding_to_dict(f: Finding, ctx: ReportContext) -> dict[str, Any]:
    return {
        "code": f.code,
        "name": f.name,
        "message": f.message,
        "severity": f.severity.value,
        "confidence": f.confidence.value,
        "filename": _absolute(f.path),
        "start": {"line": f.span.start_line, "column": f.span.start_col + 1},
        "end": {"line": f.span.end_line, "column": f.span.end_col + 1},
        "related": [
            {
                "filename": _absolute(loc.path),
                "start": {"line": loc.span.start_line, "column": loc.span.start_col + 1},
                "end": {"line": loc.span.end_line, "column": loc.span.end_col + 1},
                "message": loc.message,
            }
            for loc in f.related
        ],
        "fix": None
        if f.fix is None
        else {
            "title": f.fix.title,
            "safety": f.fix.safety.value,
            "edits": [
                {
                    "start": {"line": e.span.start_line, "column": e.span.start_col + 1},
                    "end": {"line": e.span.end_line, "column": e.span.end_col + 1},
                    "content": e.content,
                }
                for e in f.fix.edits
            ],
        },
        "hint": f.hint,
        "url": None,  # no documentation site: `streamlint rule CODE` is the documentation
        "fingerprint": ctx.fingerprint(f),
    }


def render_json(ctx: ReportContext, out: TextIO) -> None:
    json.dump([finding_to_dict(f, ctx) for f in ctx.findings], out, indent=2, ensure_ascii=False)
    out.write("\n")


def render_json_lines(ctx: ReportContext, out: TextIO) -> None:
    for f in ctx.findings:
        out.write(json.dumps(finding_to_dict(f, ctx), ensure_ascii=False) + "\n")
