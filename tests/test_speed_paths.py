"""The shortcuts of issue 15's session-18 speed round give exactly the answers of the paths they replace."""

from __future__ import annotations

import ast
import random
import re

import libcst as cst
import pytest

from harness import FIXTURES, engine_for
from streamlint.model.positions import PositionTable, compute_positions
from streamlint.model.bytescan import lines_with as _lines_with
from streamlint.model.summary import summarize
from streamlint.model.syntax import local_nodes, memoised
from streamlint.model.walk import children

FILES = sorted(FIXTURES.rglob("*.py"))


def _rename_pattern(word: bytes) -> re.Pattern[bytes]:  # as Project.renames builds it
    return re.compile(rb"(?<![A-Za-z0-9_])" + word + rb"[ \t]+as[ \t]+([A-Za-z_][A-Za-z0-9_]*)|"
                      rb"^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*(?::[^=\n]*)?=[ \t]*"
                      rb"(?:[A-Za-z_][A-Za-z0-9_]*[ \t]*\.[ \t]*)*" + word + rb"[ \t]*(?:#.*)?$", re.M)


@pytest.mark.parametrize("data", [
    b"x = Foo\r\ny = Foo  # c\r\n", b"from a import Foo as F", b"Foo as G\nH = a.b.Foo", b"FooBar as Z\nq=Foo",
    b"Foo", b"\n\nFoo\n", b"a: T = Foo\nb = Foo as c\n  d = x . Foo  # Foo as e\n", b"Foo Foo as A Foo as B\n",
])
def test_renames_on_the_lines_that_spell_the_name_find_what_the_whole_text_finds(data: bytes) -> None:
    pattern = _rename_pattern(b"Foo")
    whole = [m.group(0) for m in pattern.finditer(data)]
    lines = [m.group(0) for line in _lines_with(data, b"Foo") for m in pattern.finditer(line)]
    assert lines == whole
    assert all(b"Foo" in line and b"\n" not in line for line in _lines_with(data, b"Foo"))


def test_renames_line_scan_on_every_fixture() -> None:
    for path in FILES[:300]:
        data = path.read_bytes()
        for word in sorted(set(re.findall(rb"(?:class|def|import|as)\s+([A-Za-z_]\w*)", data)))[:20]:
            pattern = _rename_pattern(word)
            assert [m.group(0) for line in _lines_with(data, word) for m in pattern.finditer(line)] == \
                [m.group(0) for m in pattern.finditer(data)], (path, word)


def test_summary_from_the_guard_tree_is_the_summary_from_the_bytes() -> None:
    for path in FILES:
        data = path.read_bytes()
        try:
            tree = ast.parse(data.decode("utf-8"))
        except SyntaxError:
            continue
        assert summarize(data, tree) == summarize(data), path


def test_linted_file_summary_is_the_one_a_later_run_computes(tmp_path) -> None:
    """The linted buffer's own summary (taken from its guard tree) is stored under its digest: the same as a
    fresh engine computes from the bytes, and it is not kept past the file's lint."""
    project = FIXTURES / "projects" / "caller_fork"
    files = sorted(str(p) for p in project.rglob("*.py"))
    first = engine_for(project, files)
    for path in files:
        first.lint_file(path)
    assert not first.project.summaries.trees
    second = engine_for(project, files)
    for path in files:
        assert first.project.summary(path) == second.project.summary(path)


def test_children_as_the_read_only_walk_sees_them() -> None:
    """children() (a single dict look-up per child type) lists what the generic field walk lists."""
    from streamlint.model.walk import _is_substantive, _order

    for path in FILES[:40]:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        stack: list[cst.CSTNode] = [module]
        while stack:
            node = stack.pop()
            expected = []
            for name in _order(node):
                value = getattr(node, name)
                items = value if isinstance(value, (list, tuple)) else [value]
                expected.extend(item for item in items if _is_substantive(type(item)))
            got = children(node)
            assert list(got) == expected  # (a tuple: kept answers are shared)
            stack.extend(got)


@pytest.mark.parametrize("memo_share", [0.0, 0.5, 1.0])
def test_positions_from_memoised_local_walks_are_the_same(memo_share: float) -> None:
    """A position table that registers statements from the memoised local walks of (some of) the functions and
    blocks gives compute_positions' ranges, asked in any order."""
    for seed, path in enumerate(sorted((FIXTURES / "rules").rglob("*.py"))[:10]):
        text = path.read_text(encoding="utf-8")
        module = cst.parse_module(text)
        expected = compute_positions(module)
        rng = random.Random(seed)
        for node in expected:
            if isinstance(node, (cst.FunctionDef, cst.IndentedBlock)) and rng.random() < memo_share:
                local_nodes(node)
                assert memoised("local_nodes", node) is not None
        nodes = list(expected)
        rng.shuffle(nodes)
        table = PositionTable(module, ast.parse(text), text)
        assert {node: table.get(node) for node in nodes} == expected, path


def test_event_parameter_precheck_is_a_superset_of_param_kinds() -> None:
    """Every function some parameter of which param_kinds calls an EVENT passes may_have_event_params (the
    check entry_context makes before asking the parameter kinds)."""
    from streamlint.model.streams import EVENT
    from streamlint.model.tensors import may_have_event_params, param_kinds

    seen = events = 0
    for root in (FIXTURES / "rules", FIXTURES / "projects"):
        files = sorted(str(p) for p in root.rglob("*.py"))
        engine = engine_for(root, files)
        for path in files:
            model = engine.project.file(path)
            if model is None:
                continue
            for fn in model.functions.values():
                seen += 1
                if EVENT in param_kinds(engine.project, model, fn).values():
                    events += 1
                    assert may_have_event_params(fn), (path, fn.qualname)
    assert seen > 500 and events > 5  # (the fixtures do have event parameters: the test can fail)


def test_thread_handoff_question_parses_only_files_that_may_hand_the_function(tmp_path, monkeypatch) -> None:
    """``hostargs._handed_to_thread`` reads only the files where the function's name may be handed to a call
    (``submit(self._push_batch, ...)``): a file that only calls it, defines it or names it in an attribute
    is never parsed, and the answer is the same."""
    from harness import engine_for

    from streamlint.model.flow import hostargs

    (tmp_path / "pusher.py").write_text(
        "class Pusher:\n"
        "    def _push_batch(self, batch):\n"
        "        return batch\n")
    (tmp_path / "pool.py").write_text(
        "def run(executor, pusher, batches):\n"
        "    for b in batches:\n"
        "        executor.submit(pusher._push_batch, b)\n")
    for i in range(3):
        (tmp_path / f"caller{i}.py").write_text(
            "def go(pusher, batch):\n"
            "    name = pusher._push_batch.__name__\n"
            f"    return pusher._push_batch(batch), name, {i}\n")
    engine = engine_for(tmp_path)
    project = engine.project
    fn = project.file(str(tmp_path / "pusher.py")).functions["Pusher._push_batch"]
    parsed: list[str] = []
    real_file = type(project).file

    def counting_file(self, path, *args, **kwargs):
        parsed.append(path)
        return real_file(self, path, *args, **kwargs)

    monkeypatch.setattr(type(project), "file", counting_file)
    assert hostargs._handed_to_thread(project, fn) is True
    assert not any("caller" in p for p in parsed), parsed
