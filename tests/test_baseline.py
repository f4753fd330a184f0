"""Baselines: recorded findings stay hidden when code moves; new defects are reported."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from streamlint.cli import main

HEADER = "import torchair\n\n"
OLD = "with torchair.scope.npu_stream_switch(1):\n    pass\n"
NEW = "with torchair.scope.npu_stream_switch(2):\n    pass\n"


def _check(cwd: Path, *args: str):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, ["check", "--output-format", "concise", *args])
    finally:
        os.chdir(old)


def _project(tmp_path: Path, body: str, config: str = "") -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.streamlint]\n{config}", encoding="utf-8")
    (tmp_path / "pkg").mkdir(exist_ok=True)
    path = tmp_path / "pkg" / "m.py"
    path.write_text(HEADER + body, encoding="utf-8")
    return path


def test_write_then_filter(tmp_path):
    path = _project(tmp_path, OLD)
    written = _check(tmp_path, ".", "--write-baseline", "baseline.json")
    assert written.exit_code == 0, written.output
    data = json.loads((tmp_path / "baseline.json").read_text())
    assert data["version"] == 1
    [entry] = data["findings"]
    assert entry["code"] == "SL105" and entry["path"] == "pkg/m.py" and entry["line"] == 3
    assert entry["message"] and len(entry["fingerprint"]) == 32

    assert _check(tmp_path, ".").exit_code == 1
    quiet = _check(tmp_path, ".", "--baseline", "baseline.json")
    assert quiet.exit_code == 0 and "SL105" not in quiet.stdout

    # code moves: lines inserted above, indentation unchanged → still baselined
    path.write_text("# -*- coding: utf-8 -*-\n# 中文注释\n\n" + HEADER + "x = 1\n\n" + OLD, encoding="utf-8")
    moved = _check(tmp_path, ".", "--baseline", "baseline.json")
    assert moved.exit_code == 0, moved.stdout

    # a new defect of the same rule in the same file is reported, the old one is not
    path.write_text(HEADER + NEW + "\n" + OLD, encoding="utf-8")
    new = _check(tmp_path, ".", "--baseline", "baseline.json")
    assert new.exit_code == 1
    assert new.stdout.count("SL105") == 1 and "pkg/m.py:3:" in new.stdout

    # a second copy of the very same line is a new finding too (occurrence index)
    path.write_text(HEADER + OLD + OLD, encoding="utf-8")
    dup = _check(tmp_path, ".", "--baseline", "baseline.json")
    assert dup.exit_code == 1 and dup.stdout.count("SL105") == 1 and "pkg/m.py:5:" in dup.stdout


def test_baseline_from_configuration(tmp_path):
    _project(tmp_path, OLD)
    assert _check(tmp_path, ".", "--write-baseline", "ci/streamlint-baseline.json").exit_code == 0
    (tmp_path / "pyproject.toml").write_text('[tool.streamlint]\nbaseline = "ci/streamlint-baseline.json"\n')
    result = _check(tmp_path, ".")
    assert result.exit_code == 0, result.output
    # run from a sub-folder: the configured path is relative to the project root
    assert _check(tmp_path / "pkg", "m.py").exit_code == 0


def test_bad_baselines_are_errors(tmp_path):
    _project(tmp_path, OLD)
    missing = _check(tmp_path, ".", "--baseline", "nope.json")
    assert missing.exit_code == 2 and "baseline file not found" in missing.stderr
    (tmp_path / "bad.json").write_text("[1, 2]")
    bad = _check(tmp_path, ".", "--baseline", "bad.json")
    assert bad.exit_code == 2 and "not a streamlint baseline" in bad.stderr


def test_baseline_output_is_deterministic(tmp_path):
    _project(tmp_path, OLD + NEW)
    _check(tmp_path, ".", "--write-baseline", "a.json")
    _check(tmp_path, ".", "--write-baseline", "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
