"""What a value is (device tensor / host value / host object), session 41: a parameter only receiving methods no
tensor has (hostobjects.foreign_receivers: races on it are low), helpers handing back host descriptors (hostresults.returns_host_values: device
addresses, tuple unpacking, the class's host fields), literal tests (syntax.literal_truth), and a context manager's
with-body race when no `with` of it is seen (flow/bodyinputs.bodies_unseen: at most low)."""

from pathlib import Path

from harness import engine_for, lint_text

from streamlint._lazy import cst
from streamlint.finding import Confidence
from streamlint.model.hostobjects import foreign_method, foreign_receivers
from streamlint.model.hostresults import _returns_host_values, returns_host_values
from streamlint.model.syntax import literal_truth
from streamlint.model.tensors import param_kinds


def _functions(tmp_path: Path, code: str):
    path = tmp_path / "kinds.py"
    path.write_text(code)
    project = engine_for(tmp_path).project
    model = project.file(str(path))
    return project, model, {fn.node.name.value: fn for fn in model.iter_functions()}


def test_foreign_method_receiver_is_a_guess(tmp_path):
    (tmp_path / "lint").mkdir()
    assert foreign_method("next_stream") and foreign_method("memcpy_async")
    assert not foreign_method("copy_") and not foreign_method("npu_format_cast") and not foreign_method("_impl")
    project, model, fns = _functions(tmp_path, '''
import torch

def launch(engine, x, stream):
    side = engine.next_stream()
    y = x.contiguous()
    with torch.cuda.stream(stream):
        engine.submit(y)
''')
    kinds = param_kinds(project, model, fns["launch"])
    assert kinds.get("x") == "tensor", kinds
    assert foreign_receivers(fns["launch"]) == {"engine"}  # (a tensor only by a guess: races on it are low)
    found = [f for f in lint_text('''
import torch

def launch(engine, stream):
    side = engine.next_stream()
    with torch.cuda.stream(side):
        engine.submit(4096)
''', tmp=tmp_path / "lint") if f.code == "SL201"]
    assert found and all(f.confidence == Confidence.LOW for f in found), found


def test_descriptor_plans_are_host_values(tmp_path):
    _, _, fns = _functions(tmp_path, '''
def plan(self, pool, layer, n):
    base = pool.data_ptr()
    page, dim = self.page, self.dim
    nbytes = page * dim * 2
    out = []
    run = 1
    while run < n:
        run += 1
    out.append((base + layer * nbytes, run * nbytes))
    return out, len(out) > 0

def plan_of_tensors(self, pool, layer):
    out = []
    out.append(pool[layer] * 2)
    return out, True
''')
    assert returns_host_values(fns["plan"], lambda attr: attr in ("page", "dim"))
    assert not _returns_host_values(fns["plan"], lambda attr: False)  # (`self.page` may be a tensor then)
    assert not returns_host_values(fns["plan_of_tensors"], lambda attr: True)


def test_literal_truth():
    def truth(code: str):
        return literal_truth(cst.parse_expression(code))

    assert truth("True") is True and truth("1") is True and truth("'x'") is True and truth("not False") is True
    assert truth("False") is False and truth("0") is False and truth("None") is False and truth("''") is False
    assert truth("flag") is None and truth("x == 1") is None


_CM = '''
from contextlib import contextmanager
import torch

_side = torch.cuda.Stream()

@contextmanager
def on_side():
    with torch.cuda.stream(_side):
        yield
'''


def test_with_body_race_of_unseen_callers_is_low(tmp_path):
    (tmp_path / "seen").mkdir()
    unseen = [f for f in lint_text(_CM, tmp=tmp_path) if f.code == "SL201"]
    assert [f.confidence for f in unseen] == [Confidence.LOW], unseen
    seen = [f for f in lint_text(_CM + '''

def step(x):
    y = x * 2
    with on_side():
        return y + 1
''', tmp=tmp_path / "seen") if f.code == "SL201" and "with-body" in f.message]
    assert seen and all(f.confidence == Confidence.MEDIUM for f in seen), seen
