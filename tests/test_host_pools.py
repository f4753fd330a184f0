"""Pools of host buffers kept on an object (model/hostpools.py): which fills keep a field a pool."""

import textwrap

import libcst as cst

from streamlint.model.file import FileModel
from streamlint.model.hostpools import host_pool_field, pool_key
from streamlint.source import SourceFile

HEAD = """
from collections import defaultdict, deque
import torch


class Stager:
    def __init__(self):
        self.free = defaultdict(deque)
"""


def _pool(body: str, attr: str = "free") -> bool:
    code = textwrap.dedent(HEAD).lstrip("\n") + textwrap.indent(textwrap.dedent(body), "    ")
    source = SourceFile.from_bytes("stager.py", code.encode())
    file = FileModel(source, cst.parse_module(code), "stager", False)
    return host_pool_field(file, file.classes["Stager"], attr)


def test_host_fills_make_a_pool() -> None:
    assert _pool("""
        def put_back(self, h):
            if h.device.type == "cpu":
                self.free[h.shape].append(h)

        def fresh(self, t):
            buf = torch.empty_like(t, device="cpu", pin_memory=True)
            self.free[t.shape].appendleft(buf)
    """)
    assert _pool("""
        def keep(self, t):
            self.free[t.shape] = t.cpu()
    """)


def test_other_fills_make_no_pool() -> None:
    assert not _pool("""
        def put_back(self, h):
            self.free[h.shape].append(h)
    """)  # (not tested to be on the host)
    assert not _pool("""
        def put_back(self, h):
            if h.device.type == "cpu":
                self.free[h.shape].append(h)
            self.free[h.shape].append(h.cuda())
    """)
    assert not _pool("""
        def put_back(self, hs):
            self.free[0].extend(hs)
    """)
    assert not _pool("""
        def put_back(self, h):
            if h.device.type == "cpu":
                slot = self.free[h.shape]
                slot.append(h)
    """)  # (filled through a name of a slot)
    assert not _pool("""
        def put_back(self, h):
            register(self.free, h)
    """)  # (handed to a call)
    assert not _pool("""
        def reset(self, blocks):
            self.free = deque(blocks)
    """)  # (rebound to a non-empty container)
    assert not _pool("""
        def peek(self):
            return None
    """)  # (nothing is ever stored)


def test_pool_key() -> None:
    assert pool_key("self.free[t.shape]") == "free"
    assert pool_key("self.free") == "free"
    assert pool_key("free[0]") is None
    assert pool_key("self.a.b") is None
