"""The project cache's word index (streamlint.model.wordindex, streamlint.wordcache): Project.paths_containing
answers exactly what a scan of every file's bytes answers (same files, same order), cold and warm, after files
are edited, added or deleted, for markers of every shape."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from streamlint.model.project import Project
from streamlint.model.wordindex import WordIndex, WordSearch, marker_words
from streamlint.wordcache import WordCache, decode, encode

WORDS = ["stream", "streams", "record_stream", "wait_stream", "set_stream", "compile", "recompile", "self",
         "event", "Event", "record", "_x", "x1", "attr", "attribute", "a", "b", "ab", "ba", "__dict__", "setattr",
         "torch", "npu", "cuda", "graph_task_update_begin", "contextmanager", "default_stream", "k"]
GLUE = [" ", ".", "(", ")", "'", '"', " = ", "=", " += ", "[", "]", ":", ",", "\n", "#", "\t", "é", "\\", ".",
        "\x00", "\xff"]


def _text(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randrange(0, 60)):
        parts.append(rng.choice(WORDS) + rng.choice(["", "", rng.choice(WORDS)]))
        parts.append(rng.choice(GLUE))
    return "".join(parts).encode("utf-8", "surrogateescape")


def _markers(rng: random.Random) -> list[tuple[bytes, ...]]:
    fixed = [(b"stream",), (b"record_stream",), (b"tream",), (b"stre",), (b".stream",), (b".attr =", b".attr=",
             b".attr +="), (b'"attr"', b"'attr'"), (b"'ab'",), (b"self.attr =", b"self.attr="), (b"set_stream(",),
             (b"class Event",), (b"Event(",), (b"(",), (b" = ",), (b"a",), (b"k",), (b"x1.",), (b".record(",),
             (b".event)",), (b"event:",), (b"__dict__",), (b"setattr(",), (b"compile",), (b".a", b"a[", b"a."),
             (b"stream", b"event"), (b"\xc3\xa9",), (b"\\",), (b"graph_task_update_begin",), (b"_x",), (b"1",),
             (b"npu.stream",), (b"streamsX",), (b"tream(",), (b" stream",), (b"\"ab'",), (b".a.b",),
             (b"'x1'",), (b"'self.",), (b".k\"",)]
    for _ in range(200):
        n = rng.randrange(1, 3)
        fixed.append(tuple(_text(rng)[: rng.randrange(1, 12)] or b"a" for _ in range(n)))
        word = rng.choice(WORDS).encode()
        cut = word[rng.randrange(0, len(word)):][: rng.randrange(1, len(word) + 1)] or word
        fixed.append((rng.choice([b"", b".", b"'", b" "]) + cut + rng.choice([b"", b"(", b"'", b" =", b"."]),))
    return fixed


def _tree(root: Path, rng: random.Random, n: int = 60) -> None:
    for i in range(n):
        d = root / f"pkg{i % 4}"
        d.mkdir(exist_ok=True)
        (d / f"m{i}.py").write_bytes(_text(rng))
    (root / "pkg0" / "empty.py").write_bytes(b"")
    (root / "pkg1" / "dangling.py").symlink_to(root / "nowhere.py")  # unreadable


def _project(root: Path, index: WordIndex | None) -> Project:
    def read(path: str) -> bytes:
        with open(path, "rb") as fh:
            return fh.read()

    def stamp(path: str):
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    project = Project(root, lambda *a: None, reader=read)
    if index is not None:
        project.words = WordSearch(lambda: index, stamp)
    return project


def _brute(project: Project, markers: tuple[bytes, ...]) -> list[str]:
    found = []
    for path in project.all_files():
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        if any(m in data for m in markers):
            found.append(path)
    return found


def _check(root: Path, index: WordIndex, markers: list[tuple[bytes, ...]]) -> None:
    indexed, scanned = _project(root, index), _project(root, None)
    for m in markers:
        expected = _brute(scanned, m)
        assert indexed.paths_containing(m) == expected, m
        assert scanned.paths_containing(m) == expected, m


def _age(root: Path) -> None:
    """Files old enough for their stamp to be trusted (the index re-reads files modified in the last 2 s)."""
    for path in root.rglob("*.py"):
        if not path.is_symlink():
            os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 10_000_000_000))


def test_marker_words():
    assert marker_words(b".attr =") == [(b"attr", True, True)]
    assert marker_words(b"'name") == [(b"name", True, False)]
    assert marker_words(b"self.x(") == [(b"self", False, True), (b"x", True, True)]
    assert marker_words(b"(") == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_index_answers_as_the_scan(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "proj"
    root.mkdir()
    _tree(root, rng)
    _age(root)
    markers = _markers(rng)
    index = WordIndex()
    _check(root, index, markers)  # cold: built during the first search
    # stored and loaded again (the next run), then compacted: the same answers
    warm = decode(encode(index))
    assert warm is not None and warm.files == index.files
    _check(root, warm, markers)
    warm.compact()
    _check(root, decode(encode(warm)), markers)


def test_edits_additions_deletions_change_the_next_warm_answers(tmp_path: Path) -> None:
    rng = random.Random(7)
    root = tmp_path / "proj"
    root.mkdir()
    _tree(root, rng, 30)
    _age(root)
    cache = WordCache(tmp_path / "cache")
    index = cache.load()
    markers = _markers(rng)[:80] + [(b"brand_new_word",), (b".brand_new_word =",), (b"'quoted_new'",)]
    _check(root, index, markers)
    cache.save(index)
    assert cache.file.is_file()
    for step in range(4):
        files = sorted(p for p in root.rglob("*.py") if not p.is_symlink())
        # edit one (same size too: a new mtime), add one, delete one
        files[step].write_bytes(files[step].read_bytes()[:-3] + b" brand_new_word .brand_new_word = 'quoted_new'")
        same = files[step + 5]
        data = same.read_bytes()
        same.write_bytes(data.replace(b"stream", b"strean") if b"stream" in data else data)
        (root / "pkg2" / f"added{step}.py").write_bytes(_text(rng) + b" record_stream(x) self.attr = 1")
        files[-1 - step].unlink()
        if step % 2:
            _age(root)  # trusted stamps next time; else re-read because recent
        index = cache.load()
        assert index.files  # the earlier run's index
        _check(root, index, markers)
        cache.save(index)


def test_damaged_cache_is_an_empty_index(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    _tree(root, random.Random(3), 10)
    cache = WordCache(tmp_path / "cache")
    index = cache.load()
    _project(root, index).paths_containing((b"stream",))
    cache.save(index)
    good = cache.file.read_bytes()
    assert decode(good) is not None
    for bad in (good[:-1], good[:40] + b"x" + good[41:], b"", good + b"\0", good.replace(b"stream", b"strea\n")):
        cache.file.write_bytes(bad)
        loaded = cache.load()
        assert isinstance(loaded, WordIndex)
        _check(root, loaded, [(b"stream",), (b".attr =",)])


def test_index_holds_no_contents(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_bytes(b"x = 'unique_marker_text here'\n" * 100)
    index = WordIndex()
    _project(root, index).paths_containing((b"unique_marker_text here",))
    assert b"unique_marker_text here" not in encode(index)
    assert not any(isinstance(v, bytes) and len(v) > 100 for v in vars(index).values())


def test_unreadable_and_binary_files_as_the_scan(tmp_path: Path) -> None:
    """A file the reader cannot read holds no marker for either; binary bytes are searched as bytes by both."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_bytes(b"x.attr = 1 'attr'\n")
    (root / "b.py").write_bytes(b"\x00\xff.attr =\x00stream\x89PNG")
    scope = frozenset({str(root / "a.py"), str(root / "b.py"), str(root / "gone.py")})  # gone.py: unreadable
    markers = [(b".attr =",), (b"'attr'",), (b"stream",), (b"PNG",), (b"\x00stream",), (b"gone",)]
    index = WordIndex()
    for m in markers:
        indexed, scanned = _project(root, index), _project(root, None)
        indexed.scope = scanned.scope = scope
        assert indexed.paths_containing(m) == scanned.paths_containing(m) == _brute(scanned, m), m
    assert str(root / "gone.py") in index.files and index.files[str(root / "gone.py")][1] is None  # read again
