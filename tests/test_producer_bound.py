"""A class-protocol producer whose run can make current no stream but the entry stream, the host or TorchAir tag
streams leaves nothing pending, so it is not run (streamlint/model/flow/producerbound.py, issue 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import FIXTURES, engine_for, lint_paths
from streamlint.discovery import discover
from streamlint.model.flow import interp as interp_mod
from streamlint.model.flow import producerbound
from streamlint.model.flow import protocols
from streamlint.model.flow.interp import run_producer
from streamlint.model.flow.producerbound import may_leave_pending

ROOT = Path(__file__).resolve().parent.parent
PROJECT = FIXTURES / "projects" / "sl201_tag_stream_producers"


def _lint(root: Path) -> list[tuple]:
    files = [str(f) for f in discover([str(root)], root).files]
    return sorted((Path(f.path).name, f.code, f.span.start_line, f.span.start_col, f.message, f.confidence.value)
                  for f in lint_paths(root, files))


def _producer_runs(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = interp_mod.Interp.run

    def run(self):
        if not self.protocol_seed:
            seen.append(self.fn.qualname)
        return real(self)

    monkeypatch.setattr(interp_mod.Interp, "run", run)
    return seen


def test_a_tag_stream_producer_is_not_run(monkeypatch) -> None:
    seen = _producer_runs(monkeypatch)
    bounded = _lint(PROJECT)
    ran = list(seen)
    seen.clear()
    monkeypatch.setattr(protocols, "may_leave_pending", lambda *args: True)
    assert _lint(PROJECT) == bounded
    assert [f[:3] for f in bounded if f[1] == "SL201"] == [("moe.py", "SL201", 73)]
    # `route` asks the producers of SharedExpertMoE in the eager mode: its `forward` switches only to a tag stream
    assert "SharedExpertMoE.forward" in seen and "SharedExpertMoE.forward" not in ran
    # StagedExpertMoE.forward's helper `_stage` (inlined) copies on the layer's own stream: run, and its hand-off found
    assert "StagedExpertMoE.forward" in ran


def test_the_bound_follows_what_the_run_inlines(monkeypatch) -> None:
    """Without the callees (`self._stage(...)` opening a native stream scope) the bound would spare a run that
    leaves `self.staged` pending: the finding would be lost."""
    monkeypatch.setattr(producerbound, "inline_callee", lambda *args: (None, None))
    assert not [f for f in _lint(PROJECT) if f[1] == "SL201"]


def _producer_candidates(project, model):
    for cls in model.classes.values():
        for m in cls.methods.values():
            if m.params[:1] == ("self",) and protocols._scoped(project, model, cls, m):
                yield m


@pytest.mark.parametrize("name", [*sorted(p.name for p in (ROOT / "fixtures" / "rules").glob("sl201_*.py"))[::6],
                                  "projects/sl201_tag_stream_producers/serving/moe.py"])
def test_a_bounded_producer_leaves_nothing_pending(name: str) -> None:
    """The bound's claim itself: every producer it spares, run anyway, leaves no pending field (and the bound does
    spare some of them across these fixtures)."""
    path = ROOT / "fixtures" / ("rules/" + name if "/" not in name else name)
    root = PROJECT if "/" in name else path.parent
    project = engine_for(root).project
    model = project.file(str(path))
    for m in _producer_candidates(project, model):
        for mode in ("eager", "cuda"):
            if not may_leave_pending(project, model, m, mode):
                assert protocols._producer_pending(project, model, m, mode, run_producer) == [], (m.qualname, mode)


def test_the_bound_spares_tag_producers_and_keeps_native_ones() -> None:
    project = engine_for(PROJECT).project
    model = project.file(str(PROJECT / "serving" / "moe.py"))
    shared, staged = model.classes["SharedExpertMoE"], model.classes["StagedExpertMoE"]
    assert not may_leave_pending(project, model, shared.methods["forward"], "eager")
    assert may_leave_pending(project, model, staged.methods["forward"], "eager")
    assert may_leave_pending(project, model, staged.methods["_stage"], "eager")
