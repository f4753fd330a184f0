"""Project-wide scans without parsing: which project files may contain a marker (byte searches over the
file contents a project keeps, joined when many searches are asked, or the word index), may compile
(byte pattern, then the module summary), or may call a name; the names a class may be renamed to.
A mixin of :class:`~streamlint.model.project.Project`, whose fields it uses (``_scan_bytes``, ``_blob``,
``_marker_paths``, ``_renames``, ``_compiling``, ``summaries``, ``reader``, ``words``…)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Callable, Iterator

from streamlint.model.file import FileModel
from streamlint.model import bytescan
from streamlint.model.bytescan import lines_with, may_call_bytes as _may_call_bytes, may_compile_bytes
from streamlint.model.summary import ModuleSummary
from streamlint.profile import phase as _phase

JOINED_BYTES = 32 << 20  # past this, paths_containing tests each file (Project._joined)
JOIN_AFTER = 8  # distinct marker searches answered file by file before the tree is joined
SCAN_BYTES_KEPT = 16 << 20  # file contents a project keeps for its byte searches (Project._scan_bytes)


class ProjectScans:
    """The byte searches and module-summary questions of :class:`~streamlint.model.project.Project`."""

    def remember_bytes(self, path: str, data: bytes) -> None:
        """Content the caller read already, for the byte searches of project-wide scans."""
        self._keep_bytes(os.path.abspath(path), data)

    def _keep_bytes(self, path: str, data: bytes) -> None:
        if path in self._scan_bytes:
            self._scan_kept -= len(self._scan_bytes.pop(path))
        if self._scan_kept + len(data) <= SCAN_BYTES_KEPT:
            self._scan_bytes[path] = data
            self._scan_kept += len(data)

    def forget_bytes(self, path: str) -> None:
        self._scan_kept -= len(self._scan_bytes.pop(os.path.abspath(path), b""))
        self._blob = None

    def may_contain(self, path: str, markers: tuple[bytes, ...]) -> bool:
        """Cheap byte search used before parsing a file for project-wide facts."""
        if self.reader is None:
            return True
        data = self._scan_bytes.get(path)
        if data is None:
            try:
                data = self.reader(path)
            except OSError:
                return False
            self._keep_bytes(path, data)  # several project-wide scans share one read per file
        return any(m in data for m in markers)

    def paths_containing(self, markers: tuple[bytes, ...]) -> list[str]:
        """The project files whose bytes contain one of ``markers`` (:meth:`may_contain`), in :meth:`all_files` order,
        from the word index if any; memoised per marker: a release keeps it, an edit forgets it (Engine.set_override)."""
        files = self.all_files()
        found = self._marker_paths.get(markers)
        if found is None:
            found = self.words.paths(self, files, markers) if self.words is not None else None
            joined = self._joined(files) if found is None and markers and all(m and b"\0" not in m for m in markers) else None
            if found is None:
                found = [p for p in files if self.may_contain(p, markers)] if joined is None else joined[1].hits(markers)
            self._marker_paths[markers] = found
        return found

    def _joined(self, files: list[str]) -> "tuple[list[str], bytescan.JoinedTree] | None":
        """Every project file's content joined by NUL bytes, read once (``bytescan.join_contents``; None: no reader,
        or a tree over JOINED_BYTES), for a large file's ~70 marker searches without the word index."""
        if self.reader is None:
            return None
        if self._blob is None or self._blob[0] is not files:
            if len(self._marker_paths) < JOIN_AFTER:  # (a run asking few searches reads the files as before)
                return None
            joined = bytescan.join_contents(files, lambda p: self._scan_bytes.get(p) or self.reader(p), JOINED_BYTES)
            self._blob = (files, joined)  # (None: over the limit, remembered until the file list changes)
        return self._blob if self._blob[1] is not None else None

    def files_containing(self, markers: tuple[bytes, ...], report_progress: bool = False,
                         keep: "Callable[[str], bool] | None" = None) -> Iterator[FileModel]:
        """The parsed project files whose bytes contain one of ``markers`` (a byte search first, so
        files that cannot matter are never parsed); unparsable files are skipped. With
        ``report_progress``, :attr:`index_progress` hears of each file scanned (the project index scan).
        ``keep``: a test of a path before its file is parsed (one it rejects is skipped)."""
        report = self.index_progress if report_progress else None
        if report is None:
            for path in self.paths_containing(markers):
                if keep is not None and self.loaded(path) is None and not keep(path):
                    continue
                model = self.file(path)
                if model is not None:
                    yield model
            return
        files = self.all_files()
        for done, path in enumerate(files, 1):
            if report is not None:
                report(done, len(files))
            if not self.may_contain(path, markers):
                continue
            model = self.file(path)
            if model is not None:
                yield model

    def _bytes(self, path: str) -> bytes | None:
        data = self._scan_bytes.get(path)
        if data is None:
            try:
                data = self.reader(path) if self.reader is not None else Path(path).read_bytes()
            except OSError:
                return None
            self._keep_bytes(path, data)
        return data

    def ask(self, kind: str, question: "tuple[str | None, ...]", answer: "Callable[[], bool]") -> bool:
        """A project-wide question of a byte scan over many files (``kind``: which scan, one of
        ``reachcache.ASKED``; ``question``: its arguments after the project), answered by ``answer()``; a recording
        project (streamlint/reachcache.py) notes the answer instead of the bytes the scan read, and asks it again
        the same way when a record is checked."""
        return answer()

    def file_bytes(self, path: str) -> bytes | None:
        """A project file's content (read once per run; None: unreadable)."""
        return self._bytes(os.path.abspath(path))

    def renames(self, name: str) -> frozenset[bytes]:
        """``name`` and every name a project module may bind to what it names, transitively: imports with
        ``as`` (``from .x import Model as M``) and assignments of it or of an attribute ending in it
        (``M = Model``, ``M = x.Model``). Byte searches over the files that spell it (comments and strings
        included: a superset)."""
        known = self._renames.get(name)
        if known is not None:
            return known
        found = {name.encode()}
        stack = [name.encode()]
        while stack:
            word = stack.pop()  # an identifier: nothing to escape
            rename = re.compile(rb"(?<![A-Za-z0-9_])" + word + rb"[ \t]+as[ \t]+([A-Za-z_][A-Za-z0-9_]*)|"
                                rb"^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*(?::[^=\n]*)?=[ \t]*"
                                rb"(?:[A-Za-z_][A-Za-z0-9_]*[ \t]*\.[ \t]*)*" + word + rb"[ \t]*(?:#.*)?$", re.M)
            for path in self.paths_containing((word,)):
                data = self._bytes(path)
                if data is None or word not in data:  # a substring test first: most files never spell it
                    continue
                for m in (m for line in lines_with(data, word) for m in rename.finditer(line)):  # (on one line)
                    alias = m.group(1) or m.group(2)
                    if alias not in found:
                        found.add(alias)
                        stack.append(alias)
        known = self._renames[name] = frozenset(found)
        return known

    def summary(self, path: str) -> ModuleSummary | None:
        """The module summary of a project file (None: unreadable), by its content's sha256."""
        key = os.path.abspath(path)
        data = self._bytes(key)
        if data is None:
            return None
        with _phase(self.profiler, "summary"):
            known = self._summary_digests.get(key)
            if known is None or known[0] is not data:  # hashed once per content read
                known = (data, hashlib.sha256(data).hexdigest())
                if self._scan_bytes.get(key) is data:  # (a content not kept is not kept here either)
                    self._summary_digests[key] = known
            return self.summaries.get(known[1], data)

    def compiling_paths(self) -> list[tuple[str, ModuleSummary]]:
        """The project files that may hold a compile site, without parsing them: byte searches, then the
        module summary (``ast``, cached by content), with each its summary."""
        self.note_wide_read()
        if self._compiling is None:
            found: list[tuple[str, ModuleSummary]] = []
            files = self.all_files()
            report = self.index_progress
            spelling = set(self.paths_containing((b"compile",))) if self.words is not None and self.words.ready(self) else None  # (none read)
            for done, path in enumerate(files, 1):
                if report is not None:
                    report(done, len(files))
                spells = self.may_contain(path, (b"compile",)) if spelling is None else path in spelling
                data = self._bytes(path) if spells else None
                if data is None or not may_compile_bytes(data):
                    continue
                summary = self.summary(path)
                name, is_package, _ = self.module_name(path)
                if summary is None or not summary.may_compile(name, is_package):
                    continue
                found.append((path, summary))
            self._compiling = found
        return self._compiling

    def compiling_files(self, keep: "Callable[[str, ModuleSummary], bool] | None" = None) -> Iterator[FileModel]:
        """The parsed files of :meth:`compiling_paths` (only those are parsed) that ``keep`` accepts."""
        for path, summary in self.compiling_paths():
            if keep is None or keep(path, summary):
                model = self.file(path)
                if model is not None:
                    yield model

    def may_call(self, path: str, name: str) -> bool:
        """Could a call in the file have ``name`` as its callee's last part, or resolve to a name ending so
        (``ModuleSummary.may_call``)? A byte search, then the module summary (``ast``, cached by content):
        asked before parsing a file with LibCST only to look at its calls of ``name``."""
        data = self._bytes(os.path.abspath(path))
        if data is None or not _may_call_bytes(data, name.encode()):
            return data is None
        summary = self.summary(path)
        return summary is None or summary.may_call(name)

    def may_resolve_call(self, path: str, leaf: str) -> bool:
        """Could a call in the file resolve (``FileModel.resolve``) to a qualified name whose last part is ``leaf``?
        From the module summary (``ast``, cached by content: ``ModuleSummary.may_resolve_call``) without parsing."""
        summary = self.summary(path)
        return summary is None or summary.may_resolve_call(leaf)

    def files_calling(self, name: str, limit: int | None = None) -> list[FileModel] | None:
        """The parsed project files of :meth:`paths_calling` (only those are parsed)."""
        paths = self.paths_calling(name, limit)
        return None if paths is None else [model for model in map(self.file, paths) if model is not None]

    def paths_calling(self, name: str, limit: int | None = None) -> list[str] | None:
        """The project files with a call that may resolve to a qualified name ending in ``name`` (a byte
        search, then the module summary). ``None`` when more than ``limit`` files may call it: a name that
        common (`forward`, `run`) is not followed, so one file's question never parses most of a project."""
        needle = (name.encode(),)
        sizes: dict[str, int] = {}
        for path in self.paths_containing(needle):
            data = self._bytes(path)
            if data is not None and _may_call_bytes(data, needle[0]):
                sizes[path] = len(data)  # the name as a whole word, where a call or an alias may use it
        # then the module summaries (``ast``, cached by content), smallest module first: past ``limit`` hits the
        # answer is None whatever the order, and a common name (``compile``: 55 modules of torch-npu, 28 of them
        # calling one) is decided before the largest are parsed; else the hits in project order
        hits: set[str] = set()
        for path in sorted(sizes, key=sizes.__getitem__) if limit is not None and len(sizes) > limit else sizes:
            summary = self.summary(path)
            if summary is not None and summary.may_call(name):
                hits.add(path)
                if limit is not None and len(hits) > limit:
                    return None
        return [path for path in sizes if path in hits]
