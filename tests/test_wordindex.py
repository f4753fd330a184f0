"""The project cache's word index (streamlint.model.wordindex, streamlint.wordcache): Project.paths_containing
answers exactly what a scan of every file's bytes answers (same files, same order), cold and warm, after files
are edited, added or deleted, for markers of every shape."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from streamlint.model.project import Project
from streamlint.model.wordindex import WordIndex, WordSearch, marker_words, stamp_of
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
        return stamp_of(st)

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


def _aged(path: Path, data: bytes, seconds: int) -> None:
    path.write_bytes(data)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 1_000_000_000))


def _clock_ahead(monkeypatch, seconds: int = 10) -> None:
    """The index's and the engine's clock ``seconds`` ahead: the files written by a test (whose ctime cannot be
    set back) are old enough for their stamps to be trusted."""
    import time
    import types

    import streamlint.engine
    import streamlint.model.wordindex

    now = lambda: time.time_ns() + seconds * 1_000_000_000  # noqa: E731
    monkeypatch.setattr(streamlint.model.wordindex, "time", types.SimpleNamespace(time_ns=now))
    monkeypatch.setattr(streamlint.engine, "_time_ns", now)


def test_bytes_read_before_a_save_are_not_stored_with_the_later_stamp(tmp_path: Path, monkeypatch) -> None:
    """A file read early in a run (its bytes kept for the searches) and saved before the index is brought up to
    date must not be stored with its new stamp and its old words: the next run would trust that stamp and never
    find the markers of its new content (review of perf5, problem 1)."""
    _clock_ahead(monkeypatch)
    root = tmp_path / "proj"
    root.mkdir()
    _aged(root / "a.py", b"x = 1\n", 100)
    _aged(root / "b.py", b"stream = 2\n", 100)
    for read_stamp in (None, "before"):
        _aged(root / "a.py", b"x = 1\n", 100)
        index = WordIndex()
        project = _project(root, index)
        before = stamp_of(os.stat(root / "a.py"))
        project.remember_bytes(str(root / "a.py"), (root / "a.py").read_bytes())  # read by the run
        _aged(root / "a.py", b"y = torch.npu.stream()\n", 50)  # saved by the user, then the first search
        if read_stamp is not None:
            project.words.read_stamp = lambda path: before if path == str(root / "a.py") else None
        assert project.paths_containing((b"stream",)) == [str(root / "b.py")]  # (the bytes the run holds)
        stored = index.files[str(root / "a.py")][1]
        assert stored == (before if read_stamp is not None else None)
        # the next run: a.py is read again, its new content found
        assert _project(root, decode(encode(index))).paths_containing((b"stream",)) == [str(root / "a.py"),
                                                                                        str(root / "b.py")]


def test_engine_read_stamp_is_taken_before_the_first_read(tmp_path: Path, monkeypatch) -> None:
    from harness import REGISTRY
    from streamlint.config import Settings
    from streamlint.engine import Engine
    import time

    path = tmp_path / "a.py"
    _aged(path, b"x = 1\n", 100)
    engine = Engine(Settings(project_root=str(tmp_path)), REGISTRY, project_root=str(tmp_path))
    engine.read(str(path))
    assert engine.read_stamp(str(path)) is None  # its mtime is old, its ctime is not (just replaced): not trusted
    _clock_ahead(monkeypatch)
    engine = Engine(Settings(project_root=str(tmp_path)), REGISTRY, project_root=str(tmp_path))
    first = stamp_of(path.stat())
    assert engine.read_stamp(str(path)) is None  # not read yet
    assert engine.read(str(path)) == b"x = 1\n"
    _aged(path, b"x = 22\n", 50)
    assert engine.read(str(path)) == b"x = 22\n"
    assert engine.read_stamp(str(path)) == first  # the first read's: kept bytes are as new or newer
    fresh = tmp_path / "b.py"
    fresh.write_bytes(b"y = 1\n")
    os.utime(fresh, ns=(time.time_ns() + 10_000_000_000,) * 2)  # modified "just now" on the clock ahead
    engine.read(str(fresh))
    assert engine.read_stamp(str(fresh)) is None


def _lint(root: Path, files: list[str], cache_dir: Path, read=None):
    from harness import REGISTRY
    from streamlint.cache import ResultCache
    from streamlint.config import Settings
    from streamlint.engine import Engine
    from streamlint.parallel import lint_files

    s = Settings(select=("SL",), project_root=str(root), cache_dir=str(cache_dir))
    engine = Engine(s, REGISTRY, project_root=str(root))
    if read is not None:
        engine.read = read.__get__(engine)
    reports, _ = lint_files(engine, files, jobs=1, cache=ResultCache.for_settings(s, REGISTRY))
    return sorted((os.path.relpath(f.path, root), f.span.start_line, f.code) for r in reports for f in r.findings)


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "projects"


def test_a_file_saved_during_a_cached_run_loses_no_finding_next_run(tmp_path: Path) -> None:
    """The review's save race end to end: drafter.py is read blank, then saved with its real content (old
    enough to be trusted) during the run; the next cached run finds what a run without the cache finds."""
    import shutil

    from streamlint.engine import Engine

    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "sl201_caller_entry_context", root)
    for path in root.rglob("*.py"):
        _aged(path, path.read_bytes(), 100)
    files = sorted(str(p) for p in root.rglob("*.py"))
    target = root / "draftkit" / "drafter.py"
    real = target.read_bytes()
    expected = _lint(root, files, root / ".cache-a")
    assert ("draftkit/decoder.py", 14, "SL201") in expected
    _aged(target, b"\n", 100)
    saved = []

    def read(self, path: str) -> bytes:
        data = Engine.read(self, path)
        if os.path.abspath(path) == str(target) and not saved:
            saved.append(1)
            _aged(target, real, 50)  # the user saves while the run goes on
        return data

    _lint(root, files, root / ".cache-b", read)
    assert saved
    assert _lint(root, files, root / ".cache-b") == expected


def test_one_index_per_project_in_a_shared_cache_directory(tmp_path: Path) -> None:
    shared = tmp_path / "cache"
    roots = []
    for name in ("A", "B"):
        root = tmp_path / name
        root.mkdir()
        _tree(root, random.Random(len(name) + ord(name)), 8)
        _age(root)
        roots.append(root)
    caches = [WordCache(shared, root) for root in roots]
    assert caches[0].file != caches[1].file
    for cache, root in zip(caches, roots):
        index = cache.load()
        _project(root, index).paths_containing((b"stream",))
        cache.save(index)
    for cache, root in zip(caches, roots):  # each run finds its own project's index, warm
        files = cache.load().files
        assert files and all(path.startswith(str(root) + os.sep) for path in files)


def test_a_run_of_few_files_does_not_read_the_tree_to_index_it(tmp_path: Path, monkeypatch) -> None:
    """Without a marker search, the index is built at the end of a run only when the run read most files: a run
    of two files of six leaves no ``words-*.bin`` and reads those two only; a run of all six builds it."""
    import streamlint.parallel
    from harness import REGISTRY
    from streamlint.config import Settings
    from streamlint.engine import Engine
    from streamlint.parallel import mostly_read

    root = tmp_path / "p"
    (root / "pkg").mkdir(parents=True)
    for i in range(6):
        _aged(root / "pkg" / f"m{i}.py", b"import torch\n# %d\ns = torch.npu.Stream()\nwith torch.npu.stream(s):\n"
               b"    y = torch.ones(2)\nprint(y)\n" % i, 100)
    files = sorted(str(p) for p in root.rglob("*.py"))
    engine = Engine(Settings(project_root=str(root)), REGISTRY, project_root=str(root))
    engine.read(files[0])
    assert not mostly_read(engine)
    for path in files[1:3]:
        engine.read(path)
    assert mostly_read(engine)
    # (checking the stored reach facts asks a marker search itself, which indexes the tree as the scan it
    # replaces reads it: without them, these module-level files ask none, so only the end-of-run build can)
    monkeypatch.setattr(streamlint.parallel, "install_reach", lambda *args: None)
    asked: list[tuple[bytes, ...]] = []
    search = Project.paths_containing
    monkeypatch.setattr(Project, "paths_containing",
                        lambda self, markers: asked.append(markers) or search(self, markers))
    read_by_run: list[str] = []
    monkeypatch.setattr(Engine, "read",
                        lambda self, path, read=Engine.read: read_by_run.append(path) or read(self, path))
    few = root / ".cache-few"
    _lint(root, files[:2], few)
    assert not asked
    assert sorted(set(read_by_run)) == files[:2]
    assert not list(few.rglob("words-*.bin"))
    whole = root / ".cache-whole"
    _lint(root, files, whole)
    assert not asked
    built = list(whole.rglob("words-*.bin"))
    assert len(built) == 1 and sorted(decode(built[0].read_bytes()).files) == files


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_planted_fifo_is_a_damaged_cache(tmp_path: Path) -> None:
    cache = WordCache(tmp_path / "cache", tmp_path)
    cache.file.parent.mkdir(parents=True)
    os.mkfifo(cache.file)
    loaded = cache.load()  # (would block on open without O_NONBLOCK)
    assert isinstance(loaded, WordIndex) and not loaded.files


def test_a_replacement_of_the_same_size_and_mtime_is_read_again(tmp_path: Path) -> None:
    """A file replaced by one of the same size and mtime (``cp -p``, ``rsync -t``, ``tar x``, ``touch -r``: by a
    rename, or written in place then its mtime set back) is read again: the stamp holds its inode and ctime,
    which neither can keep (review of perf5fix, problem 1)."""
    import time

    from harness import REGISTRY
    from streamlint.config import Settings
    from streamlint.engine import Engine

    engine = Engine(Settings(project_root=str(tmp_path)), REGISTRY, project_root=str(tmp_path))
    path = tmp_path / "records.py"
    old, new = b"#" + b"x" * 21 + b"\n", b"s = torch.npu.stream()\n"
    assert len(old) == len(new)

    def read(p: str, now):
        return Path(p).read_bytes(), now

    for how in ("rename", "in place"):
        _aged(path, old, 100)
        mtime = path.stat().st_mtime_ns
        index = WordIndex()
        index.refresh([str(path)], engine.word_stamp, read, lambda st: True, prune=True)
        assert index.candidates((b"stream",)) == set()
        time.sleep(0.05)  # (past the ctime clock's tick)
        if how == "rename":
            (tmp_path / "tmp").write_bytes(new)
            os.replace(tmp_path / "tmp", path)
        else:
            path.write_bytes(new)
        os.utime(path, ns=(mtime, mtime))
        assert (path.stat().st_size, path.stat().st_mtime_ns) == (len(old), mtime)
        index.refresh([str(path)], engine.word_stamp, read, lambda st: True, prune=True)
        assert index.candidates((b"stream",)) == {str(path)}, how


def test_a_second_equal_file_list_is_not_statted_again(tmp_path: Path) -> None:
    """The reach cache's fresh project lists the files itself: the real project's equal list after it does not
    stat every file again (review of perf5fix, note 4)."""
    _tree(tmp_path, random.Random(5), 12)
    _age(tmp_path)
    project = _project(tmp_path, WordIndex())
    stats: list[str] = []
    stamp = project.words.stamp
    project.words.stamp = lambda path: stats.append(path) or stamp(path)
    files = project.all_files()
    project.words.current(project, files)
    assert len(stats) == len(files)
    project.words.current(project, list(files))
    assert len(stats) == len(files)
    project.words.current(project, files[1:])  # another list: checked
    assert len(stats) == 2 * len(files) - 1


@pytest.mark.parametrize("seed", [4, 5])
@pytest.mark.parametrize("joined", [100, 1 << 30])
def test_a_run_without_the_cache_answers_as_the_scan(tmp_path: Path, monkeypatch, seed: int, joined: int) -> None:
    """The index an engine builds in memory when it has no project cache (Engine: ``WordSearch(after=JOIN_AFTER)``)
    answers every search exactly as the scan (same files, same order): for a tree too large to be joined it is
    built at the JOIN_AFTER-th search and answers from then on; for a smaller one it never answers (the joined
    contents do), and a run asking fewer searches never builds it (each file read as before)."""
    import streamlint.model.projectscans as scans_module
    from streamlint.model.projectscans import JOIN_AFTER

    monkeypatch.setattr(scans_module, "JOINED_BYTES", joined)
    rng = random.Random(seed)
    root = tmp_path / "proj"
    root.mkdir()
    _tree(root, rng, n=80)
    _age(root)
    markers = list(dict.fromkeys(_markers(rng)))
    scanned = _project(root, None)
    indexed = _project(root, None)
    indexed.words = WordSearch(WordIndex, _stamp, after=JOIN_AFTER)
    for i, m in enumerate(markers):
        assert indexed.paths_containing(m) == _brute(scanned, m), m
        built = indexed.words.index is not None
        assert built == (joined == 100 and i + 1 > JOIN_AFTER), (i, m)
    assert indexed.words.ready(indexed) == (joined == 100)


def _stamp(path: str):
    try:
        return stamp_of(os.stat(path))
    except OSError:
        return None
