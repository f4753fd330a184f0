"""A class protocol producer's run is taken as its method's own run when the method's entry would seed nothing
(streamlint/model/flow/producerruns.py, issue 15): the findings are those of the two runs, and the method is run
once instead of twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import engine_for, write
from streamlint.model import dataflow
from streamlint.model.flow import interp as interp_mod

ROOT = Path(__file__).resolve().parent.parent

PREFETCH = '''\
import torch
from torch import nn


class WeightPrefetcher(nn.Module):
    """Copies the next layer's weights on a side stream while the current layer runs."""

    def __init__(self, layers):
        super().__init__()
        self.layers = layers
        self.copy_stream = torch.cuda.Stream()
        self.staged = None

    def prefetch(self, index: int) -> None:
        with torch.cuda.stream(self.copy_stream):
            self.staged = [w.to("cuda", non_blocking=True) for w in self.layers[index].parameters()]

    def prefetch_joined(self, index: int) -> list:
        with torch.cuda.stream(self.copy_stream):
            staged = [w.to("cuda", non_blocking=True) for w in self.layers[index].parameters()]
        torch.cuda.current_stream().wait_stream(self.copy_stream)
        return staged

    def forward(self, x: torch.Tensor, index: int) -> torch.Tensor:
        weight = self.staged[0]  # (not joined: the copy stream may still be writing it)
        return x @ weight
'''


def _runs(monkeypatch) -> list[tuple[str, bool]]:
    seen: list[tuple[str, bool]] = []
    real = interp_mod.Interp.run

    def run(self):
        seen.append((self.fn.qualname, self.protocol_seed))
        return real(self)

    monkeypatch.setattr(interp_mod.Interp, "run", run)
    return seen


def _findings(path: Path, root: Path) -> list[tuple]:
    report = engine_for(root).lint_file(str(path))
    return sorted((f.code, f.span.start_line, f.span.start_col, f.message, f.confidence.value) for f in report.findings)


def test_a_producer_whose_entry_seeds_nothing_is_run_once(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path, "serve/prefetch.py", PREFETCH)
    seen = _runs(monkeypatch)
    taken = _findings(path, tmp_path)
    ran = list(seen)
    seen.clear()
    monkeypatch.setattr(dataflow, "take", lambda *args: None)
    both = _findings(path, tmp_path)
    assert taken == both and taken
    # each producer method (prefetch, prefetch_joined: a side-stream scope of their own) is run once, as a producer
    for name in ("WeightPrefetcher.prefetch", "WeightPrefetcher.prefetch_joined"):
        assert [s for q, s in ran if q == name] == [False]
        assert sorted(s for q, s in seen if q == name) == [False, True]


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "fixtures" / "rules").glob("sl201_*.py"))[::20])
def test_the_findings_are_those_of_two_runs(name: str, monkeypatch) -> None:
    path = ROOT / "fixtures" / "rules" / name
    taken = _findings(path, path.parent)
    monkeypatch.setattr(dataflow, "take", lambda *args: None)
    assert taken == _findings(path, path.parent)
