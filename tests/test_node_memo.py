"""syntax.node_memo / local_nodes: the memoised walk answers exactly what the plain walk does, never answers
for another node that reuses a dropped node's id, and stays bounded."""

from __future__ import annotations

import libcst as cst

from streamlint.model import syntax
from streamlint.model.syntax import _local_nodes, local_nodes, node_memo

SOURCE = '''
def outer(x, stream):
    with torch.cuda.stream(stream):
        y = x * 2
    def inner(z):
        return z.record_stream(stream)
    f = lambda q: q + 1
    class Box:
        field = y
    return [inner(v) for v in (y, f(x))]
'''


def _fn() -> cst.FunctionDef:
    return cst.parse_module(SOURCE).body[0]


def test_memoised_walk_equals_plain_walk():
    fn = _fn()
    for node in (fn, fn.body):
        plain = list(_local_nodes(node))
        assert list(local_nodes(node)) == plain
        assert list(local_nodes(node)) == plain  # the second (memoised) answer too
        inner = next(n for n in plain if isinstance(n, cst.FunctionDef) and n is not fn)
        assert inner.name.value == "inner" and not any(n is inner.body for n in plain)  # (not entered)


def test_memo_checks_node_identity():
    calls = []

    def count(node):
        calls.append(node)
        return len(calls)

    a, b = _fn(), _fn()
    assert node_memo("t-identity", a, count) == 1
    assert node_memo("t-identity", a, count) == 1
    syntax._NODE_MEMO[("t-identity", id(b))] = (a, 99)  # a stale entry under b's id must not answer for b
    assert node_memo("t-identity", b, count) == 2


def test_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(syntax, "_NODE_MEMO_SIZE", 5)
    nodes = [cst.Name(f"n{i}") for i in range(20)]
    for n in nodes:
        node_memo("t-bound", n, lambda node: node.value)
    assert len(syntax._NODE_MEMO) <= 5
    assert node_memo("t-bound", nodes[-1], lambda node: "recomputed") == nodes[-1].value
