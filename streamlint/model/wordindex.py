"""A persistent word index of a project's files, for its marker searches (``Project.paths_containing``).

Per file, keyed by its content stamp (size, mtime, inode and ctime: :func:`stamp_of`), the set of
its *words*: the maximal runs of ``[A-Za-z0-9_]`` bytes (comments and strings included). They are merged into a
word -> files posting table kept in the project cache (:mod:`streamlint.wordcache`) and updated for changed
files only, so a warm run answers a marker search without reading the tree:

- a word of the marker with a non-word byte of the marker on each side (``attr`` in ``.attr =``): an occurrence
  of the marker is an occurrence of that very word in the file (exact lookup);
- one with a non-word byte before it only (``name`` at the end of ``"name``): a word of the file starts with it
  (a prefix range of the sorted vocabulary); after it only: a word of the file ends with it; neither (the
  marker is one word): a word of the file contains it (a search of the vocabulary's bytes);
- a marker without a word: no answer (the caller scans as before).

The files so found are candidates only: the caller confirms the marker with a byte search in each, so the
answer is the scan's exactly. The index never holds file contents. File ids are never reused within an index:
a changed file gets a new id and its old one is dead (filtered out), its new words go to an overlay of the
postings; :meth:`WordIndex.compact` folds both in when they grow.
"""

from __future__ import annotations

import bisect
import re
import time
from array import array
from typing import Callable, Iterable

from streamlint.profile import phase as _phase

WORD = re.compile(rb"[A-Za-z0-9_]+")
_WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")

Stamp = tuple[int, int, int, int]  # (size, mtime_ns, inode, ctime_ns)


def stamp_of(st) -> Stamp:
    """A file's content stamp from its ``os.stat_result``: size and mtime (the result cache's), plus its inode and
    ctime, which a replacement by a file of the same size and mtime (``cp -p``, ``rsync -t``, ``tar x``,
    ``touch -r``: a rename, or a write in place then the mtime set back) cannot keep."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def stamp_settled(stamp: Stamp, before_ns: int) -> bool:
    """Was the file last modified or replaced (mtime and ctime) before ``before_ns``? (a later change within
    the clock's granularity could keep the very same stamp: such a stamp is not trusted)"""
    return max(stamp[1], stamp[3]) < before_ns


_BLANKS = bytes(c if c in _WORD_BYTES else 32 for c in range(256))  # every non-word byte -> a space


# ``.word`` (a word right after a dot) and ``'word`` (a word between two quotes, either kind; the closing quote
# not consumed: ``'a'b'`` holds both), kept as tokens of their own next to the plain words: ``.attr =`` and ``"attr"``
# are far rarer than ``attr``, and their candidate files are all read to confirm the marker
_DOTTED = re.compile(rb"\.([A-Za-z0-9_]+)")
_QUOTED = re.compile(rb"[\"']([A-Za-z0-9_]+)(?=[\"'])")
_QUOTES = frozenset(b"'\"")


def words_of(data: bytes) -> set[bytes]:
    """The words of ``data`` (maximal runs of ``[A-Za-z0-9_]``; as ``set(WORD.findall(data))``, ~2x faster), with
    the tokens ``.word`` and ``'word`` (see ``_DOTTED``, ``_QUOTED``)."""
    words = set(data.translate(_BLANKS).split())
    words.update(b"." + w for w in set(_DOTTED.findall(data)))
    if b"'" in data or b'"' in data:
        words.update(b"'" + w for w in set(_QUOTED.findall(data)))
    return words


def is_word(marker: bytes) -> bool:
    """Is ``marker`` one word? A file holding a word that contains it holds it: no confirmation needed."""
    return WORD.fullmatch(marker) is not None


def marker_words(marker: bytes) -> list[tuple[bytes, bool, bool]]:
    """(word, a non-word byte of the marker before it, one after it) for each word of ``marker``."""
    return [(m.group(), m.start() > 0, m.end() < len(marker)) for m in WORD.finditer(marker)]


def _keys(marker: bytes) -> list[tuple[tuple[int, int, int, int], bytes, bool, bool]]:
    """(rank, token, left, right) for each word of ``marker`` (see :meth:`WordIndex._with`): a file holding
    the marker holds such a token."""
    keys = []
    for m in WORD.finditer(marker):
        word, start, end = m.group(), m.start(), m.end()
        left, right = start > 0, end < len(marker)
        kind = 0
        if left and right and marker[start - 1] in _QUOTES and marker[end] in _QUOTES:
            word, kind = b"'" + word, 2
        elif left and marker[start - 1] == 46:  # .
            word, kind = b"." + word, 1
        keys.append(((left + right, kind, left, len(word)), word, left, right))
    return keys


class WordIndex:
    """Files (by path, with their stamp) and the words each holds, as postings word -> file ids.

    ``vocab`` (sorted, without the overlay's new words) and ``base`` / ``offsets`` (the postings of ``vocab[i]``
    are ``base[offsets[i]:offsets[i + 1]]``) are what the cache stores compactly; ``overlay`` holds the words of
    files indexed since (word -> their ids); ``files`` maps a path to (its id, its stamp or None: not to be
    trusted next run); ids not in ``files`` are dead."""

    def __init__(self, vocab: list[bytes] | None = None, base: "array | None" = None,
                 offsets: "array | None" = None, files: dict[str, tuple[int, Stamp | None]] | None = None,
                 next_id: int = 0, overlay: dict[bytes, list[int]] | None = None) -> None:
        self.vocab = vocab or []
        self.base = base if base is not None else array("I")
        self.offsets = offsets if offsets is not None else array("I", [0])
        self.files = files or {}
        self.next_id = next_id
        self.overlay = overlay or {}
        self.dirty = False
        self._blob: bytes | None = None  # b"\n".join(vocab) with a leading b"\n" (suffix / inner searches)
        self._starts: list[int] = []  # where each word of vocab starts in _blob
        self._live: frozenset[int] | None = None
        self._paths: dict[int, str] | None = None  # live id -> its path

    # ---- keeping it current
    def refresh(self, paths: Iterable[str], stamp: Callable[[str], "Stamp | None"],
                read: Callable[[str, "Stamp | None"], "tuple[bytes, Stamp | None]"], trusted: Callable[[Stamp], bool],
                prune: bool) -> None:
        """Re-index every path whose stamp is not the recorded one (or was not trusted); an unreadable file
        holds no word (the scan finds nothing in it either). ``read(path, now)``: the file's bytes and the stamp
        taken BEFORE they were read (``now`` when it reads them itself; None when unknown: a file saved between
        an earlier read and ``now`` must not be stored with its new stamp and its old words). ``prune``: drop
        files not in ``paths``."""
        seen = set()
        for path in paths:
            seen.add(path)
            now = stamp(path)
            known = self.files.get(path)
            if known is not None and known[1] is not None and known[1] == now:
                continue
            try:
                data, before = read(path, now)
                words = words_of(data)
            except OSError:
                words, before = set(), None
            self._put(path, words, before if before is not None and trusted(before) else None)
        if prune:
            for path in [p for p in self.files if p not in seen]:
                del self.files[path]
                self.dirty = True
                self._live = self._paths = None

    def _put(self, path: str, words: set[bytes], stamp: "Stamp | None") -> None:
        ident = self.next_id
        self.next_id += 1
        self.files[path] = (ident, stamp)
        for word in words:
            self.overlay.setdefault(word, []).append(ident)
        self.dirty = True
        self._live = self._paths = None

    def live(self) -> frozenset[int]:
        if self._live is None:
            self._live = frozenset(ident for ident, _ in self.files.values())
        return self._live

    def compact(self) -> None:
        """Fold the overlay into the base postings and drop dead ids (renumbered densely, in order). Every
        posting list stays sorted: ids grow, the overlay's are above the base's, renumbering keeps the order."""
        ids = sorted(self.live())
        dense = len(ids) == self.next_id  # (no dead id: nothing to renumber; the first build of a tree)
        renumber = None if dense else {old: new for new, old in enumerate(ids)}
        merged: dict[bytes, "array | list[int]"] = {}
        base, offsets = self.base, self.offsets
        for i, word in enumerate(self.vocab):
            kept = base[offsets[i]:offsets[i + 1]]
            if renumber is not None:
                kept = [renumber[k] for k in kept if k in renumber]
            if kept:
                merged[word] = kept
        for word, extra in self.overlay.items():
            kept = extra if renumber is None else [renumber[k] for k in extra if k in renumber]
            if kept:
                known = merged.get(word)
                merged[word] = kept if known is None else [*known, *kept]
        self.vocab = sorted(merged)
        self.base, self.offsets = array("I"), array("I", [0])
        extend, append, base = self.base.extend, self.offsets.append, self.base
        for word in self.vocab:
            extend(merged[word])
            append(len(base))
        if renumber is not None:
            self.files = {path: (renumber[ident], stamp) for path, (ident, stamp) in self.files.items()}
        self.next_id = len(ids)
        self.overlay = {}
        self._blob = None
        self._live = self._paths = None

    def wants_compaction(self) -> bool:
        return sum(map(len, self.overlay.values())) > max(len(self.base) // 4, 20_000) \
            or self.next_id > 2 * len(self.files) + 64

    # ---- questions
    def _ids(self, i: int) -> "array":
        return self.base[self.offsets[i]:self.offsets[i + 1]]

    def _with(self, word: bytes, left: bool, right: bool) -> set[int]:
        """Ids (live or dead) of the files holding a word that starts with ``word`` (``left``), ends with it
        (``right``), both (exactly it) or contains it."""
        found: set[int] = set()
        vocab = self.vocab
        if left and right:
            i = bisect.bisect_left(vocab, word)
            if i < len(vocab) and vocab[i] == word:
                found.update(self._ids(i))
            found.update(self.overlay.get(word, ()))
            return found
        if left:
            i = bisect.bisect_left(vocab, word)
            while i < len(vocab) and vocab[i].startswith(word):
                found.update(self._ids(i))
                i += 1
            for other, ids in self.overlay.items():
                if other.startswith(word):
                    found.update(ids)
            return found
        if self._blob is None:
            self._blob = b"\n" + b"\n".join(vocab) + b"\n"
            self._starts, at = [], 1
            for other in vocab:
                self._starts.append(at)
                at += len(other) + 1
        blob, starts = self._blob, self._starts
        at = blob.find(word)
        while at >= 0:
            start = blob.rfind(b"\n", 0, at) + 1
            end = blob.find(b"\n", at)
            if end < 0:
                break  # (a word holds no newline: never)
            if not right or at + len(word) == end:
                found.update(self._ids(bisect.bisect_right(starts, start) - 1))
                at = blob.find(word, end)  # (this word's postings are in: the next one)
            else:
                at = blob.find(word, at + 1)
        for other, ids in self.overlay.items():
            if other.endswith(word) if right else word in other:
                found.update(ids)
        return found

    def candidates(self, markers: tuple[bytes, ...]) -> set[str] | None:
        """The paths that may contain one of ``markers`` (a superset of the scan's answer); None: a marker
        without a word (no answer from the index)."""
        ids: set[int] = set()
        for marker in markers:
            keys = _keys(marker)
            if not keys:
                return None
            # the most selective: both sides bounded (a quoted word, then a dotted one, then a word), then a
            # dotted prefix, a prefix, a suffix, the longest
            _, word, left, right = max(keys)
            ids |= self._with(word, left, right)
        if self._paths is None:
            self._paths = {ident: path for path, (ident, _) in self.files.items()}
        paths = self._paths
        return {paths[ident] for ident in ids if ident in paths}


class WordSearch:
    """The word index as a project uses it (``Project.words``): loaded on the first search (``source``: the
    project cache's, :mod:`streamlint.wordcache`), brought up to date for the project's file list once (``stamp``:
    a file's content stamp, None when not to be trusted, e.g. an editor buffer). The project is duck-typed (this
    layer does not know it): ``reader``, ``scope``, ``profiler``, ``_scan_bytes``, ``_keep_bytes``, ``may_contain``;
    for an in-memory index (``after``) also ``_marker_paths``, ``_joined``, ``all_files``."""

    def __init__(self, source: Callable[[], WordIndex], stamp: Callable[[str], "Stamp | None"],
                 read_stamp: Callable[[str], "Stamp | None"] | None = None, after: int = 0) -> None:
        # read_stamp: the stamp taken before the reader's first read of a file this run (Engine.read_stamp), for
        # the bytes the project holds already; None: those bytes' words are stored untrusted (read again next run)
        self.source, self.stamp, self.read_stamp = source, stamp, read_stamp
        # after: an index of a run without the project cache (built in memory, never stored: Engine), which answers
        # only once the project asked this many distinct searches and its files are too large to be joined
        # (Project._joined): before that, or for a smaller tree, the project scans as it did without an index
        # (a run of one file reads no more than it did; a large tree's run reads each file once, not per marker)
        self.after = after
        self.index: WordIndex | None = None
        # the file list the index was last brought up to date for (None: check every stamp at the next search)
        self.files_for: list[str] | None = None
        self._order: tuple[list[str], int, dict[str, int] | None] | None = None  # (files, each one's place: _in_order)

    def current(self, project, files: list[str], keep: bool = True) -> WordIndex:
        """The index, every file of ``files`` whose stamp is not the recorded one read again (``keep``: its
        content kept for the byte searches, as a search would keep it)."""
        if self.index is None:
            self.index = self.source()
        if self.files_for is not files and self.files_for != files:  # (an equal list: the reach cache's project's)
            recent = time.time_ns() - 2_000_000_000  # (a file modified or replaced since is read again)
            read = project.reader

            def reread(path: str, now: "Stamp | None") -> "tuple[bytes, Stamp | None]":
                data = project._scan_bytes.get(path)
                if data is not None:  # read earlier in the run: the stamp taken before that read, if known
                    return data, self.read_stamp(path) if self.read_stamp is not None else None
                data = read(path)
                if keep:
                    project._keep_bytes(path, data)
                return data, now

            self.index.refresh(files, self.stamp, reread, lambda st: stamp_settled(st, recent),
                               prune=project.scope is None)
            if self.index.wants_compaction():
                self.index.compact()
            self.files_for = files
        return self.index

    def ready(self, project, files: list[str] | None = None) -> bool:
        """Does this index answer the project's searches? (always, but an in-memory one: see ``after``)"""
        if not self.after or self.index is not None:
            return True
        return len(project._marker_paths) >= self.after and project._joined(files or project.all_files()) is None

    def paths(self, project, files: list[str], markers: tuple[bytes, ...]) -> list[str] | None:
        """``Project.paths_containing``'s answer: the files holding a token each marker implies, the marker
        confirmed in those only (a one-word marker needs no confirmation: a word containing it spells it).
        None: a marker without a word, or no reader (the caller scans)."""
        if project.reader is None or not markers or not self.ready(project, files):
            return None
        with _phase(project.profiler, "word-index"):
            candidates = self.current(project, files).candidates(markers)
        if candidates is None:
            return None
        hits = self._in_order(files, candidates)
        if all(map(is_word, markers)):
            return hits
        return [path for path in hits if project.may_contain(path, markers)]

    def _in_order(self, files: list[str], candidates: set[str]) -> list[str]:
        """``[path for path in files if path in candidates]``, from the candidates (a few) rather than the files
        (the whole tree, asked ~80 times by a run of one large module): by each file's place in ``files``."""
        if self._order is None or self._order[0] is not files or self._order[1] != len(files):
            order = {path: i for i, path in enumerate(files)}
            self._order = (files, len(files), order if len(order) == len(files) else None)  # (None: repeated paths)
        order = self._order[2]
        if order is None or len(candidates) * 4 > len(files):
            return [path for path in files if path in candidates]
        return sorted((path for path in candidates if path in order), key=order.__getitem__)


__all__ = ["WORD", "WordIndex", "WordSearch", "is_word", "marker_words", "stamp_of", "stamp_settled", "words_of"]
