"""Memo entries still being computed, and the reads of them (issue 15: flow/producerruns.py).

A memoised fact of the flow puts a placeholder in its memo while it is computed, so that a question re-entering
itself gets an answer (the placeholder: usually "nothing"). A run that read a placeholder may see another answer
once the fact is complete: such reads are counted here, for the memos that say when they start and finish.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint.model.streams import derived

if TYPE_CHECKING:
    from streamlint.model.project import Project


def started(project: Project, topic: str, key: object) -> None:
    """``key`` of memo ``topic`` is being computed (its placeholder is in the memo)."""
    derived(project, "inflight").setdefault(topic, set()).add(key)


def finished(project: Project, topic: str, key: object) -> None:
    running = derived(project, "inflight").get(topic)
    if running is not None:
        running.discard(key)


def asked(project: Project, topic: str, key: object) -> None:
    """A memo hit on ``key`` of ``topic``: counted when the entry is still being computed."""
    running = derived(project, "inflight").get(topic)
    if running and key in running:
        note(project)


def note(project: Project) -> None:
    """Count a read of a fact not complete yet (also: a question answered "unknown now" for that reason)."""
    counts = derived(project, "inflight_reads")
    counts["n"] = counts.get("n", 0) + 1


def reads(project: Project) -> int:
    return derived(project, "inflight_reads").get("n", 0)
