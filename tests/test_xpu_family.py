"""torch.xpu is a device family of the API table like torch.cuda / torch.npu: its stream API has roles, its
path is the native CUDA-like one, and a device dispatch between torch.cuda and torch.xpu is one path."""

from pathlib import Path

from harness import engine_for, lint_text

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


SPELLINGS = """
import torch


class XpuOffload:
    def __init__(self):
        self.copy_stream = torch.xpu.Stream()

    def prefetch(self, cpu_kv):
        staged = cpu_kv.to("xpu", non_blocking=True)
        with torch.xpu.stream(self.copy_stream):
            return staged * 2


class CudaOffload:
    def __init__(self):
        self.copy_stream = torch.cuda.Stream()

    def prefetch(self, cpu_kv):
        staged = cpu_kv.to("cuda", non_blocking=True)
        with torch.cuda.stream(self.copy_stream):
            return staged * 2


class NpuOffload:
    def __init__(self):
        self.copy_stream = torch.npu.Stream()

    def prefetch(self, cpu_kv):
        staged = cpu_kv.to("npu", non_blocking=True)
        with torch.npu.stream(self.copy_stream):
            return staged * 2


class AnyDeviceOffload:
    def __init__(self):
        self.copy_stream = torch.accelerator.Stream()

    def prefetch(self, cpu_kv, device):
        staged = cpu_kv.to(device, non_blocking=True)
        with torch.accelerator.stream(self.copy_stream):
            return staged * 2
"""


def test_hints_and_tags_spell_the_device_of_the_function(tmp_path: Path) -> None:
    """A function that never names its current stream gets a hint with its own device's API (torch.xpu code is
    told ``torch.xpu.current_stream()``, device-generic code ``torch.accelerator``), and XPU findings say [xpu]."""
    found = {f.span.start_line: f for f in lint_text(SPELLINGS, tmp=tmp_path) if f.code == "SL201"}
    assert len(found) == 4, [f.message for f in found.values()]
    expected = {"XpuOffload": ("torch.xpu", "[xpu]"), "CudaOffload": ("torch.cuda", "[cuda]"),
                "NpuOffload": ("torch.npu", "[eager]"), "AnyDeviceOffload": ("torch.accelerator", None)}
    lines = SPELLINGS.lstrip("\n").splitlines()
    for line, f in found.items():
        cls = next(text.split()[1].rstrip(":") for text in reversed(lines[:line]) if text.startswith("class "))
        module, tag = expected[cls]
        assert f"`self.copy_stream.wait_stream({module}.current_stream())`" in f.hint, (cls, f.hint)
        for other in {"torch.xpu", "torch.cuda", "torch.npu", "torch.accelerator"} - {module}:
            assert other not in f.hint, (cls, f.hint)
        if tag is not None:
            assert f.message.endswith(tag), (cls, f.message)
