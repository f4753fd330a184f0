"""Stream contexts entered through factory values and streams that exist only under a test
(model/ctxfactories.py): what the model reads, and the confidence of an SL201 that cannot be correlated."""
from pathlib import Path

from harness import engine_for, lint_text

from streamlint.finding import Confidence
from streamlint.model.apis import Role
from streamlint.model.ctxfactories import stream_condition

WARMUP = """
import contextlib
from functools import partial

import torch


class Warmup:
    def __init__(self, fn):
        self.fn = fn
        self.has_cuda = torch.cuda.is_available()
        if torch.cuda.is_available():
            self.side = torch.cuda.Stream()
            self.ctx = partial(torch.cuda.stream, self.side)
        else:
            self.side = None
            self.ctx = contextlib.nullcontext

    def run(self, x: torch.Tensor):
        if self.has_cuda:
            self.side.wait_stream(torch.cuda.current_stream())
        with self.ctx():
            y = x * 2
        if self.has_cuda:
            torch.cuda.current_stream().wait_stream(self.side)
        return y
"""

LAZY = """
import torch


class LazySide:
    def __init__(self, overlap: bool):
        self.overlap = overlap
        self.side = None

    def setup(self):
        self.side = torch.cuda.Stream()

    def run(self, n: int):
        a = torch.ones(n, device="cuda") * 3
        if self.overlap:
            self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            y = a * 2
        if self.overlap:
            torch.cuda.current_stream().wait_stream(self.side)
        z = y + 1
        return z.sum()
"""


def _model(tmp_path: Path, code: str):
    path = tmp_path / "mod.py"
    path.write_text(code, encoding="utf-8")
    engine = engine_for(tmp_path, [str(path)])
    project = engine.project
    return project, project.file(str(path))


def test_partial_field_is_a_switch_under_the_field_the_caller_tests(tmp_path: Path) -> None:
    project, file = _model(tmp_path, WARMUP)
    site = next(s for s in file.scopes if s.function is not None and s.function.qualname == "Warmup.run")
    uses = project.scope_use(file, site).uses
    assert [u.role for u in uses] == [Role.NATIVE_STREAM_CONTEXT]
    assert file.code(uses[0].arg("stream")) == "self.side"
    test, positive = uses[0].enabled
    assert (file.code(test), positive) == ("self.has_cuda", True)  # torch.cuda.is_available() by its field
    cond = stream_condition(project, file, site.function, uses[0].arg("stream"))
    assert cond is not None and (file.code(cond[0]), cond[1]) == ("self.has_cuda", True)


def test_correlated_guards_leave_the_warmup_silent(tmp_path: Path) -> None:
    assert [f.code for f in lint_text(WARMUP, tmp=tmp_path) if f.code == "SL201"] == []


def test_dropped_join_is_reported_through_the_factory(tmp_path: Path) -> None:
    code = WARMUP.replace("            torch.cuda.current_stream().wait_stream(self.side)\n", "            pass\n")
    found = [f for f in lint_text(code, tmp=tmp_path) if f.code == "SL201"]
    assert [(f.code, f.span.start_line) for f in found] == [("SL201", 25)]  # the return


def test_uncorrelated_optional_stream_is_medium_at_most(tmp_path: Path) -> None:
    project, file = _model(tmp_path, LAZY)
    run = file.functions["LazySide.run"]
    site = run.scopes[0]
    use = project.scope_use(file, site).uses[0]
    assert stream_condition(project, file, run, use.arg("stream")) is None  # created in another method
    found = [f for f in lint_text(LAZY, tmp=tmp_path) if f.code == "SL201"]
    assert found and all(f.code == "SL201" and f.confidence is not Confidence.HIGH for f in found)
    assert any("may be None" in (f.hint or "") for f in found)
