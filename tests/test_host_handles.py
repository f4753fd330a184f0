"""A torch function's non-tensor result used only through methods no tensor has is a host handle
(flow/hostnames.host_method_names); anything that may be a tensor keeps its findings."""

import ast

from bench.tensornames import class_names
from harness import lint_text
from streamlint.model.tensornames import TENSOR_NAMES

HEAD = '''import torch
from torch.distributed._symmetric_memory import get_symm_mem_workspace

'''


def codes(code: str, tmp_path) -> list[tuple[str, int]]:
    return sorted((f.code, f.span.start_line) for f in lint_text(HEAD + code, tmp=tmp_path) if f.code[:3] in ("SL2", "SL3"))


def test_workspace_handle_used_through_its_methods_is_no_tensor(tmp_path):
    code = '''
def signal(group, n, side: torch.cuda.Stream, peer: int):
    mem = get_symm_mem_workspace(group.group_name, n)
    with torch.cuda.stream(side):
        mem.put_signal(peer, 0)
'''
    assert codes(code, tmp_path) == []


def test_handle_also_handed_to_a_call_keeps_its_reading(tmp_path):
    code = '''
def signal(group, n, side: torch.cuda.Stream, peer: int, consume):
    mem = get_symm_mem_workspace(group.group_name, n)
    with torch.cuda.stream(side):
        mem.put_signal(peer, 0)
    consume(mem)
'''
    assert [c for c, _ in codes(code, tmp_path)] != []


def test_a_name_bound_twice_keeps_its_reading(tmp_path):
    code = '''
def signal(group, n, side: torch.cuda.Stream, peer: int):
    mem = get_symm_mem_workspace(group.group_name, n)
    with torch.cuda.stream(side):
        mem.put_signal(peer, 0)
    mem = get_symm_mem_workspace(group.group_name, 2 * n)
    mem.put_signal(peer, 1)
'''
    assert [c for c, _ in codes(code, tmp_path)] != []


def test_tensor_names_hold_the_tensor_api():
    for name in ("copy_", "record_stream", "view", "contiguous", "to", "cuda", "wait", "to_local", "untyped_storage"):
        assert name in TENSOR_NAMES
    for name in ("put_signal", "get_buffer", "items", "__init__"):
        assert name not in TENSOR_NAMES


def test_generator_reads_members_under_conditions():
    source = '''
class Tensor:
    def view(self): ...
    if TYPE_CHECKING:
        def hidden(self): ...
    else:
        shape: int
    try:
        def tried(self): ...
    except ImportError:
        def fallback(self): ...
'''
    ast.parse(source)
    assert class_names(source, "Tensor") == {"view", "hidden", "shape", "tried", "fallback"}
