"""Early records hidden by a release event or by joins its threaded waiter never sees
(model/flow/releaseguards.py, model/flow/threadwaiters.py), reported only when the work after the record touches
what the waiters touch (model/flow/waitertouch.py)."""

from pathlib import Path

from harness import lint_text

from streamlint.finding import Confidence
from streamlint.model.flow.releaseguards import kept_with
from streamlint._lazy import cst

PROJECT = Path(__file__).parent.parent / "fixtures/projects/sl201_release_guards/kvoffload"


def _early(path: Path, tmp: Path) -> list:
    return [f for f in lint_text(path.read_text(encoding="utf-8"), tmp=tmp) if f.code == "SL201"]


def test_a_release_event_reports_the_field_record_at_medium(tmp_path):
    # (and not the record followed only by a write of a field no waiter reads: `swap_in_with_stats`)
    found = _early(PROJECT / "kvswap.py", tmp_path)
    early = [f for f in found if "is recorded" in f.message]
    assert len(early) == 1, [(f.line, f.message) for f in found]
    assert "`self.block_ready[req]` is recorded" in early[0].message
    assert early[0].confidence == Confidence.MEDIUM
    assert "`released`" in (early[0].hint or "")


def test_a_threaded_waiter_reports_the_record_at_medium(tmp_path):
    # (and not the record followed only by work on fresh tensors and a field the thread never names)
    found = _early(PROJECT / "optstate.py", tmp_path)
    early = [f for f in found if "is recorded" in f.message]
    assert len(early) == 1, [(f.line, f.message) for f in found]
    assert "`self.slot_free[k]` is recorded" in early[0].message
    assert early[0].confidence == Confidence.MEDIUM
    assert "`_refill()`" in (early[0].hint or "")


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


def test_kept_with_is_memoised_per_function_and_name():
    fn = _fn("def f(self, q):\n    h, d = q.get()\n    q.put((h, d))\n")
    assert kept_with(fn, "d") is kept_with(fn, "d")
    assert kept_with(fn, "h") == {"d"}  # (the memo keeps each name apart)
