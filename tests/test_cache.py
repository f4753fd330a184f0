"""The result cache: cold and warm runs agree, and every kind of change invalidates what it must."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import REGISTRY
from streamlint.cache import CACHEDIR_TAG, ResultCache, decode_finding, encode_finding, run_key
from streamlint.cli import main
from streamlint.config import Settings
from streamlint.engine import Engine
from streamlint.parallel import lint_files

TORCHAIR_WRAPPER = '''\
from contextlib import nullcontext

from torchair.scope import npu_stream_switch as _npu_stream_switch


def npu_stream_switch(tag, priority, *, enabled=True):
    return _npu_stream_switch(tag, priority) if enabled else nullcontext()
'''
NATIVE_WRAPPER = '''\
from contextlib import nullcontext

import torch


def npu_stream_switch(target_stream, priority, *, enabled=True):
    return torch.npu.stream(target_stream) if enabled else nullcontext()
'''
MODEL = '''\
from ..utils import npu_stream_switch


def forward(x, flag):
    with npu_stream_switch(7, 0, enabled=flag):
        y = x * 2
    return y
'''
PLAIN = "def add(a, b):\n    return a + b\n"


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg" / "models").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "models" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "utils.py").write_text(TORCHAIR_WRAPPER)
    (tmp_path / "pkg" / "models" / "x.py").write_text(MODEL)
    (tmp_path / "pkg" / "plain.py").write_text(PLAIN)
    return tmp_path


def _files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*.py") if ".streamlint_cache" not in p.parts)


def _run(root: Path, **settings) -> tuple[list[tuple], ResultCache]:
    s = Settings(select=("ALL",), project_root=str(root), cache_dir=str(root / ".streamlint_cache"), **settings)
    engine = Engine(s, REGISTRY, project_root=str(root))
    cache = ResultCache.for_settings(s, REGISTRY)
    reports, _ = lint_files(engine, _files(root), jobs=1, cache=cache)
    found = [(os.path.relpath(f.path, root), f.span.start_line, f.code, f.message) for r in reports for f in r.findings]
    return found, cache


def _codes(found: list[tuple], path: str) -> list[str]:
    return [code for p, _, code, _ in found if p == path]


def test_cold_and_warm_runs_agree(project: Path) -> None:
    cold, cache = _run(project)
    assert cache.hits == 0 and cache.misses == len(_files(project))
    assert "SL105" in _codes(cold, "pkg/models/x.py")
    warm, cache = _run(project)
    assert warm == cold
    assert cache.hits == len(_files(project)) and cache.misses == 0
    assert (project / ".streamlint_cache" / "CACHEDIR.TAG").read_text() == CACHEDIR_TAG
    assert not [p for p in (project / ".streamlint_cache").rglob("*.tmp")]


def test_content_change_invalidates(project: Path) -> None:
    cold, cache = _run(project)
    plain_hash = cache.entries[str(project / "pkg" / "plain.py")]["h"]
    (project / "pkg" / "plain.py").write_text(PLAIN + "\n\ndef sub(a, b):\n    return a - b\n")
    again, cache = _run(project)
    assert again == cold
    assert cache.misses >= 1 and cache.hits >= 1
    assert cache.entries[str(project / "pkg" / "plain.py")]["h"] != plain_hash
    (project / "pkg" / "models" / "x.py").write_text(MODEL.replace("(7, 0,", '("aux", 0,'))
    found, _ = _run(project)
    assert "SL105" not in _codes(found, "pkg/models/x.py")


def test_settings_change_invalidates(project: Path) -> None:
    _run(project)
    found, cache = _run(project, ignore=("SL105",))
    assert cache.hits == 0
    assert "SL105" not in _codes(found, "pkg/models/x.py")
    found, cache = _run(project)  # back: the first configuration's results are still there
    assert cache.hits == len(_files(project))
    assert "SL105" in _codes(found, "pkg/models/x.py")
    base = Settings(project_root=str(project))
    assert run_key(base, REGISTRY) != run_key(base.with_overrides(mode="ge"), REGISTRY)
    assert run_key(base, REGISTRY) == run_key(base.with_overrides(output_format="json"), REGISTRY)


def test_changed_dependency_module_invalidates_cross_file_finding(project: Path) -> None:
    found, _ = _run(project)
    assert "SL105" in _codes(found, "pkg/models/x.py")
    # the wrapper in utils.py becomes a native-stream wrapper: its first argument is a Stream, not a tag
    (project / "pkg" / "utils.py").write_text(NATIVE_WRAPPER)
    found, cache = _run(project)
    assert "SL105" not in _codes(found, "pkg/models/x.py")
    assert cache.hits >= 1  # plain.py is untouched
    (project / "pkg" / "utils.py").write_text(TORCHAIR_WRAPPER)
    found, _ = _run(project)
    assert "SL105" in _codes(found, "pkg/models/x.py")


def test_deleted_dependency_invalidates(project: Path) -> None:
    _run(project)
    (project / "pkg" / "utils.py").unlink()
    found, _ = _run(project)
    assert "SL105" not in _codes(found, "pkg/models/x.py")


def test_corrupt_cache_is_ignored(project: Path) -> None:
    cold, cache = _run(project)
    cache.file.write_text("{not json")
    again, cache = _run(project)
    assert again == cold and cache.hits == 0
    data = json.loads(cache.file.read_text())
    data["files"] = {k: {"h": v["h"], "f": [{"bogus": 1}]} for k, v in data["files"].items()}
    cache.file.write_text(json.dumps(data))
    again, _ = _run(project)
    assert again == cold


def test_finding_round_trip(project: Path) -> None:
    found, cache = _run(project)
    entries = [e for e in cache.entries.values() if e["f"]]
    assert entries
    for entry in entries:
        for raw in entry["f"]:
            finding = decode_finding(raw, "some/path.py")
            assert encode_finding(finding, "some/path.py") == raw


def test_cli_no_cache_and_clean(project: Path) -> None:
    runner = CliRunner()
    args = ["check", str(project), "--isolated", "--select", "ALL", "--output-format", "json"]
    first = runner.invoke(main, [*args, "--no-cache"])
    assert not (project / ".streamlint_cache").exists()
    second = runner.invoke(main, args)
    third = runner.invoke(main, args)
    assert first.stdout == second.stdout == third.stdout
    assert (project / ".streamlint_cache" / "CACHEDIR.TAG").is_file()
    result = runner.invoke(main, ["clean", str(project), "--isolated"])
    assert result.exit_code == 0, result.output
    assert not (project / ".streamlint_cache").exists()
    # a directory that is not ours is never removed
    (project / ".streamlint_cache").mkdir()
    (project / ".streamlint_cache" / "precious.txt").write_text("keep")
    result = runner.invoke(main, ["clean", str(project), "--isolated"])
    assert result.exit_code == 2
    assert (project / ".streamlint_cache" / "precious.txt").exists()


def _age(root: Path, seconds: int = 3600) -> None:
    """Files last modified an hour ago: old enough for the cache to trust their size and mtime."""
    for path in _files(root):
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 1_000_000_000))


def test_unchanged_stat_answers_without_reading(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _age(project)
    cold, _ = _run(project)
    reads: list[str] = []
    real_read = Engine.read
    monkeypatch.setattr(Engine, "read", lambda self, path: reads.append(path) or real_read(self, path))
    warm, cache = _run(project)
    assert warm == cold and cache.hits == len(_files(project))
    assert reads == []  # every answer came from (size, mtime) -> recorded digest
    # a dependency edited now (new mtime): read, hashed, and the cross-file finding re-evaluated
    (project / "pkg" / "utils.py").write_text(NATIVE_WRAPPER)
    found, _ = _run(project)
    assert "SL105" not in _codes(found, "pkg/models/x.py")
    assert str(project / "pkg" / "utils.py") in reads


def test_recently_modified_files_are_not_trusted_by_stat(project: Path) -> None:
    _run(project)  # the files were written just now: no (size, mtime) recorded for them
    entries = ResultCache.for_settings(Settings(select=("ALL",), project_root=str(project),
                                                cache_dir=str(project / ".streamlint_cache")), REGISTRY).entries
    assert entries and all("s" not in entry for entry in entries.values())
    _age(project)
    _, cache = _run(project)
    assert all("s" in entry for entry in cache.entries.values())
