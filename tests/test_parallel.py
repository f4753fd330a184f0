"""The process pool gives exactly the serial results; findings and settings cross process boundaries."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import FIXTURES, REGISTRY, ROOT
from streamlint import parallel
from streamlint.cli import main
from streamlint.config import Settings
from streamlint.discovery import discover
from streamlint.engine import Engine
from streamlint.profile import Profiler


PROJECTS = ("sl1_vllm_style", "sl402_pos_dynamic_ge")
RULE_FIXTURES = ("sl104_reserved_stream_priority.py", "sl105_invalid_stream_tag.py")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few fixture projects and rule fixtures, copied so that the project root is the copy (the
    repository root would make every project-wide fact scan the whole repository)."""
    root = tmp_path_factory.mktemp("tree")
    for name in PROJECTS:
        shutil.copytree(FIXTURES / "projects" / name, root / "projects" / name)
    (root / "rules").mkdir()
    for name in RULE_FIXTURES:
        if (FIXTURES / "rules" / name).is_file():
            shutil.copy(FIXTURES / "rules" / name, root / "rules" / name)
    return root


def _json(root: Path, args: list[str]) -> str:
    result = CliRunner().invoke(main, ["check", str(root), "--isolated", "--select", "ALL", "--no-cache",
                                       "--output-format", "json", *args])
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def test_jobs_1_and_2_give_identical_json(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "SERIAL_BELOW", 0)  # use the pool even for a small tree
    serial = _json(tree, ["-j", "1"])
    pooled = _json(tree, ["-j", "2"])
    assert json.loads(serial) == json.loads(pooled)
    assert serial == pooled
    assert '"code"' in serial  # the fixtures do produce findings


def test_pool_is_used_and_results_are_in_input_order(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "SERIAL_BELOW", 0)
    settings = Settings(select=("ALL",), project_root=str(tree))
    files = discover([str(tree)], tree).files
    engine = Engine(settings, REGISTRY)
    engine.profiler = Profiler()
    reports, stats = parallel.lint_files(engine, files, jobs=2)
    assert stats.jobs == 2 and stats.analysed > 2
    assert [r.path for r in reports] == files
    assert "parse" in engine.profiler.phases  # worker profiles are merged into the parent's
    serial, stats = parallel.lint_files(Engine(settings, REGISTRY), files, jobs=1)
    assert stats.jobs == 1
    for a, b in zip(serial, reports):
        assert a.findings == b.findings, a.path
    # findings cross the process boundary intact
    findings = [f for r in reports for f in r.findings]
    assert findings and pickle.loads(pickle.dumps(findings)) == findings


def test_settings_are_picklable() -> None:
    settings = Settings(select=("ALL",), project_root=str(ROOT), rule_options={"SL104": {}},
                        per_file_ignores=(("tests/*", ("SL1",)),))
    assert pickle.loads(pickle.dumps(settings)) == settings


def test_dependencies_follow_imports(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "utils.py").write_text(
        "from torchair.scope import npu_stream_switch as s\n\ndef npu_stream_switch(tag):\n    return s(tag)\n")
    (tmp_path / "pkg" / "unrelated.py").write_text("import torch\nstream = torch.npu.Stream()\n")
    model = tmp_path / "pkg" / "model.py"
    model.write_text("from .utils import npu_stream_switch\n\ndef f(x):\n    with npu_stream_switch(3):\n        return x\n")
    engine = Engine(Settings(select=("ALL",), project_root=str(tmp_path)), REGISTRY, project_root=str(tmp_path))
    engine.lint_file(str(tmp_path / "pkg" / "unrelated.py"))
    engine.lint_file(str(model))
    deps = parallel.dependencies(engine.project, str(model))
    assert str(tmp_path / "pkg" / "utils.py") in deps
    assert str(tmp_path / "pkg" / "unrelated.py") not in deps


def test_profile_option_prints_phases(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torchair\nwith torchair.scope.npu_stream_switch(1):\n    pass\n")
    result = CliRunner().invoke(main, ["check", str(tmp_path), "--isolated", "--no-cache", "--profile"])
    assert "discover" in result.stderr and "parse" in result.stderr and "slowest" in result.stderr


def test_cold_warm_serial_pooled_all_identical(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-j 1 / -j 2, cold / warm (content-hash hits, then (size, mtime) hits): one output."""
    import os

    monkeypatch.setattr(parallel, "SERIAL_BELOW", 0)
    root = tmp_path / "tree"
    shutil.copytree(tree, root)
    monkeypatch.chdir(root)  # the project root, where the cache goes (.streamlint_cache)

    def run(jobs: str, *extra: str) -> str:
        result = CliRunner().invoke(main, ["check", ".", "--isolated", "--select", "ALL", "--output-format",
                                           "json", "-j", jobs, *extra])
        assert result.exit_code in (0, 1), result.output
        return result.stdout

    reference = run("1", "--no-cache")
    assert run("2") == reference  # cold, pooled, writes the cache
    assert (root / ".streamlint_cache" / "CACHEDIR.TAG").is_file()
    assert run("2") == reference  # warm: answered by content digest
    for path in root.rglob("*.py"):  # old enough to be trusted by (size, mtime)
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 3600 * 10**9))
    assert run("1") == reference  # records (size, mtime)
    monkeypatch.setattr(Engine, "lint_file", lambda self, path, data=None: pytest.fail(f"linted {path} again"))
    monkeypatch.setattr(parallel, "sha256", lambda data: pytest.fail(f"hashed a file although unchanged: {data[:80]!r}"))
    assert run("2") == reference  # warm by stat: nothing linted or hashed, same output
    assert run("1") == reference
