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
