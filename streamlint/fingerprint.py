"""Stable finding fingerprints: path + code + normalised source line + occurrence index.

They survive edits elsewhere in the file (lines moving), and feed both baselines and SARIF.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Callable, Iterable

from streamlint.finding import Finding


def _normalise(line: str) -> str:
    return " ".join(line.split())


def fingerprints(findings: Iterable[Finding], line_text: Callable[[str, int], str],
                 relpath: Callable[[str], str]) -> dict[int, str]:
    """id(finding) -> fingerprint. ``line_text(path, line)`` gives the source line."""
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    result: dict[int, str] = {}
    for finding in sorted(findings, key=lambda f: f.sort_key):
        rel = relpath(finding.path)
        text = _normalise(line_text(finding.path, finding.span.start_line))
        key = (rel, finding.code, text)
        index = counts[key]
        counts[key] += 1
        digest = hashlib.sha256("\0".join((rel, finding.code, text, str(index))).encode()).hexdigest()
        result[id(finding)] = digest[:32]
    return result
