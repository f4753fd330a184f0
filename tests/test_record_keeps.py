"""A no-op record of a tensor a work record handed back keeps until its join (flow/recordkeeps.py): silent when every
seen caller keeps the record, low when no caller is seen, medium (as before) when a caller drops it."""

from harness import lint_text

from streamlint.finding import Confidence

LAUNCH = '''
from dataclasses import dataclass

import torch


@dataclass
class GatherWork:
    out: torch.Tensor
    side: torch.cuda.Stream

    def wait(self) -> torch.Tensor:
        torch.cuda.current_stream().wait_stream(self.side)
        return self.out


_SIDE = torch.cuda.Stream()


def launch_gather(tokens: torch.Tensor, index: torch.Tensor) -> GatherWork:
    out = torch.empty_like(tokens)
    _SIDE.wait_stream(torch.cuda.current_stream())
    out.record_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_SIDE):
        torch.index_select(tokens, 0, index, out=out)
    return GatherWork(out=out, side=_SIDE)
'''


def _noop(code: str, tmp_path) -> list:
    return [f for f in lint_text(code, tmp=tmp_path, min_confidence="low")
            if f.code == "SL301" and "memory belongs to" in f.message]


def test_no_caller_seen_is_low(tmp_path):
    found = _noop(LAUNCH, tmp_path)
    assert [f.confidence for f in found] == [Confidence.LOW]


def test_caller_keeping_the_record_is_silent(tmp_path):
    code = LAUNCH + '''

def route(tokens, index):
    work = launch_gather(tokens, index)
    return work.wait() * 2
'''
    assert _noop(code, tmp_path) == []


def test_caller_dropping_the_record_is_medium(tmp_path):
    code = LAUNCH + '''

def prefetch(tokens, index):
    launch_gather(tokens, index)
'''
    found = _noop(code, tmp_path)
    assert [f.confidence for f in found] == [Confidence.MEDIUM]
