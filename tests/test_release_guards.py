"""Early records hidden by a release event or by joins its threaded waiter never sees
(model/flow/releaseguards.py, model/flow/threadwaiters.py)."""

from pathlib import Path

from harness import lint_text

from streamlint.finding import Confidence
from streamlint.model.flow.releaseguards import kept_with
from streamlint._lazy import cst

PROJECT = Path(__file__).parent.parent / "fixtures/projects/sl201_release_guards/staging"


def _early(path: Path, tmp: Path) -> list:
    return [f for f in lint_text(path.read_text(encoding="utf-8"), tmp=tmp) if f.code == "SL201"]


def test_a_release_event_reports_the_field_record_at_medium(tmp_path):
    found = _early(PROJECT / "layers.py", tmp_path)
    assert len(found) == 1
    assert "`self.loaded[layer]` is recorded" in found[0].message
    assert found[0].confidence == Confidence.MEDIUM
    assert "`host_done`" in (found[0].hint or "")


def test_a_threaded_waiter_reports_the_record_at_medium(tmp_path):
    found = _early(PROJECT / "threads.py", tmp_path)
    assert len(found) == 1
    assert "`self.consumed[slot]` is recorded" in found[0].message
    assert found[0].confidence == Confidence.MEDIUM
    assert "`_uploader()`" in (found[0].hint or "")


def _fn(code: str) -> cst.FunctionDef:
    return next(n for n in cst.parse_module(code).body if isinstance(n, cst.FunctionDef))


def test_kept_with_reads_tuple_hand_overs_only():
    take = "def f(self, q):\n    h, d = q.get()\n"
    assert kept_with(_fn(take + "    d.record()\n    q.put((h, d))\n"), "d") == {"h"}
    assert kept_with(_fn(take + "    self.pool.append([h, self.bufs[0], d])\n"), "d") == {"h", "self.bufs"}
    assert kept_with(_fn(take + "    q.put((h, d))\n    return d\n"), "d") is None  # handed alone too
    assert kept_with(_fn(take + "    torch.cuda.current_stream().wait_event(d)\n"), "d") is None  # an argument
    assert kept_with(_fn(take + "    d.record()\n"), "d") is None  # never handed
    assert kept_with(_fn("def f(q, h, d):\n    q.put((h, d))\n"), "d") is None  # the caller's: it holds it too
