"""Baselines: record today's findings by fingerprint, later report only the new ones.

The fingerprint (streamlint/fingerprint.py) is path + code + normalised source line + occurrence index,
so a recorded finding stays recorded when lines above it are inserted or removed, while a new defect —
even of the same rule in the same file — gets a fingerprint of its own. An entry silences a finding only
when its fingerprint and its path both match. The file is JSON, sorted, one
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
    entries: frozenset[tuple[str, str]]  # (path relative to the project, fingerprint)

    def filter(self, findings: Iterable[Finding], fingerprint: Callable[[Finding], str],
               relpath: Callable[[str], str]) -> tuple[list[Finding], int]:
        """(findings not in the baseline, number of baselined findings dropped). An entry silences a
        finding only with the same fingerprint *and* the same path."""
        kept, dropped = [], 0
        for f in findings:
            if (relpath(f.path), fingerprint(f)) in self.entries:
                dropped += 1
            else:
                kept.append(f)
        return kept, dropped


def check_location(path: str, source: str | None) -> None:
    """A baseline named by a configuration file (``source``) must be inside that file's folder (symbolic
    links resolved); one given by the user (``source`` None or "command line") may be anywhere."""
    if source is None or source == "command line":
        return
    real, root = os.path.realpath(path), os.path.realpath(os.path.dirname(os.path.abspath(source)))
    if not real.startswith(root.rstrip(os.sep) + os.sep):
        raise BaselineError(f"{source}: baseline: {path} leads outside the project ({real}); refused (give it "
                            "with --baseline to use it)")


def load_baseline(path: str) -> Baseline:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise BaselineError(f"{path}: baseline file not found (create it with --write-baseline)") from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read baseline: {exc.strerror}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BaselineError(f"{path}: not a streamlint baseline (not UTF-8: byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}: not a streamlint baseline (invalid JSON: {exc.msg})") from None
    except RecursionError:
        raise BaselineError(f"{path}: not a streamlint baseline (too deeply nested)") from None
    entries = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(entries, list) or data.get("version") != BASELINE_VERSION:
        raise BaselineError(f"{path}: not a streamlint baseline (expected version {BASELINE_VERSION} with findings)")
    keys = set()
    for index, entry in enumerate(entries):
        fp = entry.get("fingerprint") if isinstance(entry, dict) else None
        where = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(fp, str) or not fp or not isinstance(where, str) or not where:
            raise BaselineError(f"{path}: baseline entry {index + 1} needs a fingerprint and a path")
        keys.add((where, fp))
    return Baseline(path, frozenset(keys))


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
