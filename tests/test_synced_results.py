"""Results the host synchronised and the arguments every seen caller binds to one (flow/syncedresults.py), host
results of Tensor-annotated helpers and host-state classes (flow/hosthelpers.py)."""

from pathlib import Path

from harness import engine_for

from streamlint.model.flow.hosthelpers import host_state_class, returns_host_memory
from streamlint.model.flow.syncedresults import synced_by_callers, synced_result

PROJECT = Path(__file__).parent.parent / "fixtures/projects/sl201_vision_stage_streams"


def _project(tmp_path, code: str):
    path = tmp_path / "serve.py"
    path.write_text(code)
    project = engine_for(tmp_path).project
    return project, project.file(str(path))


_ENGINE = '''
import torch


def run(engine, x, stream, wait=True):
    with torch.cuda.stream(stream):
        out = engine(x)
    if wait:
        stream.synchronize()
    return out


def run_elsewhere(engine, x, stream):
    out = engine(x)
    with torch.cuda.stream(stream):
        y = engine(x)
    stream.synchronize()
    return out


def run_all(engine, x):
    out = engine(x)
    torch.cuda.synchronize()
    return out


def first(engine, x, stream):
    return run(engine, x, stream)[0]


def cpu_or_run(engine, x, stream):
    if x.device.type != "cuda":
        return engine(x)
    return run(engine, x, stream)


class Model:
    def __init__(self, engine):
        self.engine = engine
        self.side = torch.cuda.Stream()
        self.post = torch.cuda.Stream()

    def step(self, x):
        raw = self.forward(x)
        return self.decode(raw)

    def forward(self, x):
        return run(self.engine, x, self.side)

    def decode(self, raw):
        with torch.cuda.stream(self.post):
            return raw * 2


class Lazy(Model):
    def forward(self, x):
        return run(self.engine, x, self.side, wait=False)


class Eager(Model):
    def decode(self, raw):
        with torch.cuda.stream(self.post):
            return raw + 1
'''


def test_synced_results(tmp_path):
    project, model = _project(tmp_path, _ENGINE)
    fns = {fn.qualname: fn for fn in model.iter_functions()}
    lazy = next(s.node for s in model.calls if s.function is fns["Lazy.forward"] and s.node.args)
    eager = next(s.node for s in model.calls if s.function is fns["Model.forward"] and s.node.args)
    assert synced_result(project, model, fns["run"], eager)
    assert not synced_result(project, model, fns["run"], lazy)  # the call asks the helper not to wait
    assert not synced_result(project, model, fns["run_elsewhere"], None)  # bound outside the synchronised scope
    assert synced_result(project, model, fns["run_all"], None)  # a device-wide synchronize
    assert synced_result(project, model, fns["first"], None)  # an element of a synchronised result
    assert synced_result(project, model, fns["cpu_or_run"], None)  # the other return: a host device's path
    # `Model.decode` runs on Model and Lazy instances (Eager overrides it): Lazy's forward does not wait
    assert not synced_by_callers(project, model, fns["Model.decode"], "raw")
    # `Eager.decode` runs only on Eager instances, whose forward (Model's) waits for the engine
    assert synced_by_callers(project, model, fns["Eager.decode"], "raw")


def test_host_helpers_and_state_classes(tmp_path):
    project, model = _project(tmp_path, '''
from typing import Dict, List, Optional, Union

import torch


class Cut:
    def __init__(self, table: Optional[Dict[str, float]], floor: float = 0.1):
        self._table = table
        self._floor = self._pick(floor)

    @staticmethod
    def _pick(floor) -> float:
        return max(floor, 0.0)

    def per_label(self, labels: List[str]) -> Union[float, torch.Tensor]:
        if self._table is None:
            return self._floor
        return torch.tensor([self._table.get(k, self._floor) for k in labels])

    def on_device(self, labels: List[str]) -> Union[float, torch.Tensor]:
        return torch.tensor([self._floor for _ in labels], device="cuda")

    def kept(self, x) -> torch.Tensor:
        return torch.tensor(x)


class Holder:
    def __init__(self, weights, scale: float):
        self._weights = weights
        self._scale = scale
''')
    fns = {fn.qualname: fn for fn in model.iter_functions()}
    assert returns_host_memory(project, model, fns["Cut.per_label"])
    assert not returns_host_memory(project, model, fns["Cut.on_device"])
    assert not returns_host_memory(project, model, fns["Cut.kept"])  # (`x` may be a device tensor it keeps)
    assert host_state_class(project, model, model.classes["Cut"])
    assert not host_state_class(project, model, model.classes["Holder"])  # holds whatever it is handed


def test_a_grandchild_in_another_file_that_does_not_wait(tmp_path):
    # serve.py: a base detector whose forward waits and a family model deriving from it; batched.py derives from
    # the family model (naming it, never the base; no substring of it either) and overrides forward: the base's `decode` runs on its result
    serve = _ENGINE[:_ENGINE.index("class Model:")] + '''
class Detector:
    def __init__(self, engine):
        self.engine = engine
        self.side = torch.cuda.Stream()
        self.post = torch.cuda.Stream()

    def step(self, x):
        raw = self.forward(x)
        return self.decode(raw)

    def forward(self, x):
        return run(self.engine, x, self.side)

    def decode(self, raw):
        with torch.cuda.stream(self.post):
            return raw * 2


class YoloFamily(Detector):
    pass
'''
    (tmp_path / "serve.py").write_text(serve)
    for wait, synced in (("wait=False", False), ("wait=True", True)):
        (tmp_path / "batched.py").write_text(f'''
from serve import YoloFamily, run


class Batched(YoloFamily):
    def forward(self, x):
        return run(self.engine, x, self.side, {wait})
''')
        project = engine_for(tmp_path).project
        model = project.file(str(tmp_path / "serve.py"))
        fns = {fn.qualname: fn for fn in model.iter_functions()}
        assert synced_by_callers(project, model, fns["Detector.decode"], "raw") is synced, wait
