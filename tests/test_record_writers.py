"""Records typed by the container they are kept in (flow/elementtypes.py) and the fields functions outside the
record's class leave written on a side stream (flow/recordwriters.py), read by a holder of the record."""
from __future__ import annotations

from pathlib import Path

from harness import engine_for, lint_text, write
from streamlint.model.dataflow import run_producer
from streamlint.model.flow.elementtypes import element_class, loop_holders
from streamlint.model.flow.recordwriters import record_writes

RUNTIME = '''
from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class Chunk:
    host: torch.Tensor
    dev: Optional[torch.Tensor] = None
    ready: Optional[torch.cuda.Event] = None


class Staging:
    def __init__(self):
        self.by_step: dict[int, list[Chunk]] = defaultdict(list)
        self.flat: list[Chunk] = []
        self.named: dict[str, Chunk] = {}
        self.copy = torch.cuda.Stream()

    def stage(self, step: int) -> None:
        for c in reversed(self.by_step.get(step, ())):
            with torch.cuda.stream(self.copy):
                dev = c.host.to("cuda", non_blocking=True)
                ev = torch.cuda.Event()
                ev.record(self.copy)
            c.dev = dev
            c.ready = ev

    def stage_no_event(self) -> None:
        for c in self.flat:
            with torch.cuda.stream(self.copy):
                c.dev = c.host.to("cuda", non_blocking=True)

    def keys_only(self) -> None:
        for k in self.named:
            print(k)

    def values(self) -> None:
        for c in self.named.values():
            print(c)


def consume(c: Chunk) -> torch.Tensor:
    return c.dev * 2
'''


def test_loop_variables_typed_by_their_container(tmp_path: Path) -> None:
    path = write(tmp_path, "rt.py", RUNTIME)
    project = engine_for(tmp_path).project
    file = project.file(str(path))
    stage = file.functions["Staging.stage"]
    assert [(n, c.name) for n, c, _ in loop_holders(project, file, stage)] == [("c", "Chunk")]
    assert element_class(project, file, file.functions["Staging.stage_no_event"], "c")[0].name == "Chunk"
    assert element_class(project, file, file.functions["Staging.keys_only"], "k") is None  # (a dict's keys)
    assert element_class(project, file, file.functions["Staging.values"], "c")[0].name == "Chunk"


def test_record_fields_written_outside_with_an_event(tmp_path: Path) -> None:
    path = write(tmp_path, "rt.py", RUNTIME)
    project = engine_for(tmp_path).project
    file = project.file(str(path))
    from streamlint.model.flow.protocols import _producer_pending

    writes = record_writes(project, file, file.classes["Chunk"], "cuda",
                           lambda fn, prefix: _producer_pending(project, file, fn, "cuda", run_producer, prefix))
    # stage() keeps an event recorded after the copy on the record; stage_no_event() keeps none: not a protocol
    assert [(p.field, p.events, p.producer.node.name.value) for p in writes] == \
        [("self.dev", ("self.ready",), "stage")]


def test_holder_of_the_record_reads_unwaited(tmp_path: Path) -> None:
    found = lint_text(RUNTIME, "rt.py", tmp_path)
    text = RUNTIME.lstrip("\n")
    line = text.count("\n", 0, text.index("c.dev * 2")) + 1
    assert [(f.span.start_line, f.confidence.value) for f in found if f.code == "SL201"] == [(line, "medium")]
