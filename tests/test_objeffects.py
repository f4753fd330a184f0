"""Effects of methods on objects (flow/objeffects.py): receivers resolved, summaries, confidence."""

import textwrap
from pathlib import Path

import libcst as cst
from harness import engine_for, lint_text

from streamlint.finding import Confidence
from streamlint.model.flow.objeffects import method_effects, object_method

CODE = '''
import torch
import torch.distributed as dist


class Flat:
    def __init__(self, n, device):
        self.data = torch.empty(n, device=device)

    def part(self, i):
        return self.data[i]


class Pinned:
    def __init__(self, n):
        self.data = torch.empty(n, pin_memory=True)


class Group:
    def __init__(self):
        self.out = torch.zeros(4, device="cuda")

    def new_flat(self) -> Flat:
        return Flat(4, "cuda")

    def new_pinned(self):
        return Pinned(4)

    def cached(self):
        return self.out

    def fill(self, buf, src):
        buf.part(0).copy_(src)

    def fill_copy(self, buf, src):
        buf.clone().copy_(src)

    def fill_through(self, buf, src):
        self.fill(buf, src)

    def gather(self, dst, src):
        dist.all_gather_into_tensor(dst, src)

    def store(self, buf, src):
        buf[0] = src

    def fill_waiting(self, buf, src, stream):
        torch.cuda.current_stream().wait_stream(stream)
        buf.copy_(src)


class Owner:
    groups: list[Group]

    def __init__(self):
        self.groups = []
        self.built = [Group() for _ in range(2)]

    def run(self, src):
        for g in self.groups:
            g.fill(None, src)
        for h in self.built:
            h.fill(None, src)
        self.groups[0].fill(None, src)
'''


def _model(tmp_path: Path):
    path = tmp_path / "objs.py"
    path.write_text(textwrap.dedent(CODE).lstrip("\n"), encoding="utf-8")
    engine = engine_for(tmp_path, [str(path)])
    return engine.project, engine.project.file(str(path))


def test_summaries(tmp_path):
    project, file = _model(tmp_path)
    group = file.classes["Group"]

    def fx(name):
        return method_effects(project, file, group.methods[name])

    assert fx("new_flat").fresh and not fx("new_flat").writes
    assert not fx("new_pinned").fresh  # pinned host memory: no device allocation
    assert not fx("cached").fresh  # a field handed back: long-lived, not fresh
    assert fx("fill").writes == {"buf"}  # through a getter of the object
    assert fx("fill_copy").writes == frozenset()  # a copy's in-place op leaves the argument alone
    assert fx("fill_through").writes == {"buf"}  # through a method of self
    assert fx("gather").writes == {"dst"}  # a collective's output, not its input
    assert fx("store").writes == {"buf"}
    assert fx("fill_waiting") is None  # stream work of its own: no summary


def test_receivers(tmp_path):
    project, file = _model(tmp_path)
    run = file.classes["Owner"].methods["run"]
    found = {}
    for site in run.calls:
        if isinstance(site.node.func, cst.Attribute) and site.method == "fill":
            om = object_method(project, file, run, site.node.func)
            found[file.code(site.node.func.value)] = om is not None and om.exact and om.method.node.name.value
    # declared (class-body annotation), built from constructors, and an element by index
    assert found == {"g": "fill", "h": "fill", "self.groups[0]": "fill"}


SHARDED = '''
import torch


class Shard:
    def __init__(self):
        self.x = torch.zeros(1, device="cuda")

    def pack_into_flat(self, buf):
        buf.copy_(self.x)


class Wrapper:
    def __init__(self, factory):
        self.shards = factory()
        self.side = torch.cuda.Stream()

    def step(self):
        buf = torch.empty(1, device="cuda")
        for shard in self.shards:
            shard.pack_into_flat(buf)
            with torch.cuda.stream(self.side):
                torch.distributed.all_reduce(buf)
'''


def test_name_resolved_receiver_is_medium(tmp_path):
    found = [f for f in lint_text(SHARDED, tmp=tmp_path) if f.code == "SL201"]
    assert found and all(f.confidence is Confidence.MEDIUM for f in found)
    assert "pack_into_flat" in found[0].hint
