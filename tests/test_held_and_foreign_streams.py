"""Helpers handing back the object's own tensor (flow/heldresults.py) and stream attributes the project
cannot see or only receives (model/attrstreams.py)."""
from __future__ import annotations

from pathlib import Path

from harness import engine_for, write
from streamlint.model.attrstreams import attr_origin
from streamlint.model.flow.heldresults import held_result

CACHE = '''
import numpy as np
import torch


class OffsetTables:
    def __init__(self, n: int) -> None:
        self.staging = torch.empty(n, dtype=torch.int32, device="cpu")
        self.by_device: dict[int, torch.Tensor] = {}
        self.scratch = torch.empty(n, device="cuda")

    def blocking_table(self, dev: int, offsets: np.ndarray) -> torch.Tensor:
        if dev in self.by_device:
            return self.by_device[dev]
        self.by_device[dev] = torch.zeros(len(offsets), dtype=torch.int32, device=dev)
        self.by_device[dev].copy_(torch.from_numpy(offsets))
        return self.by_device[dev]

    def staged_table(self, dev: int) -> torch.Tensor:
        self.by_device[dev] = torch.empty(4, dtype=torch.int32, device=dev)
        self.by_device[dev].copy_(self.staging)
        return self.by_device[dev]

    def async_table(self, dev: int) -> torch.Tensor:
        self.by_device[dev].copy_(self.staging, non_blocking=True)
        return self.by_device[dev]

    def device_to_device(self, dev: int) -> torch.Tensor:
        self.by_device[dev].copy_(self.scratch)
        return self.by_device[dev]

    def scaled(self, dev: int) -> torch.Tensor:
        self.by_device[dev].mul_(2)
        return self.by_device[dev]

    def fresh(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2
'''

STREAMS = '''
from dataclasses import dataclass, field

import torch
from outside_framework import Worker


class Base(Worker):
    def __init__(self) -> None:
        self.own = torch.cuda.Stream()


class Runner(Base):
    def step(self):
        return self.inherited, self.own


class Plain(torch.nn.Module):
    def step(self):
        return self.set_by_someone


@dataclass
class Ticket:
    stream: torch.cuda.Stream
    spare: torch.cuda.Stream = field(default_factory=torch.cuda.Stream)


class Holder:
    def __init__(self, stream: torch.cuda.Stream) -> None:
        self.stream = stream
        self.made = torch.cuda.Stream() if stream is None else stream
'''


def test_held_results_say_whether_the_helper_left_work_pending(tmp_path: Path) -> None:
    write(tmp_path, "pkg/__init__.py", "")
    path = write(tmp_path, "pkg/tables.py", CACHE)
    file = engine_for(tmp_path).project.file(str(path))
    cls = file.classes["OffsetTables"]
    verdict = {name: held_result(file.functions[f"OffsetTables.{name}"], cls)
               for name in ("blocking_table", "staged_table", "async_table", "device_to_device", "scaled", "fresh")}
    assert verdict == {"blocking_table": "kept", "staged_table": "kept", "async_table": "written",
                       "device_to_device": "written", "scaled": "written", "fresh": None}


def test_stream_attribute_origins(tmp_path: Path) -> None:
    write(tmp_path, "pkg/__init__.py", "")
    path = write(tmp_path, "pkg/runner.py", STREAMS)
    engine = engine_for(tmp_path)
    file = engine.project.file(str(path))
    origin = {(c, a): attr_origin(engine.project, file, file.classes[c], a)
              for c, a in (("Runner", "inherited"), ("Runner", "own"), ("Plain", "set_by_someone"),
                           ("Ticket", "stream"), ("Ticket", "spare"), ("Holder", "stream"), ("Holder", "made"))}
    assert origin == {("Runner", "inherited"): "unseen", ("Runner", "own"): "own", ("Plain", "set_by_someone"): None,
                      ("Ticket", "stream"): "handed", ("Ticket", "spare"): "own", ("Holder", "stream"): "handed",
                      ("Holder", "made"): "own"}


def test_callers_side_stream_lifetimes_only_with_strict(tmp_path: Path, monkeypatch) -> None:
    """SL301 for a tensor parameter some caller runs on a side stream and drops unrecorded rests on what the
    callers do: reported (low confidence) only with the rule's ``strict`` option; the negatives stay silent."""
    import json
    import shutil

    from harness import cli

    src = Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "sl301_caller_side_helpers"
    shutil.copytree(src, tmp_path / "proj")
    monkeypatch.chdir(tmp_path / "proj")

    def sl301() -> set[tuple[str, int]]:
        out = json.loads(cli(["--no-cache", "--min-confidence", "low", "--output-format", "json", "."]).stdout)
        return {(Path(f["filename"]).name, f["start"]["line"]) for f in out if f["code"] == "SL301"}

    assert sl301() == set()  # not even low without `strict`
    (tmp_path / "proj" / "streamlint.toml").write_text("[rules.SL301]\nstrict = true\n")
    assert {("digest.py", 7), ("transfer.py", 15), ("transfer.py", 31)} <= sl301()


def test_held_release_lifetimes_only_with_strict(tmp_path: Path, monkeypatch) -> None:
    """SL301 for a local kept in a field that another method drops without a join presumes what the object's
    other methods do (on vLLM 0.33.0 the drop follows a host sync of an event field): reported only with the
    rule's ``strict`` option."""
    import json
    import shutil

    from harness import cli

    src = Path(__file__).resolve().parent.parent / "fixtures" / "rules" / "sl301_held_staging_ring.py"
    (tmp_path / "proj").mkdir()
    shutil.copy(src, tmp_path / "proj" / "ring.py")
    monkeypatch.chdir(tmp_path / "proj")

    def sl301() -> set[int]:
        out = json.loads(cli(["--no-cache", "--output-format", "json", "."]).stdout)
        return {f["start"]["line"] for f in out if f["code"] == "SL301"}

    assert 31 not in sl301()
    (tmp_path / "proj" / "streamlint.toml").write_text("[rules.SL301]\nstrict = true\n")
    assert 31 in sl301()
