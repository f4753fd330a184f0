"""A method's callers are searched by name: a call of another class's method of the same name is no caller of it
(selfjoins.caller_joins_after, leaves.callers_view; review of session 36). Its receiver is resolved as
joinowners.unrelated_receiver does: a parameter every call binds to ``self`` of an unrelated class, an annotated
parameter, a local or a field constructing an unrelated class."""

from __future__ import annotations

from pathlib import Path

from tests.harness import lint_paths, write

POOL = """
    import torch


    class BlockPool:
        def __init__(self, num_blocks, block_numel):
            self.gpu = torch.empty(num_blocks, block_numel, device="cuda")
            self.cpu = torch.empty(num_blocks, block_numel, pin_memory=True)
            self.copy_stream = torch.cuda.Stream()

        def swap_out(self, ids):
            with torch.cuda.stream(self.copy_stream):
                for i in ids:
                    self.cpu[i].copy_(self.gpu[i], non_blocking=True)
            self.copy_stream.synchronize()

        def swap_in(self, ids):
            with torch.cuda.stream(self.copy_stream):
                for i in ids:
                    self.gpu[i].copy_(self.cpu[i], non_blocking=True)

        def view(self, i):
            return self.gpu[i]
"""

# a host-side archive with a method of the same name, restored through an untyped helper that synchronises after
TAPE = """
    import torch


    def restore(arch, ids):
        arch.swap_in(ids)
        torch.cuda.synchronize()


    class TapeArchive:
        def __init__(self, path):
            self.path = path
            self.loaded = {}

        def swap_in(self, ids):
            for i in ids:
                self.loaded[i] = torch.load(f"{self.path}/{i}.pt", map_location="cuda")

        def warm(self, ids):
            restore(self, ids)
"""

# the same helper, also handed the pool: a real caller that joins after its call
MIXED = """
    import torch

    from pool.blocks import BlockPool


    def restore(arch, ids):
        arch.swap_in(ids)
        torch.cuda.synchronize()


    def resume(pool: BlockPool, ids):
        restore(pool, ids)
"""


def _sl201(root: Path, owner: Path) -> list:
    files = sorted(str(p) for p in root.rglob("*.py"))
    return [f for f in lint_paths(root, files, min_confidence="low") if f.path == str(owner) and f.code == "SL201"]


def test_another_class_method_of_the_same_name_is_no_caller(tmp_path: Path) -> None:
    write(tmp_path, "pool/__init__.py", "")
    owner = write(tmp_path, "pool/blocks.py", POOL)
    write(tmp_path, "pool/tape.py", TAPE)
    found = _sl201(tmp_path, owner)
    assert [f.span.start_line for f in found] == [20], [(f.span.start_line, f.message) for f in found]


def test_a_caller_that_may_be_the_class_still_joins(tmp_path: Path) -> None:
    write(tmp_path, "pool/__init__.py", "")
    owner = write(tmp_path, "pool/blocks.py", POOL)
    write(tmp_path, "pool/tape.py", MIXED)
    assert _sl201(tmp_path, owner) == []
