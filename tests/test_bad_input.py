"""Bad input, generated here (no committed binaries): each case gets a clear finding or message, the other
files are still linted, and no traceback ever reaches the user."""

from __future__ import annotations

import ast
import builtins
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import streamlint.discovery
import streamlint.engine
from harness import REGISTRY
from streamlint.cli import main
from streamlint.config import Settings
from streamlint.engine import Engine
from streamlint.source import SourceFile

# one SL105 at line 2, column 39 (1-based) of every file that starts with it
MARKED = b"import torchair\nwith torchair.scope.npu_stream_switch(1):\n    pass\n"
SYNTAX = MARKED + b"def f(:\n    pass\n"


def build_corpus(root: Path) -> None:
    (root / ".git").mkdir()
    files = {
        "good.py": MARKED,
        "syntax.py": SYNTAX,
        "undecodable.py": MARKED + b"x = '\xe9t\xe9'\n",  # latin-1 bytes in a utf-8 file
        "binary.py": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4,
        "binary_nomarker.py": b"\x00\x01\x02\x03",
        "empty.py": b"",
        "bom_only.py": b"\xef\xbb\xbf",
        "latin1.py": b"# -*- coding: latin-1 -*-\n# caf\xe9 cr\xe8me\n" + MARKED,
        "bad_cookie.py": b"# -*- coding: klingon -*-\n" + MARKED,
        "crlf.py": MARKED.replace(b"\n", b"\r\n"),
        "mixed.py": b"import torchair\r\nx = 1\ry = 2\nz = '\x0c'  # \xe2\x80\xa8 \x0c\r\n"
                    b"with torchair.scope.npu_stream_switch(1):\n    pass\r\n",
        "big.py": b"".join(b"value_%d = %d  # generated\n" % (i, i) for i in range(50_000)),
        "loop/inner.py": MARKED,
        "dir.py/inside.py": MARKED,  # a directory named x.py is walked, not read
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    os.symlink("..", root / "loop" / "back")  # loop/back -> loop/..: a cycle
    os.symlink("missing_target.py", root / "dangling.py")
    os.mkfifo(root / "fifo.py")  # never opened (it would block)


def _concise(args: list[str]) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(main, [*args, "--output-format", "concise", "--no-cache"], catch_exceptions=False)
    assert "Traceback" not in result.output
    lines = [line.removesuffix(" [*]") for line in result.stdout.splitlines()]  # fixability is not the point
    return result.exit_code, lines, result.stderr


def test_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, lines, err = _concise([".", "does_not_exist.py"])
    assert code == 2  # the missing path named on the command line
    syntax = _syntax_position(SYNTAX)
    by_file: dict[str, list[str]] = {}
    for line in lines:
        path, rest = line.split(":", 1)
        by_file.setdefault(os.path.normpath(path), []).append(rest)
    assert by_file == {
        "good.py": ["2:39: SL105 stream tag 1 is an int; tags must be non-empty strings"],
        "syntax.py": [f"{syntax}: SL001 syntax error: invalid syntax"],
        "undecodable.py": ["4:6: SL001 cannot decode as utf-8: byte 0xe9 at offset 72"],
        "binary.py": ["1:1: SL001 binary file: contains NUL bytes"],
        "binary_nomarker.py": ["1:1: SL001 binary file: contains NUL bytes"],
        "latin1.py": ["4:39: SL105 stream tag 1 is an int; tags must be non-empty strings"],
        "bad_cookie.py": ["1:1: SL001 bad coding declaration: unknown encoding: klingon"],
        "crlf.py": ["2:39: SL105 stream tag 1 is an int; tags must be non-empty strings"],
        # a lone CR ends a line, form feeds and U+2028 do not (as for Python's tokenizer)
        "mixed.py": ["5:39: SL105 stream tag 1 is an int; tags must be non-empty strings"],
        "loop/inner.py": ["2:39: SL105 stream tag 1 is an int; tags must be non-empty strings"],  # once
        "dir.py/inside.py": ["2:39: SL105 stream tag 1 is an int; tags must be non-empty strings"],
    }
    messages = sorted(err.splitlines())
    assert "streamlint: error: does_not_exist.py: no such file or directory" in messages
    assert any("loop/back: symbolic link loop" in m for m in messages)
    assert any("dangling.py: broken symbolic link" in m for m in messages)
    assert all(m.startswith("streamlint: ") for m in messages)


def _syntax_position(data: bytes) -> str:
    try:
        ast.parse(data)
    except SyntaxError as exc:
        return f"{exc.lineno}:{exc.offset}"
    raise AssertionError("not a syntax error")


def test_full_format_survives_the_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [".", "--no-cache"], catch_exceptions=False)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "    5 | with torchair.scope.npu_stream_switch(1):" in result.stdout  # mixed.py's excerpt
    result = CliRunner().invoke(main, [".", "--no-cache", "--output-format", "json"], catch_exceptions=False)
    assert len(json.loads(result.stdout)) == 11


def test_named_special_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, lines, err = _concise(["fifo.py", "dangling.py", "dir.py", "good.py"])
    assert code == 2
    assert [line.split(": ")[0] for line in lines] == ["dir.py/inside.py:2:39", "good.py:2:39"]
    assert "streamlint: error: fifo.py: not a regular file" in err
    assert "streamlint: error: dangling.py: broken symbolic link" in err
    code, lines, err = _concise(["empty.py", "bom_only.py", "big.py"])
    assert (code, lines) == (0, [])
    err = "".join(line for line in err.splitlines(keepends=True)  # a slow machine may add "took N s" notes
                  if not (line.startswith("streamlint: note: ") and " to analyse" in line))
    assert err.startswith("streamlint: checked 3 files in ") and err.count("\n") == 1  # the run summary only


def _deny(monkeypatch: pytest.MonkeyPatch, denied: Path) -> None:
    """We run as root, where chmod 000 does not stop reading: make `open` refuse the file instead."""
    real_open = builtins.open

    def fake_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(file) == str(denied):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    for module in (streamlint.engine, streamlint.discovery):
        monkeypatch.setattr(module, "open", fake_open, raising=False)


def test_unreadable_file_found_in_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    _deny(monkeypatch, tmp_path / "good.py")
    code, lines, _ = _concise(["."])
    assert "good.py:1:1: SL001 cannot read file: Permission denied" in lines
    assert "syntax.py:4:7: SL001 syntax error: invalid syntax" in lines  # the others are still linted
    assert code == 1


def test_unreadable_file_named_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    _deny(monkeypatch, tmp_path / "good.py")
    code, lines, err = _concise(["good.py", "crlf.py"])
    assert code == 2
    assert "streamlint: error: good.py: cannot read: Permission denied" in err
    assert [line.split(": ")[0] for line in lines] == ["crlf.py:2:39"]


def test_engine_reports_read_errors_as_sl001(tmp_path: Path) -> None:
    engine = Engine(Settings(project_root=str(tmp_path)), REGISTRY)
    (tmp_path / "d.py").mkdir()
    for path in (tmp_path / "nope.py", tmp_path / "d.py"):
        findings = engine.lint_file(str(path)).findings
        assert [f.code for f in findings] == ["SL001"]
        assert findings[0].message.startswith("cannot read file: ")


def test_newer_grammar_is_no_syntax_error(tmp_path: Path) -> None:
    """A Python 3.12 module (PEP 695 type parameters, a ``type`` alias) is valid code the 3.11 ``ast`` rejects:
    LibCST's grammar decides, with or without a stream marker; a real syntax error is still SL001."""
    generic = "from abc import ABC\n\n\nclass Handler[T](ABC):\n    def run(self, item: T) -> T:\n" \
              "        return item\n\n\ntype Items = list[int]\n"
    (tmp_path / "plain.py").write_text(generic)
    (tmp_path / "marked.py").write_text("import torch\n" + generic + "\n\ns = torch.cuda.Stream()\n")
    (tmp_path / "broken.py").write_text("class Handler[T](ABC:\n    pass\n")
    engine = Engine(Settings(project_root=str(tmp_path)), REGISTRY)
    found = {name: [f.code for f in engine.lint_file(str(tmp_path / name)).findings]
             for name in ("plain.py", "marked.py", "broken.py")}
    assert found == {"plain.py": [], "marked.py": [], "broken.py": ["SL001"]}


def test_source_lines_match_the_parser() -> None:
    text = "a = 1\x0c\nb = '\u2028'\r\nc = 3\rd = 4\n"
    source = SourceFile.from_bytes("x.py", text.encode())
    tree = ast.parse(text)
    for stmt in tree.body:
        assert source.line_text(stmt.lineno).startswith(ast.unparse(stmt.targets[0]) + " =")
    assert source.offset(4, 0) == text.index("d = 4")
    assert source.newline == "\n"


DEEP = {
    "parens.py": "x = " + "(" * 3000 + "1" + ")" * 3000 + "\n",
    "chain.py": "x = " + "+".join(["a"] * 5000) + "\n",
    "calls.py": "x = " + "f(" * 400 + ")" * 400 + "\n",
    "lists.py": "x = " + "[" * 190 + "]" * 190 + "\n",
    "attrs.py": "x = " + ".".join(["a"] * 5000) + "\n",
    "ifs.py": "".join(" " * i + "if x:\n" for i in range(99)) + " " * 99 + "pass\n",
    "nots.py": "x = " + "not " * 5000 + "y\n",
    "strings.py": "x = " + " ".join(['"a"'] * 5000) + "\n",  # valid Python, too much for LibCST's parser
}


def test_deep_nesting_does_not_crash_the_process(tmp_path: Path) -> None:
    """Beyond LibCST's (native, recursive) parser comfort: the engine guards with ast.parse first. A
    real process, so a stack overflow would show up as a signal instead of taking pytest down."""
    (tmp_path / ".git").mkdir()
    header = "import torchair\nwith torchair.scope.npu_stream_switch(1):\n    pass\n"
    for name, text in DEEP.items():
        (tmp_path / name).write_text(header + text, encoding="utf-8")
    (tmp_path / "good.py").write_text(header, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "streamlint", ".", "--output-format", "json", "--no-cache", "-j", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])  # not a signal (negative) nor 2
    assert "Traceback" not in proc.stderr
    findings = json.loads(proc.stdout)
    by_file: dict[str, set[str]] = {}
    for f in findings:
        f["filename"] = os.path.basename(f["filename"])  # absolute in JSON
        by_file.setdefault(f["filename"], set()).add(f["code"])
    assert set(by_file) == {*DEEP, "good.py"}  # every file gets a finding: analysed or a clear SL001
    assert by_file["good.py"] == {"SL105"}
    assert by_file["ifs.py"] == {"SL105"}  # deep but fine
    for name in DEEP:
        messages = [f["message"] for f in findings if f["filename"] == name and f["code"] == "SL001"]
        assert all("nested" in m or "LibCST" in m for m in messages), messages
    assert by_file["parens.py"] == {"SL001"}
    [message] = [f["message"] for f in findings if f["filename"] == "strings.py"]
    assert message.startswith("cannot analyse: valid Python that LibCST's parser rejects (")


def test_50000_line_file_with_a_marker(tmp_path: Path) -> None:
    """The corpus' 50,000-line file has no marker and is skipped by the prefilter; this one is analysed."""
    path = tmp_path / "big.py"
    path.write_bytes(MARKED + b"".join(b"value_%d = %d\n" % (i, i) for i in range(50_000)))
    engine = Engine(Settings(project_root=str(tmp_path)), REGISTRY)
    assert [(f.code, f.span.start_line) for f in engine.lint_file(str(path)).findings] == [("SL105", 2)]


def test_sl001_obeys_ignore_and_per_file_ignores(tmp_path: Path) -> None:
    (tmp_path / "syntax.py").write_bytes(SYNTAX)
    (tmp_path / "binary.py").write_bytes(b"\x00\x01")
    files = [str(tmp_path / "syntax.py"), str(tmp_path / "binary.py")]

    def codes(**kw) -> list[str]:
        engine = Engine(Settings(project_root=str(tmp_path), **kw), REGISTRY)
        return [f"{os.path.basename(f.path)}:{f.code}" for p in files for f in engine.lint_file(p).findings]

    assert codes() == ["syntax.py:SL001", "binary.py:SL001"]
    assert codes(ignore=("SL001",)) == []
    assert codes(per_file_ignores=(("syntax.py", ("syntax-error",)),)) == ["binary.py:SL001"]


def test_the_linted_codes_own_compile_warnings_are_not_printed(tmp_path) -> None:
    """`1(2)` or an invalid escape make Python's compiler warn; that is the linted code's business."""
    import subprocess
    import sys

    (tmp_path / "noisy.py").write_text('import torchair\nx = 1(2)\ny = "\\d"  # noqa: SL101\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-W", "default", "-m", "streamlint", "check", "noisy.py", "--isolated",
                           "--no-cache"], cwd=tmp_path, capture_output=True, text=True)
    assert "SL002" in done.stdout  # linted (the unused suppression is reported)
    assert "Warning" not in done.stderr, done.stderr
