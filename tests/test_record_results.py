"""Records of device data handed back by project calls (flow/recordresults.py): summaries and confidence."""

import textwrap
from pathlib import Path

from harness import engine_for, lint_text

from streamlint.finding import Confidence
from streamlint.model.flow.recordresults import device_record

CODE = '''
import functools
from dataclasses import dataclass
from typing import NamedTuple

import torch


@dataclass
class Slab:
    data: torch.Tensor
    scale: torch.Tensor
    rows: int


class Pair(NamedTuple):
    left: torch.Tensor
    right: torch.Tensor


class Held:
    def __init__(self, keys, vals):
        self.k = keys
        self.v = vals


class Source:
    def __init__(self, data, scale):
        self.data = data
        self.scale = scale

    def upload(self, dev) -> Slab:
        return Slab(self.data.to(dev, non_blocking=True), self.scale.to(dev, non_blocking=True), 4)

    def upload_held(self, dev):
        return Held(self.data.to(dev, non_blocking=True), vals=self.scale.to(dev, non_blocking=True))

    def upload_data_only(self, dev):
        data = self.data.to(dev, non_blocking=True)
        return Slab(data, self.scale, 4)

    def upload_blocking(self, dev) -> Slab:
        return Slab(self.data.to(dev), self.scale.to(dev), 4)

    def to_host(self) -> Slab:
        return Slab(self.data.to("cpu", non_blocking=True), self.scale.cpu(), 4)

    def cast(self) -> Slab:
        return Slab(self.data.to(torch.float16, non_blocking=True), self.scale, 4)

    def upload_synced(self, dev) -> Slab:
        out = Slab(self.data.to(dev, non_blocking=True), self.scale.to(dev, non_blocking=True), 4)
        torch.cuda.synchronize()
        return out

    def scratch(self, dev) -> Pair:
        return Pair(torch.empty(8, device=dev), torch.zeros(8, device=dev))

    def pinned_scratch(self) -> Pair:
        return Pair(torch.empty(8, pin_memory=True), torch.empty(8, device="cpu"))

    def many(self, dev, n: int) -> list[Slab]:
        return [self.upload(dev) for _ in range(n)]

    def through(self, dev):
        return self.upload(dev)

    def upload_mirrored(self, dev, mirror):
        mirror.copy_(self.data, non_blocking=True)
        return Slab(self.data.to(dev, non_blocking=True), self.scale.to(dev, non_blocking=True), 4)

    def upload_staged(self, dev):
        staged = torch.empty(self.data.shape, device=dev)
        staged.copy_(self.data, non_blocking=True)
        return Slab(staged, self.scale.to(dev, non_blocking=True), 4)

    @functools.lru_cache(maxsize=2)
    def upload_cached(self, dev) -> Slab:
        return Slab(self.data.to(dev, non_blocking=True), self.scale.to(dev, non_blocking=True), 4)

    def upload_remembered(self, dev) -> Slab:
        slab = Slab(self.data.to(dev, non_blocking=True), self.scale.to(dev, non_blocking=True), 4)
        self.latest = slab
        return slab

    def either(self, dev, flag: bool):
        if flag:
            return self.upload(dev)
        return None


def upload_source(src: Source, dev) -> Slab:
    return src.upload(dev)
'''


def _model(tmp_path: Path):
    path = tmp_path / "slabs.py"
    path.write_text(textwrap.dedent(CODE).lstrip("\n"), encoding="utf-8")
    engine = engine_for(tmp_path, [str(path)])
    return engine.project, engine.project.file(str(path))


def test_summaries(tmp_path):
    project, file = _model(tmp_path)
    source = file.classes["Source"]

    def fields(name):
        found = device_record(project, file, source.methods[name])
        return found.fields if found is not None else None

    assert fields("upload") == {"data", "scale"}
    assert fields("upload_held") == {"k", "v"}  # stored as `self.k` / `self.v` (`vals=` names the parameter)
    assert fields("upload_data_only") == {"data"}  # (a local bound once to the copy; `scale` is handed as is)
    assert fields("upload_blocking") is None  # the host waits for a blocking copy
    assert fields("to_host") is None  # host memory
    assert fields("cast") is None  # a dtype conversion, no copy to a device
    assert fields("upload_synced") is None  # orders its own work before it returns
    assert fields("scratch") == {"left", "right"}  # torch factories on a device
    assert fields("pinned_scratch") is None
    assert fields("many") == {"data", "scale"}  # a list of records
    assert fields("through") == {"data", "scale"}  # another method's record
    assert fields("upload_mirrored") is None  # also writes the caller's buffer: stays inlined
    assert fields("upload_staged") == {"data", "scale"}  # a copy into a buffer it allocates itself
    assert fields("upload_cached") is None  # a shared, memoised record
    assert fields("upload_remembered") is None  # the object keeps it
    assert fields("either") is None  # `None` on one path: not every return is a record
    fn = file.functions["upload_source"]
    assert device_record(project, file, fn).fields == {"data", "scale"}  # a method of an annotated parameter


USERS = '''
from dataclasses import dataclass

import torch


@dataclass
class Chunk:
    body: torch.Tensor
    tail: torch.Tensor

    def merged(self) -> torch.Tensor:
        return torch.cat([self.body, self.tail])


class ChunkSource:
    def __init__(self, host):
        self.host = host

    def bring_chunk(self, dev) -> Chunk:
        return Chunk(self.host[0].to(dev, non_blocking=True), self.host[1].to(dev, non_blocking=True))


class Runner:
    def __init__(self):
        self.side = torch.cuda.Stream()
        self.sources = []

    def typed(self, src: ChunkSource, x):
        with torch.cuda.stream(self.side):
            chunk = src.bring_chunk("cuda")
        return x + chunk.merged()

    def untyped(self, x):
        for src in self.sources:
            with torch.cuda.stream(self.side):
                chunk = src.bring_chunk("cuda")
            x = x + chunk.merged()
        return x
'''


def test_confidence(tmp_path):
    found = [f for f in lint_text(USERS, tmp=tmp_path, min_confidence="low") if f.code == "SL201"]
    by_line = {f.span.start_line: f.confidence for f in found}
    assert by_line == {31: Confidence.HIGH, 37: Confidence.MEDIUM}, [(f.span.start_line, f.message) for f in found]
