"""A large module parsed in pieces (streamlint/pieces.py) is the tree of a whole parse; the engine's findings
do not depend on it."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from streamlint import pieces
from streamlint.config import Settings
from streamlint.engine import Engine, _parse_unvalidated
from streamlint.registry import load_registry

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (ROOT / "fixtures").rglob("*.py") if p.stat().st_size > 600)


def _pieces(text: str, piece: int):
    return pieces.parse_in_pieces(text, ast.parse(text), _parse_unvalidated, piece=piece)


def test_every_fixture_in_pieces_is_its_whole_parse() -> None:
    cut = 0
    for path in FIXTURES:
        text = path.read_text(encoding="utf-8")
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        for piece in (120, 400):
            got = _pieces(text, piece)
            if got is None:
                continue
            cut += 1
            assert got.deep_equals(_parse_unvalidated(text)), (path, piece)
            assert got.code == text
    assert cut > len(FIXTURES)  # most fixtures were really cut (at both sizes)


GAPS = ["\n", "\n\n", "# a comment at column 0\n", "\n# section\n\n", "    \n", "\t\n", ""]
STATEMENTS = [
    "def f{n}(a, b):\n    return a + b\n",
    "class C{n}:\n    x = 1\n\n    def m(self):\n        pass\n",
    "class D{n}:\n    def m(self):\n        pass\n    # a footer comment of the class body\n",
    "@decorator\n# between decorator and def\ndef g{n}():\n    if x:\n        y = 1\n    else:\n        y = 2\n",
    "x{n} = [\n    1,\n    2,\n]\n",
    "if flag:\n  two = 2\n",
    "try:\n    pass\nexcept E:\n    pass\nfinally:\n    z = 0\n",
    "a{n} = 1; b{n} = 2\n",
    's{n} = """\nnot code\n  # not a comment\n"""\n',
    "y{n} = 1 + \\\n    2\n",
    "def h{n}():\n    pass\n        # an over-indented comment\n",
    "for i in range(3):\n\tpass\n",
]


def test_random_modules_in_pieces_are_their_whole_parse() -> None:
    cut = 0
    for seed in range(60):
        rng = random.Random(seed)
        head = rng.choice(["", "# header comment\n\n", '"""Docstring."""\n',
                           "#!/usr/bin/env python\n# coding: utf-8\n"])
        parts = [head]
        for n in range(rng.randrange(8, 40)):
            parts.append(rng.choice(GAPS))
            parts.append(rng.choice(STATEMENTS).format(n=n))
        parts.append(rng.choice(["", "\n# trailing comment\n", "\n\n", "    # indented trailing comment\n"]))
        text = "".join(parts)
        if rng.random() < 0.3:
            text = text.rstrip("\n")  # no newline at the end
        got = pieces.parse_in_pieces(text, ast.parse(text), _parse_unvalidated, piece=rng.choice([1, 40, 150]))
        if got is not None:
            cut += 1
            assert got.deep_equals(_parse_unvalidated(text)), text
            assert got.code == text
    assert cut >= 40


def test_refused_where_a_cut_would_change_ownership() -> None:
    # the only gap between the two statements holds an indented comment (the class body's footer)
    text = "class A:\n    x = 1\n    # owned by A's body\ny = 2\n" * 1
    assert pieces.cut_lines(text, ast.parse(text), 1) == []
    text = "x = 1\ny = 2\nz = 3\n"
    assert pieces.cut_lines(text, ast.parse(text), 1) == [1, 2]
    assert pieces.parse_in_pieces("x = 1\r\ny = 2\r\n" * 10, ast.parse("x = 1\ny = 2\n" * 10), _parse_unvalidated,
                                  piece=1) is None


def test_module_without_an_indented_block() -> None:
    """No INDENT anywhere (one-line suites only): the default indentation is LibCST's, the tokenizer ends."""
    text = "".join(f"x{n} = {n}\ndef f{n}(): return {n}\nclass C{n}: pass\n" for n in range(50))
    got = pieces.parse_in_pieces(text, ast.parse(text), _parse_unvalidated, piece=100)
    assert got is not None and got.deep_equals(_parse_unvalidated(text))


def test_findings_do_not_depend_on_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fixture with findings, linted whole and in pieces of a few hundred characters: same findings."""
    registry = load_registry()

    def lint(piece: int) -> dict:
        monkeypatch.setattr(pieces, "PIECE_CHARS", piece)
        out = {}
        for path in FIXTURES[::4]:
            engine = Engine(Settings(), registry, project_root=str(path.parent))
            out[str(path)] = [(f.code, f.span, f.message) for f in engine.lint_file(str(path)).findings]
        return out

    whole = lint(1 << 40)
    assert any(whole.values())
    assert lint(150) == whole


def test_skeleton_serves_the_cuts_and_the_statement_starts() -> None:
    """What the piecewise parse and the position table read of a stdlib tree is in its skeleton."""
    from streamlint.model.positions import _statement_starts

    compared = 0
    for path in FIXTURES:
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        bones = pieces.skeleton(tree)
        assert [type(s) for s in bones.body] == [type(s) for s in tree.body]
        for piece in (120, 400):
            assert pieces.cut_lines(text, bones, piece) == pieces.cut_lines(text, tree, piece), path
        assert pieces._default_indent(text, bones) == pieces._default_indent(text, tree), path
        module = _parse_unvalidated(text)
        assert _statement_starts(module, bones) == _statement_starts(module, tree), path
        compared += _statement_starts(module, tree) is not None
    assert compared > len(FIXTURES) // 2


def test_large_module_parsed_once_and_lightened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large module (pieces.large) keeps the skeleton of its stdlib tree and its summary, not the tree: when
    it is parsed first for another file's question and linted after, it is parsed once (stdlib and LibCST), and
    its findings, positions and summary are those of a small module's path; with a suppression comment the
    whole tree stays (the suppressions read every statement)."""
    from streamlint import engine as engine_mod
    from streamlint.model.summary import summarize

    registry = load_registry()
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    body = "\n\n".join(f"def helper_{i}(x):\n    y = x + {i}\n    return y\n" for i in range(60))
    fixture = (ROOT / "fixtures" / "rules" / "sl201_event_wrapper_own_stream.py").read_text(encoding="utf-8")
    (pkg / "big.py").write_text(fixture + "\n\n" + body, encoding="utf-8")
    (pkg / "user.py").write_text(
        "import torch\nfrom pkg.big import helper_3\n\n\ndef f(x):\n    s = torch.npu.Stream()\n"
        "    with torch.npu.stream(s):\n        return helper_3(x)\n", encoding="utf-8")
    big_text = (pkg / "big.py").read_text(encoding="utf-8")
    user_text = (pkg / "user.py").read_text(encoding="utf-8")

    def lint(piece: int, order: list[str], count: list[str]) -> dict:
        monkeypatch.setattr(pieces, "PIECE_CHARS", piece)
        real = ast.parse

        def counting(text, *args, **kwargs):
            count.append(len(text))
            return real(text, *args, **kwargs)

        monkeypatch.setattr(engine_mod.ast, "parse", counting)
        engine = Engine(Settings(), registry, project_root=str(tmp_path))
        out = {name: [(f.code, f.span, f.message) for f in engine.lint_file(str(pkg / name)).findings]
               for name in order}
        monkeypatch.setattr(engine_mod.ast, "parse", real)
        return out

    whole = lint(1 << 40, ["user.py", "big.py"], [])
    assert whole["big.py"]  # the fixture's findings (with their positions)
    for order in (["user.py", "big.py"], ["big.py", "user.py"]):
        parses: list[str] = []
        assert lint(200, order, parses) == {k: whole[k] for k in order}
        # big.py is parsed by Python's parser once, in pieces (never its whole tree): its skeleton and summary
        # served its own lint
        assert parses.count(len(big_text)) == 0 and sum(n for n in parses if n > len(user_text)) == len(big_text), parses
    data = (pkg / "big.py").read_bytes()
    tree, summary = engine_mod._lighten(data.decode(), data, ast.parse(data))
    assert summary == summarize(data) and tree is not None and all(not getattr(s, "body", []) for s in tree.body)
    text = data.decode() + "\nz = 1  # noqa: SL201\n"
    kept, none = engine_mod._lighten(text, text.encode(), ast.parse(text))
    assert none is None and kept is not None and any(getattr(s, "body", []) for s in kept.body)


def test_the_engine_s_parse_shares_whitespace_leaves_and_is_libcst_s_tree() -> None:
    """_parse_unvalidated builds each whitespace leaf (SimpleWhitespace, Newline) once per value within a tree
    (issue 15: a third of a tree's nodes): the tree is LibCST's own parse (deep_equals, same code) over every
    fixture; the package's node classes are restored after each parse, also one that fails."""
    import libcst as cst

    classes = (cst.SimpleWhitespace, cst.Newline)
    shared = 0
    for path in FIXTURES:
        text = path.read_text(encoding="utf-8")
        try:
            plain = cst.parse_module(text)
        except cst.ParserSyntaxError:
            with pytest.raises(cst.ParserSyntaxError):
                _parse_unvalidated(text)
            assert (cst.SimpleWhitespace, cst.Newline) == classes
            continue
        tree = _parse_unvalidated(text)
        assert (cst.SimpleWhitespace, cst.Newline) == classes
        assert tree.deep_equals(plain) and tree.code == text, path
        leaves, stack = [], [tree]
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            if isinstance(node, (cst.SimpleWhitespace, cst.Newline)):
                leaves.append(node)
        # one object per (class, value) in the tree, however many places hold it
        assert len({id(n) for n in leaves}) == len({(type(n), n.value) for n in leaves}), path
        shared += len(leaves) - len({id(n) for n in leaves})
    assert shared > 100 * len(FIXTURES)  # (most leaves are shared)
    # LibCST's native parser looks the classes up at each parse (no cached factory): a plain parse after ours
    # builds its own leaves, and the next of ours shares nothing with the last one (its memo died with it)
    text = "a = 1\nb = 2\n\nc = 3\n"
    ours, plain, again = _parse_unvalidated(text), cst.parse_module(text), _parse_unvalidated(text)

    def leaf_ids(tree: "cst.Module") -> list[int]:
        found, stack = [], [tree]
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            if isinstance(node, (cst.SimpleWhitespace, cst.Newline)):
                found.append(id(node))
        return found
    assert len(set(leaf_ids(plain))) == len(leaf_ids(plain))
    assert len(set(leaf_ids(ours))) < len(leaf_ids(ours)) and not set(leaf_ids(ours)) & set(leaf_ids(again))


def _bones(tree: ast.Module) -> list:
    return [(type(s).__name__, s.lineno, s.col_offset, s.end_lineno, s.end_col_offset, hasattr(s, "body"),
             [(d.lineno, d.col_offset) for d in getattr(s, "decorator_list", None) or []]) for s in tree.body]


def _stdlib_in_pieces(text: str, piece: int):
    from streamlint.model.summary import MayCompile, SummaryParts

    parts = SummaryParts()
    try:
        bones = pieces.stdlib_skeleton(text, parts.add, piece=piece)
    except MayCompile:  # (the whole tree answers: the skeleton is checked without a summary)
        return pieces.stdlib_skeleton(text, lambda tree: None, piece=piece), None
    return bones, (parts.summary() if bones is not None else None)


def _whole(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def test_stdlib_pieces_give_the_whole_parse_s_skeleton_and_summary() -> None:
    """The stdlib parse in pieces (a large module's guard, issue 15: its whole tree is never held) gives the
    skeleton of the whole parse and its module summary, over every fixture cut in pieces of a few dozen to a few
    hundred characters; a module that may compile has no summary from its pieces (the whole tree answers)."""
    from streamlint.model.summary import summarize

    cut = summarised = 0
    for path in FIXTURES:
        text = path.read_text(encoding="utf-8")
        whole = _whole(text)
        for piece in (40, 150, 500):
            bones, summary = _stdlib_in_pieces(text, piece)
            if bones is None:
                continue
            assert whole is not None, path
            assert _bones(bones) == _bones(pieces.skeleton(whole)), (path, piece)
            cut += 1
            expected = summarize(text.encode(), whole)
            if summary is None:
                assert expected.compiles or expected.compile_names, path
            else:
                assert summary == expected, (path, piece)
                summarised += 1
    assert cut > 2 * len(FIXTURES) and summarised > len(FIXTURES)


_TRICKY = '''import torch


def first(x):
    doc = """
line at column 0
def looks_like_code(y):
    return y
"""
    return x


value = call(
1,
2)


if value:
    pass
else:
    pass


try:
    import foo
except ImportError:
    foo = None
finally:
    pass


@decorate
@decorate_more(
    arg=1)
def decorated():
    return 1


total = 1 + \\
2


class Holder:
    size: int = 0
    """
x = 1
"""
'''


def test_stdlib_pieces_refuse_every_text_python_rejects() -> None:
    """Never a skeleton for a text the whole parse rejects: random damage (a character deleted, a quote, a bracket,
    a clause or an indented line inserted) to fixtures and to a module whose strings, brackets, continuations,
    clauses and decorators span lines at column 0, cut in pieces of every size from a few dozen characters; where
    the pieces are accepted, the skeleton is the whole parse's."""
    rng = random.Random(15)
    texts = [_TRICKY * 3] + [p.read_text(encoding="utf-8") for p in FIXTURES[::7]]
    damage = ['"""', "'", "(", "[", ")", "else:\n", "except:\n", "@deco\n", "    x = 1\n", "\\\n", "\x00", "def\n"]
    refused = accepted = 0
    for text in texts:
        for _ in range(25):
            at = rng.randrange(len(text))
            at = text.rfind("\n", 0, at) + 1 if rng.random() < 0.5 else at  # often at a line start
            if rng.random() < 0.3:
                broken = text[:at] + text[at + 1:]
            else:
                broken = text[:at] + rng.choice(damage) + text[at:]
            whole = _whole(broken)
            for piece in (30, 90, 300):
                bones, _ = _stdlib_in_pieces(broken, piece)
                if whole is None:
                    assert bones is None, (broken[max(0, at - 80):at + 80], piece)
                    refused += 1
                elif bones is not None:
                    assert _bones(bones) == _bones(pieces.skeleton(whole))
                    accepted += 1
    assert refused > 100 and accepted > 100
    text = _TRICKY * 3
    bones, _ = _stdlib_in_pieces(text, 40)
    assert bones is not None and _bones(bones) == _bones(pieces.skeleton(ast.parse(text)))


def test_a_large_module_s_summary_is_taken_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """``summarize`` of a large module that nobody parsed (a project-wide question) parses it in pieces, with the
    summary of the whole tree; a text ``ast.parse`` may decode otherwise (an encoding declaration) is parsed whole."""
    from streamlint.model import summary as summary_mod

    monkeypatch.setattr(pieces, "PIECE_CHARS", 120)
    taken = 0
    for path in FIXTURES[::3]:
        data = path.read_bytes()
        whole = _whole(data.decode("utf-8"))
        expected = summary_mod.summarize(data, whole) if whole is not None else summary_mod.ModuleSummary(None, True)
        assert summary_mod.summarize(data) == expected, path
        taken += summary_mod._summarize_in_parts(data) is not None
    assert taken > len(FIXTURES[::3]) // 2
    declared = b"# -*- coding: latin-1 -*-\n" + FIXTURES[0].read_bytes()
    assert summary_mod._summarize_in_parts(declared) is None


def test_the_piecewise_parse_reads_the_piece_size_when_called(monkeypatch: pytest.MonkeyPatch) -> None:
    """``parse_in_pieces`` without a ``piece`` uses :data:`pieces.PIECE_CHARS` as it is when called (a test that
    makes it small splits the LibCST parse too), and the tree is the whole parse's."""
    text = next(p.read_text(encoding="utf-8") for p in FIXTURES if p.stat().st_size > 3000)
    tree = ast.parse(text)
    assert pieces.parse_in_pieces(text, tree, _parse_unvalidated) is None  # (small for the default size)
    monkeypatch.setattr(pieces, "PIECE_CHARS", 300)
    got = pieces.parse_in_pieces(text, tree, _parse_unvalidated)
    assert got is not None and got.deep_equals(_parse_unvalidated(text))


def test_a_stdlib_piece_grows_to_a_bounded_size_then_the_whole_text_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece that does not parse and cannot be ended sooner (a string opened on its first line) is made longer at
    each retry, up to ``_STDLIB_GROWTH`` pieces; past that the text is left to the whole parse (None)."""
    piece = 200
    lines = "".join(f"row {i} of a long literal\n" for i in range(400))  # ~10,000 characters at column 0
    text = "head = 1\n" * 40 + 'BLOB = """\n' + lines + '"""\n' + "tail = 2\n" * 40
    seen: list[int] = []
    parse = ast.parse

    def counting(source, *args, **kwargs):
        seen.append(len(source))
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(pieces.ast, "parse", counting)
    assert pieces.stdlib_skeleton(text, lambda tree: None, piece=piece) is None
    assert max(seen) < piece * (pieces._STDLIB_GROWTH + 2)  # (a cut line past the capped end, at most)
    seen.clear()
    monkeypatch.setattr(pieces, "_STDLIB_GROWTH", 1 << 10)  # no cap: the piece grows until the string fits
    assert pieces.stdlib_skeleton(text, lambda tree: None, piece=piece) is not None
