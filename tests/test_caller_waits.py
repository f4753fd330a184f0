"""Caller protocols where the caller does the wait (model/flow/callerwaits.py, flow/flagjoins.py on a hand-back):
fixtures/rules/sl201_caller_does_the_wait.py says where the findings are; this says how sure they are, and what
the returned-handle summary answers for each shape of caller."""

import shutil
import textwrap
from pathlib import Path

from harness import engine_for, lint_text

from streamlint._lazy import cst
from streamlint.finding import Confidence
from streamlint.model.flow.callerwaits import joined_before_calls, returned_handle_waits

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "rules" / "sl201_caller_does_the_wait.py"


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1) if marker in text)


def test_a_hand_back_only_the_callers_flag_leaves_unjoined_is_low(tmp_path):
    found = {f.span.start_line: f.confidence for f in lint_text(FIXTURE.read_text(), tmp=tmp_path) if f.code == "SL201"}
    assert found[_line("low: unjoined only when the caller passes sync=False")] is Confidence.LOW
    assert found[_line("medium: the flag synchronises another stream")] is Confidence.MEDIUM
    assert found[_line("the caller joined another stream")] is Confidence.MEDIUM
    assert found[_line("joined on one branch only")] is Confidence.MEDIUM


def test_a_field_drop_in_a_class_whose_users_join_its_stream_is_low(tmp_path):
    found = {f.span.start_line: f.confidence for f in lint_text(FIXTURE.read_text(), tmp=tmp_path) if f.code == "SL301"}
    assert found[_line("low: the trainer joins the comm stream before marking")] is Confidence.LOW
    assert found[_line("medium: no caller joins the reduce stream")] is Confidence.MEDIUM


STAGING = """
import torch


class Fence:
    def wait_staged(self, handle):
        if handle is None:
            return
        handle.wait_on_stream(torch.cuda.current_stream())

    def wait_typed(self, handle):
        if isinstance(handle, tuple):
            handle[0].wait_on_stream(torch.cuda.current_stream())


class Buffers:
    fence: Fence

    def __init__(self, engine, fence: Fence):
        self.engine = engine
        self.fence = fence
        self.side = torch.cuda.Stream()

    def stage_a(self, ids):
        views = [ids]
        with torch.cuda.stream(self.side):
            ready = self.engine.submit(ids)
        return views, ready

    def stage_b(self, ids):
        views = [ids]
        with torch.cuda.stream(self.side):
            ready = self.engine.submit(ids)
        return views, ready

    def stage_c(self, ids):
        views = [ids]
        with torch.cuda.stream(self.side):
            ready = self.engine.submit(ids)
        return views, ready

    def stage_d(self, ids):
        views = [ids]
        with torch.cuda.stream(self.side):
            ready = self.engine.submit(ids)
        return views, ready

    def use_a(self, ids):
        views, ready = self.stage_a(ids)
        self.fence.wait_staged(ready)
        return torch.cat(views)

    def use_b(self, ids):
        views, ready = self.stage_b(ids)
        total = torch.cat(views)
        self.fence.wait_staged(ready)
        return total

    def use_c(self, ids):
        views, ready = self.stage_c(ids)
        self.fence.wait_typed(ready)
        return torch.cat(views)

    def use_d(self, ids):
        views, ready = self.stage_d(ids)
        torch.cuda.current_stream().wait_event(ready)
        return torch.cat(views)
"""


def _model(tmp_path: Path, code: str):
    path = tmp_path / "staging.py"
    path.write_text(textwrap.dedent(code).lstrip("\n"), encoding="utf-8")
    engine = engine_for(tmp_path, [str(path)])
    return engine.project, engine.project.file(str(path))


def test_a_returned_handle_every_caller_waits_on_first(tmp_path):
    project, model = _model(tmp_path, STAGING)
    verdicts = {}
    for name in ("stage_a", "stage_b", "stage_c", "stage_d"):
        fn = model.classes["Buffers"].methods[name]
        ret = fn.returns[0]
        verdicts[name] = returned_handle_waits(project, model, fn, ret, "ready")
    assert verdicts == {"stage_a": "joined",  # a helper that waits on every path but its None exit
                        "stage_b": None,  # the caller reads the views before its wait
                        "stage_c": "maybe",  # a helper that waits only under a type test
                        "stage_d": "joined"}  # the caller's own wait_event
    fn = model.classes["Buffers"].methods["stage_a"]
    assert returned_handle_waits(project, model, fn, fn.returns[0], "views") is None  # (not the part waited on)


def test_a_mark_step_every_caller_joins_before(tmp_path):
    shutil.copy(FIXTURE, tmp_path / FIXTURE.name)
    engine = engine_for(tmp_path, [str(tmp_path / FIXTURE.name)])
    project, model = engine.project, engine.project.file(str(tmp_path / FIXTURE.name))
    methods = {m.node.name.value: m for cls in model.classes.values() for m in cls.methods.values()}
    assert joined_before_calls(project, model, methods["mark_reduced"], "self._comm_stream")
    assert not joined_before_calls(project, model, methods["clear_in_flight"], "self._reduce_stream")  # another stream
    assert not joined_before_calls(project, model, methods["settle_shared"], "self._shared_stream")  # under an `if`
