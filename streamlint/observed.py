"""What a file's analysis observed of the project, kept with its cached result (issue 15).

A cached result used to be valid while the sha256 of every module in the file's import closure was unchanged and,
for an analysis that read project-wide facts (the file list, compile sites, byte searches), while no file of the
project had changed size or time. So a comment appended to a module the file imports, or any edit anywhere in the
tree, threw the result away and the file was analysed again (torch-npu's ``npu/_graph_tree.py``: ~1 s of CPU).

Here the result is keyed by the facts the analysis reached instead. The engine's project is a
:class:`~streamlint.reachcache.RecordingProject` for a serial run with the cache: it notes, from its creation on,
every observation the analyses make of the tree (``reachcache.py`` lists them): the content of each module parsed
or read, the *summary* of each module read only through its summary (so an edit the summary does not describe
keeps it: a comment, a function body it does not reach), the answers of the project-wide scans (byte and word
index searches, the modules that may compile, renames), the file list and the file-system tests of module
resolution, and the observations of the reach facts it was given (``reachcache.install``). Those are stored with
each result of the run (cumulative: a file's record holds the observations of the files analysed before it in the
same run too, whose memos it may have used; never fewer than it depends on). A later run answers the same questions
of a fresh project (byte searches, cached summaries, a hash per module read) and reuses the result when every
answer is the same: the analysis, a deterministic function of them, would give the same findings.

What is not observed makes the record unusable and the result falls back to the keys above (both are stored; the
editor server still uses those): environment settings searched in launch scripts; a run with a worker pool (each
worker has its own project); more than :data:`MAX_OBSERVATIONS` observations.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

from streamlint.model.project import Project
from streamlint.reachcache import RecordingProject, _list_digest, _markers, still_true

if TYPE_CHECKING:
    from streamlint.engine import Engine

# past this many observations (a long serial run: each record holds those of the files before it), a result is
# stored with the old keys only (a record that large would cost more to keep and check than it saves)
MAX_OBSERVATIONS = 2000
# the project memos that must be empty for a recording to cover everything its analyses use
_MEMOS = ("_files", "_all_files", "_paths", "_marker_paths", "_renames", "_compiling", "_symbols", "_modules",
          "_packages", "_wrappers", "_uses")
_SHARED = ("reader", "words", "profiler", "summaries", "index_progress", "_scan_bytes", "_scan_kept",
           "_summary_digests")


def start(engine: "Engine") -> bool:
    """Make the engine's project a recording one; False when it already answered questions (its memos would
    hold what no observation covers) or holds editor buffers."""
    project = engine.project
    if isinstance(project, RecordingProject):
        return True
    if engine._overrides or any(getattr(project, name) for name in _MEMOS):
        return False
    recording = RecordingProject(project.root, project.loader, scope=project.scope, options=project.options)
    recording.start()
    for name in _SHARED:
        setattr(recording, name, getattr(project, name))
    engine.project = recording
    return True


def checker(engine: "Engine") -> Project:
    """A fresh plain project to answer recorded questions (not the engine's: a recording would note them),
    sharing the engine's reads, summaries and word index."""
    project = engine.project
    fresh = Project(project.root, project.loader, scope=project.scope, options=project.options)
    for name in _SHARED:
        setattr(fresh, name, getattr(project, name))
    return fresh


def merge(project: Project, record: dict[str, Any]) -> None:
    """Add a reach record's observations (``reachcache.install``) to the project's: the facts it gave came
    from them."""
    if not isinstance(project, RecordingProject):
        return
    if isinstance(record.get("files"), str):
        project.files = project.files or record["files"]
    for path, value in record.get("isfile", {}).items():
        project.isfile.setdefault(path, tuple(value))
    for path, markers, found in record.get("contains", ()):
        project.contains.setdefault((path, tuple(m.encode("latin-1") for m in markers)), found)
    for path, digest in record.get("content", {}).items():
        project.content.setdefault(path, digest)
    for path, digest in record.get("code", {}).items():
        project.code.setdefault(path, digest)
    for path, digest in record.get("summaries", {}).items():
        project.summary_seen.setdefault(path, digest)
    for kind, question, answer in record.get("scans", ()):
        project.scans.setdefault(json.dumps([kind, question]), [kind, question, answer])


def _answer_digest(answer: Any) -> str:
    return hashlib.sha256(json.dumps(answer, sort_keys=True).encode("utf-8", "surrogateescape")).hexdigest()


def snapshot(project: Project) -> dict[str, Any] | None:
    """The observations so far, as stored with a result (scan answers by digest); None when the project did
    not record, or read something it does not record."""
    if not isinstance(project, RecordingProject) or project.searched_env():
        return None
    size = len(project.isfile) + len(project.contains) + len(project.content) + len(project.code) \
        + len(project.summary_seen) + len(project.scans)
    if size > MAX_OBSERVATIONS:
        return None
    # the file list always (a file's analysis may test for a module of its package outside any recorded
    # question, dataswaps._swap_back; a new or removed module changes the list)
    files = project.files or _list_digest(project.all_files())
    project.files = files
    return {"files": files,
            "isfile": {path: list(v) for path, v in project.isfile.items()},
            "contains": [[path, _markers(markers), found] for (path, markers), found in project.contains.items()],
            "content": dict(project.content), "code": dict(project.code), "summaries": dict(project.summary_seen),
            "scans": [[kind, question, _answer_digest(answer)] for kind, question, answer in project.scans.values()]}


def holds(record: Any, project: Project) -> bool:
    """Does ``project`` (a plain one: :func:`checker`) answer every observation of ``record`` as recorded?"""
    # (the record lives in the linted repository: any other shape is a miss)
    return isinstance(record, dict) and isinstance(record.get("summaries"), dict) \
        and still_true(record, project, keep=_answer_digest)


__all__ = ["checker", "holds", "merge", "snapshot", "start"]
