"""Confidence of SL301 where the caller's tensor dies at the return after an event recorded past the side-stream use
was handed to a project receiver that only keeps it (flow/syncops.receiver_joins): reported, where a receiver that
waits on it carries the join (strict only); the finding is the copier's (flow/callerfrees.py), at the caller's
confidence. The fixture project
fixtures/projects/sl301_caller_returns says where the findings are; this says how sure they are."""

import os
from pathlib import Path

from harness import lint_paths

from streamlint.finding import Confidence

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "sl301_caller_returns"


def _confidences(monkeypatch) -> dict[tuple[str, int], Confidence]:
    monkeypatch.chdir(ROOT)
    files = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py"))
    return {(os.path.basename(f.path), f.span.start_line): f.confidence
            for f in lint_paths(ROOT, files, min_confidence="low") if f.code == "SL301"}


def _line(rel: str, marker: str) -> int:
    lines = (ROOT / rel).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def test_an_event_the_receiver_only_keeps_is_no_join(monkeypatch):
    found = _confidences(monkeypatch)
    conn, copier = "kvhost/connector.py", "kvhost/copier.py"
    # the death is the caller's, the missing record the copier's: one finding, at the copy, as sure as the caller's
    # own finding at its call was, which yields to it (flow/callerfrees.py): medium where `ready` is only kept (the
    # receiver's later use of it is not followed), high where the caller's local dies at its return with no join on
    # any path (the caller's analysis saw both: the take-over must not lower it)
    assert found[("copier.py", _line(copier, "gathered KV dies when _capture returns"))] is Confidence.MEDIUM
    assert found[("copier.py", _line(copier, "export's local dies at its return"))] is Confidence.HIGH
    # a record object built for a writer thread only keeps the event: the second dropping caller of the same copy,
    # a related location of the copier's one finding (medium), not a finding of its own
    assert ("connector.py", _line(conn, "only kept in a record")) not in found
    for silent in ("the receiver waits on `ready`", "goes on in **extra", "handed on by name"):
        assert ("connector.py", _line(conn, silent)) not in found  # (its waiter is assumed: strict only)
