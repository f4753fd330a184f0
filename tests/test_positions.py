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


@pytest.mark.parametrize("with_tree", [False, True, "text"])
@pytest.mark.parametrize("name", ["tricky", "projects", "rules"])
def test_position_table_gives_the_same_ranges_in_any_order(name: str, with_tree: bool | str) -> None:
    """Asked in any order, the lazy table gives compute_positions' ranges: generating in order (no
    stdlib tree), or one statement alone from the stdlib tree's line (checked against the next one)."""
    import ast
    import random

    from streamlint.model.positions import PositionTable

    if name == "tricky":
        texts = [TRICKY, TRICKY.replace("\r\n", "\n"), DECORATED, DECORATED.replace("\n", "\r\n"),
                 DECORATED.rstrip("\n"), "x = 1", "", "# only a comment\n\n",
                 DECORATED + "\n# a trailing comment\n\n", DECORATED.replace("\n", "\r\n") + "# footer",
                 "class A:\n    def f(self):\n        return 1\n    # the end", "if x:\n    y = 1\r\n\r\n"]
    else:
        texts = [p.read_text(encoding="utf-8") for p in sorted((FIXTURES / name).rglob("*.py"))[:12]]
    for seed, text in enumerate(texts):
        module = cst.parse_module(text)
        expected = compute_positions(module)
        nodes = list(expected)
        random.Random(seed).shuffle(nodes)

        def table() -> PositionTable:
            return PositionTable(module, ast.parse(text) if with_tree else None,
                                 text if with_tree == "text" else None)

        every = table()
        assert {node: every.get(node) for node in nodes} == expected
        assert every.get(cst.Name("unrelated")) is None
        if not module.body:
            continue
        if not with_tree:  # asked for the first statement: the code generator stops right after it
            first, one = module.body[0], table()
            assert one.get(first) == expected[first]
            assert module not in one.state.computed
        elif len(module.body) > 2:  # asked for a middle statement: generated alone, the shortcut stays on
            middle, one = module.body[len(module.body) // 2], table()
            assert one.get(middle) == expected[middle]
            assert one._starts is not None and not one._started
        if with_tree == "text":  # the last statement alone too: checked against the source's line count
            last, one = module.body[-1], table()
            assert one.get(last) == expected[last]
            if one._starts is not None:
                assert not one._started


CLASSES = (
    "import os\n\n\nclass A(Base):\n    '''doc'''\n    x = 1; y = 2\n\n    # about f\n    @staticmethod\n"
    "    @other(1)\n    def f(a):\n        return g(a,\n                 2)\n\n    def h(self):\n        pass\n"
    "        # indented comment at the end of the block\n\n\n# module comment\nclass B:\n\tdef k(self): return 1\n"
    "\tz = 3\n\n\ny = A.f(1)\n"
)


@pytest.mark.parametrize("text", [CLASSES, CLASSES.replace("\n", "\r\n"), CLASSES + "class C:\n    a = 1\n    b = 2",
                                  CLASSES + "class D:\n    a = 1\n    # last\n# footer\n",
                                  "class E:\n    def f(self):\n        x = 1\n\n\n    def g(self):\n        y = 2\n"])
def test_a_class_member_is_generated_alone(text: str) -> None:
    """Asked for a node in a method of a top-level class, the table generates that method alone (from the
    stdlib tree's line, checked against the next member's or the block's end) and gives compute_positions'
    ranges; the class itself is not generated."""
    import ast
    import random

    from streamlint.model.positions import PositionTable

    module = cst.parse_module(text)
    expected = compute_positions(module)
    classes = [(i, s) for i, s in enumerate(module.body) if isinstance(s, cst.ClassDef)]
    generated = 0
    for index, cls in classes:
        for k, member in enumerate(cls.body.body):
            inner = [n for n in expected if isinstance(n, (cst.Name, cst.Call, cst.BaseSmallStatement, cst.Integer))
                     and _within(member, n)] or [member]
            table = PositionTable(module, ast.parse(text), text)
            node = random.Random(k).choice(inner)
            assert table.get(node) == expected[node]
            if (index, k) in table._generated_members and not table._generated and not table._started:
                generated += 1
                assert cls not in table.state.computed
            nodes = list(expected)
            random.Random(index).shuffle(nodes)
            assert {n: table.get(n) for n in nodes} == expected
    assert generated >= sum(len(c.body.body) for _, c in classes) - 1


def _within(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    stack = [root]
    while stack:
        current = stack.pop()
        if current is node:
            return True
        stack.extend(current.children)
    return False
