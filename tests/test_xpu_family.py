"""torch.xpu is a device family of the API table like torch.cuda / torch.npu: its stream API has roles, its
path is the native CUDA-like one, and a device dispatch between torch.cuda and torch.xpu is one path."""

from pathlib import Path

from harness import engine_for

from streamlint.model import apis
from streamlint.model.apis import Family, Role


def test_the_xpu_stream_api_is_in_the_table() -> None:
    for name, role in (("Stream", Role.STREAM_NEW), ("Event", Role.EVENT_NEW), ("stream", Role.NATIVE_STREAM_CONTEXT),
                       ("current_stream", Role.CURRENT_STREAM), ("synchronize", Role.DEVICE_SYNCHRONIZE),
                       ("graph", Role.GRAPH_CAPTURE)):
        spec = apis.lookup(f"torch.xpu.{name}")
        assert spec is not None and spec.role is role and spec.family is Family.XPU
    assert apis.lookup("torch.xpu.streams.Stream") is apis.lookup("torch.xpu.Stream")
    assert apis.FAMILY_MODE[Family.XPU] == apis.FAMILY_MODE[Family.CUDA] == "cuda"
    assert apis.lookup("torch.xpu.graph").params[0] == "xpu_graph"


def _paths(tmp_path: Path, source: str) -> dict[str, frozenset[str]]:
    path = tmp_path / "mod.py"
    path.write_text(source)
    engine = engine_for(tmp_path)
    file = engine.project.file(str(path))
    return {q: engine.project.execution_path(file, fn).modes for q, fn in file.functions.items()}


def test_a_dispatch_between_cuda_and_xpu_contexts_is_one_native_path(tmp_path: Path) -> None:
    paths = _paths(tmp_path, """
import contextlib
import torch


def on_stream(stream):
    if torch.cuda.is_available():
        return torch.cuda.stream(stream)
    if torch.xpu.is_available():
        return torch.xpu.stream(stream)
    return contextlib.nullcontext()


def scale_on_side(x, w):
    side = torch.Stream(device=x.device)
    side.wait_stream(torch.accelerator.current_stream())
    with on_stream(side):
        return x * w


def xpu_only(x):
    side = torch.xpu.Stream()
    with torch.xpu.stream(side):
        return x * 2
""")
    assert paths["scale_on_side"] == frozenset({"cuda"})
    assert paths["xpu_only"] == frozenset({"cuda"})
