"""A module reached by another file's question is parsed with its large displays of numbers reduced to one
number (streamlint/numdisplays.py, issue 15): every line keeps its length, every node outside a display its
position, the answers are those of a whole parse, and a reduced module that is linted is parsed whole."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from harness import engine_for
from streamlint import numdisplays
from streamlint.engine import _parse_unvalidated
from streamlint.model.positions import compute_positions
from test_scale import _codes, _project

from streamlint._lazy import cst


def _table(rows: int, cols: int, sign: bool = True) -> str:
    """A literal matrix of ``rows`` x ``cols`` numbers, one row per line (a rotation table, a codebook...)."""
    row = ",".join(("+1" if (r * 7 + c) % 3 else "-1") if sign else str(r * cols + c)
                   for r in range(1) for c in range(cols))
    return "[\n" + "".join(f"    [{row}],\n" for _ in range(rows)) + "]"


SERVING = '''\
"""Rotation tables for quantised serving: the kernel rotates activations before the int4 matmul."""
import torch

ROTATION_64 = {table}
CODEBOOK = ({flat})  # é: the columns of the stdlib's tree are bytes, LibCST's are characters
SCALES = {{{pairs}}}


def rotation(device):
    return torch.tensor(ROTATION_64, device=device)


def prefetch(weights, stream):
    with torch.cuda.stream(stream):
        return [w.to("cuda", non_blocking=True) for w in weights]
'''


def _serving() -> str:
    flat = ", ".join(f"{k * 0.5:.1f}" for k in range(1100))
    pairs = ", ".join(f"{k}: {-k}" for k in range(600))
    return SERVING.format(table=_table(32, 40), flat=flat, pairs=pairs)


def _positions(module: "cst.Module") -> list[tuple[str, tuple[int, int, int, int]]]:
    """The range of every name and string of the module, in order (none of them is inside a number display)."""
    ranges = compute_positions(module)
    found: list[tuple[str, tuple[int, int, int, int]]] = []
    stack = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Name, cst.SimpleString)):
            found.append((node.value, ranges[node]))
        stack.extend(reversed(node.children))
    return found


def test_a_reduced_module_keeps_every_line_and_every_position_outside_its_displays() -> None:
    text = _serving()
    reduced = numdisplays.lightened(text, ast.parse(text))
    assert reduced is not None and reduced != text
    assert [len(line) for line in reduced.split("\n")] == [len(line) for line in text.split("\n")]
    whole, light = _parse_unvalidated(text), _parse_unvalidated(reduced)
    values = [stmt.body[0].value for stmt in light.body[2:5]]
    assert [(type(v).__name__, len(v.elements)) for v in values] == [("List", 1), ("Tuple", 1), ("Dict", 1)]
    assert light.code == reduced
    assert _positions(light) == _positions(whole)
    assert len(light.body) == len(whole.body)


@pytest.mark.parametrize("display", [
    "[" + ", ".join(["1"] * 1023) + "]",  # fewer numbers than the bound
    "[" + ", ".join(["1"] * 1100) + ", 'cuda']",  # a string: may name a device, a mode, a tag
    "[" + ", ".join(["1"] * 1100) + ", x]",  # a name
    "[" + ", ".join(["1"] * 1100) + ", *rest]",
    "[" + ", ".join(["1"] * 600) + ",  # first half\n" + ", ".join(["2"] * 600) + "]",  # a comment
    "{**base, " + ", ".join(f"{k}: {k}" for k in range(1100)) + "}",
    "[" + ", ".join(["True"] * 1100) + "]",
])
def test_what_is_not_a_large_display_of_numbers_stays(display: str) -> None:
    text = f"TABLE = {display}\n"
    assert numdisplays.lightened(text, ast.parse(text)) is None


def test_a_tuple_without_its_own_brackets_or_inside_an_fstring_stays() -> None:
    row = ", ".join(["1"] * 1100)
    text = f"PAIRS = ({row}), ({row})\nx = t[{row}]\nlabel = f'{{[{row}]}}'\n"
    assert numdisplays.displays(ast.parse(text))  # (the inner displays are large ones: the outer tuple is not)
    reduced = numdisplays.lightened(text, ast.parse(text))
    assert reduced is not None and reduced.startswith("PAIRS = (0,") and "x = t[1, 1" in reduced
    assert reduced.endswith(f"label = f'{{[{row}]}}'\n")
    assert _parse_unvalidated(reduced).code == reduced


def test_the_byte_test_finds_every_large_display_of_numbers() -> None:
    samples = [_serving(), "T = (" + ",".join(["0x1F"] * 1024) + ")\n", "T = [" + ",".join(["1e-3j"] * 1024) + "]\n",
               "T = {" + ",".join(f"{k}:-{k}" for k in range(512)) + "}\n",
               "T = [\\\n" + ",\n".join(["\t-1_000"] * 1024) + "]\n"]
    for text in samples:
        assert numdisplays.displays(ast.parse(text)) and numdisplays.may_hold(text.encode())
    assert not numdisplays.may_hold(("x = [" + ",".join(["1"] * 1000) + "]\n").encode())
    assert not numdisplays.may_hold(("def f():\n    return g(a, b)\n" * 2000).encode())


TABLES = """\
\"\"\"Hadamard rotation tables for int4 activations.\"\"\"
import torch

HADAMARD_32 = {table}


def hadamard(device=None):
    return torch.tensor(HADAMARD_32, device=device)
"""


def test_a_reached_module_is_parsed_reduced_with_the_answers_of_a_whole_parse(tmp_path: Path, monkeypatch) -> None:
    model = _project(tmp_path, noise=2)
    tables = tmp_path / "pkg" / "tables.py"
    tables.write_text(TABLES.format(table=_table(32, 36)))
    text = model.read_text().replace("from pkg.utils import", "from pkg.tables import hadamard\nfrom pkg.utils import")
    model.write_text(text.replace("        return x + y\n", "        return (x + y) @ hadamard(x.device)\n"))
    utils = tmp_path / "pkg" / "utils.py"  # a table in a module that mentions streams: parsed whole
    utils.write_text(utils.read_text() + f"\n\nCODES = {_table(32, 36)}\n")
    engine = engine_for(tmp_path)
    reduced = _codes(engine.lint_file(str(model)).findings)
    parsed = engine._parsed[os.path.abspath(tables)]
    assert parsed.lightened and "HADAMARD_32 = [\n0" in parsed.model.module.code
    assert parsed.model.source.text == tables.read_text()
    assert not engine._parsed[os.path.abspath(utils)].lightened
    assert engine.lint_file(str(tables)).skipped  # (never linted: no marker of a rule)
    monkeypatch.setattr(numdisplays, "MIN_NUMBERS", 10 ** 9)
    whole_engine = engine_for(tmp_path)
    whole = _codes(whole_engine.lint_file(str(model)).findings)
    assert not whole_engine._parsed[os.path.abspath(tables)].lightened
    assert reduced == whole and reduced  # (the wrappers of utils.py make the findings)
    # asked for the file itself (not linting, e.g. `streamlint graph`), a reduced module is parsed whole
    assert engine.parse(str(tables)).model.module.code == tables.read_text()
