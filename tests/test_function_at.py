"""``devicenames.function_at`` asks positions only of the functions in the node's own top-level statement (or
statement of a top-level class's body): its answers must be those of the scan over every function of the file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from streamlint._lazy import cst
from streamlint.model.devicenames import function_at
from streamlint.model.file import FileModel
from streamlint.model.walk import children
from streamlint.source import SourceFile

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "fixtures").rglob("*.py"))[::13] + sorted((ROOT / "streamlint" / "model" / "flow").glob("*.py"))[:6]

EXTRA = '''
import torch


@decorate(lambda: torch.npu.current_stream())
def outer(x):
    @wraps(outer)
    def inner(y):
        return y.record_stream(torch.npu.current_stream())
    return inner


class Side:
    @staticmethod
    def make(s=torch.npu.Stream()):
        def helper():
            pass
        return s

    def run(self, x):
        with torch.npu.stream(self.s):
            return x * 2

    def run(self, x):  # redefined: the file's functions keep the last one
        return x
'''


def _full_scan(file: FileModel, node: cst.CSTNode):
    span = file.span(node)
    best, best_size = None, None
    for fn in file.functions.values():
        outer = file.span(fn.node)
        if (outer.start_line, outer.start_col) <= (span.start_line, span.start_col) \
                and (span.end_line, span.end_col) <= (outer.end_line, outer.end_col):
            size = outer.end_line - outer.start_line
            if best_size is None or size < best_size:
                best, best_size = fn, size
    return best


def _model(text: str, with_tree: bool) -> FileModel:
    source = SourceFile.from_bytes("m.py", text.encode("utf-8"))
    model = FileModel(source, cst.parse_module(text), "m", False)
    if with_tree:
        model.__dict__["_ast_tree"] = ast.parse(text)
    return model


def _nodes(root: cst.CSTNode) -> list[cst.CSTNode]:
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(children(node))
    return out


@pytest.mark.parametrize("with_tree", [True, False])
def test_function_at_answers_as_the_scan_of_every_function(with_tree: bool) -> None:
    texts = [EXTRA] + [p.read_text(encoding="utf-8") for p in FILES]
    checked = 0
    for text in texts:
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        fast, slow = _model(text, with_tree), _model(text, with_tree)
        pairs = zip(_nodes(fast.module), _nodes(slow.module))
        for a, b in list(pairs)[::3]:  # (in an order that is not the file's, so the walk is met part-way)
            got, want = function_at(fast, a), _full_scan(slow, b)
            assert (got.qualname if got else None) == (want.qualname if want else None), (text[:80], a)
            checked += 1
    assert checked > 5000
