"""A field of ``self`` is reached from outside its class when other code reads it (``engine.stream``), not when a
function of the same name is called (``torch.cuda.stream(self.stream)``): leaves.stream_exposed (review of session
36: a field called ``stream`` counted as exposed in every file entering a stream scope)."""

from __future__ import annotations

from pathlib import Path

from tests.harness import lint_paths, write

# a pool whose methods each join the work they queue on its own stream, but swap_in
POOL = """
    import torch


    class BlockPool:
        def __init__(self, num_blocks, block_numel):
            self.gpu = torch.empty(num_blocks, block_numel, device="cuda")
            self.cpu = torch.empty(num_blocks, block_numel, pin_memory=True)
            self.stream = torch.cuda.Stream()

        def swap_out(self, ids):
            with torch.cuda.stream(self.stream):
                for i in ids:
                    self.cpu[i].copy_(self.gpu[i], non_blocking=True)
            self.stream.synchronize()

        def swap_in(self, ids):
            with torch.cuda.stream(self.stream):
                for i in ids:
                    self.gpu[i].copy_(self.cpu[i], non_blocking=True)

        def view(self, i):
            return self.gpu[i]
"""

SCHED = """
    import torch

    from pool.blocks import BlockPool


    class Scheduler:
        def __init__(self, pool: BlockPool):
            self.pool = pool

        def resume(self, ids, q):
            self.pool.swap_in(ids)
            return q @ self.pool.view(ids[0])
"""

# the scheduler reads the pool's stream field: code outside the class may join it
READER = SCHED + """
        def fence(self):
            torch.cuda.current_stream().wait_stream(self.pool.stream)
"""


def _sl201(root: Path, owner: Path) -> list:
    files = sorted(str(p) for p in root.rglob("*.py"))
    return [f.span.start_line for f in lint_paths(root, files) if f.path == str(owner) and f.code == "SL201"]


def test_a_stream_scope_call_does_not_expose_the_field(tmp_path: Path) -> None:
    write(tmp_path, "pool/__init__.py", "")
    owner = write(tmp_path, "pool/blocks.py", POOL)
    write(tmp_path, "pool/sched.py", SCHED)
    assert _sl201(tmp_path, owner) == [20]


def test_a_field_read_from_outside_exposes_it(tmp_path: Path) -> None:
    write(tmp_path, "pool/__init__.py", "")
    owner = write(tmp_path, "pool/blocks.py", POOL)
    write(tmp_path, "pool/sched.py", READER)
    assert _sl201(tmp_path, owner) == []
