"""SARIF 2.1.0 output, shaped for GitHub code scanning.

- one run; ``tool.driver.rules[]`` holds every rule that has a result (sorted by code) with short/full
  descriptions, help text and markdown (the rule's documentation: there is no documentation site, so
  no ``helpUri``) and ``defaultConfiguration.level``; results point at it by ``ruleId`` and ``ruleIndex``;
- locations are repo-relative URIs against ``%SRCROOT%`` (``originalUriBaseIds`` gives its absolute URI:
  the repository containing the current directory, ``ReportContext.source_root``); files outside it
  get absolute ``file:`` URIs;
  regions are 1-based with ``columnKind: unicodeCodePoints`` (streamlint counts code points);
- ``relatedLocations`` carry a finding's causes (other files included), referenced from the message;
- ``partialFingerprints.primaryLocationLineHash`` is streamlint's fingerprint (streamlint/fingerprint.py),
  the same one baselines use, so alerts survive lines moving;
- fixes are included as ``fixes[].artifactChanges`` replacements.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from streamlint import __version__
from streamlint.finding import Finding, Severity, Span
from streamlint.reporting import ReportContext

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
PROBLEM_SEVERITY = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "recommendation"}


def render(ctx: ReportContext, out: TextIO) -> None:
    json.dump(to_sarif(ctx), out, indent=2, ensure_ascii=False)
    out.write("\n")


def to_sarif(ctx: ReportContext) -> dict[str, Any]:
    codes = sorted({f.code for f in ctx.findings})
    index = {code: i for i, code in enumerate(codes)}
    rules = [_rule(ctx, code) for code in codes]
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "streamlint",
                "semanticVersion": __version__,
                "version": __version__,
                "rules": rules,
            }
        },
        "columnKind": "unicodeCodePoints",
        "results": [_result(ctx, f, index[f.code]) for f in ctx.findings],
    }
    run["originalUriBaseIds"] = {SRCROOT: {"uri": _source_root(ctx)}}
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def _rule(ctx: ReportContext, code: str) -> dict[str, Any]:
    rule = ctx.registry.rules.get(code)
    if rule is None:  # a finding from a rule that is not registered (cannot happen from the CLI)
        return {"id": code, "shortDescription": {"text": code}, "defaultConfiguration": {"level": "warning"}}
    doc = rule.documentation() or rule.summary() or rule.name
    summary = rule.summary() or rule.name
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": _first_sentence(summary)},
        "fullDescription": {"text": summary},
        "help": {"text": doc, "markdown": doc},
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
        "properties": {
            "tags": ["streamlint", "multi-stream"],
            "precision": rule.confidence.value,
            "problem.severity": PROBLEM_SEVERITY[rule.severity],
        },
    }


def _first_sentence(text: str) -> str:
    sentence = re.split(r"(?<=[.!?])\s+(?=[A-Z`])", text, maxsplit=1)[0]
    return sentence or text


def _region(span: Span) -> dict[str, int]:
    # SARIF lines and columns are 1-based; endColumn is the column after the last character
    region = {"startLine": max(span.start_line, 1), "startColumn": span.start_col + 1}
    if span.end_line >= span.start_line:
        region["endLine"] = max(span.end_line, 1)
        region["endColumn"] = max(span.end_col + 1, 1)
    return region


def _artifact(ctx: ReportContext, path: str) -> dict[str, str]:
    rel = ctx.root_relative(path)
    if rel is None:
        return {"uri": Path(os.path.abspath(path)).as_uri()}
    return {"uri": quote(rel, safe="/"), "uriBaseId": SRCROOT}


def _location(ctx: ReportContext, path: str, span: Span) -> dict[str, Any]:
    return {"physicalLocation": {"artifactLocation": _artifact(ctx, path), "region": _region(span)}}


def _result(ctx: ReportContext, f: Finding, rule_index: int) -> dict[str, Any]:
    message = f.message
    related = []
    for i, loc in enumerate(f.related, start=1):
        entry = _location(ctx, loc.path, loc.span)
        entry["id"] = i
        text = loc.message or "related location"
        entry["message"] = {"text": text}
        related.append(entry)
        message += f" [{_escape_link(text)}]({i})" if i == 1 else f", [{_escape_link(text)}]({i})"
    if f.hint:
        message += f"\nfix: {f.hint}"
    result: dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": rule_index,
        "level": LEVELS[f.severity],
        "message": {"text": message},
        "locations": [_location(ctx, f.path, f.span)],
    }
    if related:
        result["relatedLocations"] = related
    fingerprint = ctx.fingerprint(f)
    if fingerprint:
        result["partialFingerprints"] = {"primaryLocationLineHash": fingerprint}
    if f.fix is not None:
        result["fixes"] = [{
            "description": {"text": f"{f.fix.title} ({f.fix.safety.value})"},
            "artifactChanges": [{
                "artifactLocation": _artifact(ctx, f.path),
                "replacements": [
                    {"deletedRegion": _region(e.span), "insertedContent": {"text": e.content}}
                    for e in f.fix.edits
                ],
            }],
        }]
    result["properties"] = {"confidence": f.confidence.value, "name": f.name}
    return result


def _escape_link(text: str) -> str:
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _source_root(ctx: ReportContext) -> str:
    """The absolute URI of the repository root (ends with a slash, as SARIF requires)."""
    uri = Path(ctx.root()).as_uri()
    return uri if uri.endswith("/") else uri + "/"
