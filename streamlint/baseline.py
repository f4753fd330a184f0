"""Baselines: record today's findings by fingerprint, later report only the new ones.

The fingerprint (streamlint/fingerprint.py) is path + code + normalised source line + occurrence index,
so a recorded finding stays recorded when lines above it are inserted or removed, while a new defect —
even of the same rule in the same file — gets a fingerprint of its own. The file is JSON, sorted, one
entry per finding, with the code, path, line and message kept for humans reviewing it in a diff.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable, Iterable

from streamlint.finding import Finding

BASELINE_VERSION = 1


class BaselineError(Exception):
    pass


@dataclass(frozen=True)
class Baseline:
    path: str
    fingerprints: frozenset[str]

    def filter(self, findings: Iterable[Finding], fingerprint: Callable[[Finding], str]) -> tuple[list[Finding], int]:
        """(findings not in the baseline, number of baselined findings dropped)."""
        kept, dropped = [], 0
        for f in findings:
            if fingerprint(f) in self.fingerprints:
                dropped += 1
            else:
                kept.append(f)
        return kept, dropped


def load_baseline(path: str) -> Baseline:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise BaselineError(f"{path}: baseline file not found (create it with --write-baseline)") from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read baseline: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}: not a streamlint baseline (invalid JSON: {exc.msg})") from None
    entries = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(entries, list) or data.get("version") != BASELINE_VERSION:
        raise BaselineError(f"{path}: not a streamlint baseline (expected version {BASELINE_VERSION} with findings)")
    prints = set()
    for entry in entries:
        fp = entry.get("fingerprint") if isinstance(entry, dict) else None
        if not isinstance(fp, str) or not fp:
            raise BaselineError(f"{path}: baseline entry without a fingerprint: {entry!r}")
        prints.add(fp)
    return Baseline(path, frozenset(prints))


def write_baseline(path: str, findings: Iterable[Finding], fingerprint: Callable[[Finding], str],
                   relpath: Callable[[str], str]) -> int:
    """Write the baseline (atomically); returns the number of findings recorded."""
    from streamlint.fixes import write_atomic

    entries = [
        {"fingerprint": fingerprint(f), "code": f.code, "path": relpath(f.path), "line": f.span.start_line,
         "message": f.message}
        for f in findings
        if fingerprint(f)
    ]
    entries.sort(key=lambda e: (e["path"], e["line"], e["code"], e["fingerprint"]))
    payload = {"version": BASELINE_VERSION, "tool": "streamlint", "findings": entries}
    text = json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    write_atomic(path, text.encode("utf-8"))
    return len(entries)
