"""A class protocol's consumer that hands the pending field back to its caller (model/flow/handbacks.py), and
project helpers that copy what they are handed to a device (model/flow/devicecopies.py)."""

from pathlib import Path

from harness import engine_for, lint_paths

from streamlint.finding import Confidence
from streamlint.model.flow.devicecopies import device_copy, device_copy_at

PROJECT = Path(__file__).parent.parent / "fixtures/projects/sl201_handed_back_fields"


def _sl201() -> list:
    files = [str(p) for p in sorted((PROJECT / "feeder").glob("*.py"))]
    return [f for f in lint_paths(PROJECT, [str(PROJECT / "feeder/loaders.py")], files) if f.code == "SL201"]


def test_hand_backs_are_medium_and_name_the_producer():
    found = {f.span.start_line: f for f in _sl201()}
    assert sorted(found) == [27, 102], sorted(found)
    for f in found.values():
        assert f.confidence == Confidence.MEDIUM
        assert "handed back to the caller" in f.message
    assert [r.span.start_line for r in found[27].related] == [22]  # the store in `_stage()`
    assert any("swap_in()" in (r.message or "") for r in found[102].related)


def _answers(tmp_path, code: str) -> dict[str, bool]:
    path = tmp_path / "helpers.py"
    path.write_text(code)
    project = engine_for(tmp_path).project
    model = project.file(str(path))
    return {fn.node.name.value: device_copy(project, model, fn) for fn in model.iter_functions()}


def test_device_copy_helpers(tmp_path):
    answers = _answers(tmp_path, '''
import torch


def to_accel(obj, target, non_blocking=False):
    if isinstance(obj, torch.Tensor):
        return obj.to(target, non_blocking=non_blocking)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_accel(x, target, non_blocking) for x in obj)
    if isinstance(obj, dict):
        return {k: to_accel(v, target, non_blocking) for k, v in obj.items()}
    return obj


def on_accel(batch, target):
    return to_accel(batch, target, non_blocking=True)


def cuda_all(xs):
    return [x.cuda(non_blocking=True) for x in xs]


def cuda_blocking(xs):
    return [x.cuda() for x in xs]


def to_blocking(obj, target):
    return obj.to(target)


def cast(obj):
    return obj.to(torch.bfloat16)


def to_host(obj):
    return obj.to("cpu")


def passthrough(obj, target):
    return obj


def scaled(obj, target):
    return obj.to(target) * 2
''')
    assert answers == {"to_accel": True, "on_accel": True, "cuda_all": True, "cuda_blocking": False,
                       "to_blocking": False, "cast": False, "to_host": False, "passthrough": False, "scaled": False}


def test_device_copy_at_a_call_needs_the_non_blocking_flag(tmp_path):
    """A helper taking ``non_blocking`` copies asynchronously only where the call passes a true value (from
    host memory a blocking copy is waited for by the host: no pending device value)."""
    path = tmp_path / "helpers.py"
    path.write_text('''
import torch


def to_accel(obj, target, non_blocking=False):
    if isinstance(obj, torch.Tensor):
        return obj.to(target, non_blocking=non_blocking)
    return [to_accel(x, target, non_blocking) for x in obj]


def move_kw(obj, target, **kw):
    return obj.to(target, **kw)


def use(batch, dev, flag):
    a = to_accel(batch, dev)
    b = to_accel(batch, dev, non_blocking=True)
    c = to_accel(batch, dev, False)
    d = move_kw(batch, dev)
    e = move_kw(batch, dev, non_blocking=True)
    f = to_accel(batch, dev, flag)
''')
    project = engine_for(tmp_path).project
    model = project.file(str(path))
    fns = {fn.node.name.value: fn for fn in model.iter_functions()}
    calls = {name: value for name, values in fns["use"].name_assigns.items() for value in values}
    got = {name: device_copy_at(project, model, fns[call.func.value], call) for name, call in calls.items()}
    assert got == {"a": False, "b": True, "c": False, "d": False, "e": True, "f": True}
