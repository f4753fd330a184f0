"""Loops whose steps alternate streams (flow/counters.py) and what an event's waiters rely on
(flow/promises.py), including a function too large for the path-sensitive run (the single-path fallback)."""

import pytest

import streamlint.model.flow.control as control
from harness import lint_text

ALTERNATING = """
import torch


def accumulate(q, k, dout, chunks, side_stream):
    streams = [torch.cuda.current_stream(), side_stream]
    done = torch.cuda.Event()
    dk = torch.zeros_like(k)
    dk_step = [None, None]
    side_stream.wait_stream(torch.cuda.current_stream())
    for i in range(len(chunks) + 1):
        if i < len(chunks):
            with torch.cuda.stream(streams[i % 2]):
                dk_step[i % 2] = torch.matmul(q[chunks[i]].t(), dout[chunks[i]])
        if i > 0:
            with torch.cuda.stream(streams[(i - 1) % 2]):
                if i > 1:
                    streams[(i - 1) % 2].wait_event(done)
                dk.add_(dk_step[(i - 1) % 2])
                if i < len(chunks):
                    streams[(i - 1) % 2].record_event(done)
    torch.cuda.current_stream().wait_stream(side_stream)
    return dk
"""

EARLY = """
import torch
import torch_npu


def dispatch(hidden: torch.Tensor, logits: torch.Tensor, events, comm_stream, cfg):
    if cfg.a:
        logits = logits * 2
    if cfg.b:
        logits = logits * 2
    if cfg.c:
        logits = logits * 2
    if cfg.d:
        logits = logits * 2
    if cfg.e:
        logits = logits * 2
    if cfg.f:
        logits = logits * 2
    ids = torch.argmax(logits, dim=-1)
    events["start"].record()
    with torch.npu.stream(comm_stream):
        events["start"].wait()
        events["done"].record()
        order = torch.argsort(ids)
        events["sorted"].record()  # covers the sort, but the waiter below waits on "done"
    events["done"].wait()
    return hidden[order]
"""


def sl201(code: str, tmp_path) -> list[int]:
    tmp_path.mkdir(exist_ok=True)
    return sorted(f.span.start_line for f in lint_text(code, tmp=tmp_path) if f.code == "SL201")


@pytest.mark.parametrize("budget", [None, 60])
def test_alternating_steps_race_only_without_the_wait(tmp_path, monkeypatch, budget):
    if budget is not None:  # too large for the path-sensitive run: the single path through each record
        monkeypatch.setattr(control, "MAX_STEPS", budget)
    assert sl201(ALTERNATING, tmp_path) == []
    racy = ALTERNATING.replace("streams[(i - 1) % 2].wait_event(done)", "pass")
    assert sl201(racy, tmp_path / "racy") == [18]  # step i's add on the other stream than step i-1's


def test_waiter_relying_on_work_after_the_record(tmp_path, monkeypatch):
    assert sl201(EARLY, tmp_path) == [26]  # the waiter's read: the root cause is reported there
    monkeypatch.setattr(control, "MAX_STEPS", 40)  # too large for the path-sensitive run: the coarse run
    assert sl201(EARLY, tmp_path / "coarse") == [26]  # (flow/coarse.py) finds what the full run finds
    monkeypatch.setattr(control, "MAX_STEPS", 12)  # too large for one path (the coarse run's single one here)
    assert sl201(EARLY, tmp_path / "single") == []  # silence rather than a guess
    fixed = EARLY.replace('        events["done"].record()\n        order = torch.argsort(ids)\n',
                          '        order = torch.argsort(ids)\n        events["done"].record()\n')
    assert fixed != EARLY
    assert sl201(fixed, tmp_path / "fixed") == []
