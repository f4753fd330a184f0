"""compute_positions gives exactly LibCST's PositionProvider ranges."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from harness import FIXTURES
from streamlint.model.positions import compute_positions

TRICKY = (
    'import os; import sys\r\n'
    '@decorator(1)\r\n'
    'async def f(a, *, b=2) -> "T":\r\n'
    '    """doc\r\n    string"""\r\n'
    '    x = [i for i in range(3) if i]  # comment\r\n'
    '    with a as (b, c), d:\r\n'
    '        return f"{x!r:>{b}}" + \\\r\n'
    '            "tail"\r\n'
    'class C(Base, metaclass=M):\r\n'
    '\tdef g(self): return lambda q: q[1:2, ...]\r\n'
)


def _reference(module: cst.Module) -> dict:
    ranges = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return {node: (r.start.line, r.start.column, r.end.line, r.end.column) for node, r in ranges.items()}


@pytest.mark.parametrize("name", ["tricky", "rules", "projects"])
def test_same_ranges_as_position_provider(name: str) -> None:
    if name == "tricky":
        texts = [TRICKY, TRICKY.replace("\r\n", "\n"), ""]
    else:
        texts = [p.read_text(encoding="utf-8") for p in sorted((FIXTURES / name).rglob("*.py"))[:4]]
    for text in texts:
        module = cst.parse_module(text)
        assert compute_positions(module) == _reference(module)


@pytest.mark.parametrize("name", ["tricky", "projects"])
def test_lazy_table_gives_the_same_ranges_in_any_order(name: str) -> None:
    import random

    from streamlint.model.positions import PositionTable

    if name == "tricky":
        texts = [TRICKY, TRICKY.replace("\r\n", "\n"), "", "x = 1", "# only a comment\n\n"]
    else:
        texts = [p.read_text(encoding="utf-8") for p in sorted((FIXTURES / name).rglob("*.py"))[:6]]
    for seed, text in enumerate(texts):
        module = cst.parse_module(text)
        expected = compute_positions(module)
        nodes = list(expected)
        random.Random(seed).shuffle(nodes)
        table = PositionTable(module)
        assert {node: table.get(node) for node in nodes} == expected
        # asked for the first statement: the code generator stops right after it
        table = PositionTable(module)
        if module.body:
            first = module.body[0]
            assert table.get(first) == expected[first]
            assert module not in table.state.computed  # the generator stopped early
        assert table.get(cst.Name("unrelated")) is None


def _recorder() -> cst.CSTVisitor:
    import inspect

    namespace = {}
    for cls in vars(cst).values():
        if inspect.isclass(cls) and issubclass(cls, cst.CSTNode):
            namespace[f"visit_{cls.__name__}"] = lambda self, node: self.events.append(("visit", id(node)))
            namespace[f"leave_{cls.__name__}"] = lambda self, node: self.events.append(("leave", id(node)))
    namespace["visit_If"] = lambda self, node: self.events.append(("visit-if", id(node))) or False  # prune
    visitor = type("Recorder", (cst.CSTVisitor,), namespace)()
    visitor.events = []
    return visitor


def test_walk_visits_like_libcst() -> None:
    from streamlint.model.walk import walk

    texts = [TRICKY, 'x = f"{a:{b}>10}" f"{c!r}"\nif a:\n    pass\nelif b:\n    pass\n']
    texts += [p.read_text(encoding="utf-8") for p in sorted((FIXTURES / "projects").rglob("*.py"))[:6]]
    for text in texts:
        module = cst.parse_module(text)
        expected, actual = _recorder(), _recorder()
        module.visit(expected)
        walk(module, actual)
        assert actual.events == expected.events


def test_lexical_index_orders_like_positions() -> None:
    """enter(b) > exit(a) exactly when b starts after a ends (the program order rules rely on)."""
    from streamlint.model.syntax import lexical_index

    for path in sorted((FIXTURES / "projects").rglob("*.py"))[:8]:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        positions = compute_positions(module)
        index = lexical_index(module)
        names = [n for n in positions if isinstance(n, (cst.Name, cst.Call, cst.SimpleStatementLine))]
        for a in names[:60]:
            for b in names[:60]:
                after = positions[b][:2] > positions[a][2:]
                assert (index[id(b)][0] > index[id(a)][1]) == after, (path.name, a, b)


DECORATED = (
    '"""doc"""\n# header comment\n\nimport os; import sys\n\n\n# leading comment\n@decorator(1)\n\n'
    '# between decorators\n@other\nclass C:\n    x = 1\n\n\n@d\nasync def f():\n    pass\nif a:\n    b = (1,\n'
    '         2)\nelif c:\n    pass\nx = """multi\nline"""; y = 2\nfor i in range(3):\n    pass\nelse:\n    pass\n'
    'try:\n    pass\nexcept E:\n    pass\nwith a as b, c:\n    pass\nwhile x:\n    break\nz = 1  # trailing\n'
)


@pytest.mark.parametrize("name", ["tricky", "projects", "rules"])
def test_table_with_the_stdlib_tree_gives_the_same_ranges(name: str) -> None:
    """One statement generated alone, started at the stdlib tree's line, must give the sequential ranges."""
    import ast
    import random

    from streamlint.model.positions import PositionTable

    if name == "tricky":
        texts = [TRICKY, TRICKY.replace("\r\n", "\n"), DECORATED, DECORATED.replace("\n", "\r\n"),
                 DECORATED.rstrip("\n"), "x = 1\n", ""]
    else:
        texts = [p.read_text(encoding="utf-8") for p in sorted((FIXTURES / name).rglob("*.py"))[:12]]
    for seed, text in enumerate(texts):
        module = cst.parse_module(text)
        expected = compute_positions(module)
        nodes = list(expected)
        random.Random(seed).shuffle(nodes)
        table = PositionTable(module, ast.parse(text))
        assert {node: table.get(node) for node in nodes} == expected
        if len(module.body) > 2:  # the shortcut was taken, and stayed on
            table = PositionTable(module, ast.parse(text))
            middle = module.body[len(module.body) // 2]
            assert table.get(middle) == expected[middle]
            assert table._starts is not None and not table._started
