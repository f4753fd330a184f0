"""The project's word index (:mod:`streamlint.model.wordindex`) kept in the project cache, shared by every run of
the project (command line, pre-commit, language server) whatever its configuration: ``v2/words-<key>.bin``,
``<key>`` hashing the index code. Binary, read without running anything (a cache directory planted in a
repository cannot run code): a JSON header (files, stamps, overlay) then the sorted vocabulary and the postings
as arrays of 32-bit ids. Every part is validated when read; anything of the wrong shape is an empty index (the
run indexes the tree again). Written atomically once per run, when the run changed it."""

from __future__ import annotations

import hashlib
import json
import operator
import os
import re
import stat
import struct
import sys
from array import array
from pathlib import Path

from streamlint import __version__
from streamlint.cache import CACHE_FORMAT, prepare_directory, write_atomic
from streamlint.model.wordindex import Stamp, WordIndex

MAGIC = b"streamlint-words 2\n"  # (2: stamps of size, mtime, inode and ctime)
_SIZE = struct.Struct("<Q")
_TOKEN = re.compile(rb"[.']?[A-Za-z0-9_]+")  # a word, ``.word`` or ``'word`` (streamlint.model.wordindex.words_of)
_WORDS = re.compile(rb"[.']?[A-Za-z0-9_]+(?:\n[.']?[A-Za-z0-9_]+)*")


def _ids(raw: bytes) -> "array | None":
    ids = array("I")
    if ids.itemsize != 4 or len(raw) % 4:
        return None
    ids.frombytes(raw)
    if sys.byteorder != "little":
        ids.byteswap()
    return ids


def _raw(ids: "array") -> bytes:
    if sys.byteorder != "little":
        ids = array("I", ids)
        ids.byteswap()
    return ids.tobytes()


def word_key(root: "str | Path | None" = None) -> str:
    """The index file's key: streamlint's version, the index code and the project root (one index per project:
    projects sharing a cache directory do not replace each other's)."""
    from streamlint.model import wordindex

    h = hashlib.sha256(f"{__version__}\0{os.path.abspath(root) if root is not None else ''}\0".encode(
        "utf-8", "surrogateescape"))
    try:
        with open(wordindex.__file__ or "", "rb") as fh:
            h.update(fh.read())
    except OSError:
        h.update(repr(wordindex).encode())
    return h.hexdigest()[:20]


class WordCache:
    def __init__(self, directory: Path, root: "str | Path | None" = None) -> None:
        self.directory = directory
        self.file = directory / f"v{CACHE_FORMAT}" / f"words-{word_key(root)}.bin"

    def load(self) -> WordIndex:
        try:
            if self.file.parent.is_symlink():
                return WordIndex()
            # (non-blocking, and a regular file only: a FIFO or device planted under that name is a damaged cache)
            fd = os.open(self.file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
            with open(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    return WordIndex()
                data = fh.read()
            return decode(data) or WordIndex()
        except (OSError, ValueError, RecursionError, MemoryError):
            return WordIndex()

    def save(self, index: WordIndex) -> None:
        """Write the index when the run changed it (folding its overlay in when it grew)."""
        if not index.dirty:
            return
        try:
            if not prepare_directory(self.directory) or self.file.parent.is_symlink():
                return
            self.file.parent.mkdir(exist_ok=True)
            if index.wants_compaction():
                index.compact()
            write_atomic(self.file, encode(index))
            index.dirty = False
        except OSError:
            pass


def encode(index: WordIndex) -> bytes:
    header = json.dumps({
        "files": [[path, ident, *(stamp or ())] for path, (ident, stamp) in index.files.items()],
        "next": index.next_id,
        "overlay": {word.decode("ascii"): ids for word, ids in index.overlay.items()},
    }, separators=(",", ":")).encode("utf-8", "surrogateescape")
    vocab = b"\n".join(index.vocab)
    parts = [MAGIC]
    for part in (header, vocab, _raw(index.base), _raw(index.offsets)):
        parts += [_SIZE.pack(len(part)), part]
    return b"".join(parts)


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def decode(data: bytes) -> WordIndex | None:
    """The index stored in ``data``; None when anything is not of the expected shape."""
    if not data.startswith(MAGIC):
        return None
    parts, at = [], len(MAGIC)
    for _ in range(4):
        if at + 8 > len(data):
            return None
        (size,) = _SIZE.unpack_from(data, at)
        at += 8
        if at + size > len(data):
            return None
        parts.append(data[at:at + size])
        at += size
    if at != len(data):
        return None
    head = json.loads(parts[0].decode("utf-8", "surrogateescape"))
    if not isinstance(head, dict) or not _int(head.get("next")):
        return None
    next_id = head["next"]
    files: dict[str, tuple[int, Stamp | None]] = {}
    if not isinstance(head.get("files"), list) or not isinstance(head.get("overlay"), dict):
        return None
    for entry in head["files"]:
        if not isinstance(entry, list) or len(entry) not in (2, 6) or not isinstance(entry[0], str) \
                or not all(_int(v) for v in entry[1:]) or entry[1] >= next_id:
            return None
        files[entry[0]] = (entry[1], (entry[2], entry[3], entry[4], entry[5]) if len(entry) == 6 else None)
    overlay: dict[bytes, list[int]] = {}
    for word, ids in head["overlay"].items():
        if not _TOKEN.fullmatch(raw := word.encode("ascii", "replace")) or not isinstance(ids, list) \
                or not all(_int(i) and i < next_id for i in ids):
            return None
        overlay[raw] = ids
    vocab = parts[1].split(b"\n") if parts[1] else []
    base, offsets = _ids(parts[2]), _ids(parts[3])
    if base is None or offsets is None or len(offsets) != len(vocab) + 1 or offsets[0] != 0 \
            or offsets[-1] != len(base) or (base and max(base) >= next_id):
        return None
    if not all(map(operator.le, offsets, offsets[1:])) or not all(map(operator.lt, vocab, vocab[1:])) \
            or (parts[1] and _WORDS.fullmatch(parts[1]) is None):
        return None
    return WordIndex(vocab, base, offsets, files, next_id, overlay)
