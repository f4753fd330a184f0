"""Streams and methods reached through a parameter annotated with a project class (flow/paramfields.py), the
computing helper that rebinds its result before returning it (flow/computed.py), and the coarse run's plain
frees (dataflow._straight_free)."""
from __future__ import annotations

from pathlib import Path

from harness import engine_for, lint_paths, write
from streamlint.model.flow.computed import computes_tensor
from streamlint.model.flow.paramfields import field_is_current, field_is_side

SHARDS = '''
import torch


class ShardBuffer:
    def __init__(self, n: int, side: torch.cuda.Stream) -> None:
        self.parts: list[torch.Tensor] = []
        self.copy_stream = torch.cuda.Stream()
        self.home_stream = torch.cuda.current_stream()
        self.given_stream = side
        self.default_lane = torch.cuda.default_stream()

    def packed(self) -> torch.Tensor:
        out = []
        for p in self.parts:
            out.append(p.flatten())
        out = torch.cat(out)
        return out

    def first(self) -> torch.Tensor:
        out = self.parts[0]
        return out


def gather(buf: ShardBuffer, other) -> torch.Tensor:
    with torch.cuda.stream(buf.copy_stream):
        x = buf.packed()
    return x
'''


def test_param_field_kinds_and_rebound_result(tmp_path: Path) -> None:
    path = write(tmp_path, "shards.py", SHARDS)
    engine = engine_for(tmp_path)
    project = engine.project
    file = project.file(str(path))
    fn = file.functions["gather"]
    assert field_is_side(project, file, fn, "buf.copy_stream")
    assert not field_is_side(project, file, fn, "buf.home_stream")
    assert not field_is_side(project, file, fn, "buf.given_stream")  # (handed to its constructor)
    assert not field_is_side(project, file, fn, "other.copy_stream")  # (no annotation)
    assert field_is_current(project, file, fn, "buf.home_stream")
    assert not field_is_current(project, file, fn, "buf.copy_stream")
    assert not field_is_current(project, file, fn, "buf.default_lane")  # (maybe not the caller's current stream)
    assert computes_tensor(project, file, file.functions["ShardBuffer.packed"])
    assert not computes_tensor(project, file, file.functions["ShardBuffer.first"])  # (a field, not computed)


COARSE = '''
import torch


def exchange(x: torch.Tensor, side: torch.cuda.Stream, flags: list[int], modes: list[int]) -> None:
    buf = x * 2
    for f in flags:
        for m in modes:
            for k in modes:
                if f == m:
                    x.add_(1)
                elif f > m:
                    x.sub_(1)
                elif f < k:
                    x.mul_(2)
                else:
                    x.div_(2)
                if k == m:
                    x.add_(3)
                elif k > f:
                    x.sub_(3)
                else:
                    x.mul_(3)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.distributed.all_reduce(buf)
'''


def test_coarse_run_reports_a_plain_free_at_medium(tmp_path: Path) -> None:
    path = write(tmp_path, "coarse.py", COARSE)
    found = [f for f in lint_paths(tmp_path, [str(path)], [str(path)], min_confidence="low") if f.code == "SL301"]
    assert [(f.span.start_line, f.confidence.value) for f in found] == [(26, "medium")]
