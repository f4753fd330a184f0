"""A module parsed only for another file's question is parsed by ``ast`` once per content: its guard's tree gives its
module summary (kept in the project cache), and a later parse of the same content skips the guard; an edit of the
module (new content, no summary) runs the guard again, and the answers are those of a run without a cache (issue 15)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from harness import REGISTRY, cli, engine_for, write
from streamlint import engine as engine_mod
from streamlint.cache import ResultCache
from streamlint.config import Settings
from streamlint.parallel import lint_files
from test_scale import _codes, _project


def _guarded(monkeypatch) -> list[str]:
    """The paths the engine's ``ast`` guard parses from now on (it is the one ``ast.parse`` given a filename)."""
    seen: list[str] = []
    real = ast.parse

    def parse(source, filename="<unknown>", *args, **kwargs):
        if filename != "<unknown>":
            seen.append(os.path.abspath(filename))
        return real(source, filename, *args, **kwargs)

    monkeypatch.setattr(engine_mod.ast, "parse", parse)
    return seen


def _warm_run(root: Path, target: Path):
    engine = engine_for(root)
    cache = ResultCache.for_settings(Settings(select=("ALL",), project_root=str(root)), REGISTRY)
    reports, _ = lint_files(engine, [str(target)], jobs=1, cache=cache)
    return engine, reports[0]


def test_a_reached_module_is_not_parsed_by_ast_again_on_a_warm_run(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    utils = str(tmp_path / "pkg" / "utils.py")
    cli(["check", "--isolated", "--exit-zero", "-q", str(model)])  # utils.py reached: its summary learnt
    with open(model, "a", encoding="utf-8") as fh:
        fh.write("\n# edited\n")  # (the file's own result is not reused)
    guarded = _guarded(monkeypatch)
    engine, report = _warm_run(tmp_path, model)
    assert utils in {os.path.abspath(p) for p in engine._parsed}  # reached (its wrappers) ...
    assert utils not in guarded and str(model) in guarded  # ... without the guard; the linted file keeps it
    monkeypatch.undo()
    assert _codes(report.findings) == _codes(engine_for(tmp_path).lint_file(str(model)).findings)


def test_an_edited_reached_module_is_guarded_again_and_answers_as_without_a_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    utils = tmp_path / "pkg" / "utils.py"
    cli(["check", "--isolated", "--exit-zero", "-q", str(model)])
    # the wrapper no longer switches: a new content, whose summary nobody has made
    write(tmp_path, "pkg/utils.py", utils.read_text().replace("tng.scope.npu_stream_switch(tag, 0)", "Nothing()"))
    guarded = _guarded(monkeypatch)
    engine, report = _warm_run(tmp_path, model)
    assert str(utils) in guarded
    monkeypatch.undo()
    assert _codes(report.findings) == _codes(engine_for(tmp_path).lint_file(str(model)).findings)
    cli(["check", "--isolated", "--exit-zero", "-q", str(model)])
    with open(model, "a", encoding="utf-8") as fh:
        fh.write("\n# edited\n")
    _, again = _warm_run(tmp_path, model)  # (now from the learnt summary of the new content)
    assert _codes(again.findings) == _codes(report.findings)


def test_an_unguarded_parse_that_libcst_rejects_fails_as_the_guarded_one() -> None:
    for text in ("def f(:\n    pass\n", "x = (\n", "x = 1\n  y = 2\n"):
        data = text.encode()
        guarded = engine_mod.parse_source("m.py", data, "m", False)
        unguarded = engine_mod.parse_source("m.py", data, "m", False, guarded=False)
        assert guarded.failure is not None and unguarded.failure == guarded.failure
    data = b"import torch\n\ndef f(x):\n    return torch.relu(x)\n"
    unguarded = engine_mod.parse_source("m.py", data, "m", False, guarded=False)
    assert unguarded.model is not None and unguarded.tree is None
    assert unguarded.model.module.code == engine_mod.parse_source("m.py", data, "m", False).model.module.code
