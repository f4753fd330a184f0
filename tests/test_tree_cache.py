"""Reached modules' LibCST trees kept by content in the project cache (streamlint/treecache.py, issue 15): a tree
rebuilt from an entry equals a fresh parse; an entry that is not one this user's streamlint wrote (tampered,
truncated, planted under another digest, signed with another key, made of unknown classes) is a miss and the
findings stay those of a run without a cache; a changed module is parsed again."""

from __future__ import annotations

import marshal
import os
import stat
from pathlib import Path

import pytest

from harness import REGISTRY, cli, engine_for, write
from streamlint import engine as engine_mod, treecache
from streamlint.cache import ResultCache, clean
from streamlint.config import Settings
from streamlint.engine import _parse_unvalidated
from streamlint.parallel import lint_files
from test_scale import _codes, _project

ROOT = Path(__file__).resolve().parent.parent


def _real_shaped() -> list[Path]:
    """Fixture modules (MoE / serving / training code written for the suite) and streamlint's own sources."""
    found = sorted((ROOT / "fixtures").rglob("*.py"))[:60] + sorted((ROOT / "streamlint" / "model").glob("*.py"))[:25]
    return [p for p in found if p.stat().st_size > 200]


def test_a_rebuilt_tree_equals_a_fresh_parse() -> None:
    paths = _real_shaped()
    assert len(paths) > 40
    for path in paths:
        text = path.read_text(encoding="utf-8")
        fresh = _parse_unvalidated(text)
        payload = treecache.encode(fresh)
        assert payload is not None, path
        rebuilt = treecache.decode(payload)
        assert rebuilt is not None, path
        assert rebuilt.deep_equals(fresh) and rebuilt.code == text, path
        # sequences are tuples as the parser makes them, and the whitespace leaves are shared per value as in a parse
        assert type(rebuilt.body) is tuple
        nodes = _nodes(rebuilt)
        spaces = [n for n in nodes if type(n).__name__ == "SimpleWhitespace" and n.value == " "]
        assert len({id(n) for n in spaces}) <= 1
        # equal subtrees are one object in the entry, never in the tree (the analyses key facts by node identity)
        own = [n for n in nodes if type(n).__name__ not in ("SimpleWhitespace", "Newline")]
        assert len({id(n) for n in own}) == len(own) == len([n for n in _nodes(fresh)
                                                              if type(n).__name__ not in ("SimpleWhitespace", "Newline")])


def _nodes(module) -> list:
    out, todo = [], [module]
    while todo:
        node = todo.pop()
        out.append(node)
        todo.extend(node.children)
    return out


def test_the_decoder_accepts_only_known_classes_and_field_kinds() -> None:
    good = treecache.encode(_parse_unvalidated("x = f(a, b)\n"))
    classes, leaves, root = marshal.loads(good)
    assert treecache.decode(good) is not None
    forged = [
        (["Module", "os.system"], leaves, root),  # an unknown class name
        ([*classes[:-1], "CSTNode"], leaves, root),  # an abstract base
        (classes, leaves, root[:-1]),  # a field missing
        (classes, leaves, (root[0], root[1], root[2], 7, *root[4:])),  # an int where a str belongs
        (classes, leaves, (root[0], root[1], root[2], (lambda: 0).__code__, *root[4:])),  # a code object
        (classes, [(0, " ")], root),  # a shared leaf of a class that is not one
        (classes, leaves, root[1]),  # a sequence as the root
    ]
    for value in forged:
        assert treecache.decode(marshal.dumps(value)) is None
    assert treecache.decode(b"\x00garbage") is None and treecache.decode(good[:-5]) is None


def _warm(root: Path, target: Path):
    engine = engine_for(root)
    cache = ResultCache.for_settings(Settings(select=("ALL",), project_root=str(root)), REGISTRY)
    reports, _ = lint_files(engine, [str(target)], jobs=1, cache=cache)
    return engine, reports[0]


def _edit(path: Path) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n# edited\n")


def _entries(root: Path) -> list[Path]:
    return sorted((root / ".streamlint_cache" / "v2").glob("tree-*.bin"))


def _parsed_by_libcst(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = engine_mod._parse_unvalidated

    def parse(text):
        seen.append(text)
        return real(text)

    monkeypatch.setattr(engine_mod, "_parse_unvalidated", parse)
    return seen


def test_a_warm_run_takes_reached_modules_from_the_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    utils = (tmp_path / "pkg" / "utils.py").read_text()
    cli(["check", "--isolated", "--exit-zero", "-q", str(model)])  # utils.py reached: its tree kept
    assert _entries(tmp_path)
    _edit(model)
    parsed = _parsed_by_libcst(monkeypatch)
    engine, report = _warm(tmp_path, model)
    monkeypatch.undo()
    assert engine.trees is not None and engine.trees.hits >= 1
    assert utils not in parsed and model.read_text() in parsed  # (the linted file itself is parsed)
    assert _codes(report.findings) == _codes(engine_for(tmp_path).lint_file(str(model)).findings)
    assert report.findings


@pytest.mark.parametrize("spoil", ["flip", "truncate", "swap", "foreign-key", "empty"])
def test_a_spoilt_entry_is_a_miss_with_the_same_findings(tmp_path: Path, monkeypatch, spoil: str) -> None:
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    cli(["check", "--isolated", "--exit-zero", "-q", str(model)])
    entries = _entries(tmp_path)
    assert len(entries) >= 2
    for i, entry in enumerate(entries):
        data = entry.read_bytes()
        if spoil == "flip":
            data = data[:-3] + bytes([data[-3] ^ 1]) + data[-2:]
        elif spoil == "truncate":
            data = data[: len(data) // 2]
        elif spoil == "swap":  # another module's genuine entry under this digest
            data = entries[(i + 1) % len(entries)].read_bytes()
        elif spoil == "foreign-key":  # a well-formed entry signed with a key that is not this user's
            other = treecache.TreeCache(entry.parent.parent, b"k" * 32)
            payload = data[len(treecache._MAGIC) + 32:]
            data = treecache._MAGIC + other._mac(entry.name[5:-4], payload) + payload
        else:
            data = b""
        entry.write_bytes(data)
    _edit(model)
    engine, report = _warm(tmp_path, model)
    assert engine.trees is not None and engine.trees.hits == 0
    assert _codes(report.findings) == _codes(engine_for(tmp_path).lint_file(str(model)).findings)


def test_a_changed_module_is_parsed_again(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    utils = tmp_path / "pkg" / "utils.py"
    cli(["check", "--isolated", "--exit-zero", "-q", str(model)])
    write(tmp_path, "pkg/utils.py", utils.read_text().replace("tng.scope.npu_stream_switch(tag, 0)", "Nothing()"))
    parsed = _parsed_by_libcst(monkeypatch)
    _, report = _warm(tmp_path, model)
    monkeypatch.undo()
    assert utils.read_text() in parsed
    assert _codes(report.findings) == _codes(engine_for(tmp_path).lint_file(str(model)).findings)
    assert clean(tmp_path / ".streamlint_cache") == [] and not _entries(tmp_path)  # `clean` removes the trees


def test_the_key_is_the_users_and_outside_the_project(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    project = tmp_path / "proj"
    project.mkdir()
    key = treecache.hmac_key(project, project / ".streamlint_cache")
    path = home / "streamlint" / "tree-key"
    assert key is not None and len(key) == 32 and path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert treecache.hmac_key(project, project / ".streamlint_cache") == key  # (made once)
    os.chmod(path, 0o644)  # readable by others: refused
    assert treecache.hmac_key(project, project / ".streamlint_cache") is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(project / "cfg"))  # a key the repository could plant
    assert treecache.hmac_key(project, project / ".streamlint_cache") is None


def test_the_entries_are_bounded_oldest_first(tmp_path: Path) -> None:
    store = treecache.TreeCache(tmp_path / "cache", b"k" * 32)
    module = _parse_unvalidated("import torch\n\ndef f(x):\n    return torch.relu(x)\n")
    for i in range(6):
        store.put(f"{i:064x}", module)
        os.utime(store._file(f"{i:064x}"), ns=(10**18 + i * 10**9,) * 2)
    assert store.get(f"{0:064x}") is not None  # used now: the newest
    size = store._file(f"{1:064x}").stat().st_size
    store.trim(limit=3 * size)
    left = sorted(p.name[5:-4] for p in store.folder.glob("tree-*.bin"))
    assert left == [f"{i:064x}" for i in (0, 4, 5)]
