"""Host-memory helper results and project records named like tensors (flow/hosthelpers.py,
hostobjects.record_annotation): the fixture project sl201_staged_shard_uploads, with the confidence of each race."""

from pathlib import Path

from harness import engine_for, lint_paths

from streamlint.finding import Confidence
from streamlint.model.flow.hosthelpers import opaque_returns, returns_host_memory
from streamlint.model.tensors import param_kinds

PROJECT = Path(__file__).parent.parent / "fixtures/projects/sl201_staged_shard_uploads"


def _sl201() -> dict[tuple[str, int], object]:
    files = [str(p) for p in sorted((PROJECT / "shardstream").glob("*.py"))]
    return {(Path(f.path).name, f.span.start_line): f for f in lint_paths(PROJECT, files, files) if f.code == "SL201"}


def test_races_and_their_confidence():
    found = _sl201()
    conf = {k: f.confidence for k, f in found.items()}
    high = {k for k, c in conf.items() if c in (None, Confidence.HIGH)}
    medium = {k for k, c in conf.items() if c == Confidence.MEDIUM}
    # the tensor computed on the current stream just before: high; the caller's tensor arguments: medium
    assert {k[1] for k in high if k[0] == "pager.py"} == {85}, conf
    assert {k[1] for k in medium if k[0] == "pager.py"} == {66, 75}, conf
    # the helper computing on its argument: high; the helper handing back what a fetcher not seen gives: medium
    remote = next(k for k in found if k[0] == "restore.py" and "fetched" in found[k].message)
    blended = next(k for k in found if k[0] == "restore.py" and "mixed" in found[k].message)
    assert conf[remote] == Confidence.MEDIUM and "_remote()" in (found[remote].hint or ""), found[remote]
    assert conf[blended] in (None, Confidence.HIGH)
    # an unseen method handed the tensor itself computes on it, as the same call written inline: no guess, high
    plain = next(k for k in found if k[0] == "restore.py" and "plain" in found[k].message)
    assert conf[plain] in (None, Confidence.HIGH), found[plain]
    assert len([k for k in found if k[0] == "restore.py"]) == 3, sorted(found)


def _answers(tmp_path, code: str, question) -> dict[str, bool]:
    path = tmp_path / "helpers.py"
    path.write_text(code)
    project = engine_for(tmp_path).project
    model = project.file(str(path))
    return {fn.node.name.value: question(project, model, fn) for fn in model.iter_functions()}


def test_host_memory_helpers(tmp_path):
    answers = _answers(tmp_path, '''
import numpy as np
import torch


class Stager:
    def __init__(self, n):
        self.slab = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        self.dev = torch.empty(n, device="cuda")

    def file_bytes(self, n, fh):
        raw = bytearray(n)
        fh.readinto(raw)
        return torch.frombuffer(raw, dtype=torch.uint8)

    def slot(self, a, b):
        return self.slab[a:b].view(torch.float16)

    def either(self, n, fh):
        if fh is None:
            return self.slot(0, n)
        return self.file_bytes(n, fh)

    def scratch(self, n):
        return torch.empty(n, dtype=torch.float32)

    def from_array(self, a):
        return torch.from_numpy(np.ascontiguousarray(a))

    def pending(self, x):
        return x.to("cpu", non_blocking=True)

    def handed(self, x):
        return x

    def device_slot(self, a, b):
        return self.dev[a:b]

    def wrapped(self, x):
        return torch.as_tensor(x)

    def unpacked(self, pair):
        buf, _ = pair
        return buf

    def nothing(self):
        return None
''', returns_host_memory)
    assert {k for k, v in answers.items() if v} == {"file_bytes", "slot", "either", "scratch", "from_array"}, answers


def test_opaque_returns(tmp_path):
    answers = _answers(tmp_path, '''
import torch


class Fetch:
    def __init__(self, client):
        self.client = client

    def remote(self, name):
        return self.client.fetch(name)

    def field(self, ref):
        return ref.source

    def through(self, ref):
        got = self.remote(ref.name)
        return got

    def scaled(self, x):
        return x * 2

    def cast(self, x):
        return x.float()

    def op(self, x):
        return torch.relu(x)

    def param(self, x):
        return x

    def module(self, x):
        return self.proj(x)

    def handed(self, x: torch.Tensor, name: str):
        return self.client.apply(x, name)

    def named_only(self, x, name: str):
        return self.client.fetch(name, x.shape)
''', opaque_returns)
    assert {k for k, v in answers.items() if v} == {"remote", "field", "through", "named_only"}, answers


def test_record_annotations(tmp_path):
    path = tmp_path / "records.py"
    path.write_text('''
from dataclasses import dataclass
from typing import Any, Optional

import torch


@dataclass
class ShardTensorRef:
    path: str
    offset: int
    view: Any


@dataclass
class BoundaryTensors:
    hidden: torch.Tensor


class TensorBox:
    def __init__(self, data: torch.Tensor):
        self.data = data


class LazyTensor:
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class PackedTensor(torch.Tensor):
    pass


class QuantTensor:
    def __init__(self, qdata, scale):
        self.qdata = qdata
        self.scale = scale


class HeldTensors:
    def __init__(self, **parts):
        for k, v in parts.items():
            setattr(self, k, v)


class TensorSpec:
    def __init__(self, shape: tuple, dtype: str):
        self.shape = shape
        self.dtype = dtype


def use(a: ShardTensorRef, b: Optional[ShardTensorRef], c: BoundaryTensors, d: TensorBox, e: LazyTensor,
        f: PackedTensor, g: torch.Tensor, h: "ShardTensorRef", i: ShardTensorRef | torch.Tensor, j: QuantTensor,
        k: HeldTensors, m: TensorSpec):
    return a, b, c, d, e, f, g, h, i, j, k, m
''')
    project = engine_for(tmp_path).project
    model = project.file(str(path))
    fn = next(f for f in model.iter_functions() if f.node.name.value == "use")
    kinds = param_kinds(project, model, fn)
    assert {p for p in "abcdefghijkm" if kinds.get(p) == "tensor"} == set("cdefghijk"), kinds
