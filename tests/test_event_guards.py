"""Guarded-by inference for event fields (model/eventguards.py): which fields an event an object holds
guards, and which readers skip the wait on it."""
import textwrap
from pathlib import Path

from harness import engine_for, lint_text

from streamlint.finding import Confidence
from streamlint.model.eventguards import CURRENT, event_guards, unguarded_reads

CODE = """
import torch


class Stage:
    def __init__(self, n):
        self.out = torch.empty(n, device="cuda")
        self.scale = torch.ones(n, device="cuda")
        self.flag = False
        self.done = torch.cuda.Event()
        self.packed = torch.cuda.Event()

    def launch(self, x, stream):
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            torch.mul(x, 2, out=self.out)
            self.flag = True
            self.done.record()

    def pack(self, x):
        self.scale.copy_(x)
        self.packed.record()

    def consume(self):
        torch.cuda.current_stream().wait_event(self.done)
        return self.out + 1

    def consume_fast(self):
        return self.out + 1

    def reduce(self, stream):
        with torch.cuda.stream(stream):
            return self.scale.sum()
"""


def _project(tmp_path: Path, code: str):
    path = tmp_path / "stage.py"
    path.write_text(textwrap.dedent(code).lstrip("\\n"), encoding="utf-8")
    engine = engine_for(tmp_path, [str(path)])
    return engine.project, engine.project.file(str(path))


def test_guards_are_the_device_writes_before_the_record(tmp_path):
    project, file = _project(tmp_path, CODE)
    guards = {(g.event, g.field, g.stream) for g in event_guards(project, file)["Stage"]}
    # `self.flag = True` is host state: not guarded
    assert guards == {("done", "out", "stream"), ("packed", "scale", CURRENT)}


def test_unguarded_reader_needs_the_protocol(tmp_path):
    project, file = _project(tmp_path, CODE)
    reads = {(r.function.node.name.value, r.guard.field) for r in unguarded_reads(project, file)}
    # consume_fast skips the wait `consume` does; reduce reads the fork-guarded field on a side stream, but
    # nobody in the module waits on `packed` before reading `scale` and it does not call `pack`: silent
    assert reads == {("consume_fast", "out")}


def test_finding_is_medium(tmp_path):
    found = [f for f in lint_text(CODE, tmp=tmp_path) if f.code == "SL201" and "with no wait on `" in f.message]
    assert [(f.span.start_line, f.confidence) for f in found] == [(28, Confidence.MEDIUM)], [(f.span.start_line, f.message) for f in found]
