"""Byte-level tests that run before a module is read with ``ast`` or LibCST: each is a superset of what the
module summary (:mod:`streamlint.model.summary`) would answer, so a file they reject could never have
mattered to the question asked, and a project-wide question reads the summaries of few files only.

- :func:`may_compile_bytes`: could the module hold a compile site (``ModuleSummary.may_compile``)?
- :func:`may_call_bytes`: could a call of the module resolve to a name ending in ``name``
  (``ModuleSummary.may_call``)?

They run over every file of a large project, so every pattern starts with a literal and checks the byte
before a match in Python: a pattern that starts with a look-behind is tried at every byte (~30x slower).
"""

from __future__ import annotations

import bisect
import re
from typing import Callable, Iterator

from streamlint.model import apis
from streamlint.model.apis import Role


def _compile_leaves() -> frozenset[str]:
    """Last parts of every name that canonicalises to a compile API (``compile``, ``cache_compile``)."""
    roles = (Role.TORCH_COMPILE, Role.CACHE_COMPILE)
    names = {name for name, spec in apis.SPECS.items() if spec.role in roles}
    names |= {alias for alias, target in apis._EXACT_ALIASES.items()
              if apis.SPECS.get(target) is not None and apis.SPECS[target].role in roles}
    return frozenset(name.rsplit(".", 1)[-1] for name in names)


COMPILE_LEAVES = _compile_leaves()
_LEAF_WORDS = b"|".join(re.escape(leaf.encode()) for leaf in sorted(COMPILE_LEAVES, key=len, reverse=True))
_LEAF_AT = re.compile(rb"(?:" + _LEAF_WORDS + rb")(?![A-Za-z0-9_])")
_WORD_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
# `re.compile(` of the regular-expression module: not a compile site, unless `re` may name something
# else in this file. Any binding of a name (import as, assignment, definition, parameter, loop or `with`
# target, walrus, global) shows it as a bare name, not followed by `.`; only a plain `import re` line
# may show it so and still bind the module.
_RE_BEFORE = re.compile(rb"re\s*\.\s*\Z")  # before the leaf `compile` (not preceded by a name byte or `.`)
_BARE_RE = re.compile(rb"\bre\b(?!\s*\.)")  # (not preceded by `.`)
_PLAIN_IMPORT_LINE = re.compile(rb"^[ \t]*import[ \t]+[A-Za-z0-9_., \t]+$")


# What may follow a compile leaf that the summary reads (a call's callee, or the value an import-as,
# assignment or loop binds, ``_called_names`` / ``_may_call_compile``), after blanks and line continuations:
# an opening or closing bracket, a separator, an assignment, a comment, the end of the line or file, or a
# keyword that may continue an expression. Nothing else may follow a name in valid code but `.`, `[` and
# an operator, which make the name part of a longer expression: that matters only for an attribute, which
# a ``for`` statement's iterable binds wherever it stands in it (``for f in (torch.compile, g)``). Prose
# (``one compile plus``, ``compile-time``, ``the compile cache``) and module paths (``from x.compile import``)
# are neither.
_ENDS = re.compile(rb"(?:[ \t]|\\\r?\n)*(?:[()\]{},:;=#\r\n]|\Z|"
                   rb"(?:if|else|and|or|not|in|is|for|async|as|from)(?![A-Za-z0-9_]))")
# the start of an import statement's line up to a name of its module path (nothing else may start a line so)
_IMPORT_PATH = re.compile(rb"[ \t]*(?:import[ \t]|from[ \t]+([A-Za-z0-9_.]+)[ \t]+import(?![A-Za-z0-9_]))")
_CONTINUES = re.compile(rb"(?:[ \t]|\\\r?\n)*[.\[+\-*/%@<>!&|^~]")


def _in_string_or_comment(data: bytes, line_start: int, before: bytes) -> bool:
    """Is the text after ``before`` (from the start of its line) inside a string literal or a comment that
    opened on this line? Decided only for a line that starts outside any string (not after a line ending
    in a backslash), with no backslash, brace or triple quote before the leaf; anything else: False. (A
    line that starts inside a triple-quoted string and has no triple quote before the leaf has it in that
    string whatever this answers.)"""
    if b"\\" in before or b"{" in before or b"'''" in before or b'"""' in before:
        return False  # (escapes, f-string fields, a triple-quoted string opening or closing on the line)
    previous = data[max(line_start - 3, 0):line_start].rstrip(b"\r\n")
    if previous.endswith(b"\\"):
        return False  # a string continued from the line before
    quote = 0
    for byte in before:
        if quote:
            if byte == quote:
                quote = 0
        elif byte in (34, 39):  # " '
            quote = byte
        elif byte == 35:  # #
            return True
    return quote != 0


def _may_matter(data: bytes, start: int, end: int) -> bool:
    """May the compile leaf at ``data[start:end]`` be read by :func:`summarize`? Not when it is in a comment
    (a ``#`` and no quote before it on its line: a ``#`` inside a string means the line is in a string that
    a quote on it has not closed), nor when what follows it is prose or makes it part of a longer name that
    is not an attribute (see ``_ENDS``)."""
    line_start = data.rfind(b"\n", 0, start) + 1
    before = data[line_start:start]
    if b"#" in before and b"'" not in before and b'"' not in before:
        return False
    if (b"'" in before or b'"' in before) and _in_string_or_comment(data, line_start, before):
        return False
    if _ENDS.match(data, end):
        return True
    if not _CONTINUES.match(data, end):
        return False
    # an attribute (``.`` before it, possibly on an earlier line inside brackets): a loop's iterable may bind
    # it, unless it is part of the module path of an import statement (``from pkg.compile.flags import F``)
    head = data[max(line_start - 1, 0):start].rstrip(b" \t")
    if head and not head.endswith((b".", b"\n")):
        return False
    path = _IMPORT_PATH.match(data, line_start)
    return path is None or (path.lastindex is not None and path.end(1) < end)


def may_compile_bytes(data: bytes) -> bool:
    """Could this file contain a compile site? A byte-level superset of :func:`summarize`'s answer: a compile
    leaf that may matter (:func:`_may_matter`) other than ``re.compile`` of the regex module. (Every pattern
    here starts with a literal and checks the byte before a match itself: a pattern that starts with a
    look-behind is tried at every byte, ~30x slower over a large tree.)"""
    if b"compile" not in data:
        return False
    only_regex = None
    for word in _LEAF_AT.finditer(data):
        start = word.start()
        if start and data[start - 1] in _WORD_BYTES:  # a longer identifier (no shorter leaf inside is a word)
            continue
        if not _may_matter(data, start, word.end()):
            continue
        regex = _RE_BEFORE.search(data, max(start - 64, 0), start)  # `re . compile`, blanks between
        if regex is None or (regex.start() and data[regex.start() - 1] in _WORD_BYTES + b"."):
            return True
        only_regex = True
    if only_regex is None:
        return False
    for bare in _BARE_RE.finditer(data):  # only `re.compile` calls: is `re` the regex module?
        if bare.start() and data[bare.start() - 1] == ord("."):
            continue
        start = data.rfind(b"\n", 0, bare.start()) + 1
        end = data.find(b"\n", bare.end())
        line = data[start:end if end >= 0 else len(data)].rstrip(b"\r")
        if not _PLAIN_IMPORT_LINE.match(line) or b" as " in line:
            return True
    return False


_NAME_BYTE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_SPACE = frozenset(b" \t\n\r\f\v")
_CHAIN_BYTE = _NAME_BYTE | _SPACE | frozenset(b".(")
_CALLED_OR_RENAMED = re.compile(rb"\s*\(|\s+as\s")
_CHAIN = re.compile(rb"\s*\(?\s*(?:[A-Za-z_][A-Za-z0-9_]*\s*\.\s*)*")
_FOR = re.compile(rb"\bfor\b")
_LONGEST_CHAIN = 4096  # bytes looked back from a name for the `=` of an assignment (past it: kept)


def _words(data: bytes, name: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of every occurrence of the identifier ``name`` as a whole word. A literal search: a
    pattern that starts with a look-behind is tried at every byte of the file (~30x slower)."""
    start = data.find(name) if name else -1  # (an empty name is no word: find would match everywhere)
    while start >= 0:
        end = start + len(name)
        if (start == 0 or data[start - 1] not in _NAME_BYTE) and (end == len(data) or data[end] not in _NAME_BYTE):
            yield start, end
        start = data.find(name, end)  # an occurrence starting inside this one follows a name byte


def spells(data: bytes, name: str) -> bool:
    """Does the module spell the identifier ``name`` as a whole word (anywhere, comments included)?"""
    return next(_words(data, name.encode("utf-8")), None) is not None


# after a name: a call of it or its definition (``fn(``), an attribute of it (``fn.__name__``): the name not handed on
_NOT_HANDED = re.compile(rb"\s*[(.]")


def may_hand_bytes(data: bytes, name: bytes) -> bool:
    """Could a call of the module hand the callable ``name`` itself as an argument (``executor.submit(fn, x)``,
    ``Thread(target=self.fn)``)? A byte-level superset: ``name`` as a whole word followed by neither ``(`` nor
    ``.`` (blanks and line breaks between them skipped): a call of it, its ``def``, an attribute of it never
    hand it."""
    return any(not _NOT_HANDED.match(data, end) for _, end in _words(data, name))


_STAR_IMPORT = re.compile(rb"\bimport\s*\*")


def has_star_import(data: bytes) -> bool:
    """A byte-level superset of ``from m import *`` (also inside brackets or strings)."""
    return _STAR_IMPORT.search(data) is not None


def may_call_bytes(data: bytes, name: bytes) -> bool:
    """Could the module's summary say it may call ``name`` (``ModuleSummary.may_call``)? A byte-level superset
    of ``summary._called_names``: the name called (``name(``, ``@name(``), imported under another name
    (``name as y``), assigned (``y = name`` / ``y = x.name``, also across lines in brackets, keyword
    arguments included), or an attribute of a ``for`` loop's iterable (``for f in self.name``)."""
    loops = None
    for start, end in _words(data, name):
        if _CALLED_OR_RENAMED.match(data, end):
            return True
        i = start  # `= (x . y . name`: the bytes before the name, back to the first that cannot be in a chain
        while i > 0 and data[i - 1] in _CHAIN_BYTE:
            i -= 1
            if start - i > _LONGEST_CHAIN:
                return True
        if i > 0 and data[i - 1] == ord("=") and _CHAIN.fullmatch(data, i, start):
            return True
        j = start
        while j > 0 and data[j - 1] in _SPACE:
            j -= 1
        if j > 0 and data[j - 1] == ord("."):
            if loops is None:
                loops = _FOR.search(data) is not None
            if loops:
                return True
    return False


__all__ = ["COMPILE_LEAVES", "lines_with", "may_call_bytes", "may_compile_bytes", "may_hand_bytes"]


def lines_with(data: bytes, word: bytes) -> Iterator[bytes]:
    """The lines of ``data`` (split at ``\\n`` only, a ``\\r`` kept) that contain ``word``, each once, in
    order: a pattern whose matches never cross a newline finds the same matches in them as in ``data``."""
    pos = data.find(word)
    while pos >= 0:
        start = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos)
        if end < 0:
            yield data[start:]
            return
        yield data[start:end]
        pos = data.find(word, end + 1)


class JoinedTree:
    """The contents of a project's files joined by NUL bytes (:func:`join_contents`), for its marker searches
    (``Project.paths_containing``): a marker without NUL matches inside one file only. A search of markers that
    all spell one attribute word (``.attr =``, ``.attr=``, ``.attr +=``) or one quoted word (``"attr"``,
    ``'attr'``) reads an index of the files spelling that dotted / quoted word, built once over the tree (~0.05 s
    for torch-npu's 15 MB, where each search read the whole tree: ~10 ms a marker, ~70 searches for one large
    file), then tests the markers in those files only; other markers are found in the joined contents."""

    def __init__(self, blob: bytes | bytearray, starts: list[int], paths: list[str]) -> None:
        self.blob, self.starts, self.paths = blob, starts, paths
        self._indexes: dict[str, dict[bytes, list[int]]] = {}

    def _end(self, k: int) -> int:
        return self.starts[k + 1] - 1 if k + 1 < len(self.starts) else len(self.blob)

    def _index(self, kind: str) -> dict[bytes, list[int]]:
        index = self._indexes.get(kind)
        if index is None:
            index = self._indexes[kind] = {}
            pattern = _DOT_WORD if kind == "." else _QUOTED_WORD
            for k in range(len(self.starts)):
                for word in set(pattern.findall(self.blob, self.starts[k], self._end(k))):
                    index.setdefault(word, []).append(k)
        return index

    def hits(self, markers: tuple[bytes, ...]) -> list[str]:
        """The paths whose content holds one of ``markers`` (none empty or holding NUL), in their order."""
        blob, starts = self.blob, self.starts
        kind, word = _indexed(markers)
        if kind:
            return [self.paths[k] for k in self._index(kind).get(word, ())
                    if any(blob.find(m, starts[k], self._end(k)) >= 0 for m in markers)]
        common = _shared(markers)
        found: set[int] = set()
        for marker in (common,) if common else markers:
            at = blob.find(marker)
            while at >= 0:
                k = bisect.bisect_right(starts, at) - 1
                end = self._end(k)
                if not common or any(blob.find(m, starts[k], end) >= 0 for m in markers):
                    found.add(k)
                at = blob.find(marker, end) if k + 1 < len(starts) else -1
        return [self.paths[k] for k in sorted(found)]


# an occurrence of ``.attr`` + a non-word byte, or of a quoted word, is a match of these with that word (the
# closing quote is not consumed: ``'a'b'`` holds ``'b'``); so the index holds every file that may match
_DOT_WORD = re.compile(rb"\.(\w+)")
_QUOTED_WORD = re.compile(rb"[\"'](\w+)(?=[\"'])")
_DOT_MARKER = re.compile(rb"\.(\w+)(?!\w)")
_QUOTED_MARKER = re.compile(rb"[\"'](\w+)[\"']")


def _indexed(markers: tuple[bytes, ...]) -> tuple[str, bytes]:
    """("." or "'", the word) when every marker is ``.word`` + a non-word byte (+ anything), or every marker is a
    quoted word, all the same word; else ("", b"")."""
    words: set[bytes] = set()
    dotted = all((m := _DOT_MARKER.match(marker)) is not None and m.end() < len(marker) and not words.add(m.group(1))
                 for marker in markers)
    if dotted and len(words) == 1:
        return ".", words.pop()
    words = set()
    quoted = all((m := _QUOTED_MARKER.fullmatch(marker)) is not None and marker[0] == marker[-1]
                 and not words.add(m.group(1)) for marker in markers)
    if quoted and len(words) == 1:
        return "'", words.pop()
    return "", b""


def join_contents(paths: list[str], read: "Callable[[str], bytes]", limit: int) -> "JoinedTree | None":
    """The contents of ``paths`` joined by NUL bytes (an unreadable file is left out); None past ``limit`` bytes.
    Written into one growing buffer: no list of the parts next to their join (the peak is the tree once)."""
    blob = bytearray()
    starts: list[int] = []
    kept: list[str] = []
    for path in paths:
        try:
            data = read(path)
        except OSError:
            continue
        if starts:
            blob += b"\0"
        if len(blob) + len(data) > limit:
            return None
        starts.append(len(blob))
        kept.append(path)
        blob += data
    return JoinedTree(blob, starts, kept)


def _shared(markers: tuple[bytes, ...]) -> bytes:
    """The longest substring (3 bytes or more) of every marker, when there are several; else b""."""
    if len(markers) < 2:
        return b""
    short = min(markers, key=len)
    for size in range(len(short), 2, -1):
        for i in range(len(short) - size + 1):
            part = short[i:i + size]
            if all(part in m for m in markers):
                return part
    return b""
