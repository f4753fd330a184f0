"""Suppression comments: trailing noqa, own-line ignore[...], file level, SL002 / SL003, --ignore-noqa."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import REGISTRY, lint_text
from streamlint.cli import main
from streamlint.config import Settings
from streamlint.engine import Engine
from streamlint.suppressions import parse_suppressions

HEAD = "import torchair\n"


def found(code: str, tmp_path: Path, head: str = HEAD, **settings) -> list[tuple[int, str]]:
    return sorted((f.span.start_line, f.code) for f in lint_text(head + textwrap.dedent(code), tmp=tmp_path,
                                                                  **settings))


def test_unsuppressed_baseline(tmp_path: Path) -> None:
    assert found("""\
        with torchair.scope.npu_stream_switch(1, 3):
            pass
    """, tmp_path) == [(2, "SL104"), (2, "SL105")]


def test_trailing_noqa(tmp_path: Path) -> None:
    assert found("""\
        with torchair.scope.npu_stream_switch(1, 3):  # noqa: SL105
            pass
        with torchair.scope.npu_stream_switch(1, 3):  # noqa:SL105,E501 reason text
            pass
        with torchair.scope.npu_stream_switch(1, 3):  # NOQA: sl104, sl105 -- both, lower case
            pass
        with torchair.scope.npu_stream_switch(1, 3):  # noqa
            pass
        with torchair.scope.npu_stream_switch(1, 3):  # noqa: SL1 (a prefix)
            pass
    """, tmp_path) == [(2, "SL104"), (4, "SL104")]


def test_noqa_on_the_findings_line_inside_a_multiline_call(tmp_path: Path) -> None:
    assert found("""\
        with torchair.scope.npu_stream_switch(
            1,  # noqa: SL105
            3,
        ):
            pass
        with torchair.scope.npu_stream_switch(  # noqa: SL105
            1,
        ):
            pass
    """, tmp_path) == [(4, "SL104"), (7, "SL002"), (8, "SL105")]


def test_noqa_inside_a_comprehension(tmp_path: Path) -> None:
    assert found("""\
        ctx = [
            torchair.scope.npu_stream_switch(1)  # noqa: SL105
            for i in (1, 2)
        ]
        ctx2 = [torchair.scope.npu_stream_switch(1) for _ in ()]
    """, tmp_path) == [(6, "SL105")]


def test_own_line_ignore_covers_the_next_multiline_statement(tmp_path: Path) -> None:
    assert found("""\
        # streamlint: ignore[SL105]
        with torchair.scope.npu_stream_switch(
            "side",
            3,
        ):
            torchair.scope.npu_stream_switch(1)
        with torchair.scope.npu_stream_switch(1):
            pass
    """, tmp_path) == [(5, "SL104"), (8, "SL105")]


def test_own_line_ignore_multiple_codes_and_indented(tmp_path: Path) -> None:
    assert found("""\
        def f():
            x = 1
            # streamlint: ignore[SL104, SL105]
            with torchair.scope.npu_stream_switch(1, 3):
                pass
            with torchair.scope.npu_stream_switch(1, 3):
                pass
    """, tmp_path) == [(7, "SL104"), (7, "SL105")]


def test_trailing_ignore_is_not_an_own_line_ignore(tmp_path: Path) -> None:
    assert found("""\
        x = 1  # streamlint: ignore[SL105]
        with torchair.scope.npu_stream_switch(1):
            pass
    """, tmp_path) == [(3, "SL105")]


def test_file_level_noqa(tmp_path: Path) -> None:
    assert found("""\
        # streamlint: noqa
        import torchair
        with torchair.scope.npu_stream_switch(1, 3):
            pass
    """, tmp_path, head="") == []


def test_file_level_noqa_with_prefix(tmp_path: Path) -> None:
    code = """\
        # streamlint: noqa: SL10
        import torchair
        with torchair.scope.npu_stream_switch(1, 3):  # noqa: SL9999
            pass
    """
    assert found(code, tmp_path, head="") == [(3, "SL003")]
    assert found(code.replace("SL10\n", "SL104\n"), tmp_path, head="") == [(3, "SL003"), (3, "SL105")]
    assert found(code.replace("SL10\n", "SL104, SL105\n"), tmp_path, head="") == [(3, "SL003")]


def test_file_level_noqa_after_header_comments_but_not_after_code(tmp_path: Path) -> None:
    path = tmp_path / "x.py"
    path.write_text("#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n# streamlint: noqa: SL1\n" + HEAD +
                    "with torchair.scope.npu_stream_switch(1, 3):\n    pass\n", encoding="utf-8")
    assert found_in(path) == []
    path.write_text(HEAD + "# streamlint: noqa: SL1\nwith torchair.scope.npu_stream_switch(1, 3):\n    pass\n",
                    encoding="utf-8")
    assert found_in(path) == [(3, "SL104"), (3, "SL105")]


def found_in(path: Path, **kw) -> list[tuple[int, str]]:
    engine = Engine(Settings(select=("ALL",), project_root=str(path.parent)), REGISTRY,
                    project_root=str(path.parent), project_scope=[str(path)], **kw)
    return sorted((f.span.start_line, f.code) for f in engine.lint_file(str(path)).findings)


def test_sl002_unused_but_not_for_foreign_codes(tmp_path: Path) -> None:
    assert found("""\
        with torchair.scope.npu_stream_switch("a"):  # noqa: SL105
            pass
        with torchair.scope.npu_stream_switch("a"):  # noqa: E501, W291
            pass
        # streamlint: ignore[SL104]
        with torchair.scope.npu_stream_switch("a"):
            pass
        x = 1  # noqa
    """, tmp_path) == [(2, "SL002"), (6, "SL002")]


def test_sl002_message_and_span(tmp_path: Path) -> None:
    findings = lint_text(HEAD + "x = 1  # noqa: SL105, E501\n", tmp=tmp_path)
    assert [(f.code, f.message, f.span.start_line, f.span.start_col) for f in findings] == [
        ("SL002", "unused suppression for SL105", 2, 7)]


def test_sl002_not_for_disabled_rule(tmp_path: Path) -> None:
    code = 'with torchair.scope.npu_stream_switch("a"):  # noqa: SL105\n    pass\n'
    assert found(code, tmp_path, ignore=("SL105",)) == []
    assert found(code, tmp_path, ignore=("SL002",)) == []


def test_sl003_unknown_code(tmp_path: Path) -> None:
    findings = lint_text(HEAD + "x = 1  # noqa: SL999\n# streamlint: ignore[SL42]\ny = 2\n", tmp=tmp_path)
    assert [(f.span.start_line, f.code, f.message) for f in findings] == [
        (2, "SL003", "suppression names unknown rule code SL999"),
        (3, "SL003", "suppression names unknown rule code SL42"),
    ]


def test_ignore_noqa(tmp_path: Path) -> None:
    path = tmp_path / "x.py"
    path.write_text(HEAD + "with torchair.scope.npu_stream_switch(1, 3):  # noqa: SL105, SL999\n    pass\n"
                    "x = 1  # noqa: SL104\n", encoding="utf-8")
    assert found_in(path) == [(2, "SL003"), (2, "SL104"), (4, "SL002")]
    assert found_in(path, ignore_noqa=True) == [(2, "SL104"), (2, "SL105")]


def test_ignore_noqa_flag_on_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "x.py").write_text(HEAD + "with torchair.scope.npu_stream_switch(1):  # noqa: SL105\n    pass\n",
                                   encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["x.py"]).exit_code == 0
    result = CliRunner().invoke(main, ["x.py", "--ignore-noqa", "--output-format", "concise"])
    assert result.exit_code == 1 and " SL105 " in result.stdout


def test_hash_inside_strings_is_not_a_comment(tmp_path: Path) -> None:
    assert found('''\
        s = "# noqa: SL105"; t = torchair.scope.npu_stream_switch(1)
        u = """
        # streamlint: ignore[SL105]
        """
        with torchair.scope.npu_stream_switch(1):
            pass
        v = f"{'# noqa'}"; w = torchair.scope.npu_stream_switch(1)
    ''', tmp_path) == [(2, "SL105"), (6, "SL105"), (8, "SL105")]


def test_string_mentioning_file_noqa_is_not_file_level(tmp_path: Path) -> None:
    assert found('''\
        """# streamlint: noqa"""
        with torchair.scope.npu_stream_switch(1):
            pass
    ''', tmp_path) == [(3, "SL105")]


def test_suppression_in_marker_less_file_still_judged(tmp_path: Path) -> None:
    """A file without any rule marker is not parsed, but its suppressions are still checked."""
    path = tmp_path / "plain.py"
    path.write_text("x = 1  # noqa: SL105\ny = 2  # noqa: SL31415\n", encoding="utf-8")
    assert found_in(path) == [(1, "SL002"), (2, "SL003")]


def test_parse_suppressions_ranges() -> None:
    import ast

    text = textwrap.dedent("""\
        # streamlint: noqa: SL1
        import x
        foo(
            a,
        )  # noqa: SL105
        # streamlint: ignore[SL104]
        @decorator
        def f():
            pass
        y = 1  # noqa
    """)
    sups = parse_suppressions(text, ast.parse(text))
    got = [(s.kind, s.codes, s.first_line, s.last_line) for s in sups]
    assert got == [
        ("file", ("SL1",), 1, 10**9),
        ("noqa", ("SL105",), 3, 5),  # on the last line of a multi-line statement: covers the statement
        ("ignore", ("SL104",), 7, 9),  # the decorated definition, decorators included
        ("noqa", None, 10, 10),
    ]


def test_file_level_noqa_with_a_reason(tmp_path: Path) -> None:
    code = """\
        # streamlint: noqa: SL104 -- generated by tools/gen.py
        import torchair
        with torchair.scope.npu_stream_switch(1, 3):
            pass
    """
    assert found(code, tmp_path, head="") == [(3, "SL105")]
    assert found(code.replace(": SL104 --", " --"), tmp_path, head="") == []  # blanket, with a reason


def test_own_line_ignore_inside_a_multiline_call_covers_only_that_statement(tmp_path: Path) -> None:
    assert found("""\
        ctx = dict(
            # streamlint: ignore[SL105]
            a=torchair.scope.npu_stream_switch(1),
            b=torchair.scope.npu_stream_switch(2),
        )
        with torchair.scope.npu_stream_switch(3):
            pass
    """, tmp_path) == [(7, "SL105")]


def test_comments_without_full_tokenize_match_tokenize() -> None:
    """The suppression comments found without tokenizing the module (`_comments_fast`) are exactly the
    tokenizer's, on strings that hold comment-like text, comments between concatenated string parts,
    non-ASCII text before a comment, header comments and a file-level noqa after code."""
    import ast

    from streamlint.suppressions import _CANDIDATE_RE, _comments_fast, _comments_tokenized

    texts = [
        "# streamlint: noqa: SL201\n# a header line\nimport torch  # noqa: F401\n",
        "x = '# noqa: SL301'  # noqa: SL201\ny = \"a#b\" + 'c'  # streamlint: ignore[SL1]\n",
        "s = ('part one'  # noqa: SL201\n     'part two')\n",
        "t = f'{x!r:>10}#'  # noqa\n",
        "doc = '''\n# noqa: SL201 inside a docstring\n'''\nz = 1  # NOQA: SL301\n",
        "é = 'ü'  # noqa: SL201\nclass A:\n    def f(self):\n        pass  # streamlint: noqa\n",
        "import os\n# streamlint: noqa\n",
        "b = b'#'; c = 2  # noqa:SL201,SL301\n",
    ]
    for text in texts:
        tree = ast.parse(text)
        fast = _comments_fast(text, tree)
        want = [c for c in _comments_tokenized(text) if _CANDIDATE_RE.search(c[2])]
        assert fast is None or fast == want, text
    assert _comments_fast(texts[2], ast.parse(texts[2])) is None  # a comment inside a string's range: tokenize
    assert _comments_fast(texts[1], ast.parse(texts[1])) is None  # a candidate inside a string literal
    assert _comments_fast(texts[7], ast.parse(texts[7])) == [(1, 17, "# noqa:SL201,SL301", False)]
    crlf = "x = 1  # noqa: SL201\r\n"
    assert _comments_fast(crlf, ast.parse(crlf)) is None
    for text in texts + [crlf]:  # the same suppressions either way
        tree = ast.parse(text)
        got = [(s.kind, s.codes, s.first_line, s.last_line, s.span) for s in parse_suppressions(text, tree)]
        import streamlint.suppressions as sup

        saved = sup._comments_fast
        sup._comments_fast = lambda text, tree: None
        try:
            want2 = [(s.kind, s.codes, s.first_line, s.last_line, s.span) for s in parse_suppressions(text, tree)]
        finally:
            sup._comments_fast = saved
        assert got == want2, text
