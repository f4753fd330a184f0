"""Parsing a large module in pieces of top-level statements (issue 15: a whole tree's peak memory).

LibCST's native parser holds its tokens and its own tree of the whole text while it builds the Python
nodes: about 270 bytes per byte of source, on top of the ~30 bytes per byte that the finished tree takes,
and the process keeps that memory once it is freed (a 3.1 MB generated module of torch-npu: 955 MB of
RSS after its parse, 90 MB of which are the tree). Parsed in pieces of about :data:`PIECE_CHARS`, the
same module peaks at a piece's parse, and the tree is the one a parse of the whole text builds:
LibCST nodes carry no positions, so a top-level statement parsed in a piece is the node the whole parse
makes for it, as long as every line is owned as in the whole module. As in :mod:`streamlint.reparse`:

- a piece ends right after the last line of a top-level statement (Python's own tree gives the lines)
  and the next piece starts on the line after it; every line between the two statements is empty or a
  comment at column 0, which a parse gives to the next statement's leading lines (an indented comment
  or a line of spaces there may belong to the block before: no cut there), the next statement starts
  at column 0 and the line before the cut does not end with a backslash;
- the first piece is parsed as it is (the module's header comes from it), followed by a dummy ``pass``
  line; the other pieces after a dummy block indented with the module's default indentation (the
  relative indentation of the first indented block of the text, which the first piece holds: nodes
  leave out what equals the module's default) and a dummy ``pass``, so that their first lines are
  owned as after any top-level statement; each piece but the last before a dummy ``pass`` line; the
  last piece gives the module's footer;
- the dummies must come back as parsed: plain ``pass`` lines without leading lines, no footer after the
  trailing one, the module's default indentation and ``\\n`` newlines (texts with ``\\r`` or form feeds
  are parsed whole);
- the caller has parsed the whole text with Python's own parser (a syntax error is reported as by a
  full parse); when a piece does not parse, the whole text is parsed.

tests/test_pieces.py compares the trees with whole parses (``deep_equals``) over every fixture, with
pieces of a few hundred characters.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from typing import TYPE_CHECKING, Callable

from streamlint._lazy import cst

if TYPE_CHECKING:
    import libcst

# texts longer than twice this are parsed in pieces of about this many characters (a piece's parse
# peaks near 300 bytes of memory per character, which the process keeps; the whole tree keeps ~30). At
# 64 KB (modules over 128 KB in pieces) the whole torch-npu tree (-j 2) peaks at 788 MB instead of 823-829
# at 256 KB; the parse CPU of its 12 largest modules after the generated one: 21.5 s whole, 21.0 in pieces
PIECE_CHARS = 64 << 10

_PASS = "pass\n"


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None)
    return min([stmt.lineno, *(d.lineno for d in decorators)]) if decorators else stmt.lineno


def cut_lines(text: str, tree: ast.Module, piece: int) -> list[int]:
    """0-based line numbers where pieces of about ``piece`` characters start (the first piece starts at
    line 0, not listed); empty when the text cannot be cut."""
    lines = text.split("\n")
    body = tree.body
    cuts: list[int] = []
    size = 0  # characters since the last cut
    line_done = 0  # lines counted into size so far
    for prev, stmt in zip(body, body[1:]):
        end = prev.end_lineno  # 1-based: the cut goes after this line, before line `end` (0-based)
        if end is None:
            return []
        size += sum(len(line) + 1 for line in lines[line_done:end])
        line_done = end
        if size < piece:
            continue
        start = _first_line(stmt) - 1  # 0-based first line of the next statement
        if start < end or stmt.col_offset != 0 or lines[end - 1].endswith("\\"):
            continue
        if any(line and not line.startswith("#") for line in lines[end:start]):
            continue  # an indented comment or blank line between them: owned by the block before?
        if getattr(stmt, "decorator_list", None) and lines[start][:1] != "@":
            continue
        cuts.append(end)
        size = 0
    return cuts


def _default_indent(text: str, tree: ast.Module) -> tuple[str, int] | None:
    """The module's default indentation, as LibCST reads it (the whitespace of the first INDENT token; four
    spaces when there is none), with the 0-based line of that token (-1: none); None when the tokenizer
    fails. Only compound statements hold indented blocks: the tokenizer starts at the first one."""
    start = next((_first_line(s) for s in tree.body if hasattr(s, "body")), None)
    if start is None:
        return "    ", -1
    rest = iter([line + "\n" for line in text.split("\n")[start - 1:]])
    try:
        for tok in tokenize.generate_tokens(lambda: next(rest, "")):  # ("": the end)
            if tok.type == tokenize.INDENT:
                return tok.string, start - 2 + tok.start[0]
            if tok.type == tokenize.ENDMARKER:
                break
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return "    ", -1


def _plain_pass(stmt: object) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and not stmt.leading_lines and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Pass) and stmt.body[0].semicolon is cst.MaybeSentinel.DEFAULT
            and stmt.trailing_whitespace.comment is None and stmt.trailing_whitespace.whitespace.value == "")


def parse_in_pieces(text: str, tree: ast.Module, parse: Callable[[str], "libcst.Module"],
                    piece: int | None = None) -> "libcst.Module | None":
    """The LibCST tree of ``text`` (``tree``: its stdlib tree), parsed with ``parse`` in pieces of about
    ``piece`` characters (default :data:`PIECE_CHARS`, read when called: tests make it small); None when it
    is not cut (short, no safe cut, ``\\r`` or form feeds) or a piece does not come back as it must (the
    caller parses the whole text)."""
    piece = PIECE_CHARS if piece is None else piece
    if len(text) <= 2 * piece or "\r" in text or "\f" in text:
        return None
    found = _default_indent(text, tree)
    if found is None:
        return None
    indent, indent_line = found
    cuts = [cut for cut in cut_lines(text, tree, piece) if cut > indent_line]  # the first piece holds it
    if not cuts:
        return None
    lines = text.split("\n")
    bounds = [0, *cuts, len(lines)]
    segments = ["".join(line + "\n" for line in lines[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]
    segments[-1] = segments[-1][:-1]  # (split gives the text after the last newline as a last item)
    del lines
    first: "libcst.Module | None" = None
    statements: list = []
    last = len(segments) - 1
    for k, segment in enumerate(segments):
        prefix = "" if k == 0 else f"if 1:\n{indent}{_PASS}{_PASS}"
        suffix = _PASS if k < last else ""
        try:
            part = parse(prefix + segment + suffix)
        except Exception:  # noqa: BLE001 - whatever a piece says, the whole parse decides
            return None
        segments[k] = ""  # (its text is not needed any more)
        if part.default_indent != indent or part.default_newline != "\n":
            return None
        body = list(part.body)
        if k > 0:
            if len(body) < 2 or not isinstance(body[0], cst.If) or body[0].leading_lines \
                    or not _plain_pass(body[1]) or part.header:
                return None
            body = body[2:]
        if k < last:
            if not body or not _plain_pass(body[-1]) or part.footer or not part.has_trailing_newline:
                return None
            body.pop()
        if not body:
            return None
        statements.extend(body)
        if k == 0:
            first = part
        elif k == last:
            assert first is not None
            return first.with_changes(body=tuple(statements), footer=part.footer,
                                      has_trailing_newline=part.has_trailing_newline)
    return None


# a line where a piece of the stdlib parse may start: at column 0, not blank, not a comment, not a closing
# bracket, not a clause that continues the statement before it (the piece's own parse rejects any other
# wrong cut: see stdlib_skeleton)
_STDLIB_CUT = re.compile(r"\n(?!(?:else|elif|except|finally)\b)(?=[^\s#)\]}])")
_STDLIB_RETRIES = 8  # parses of a piece that does not parse (ended sooner or made longer) before the whole text
# a piece made longer at a retry grows to this many times the piece size at most (its stdlib tree takes ~80 bytes per
# byte of text: 16 pieces of 64 KB, ~80 MB); a statement that still does not fit is left to the whole parse
_STDLIB_GROWTH = 16


def stdlib_skeleton(text: str, consume: Callable[[ast.Module], None], piece: int | None = None) -> ast.Module | None:
    """The :func:`skeleton` of ``ast.parse(text)`` without ever holding the stdlib tree of the whole text (~80 bytes
    per byte of source: 250 MB for torch-npu's 3.1 MB generated module, the peak of a whole-tree run): the text is
    parsed with Python's own parser in pieces of about ``piece`` characters cut before a line at column 0, and
    each piece's tree is handed to ``consume`` (what the caller reads of the whole tree: the module summary's
    facts) before it goes. A piece that does not parse (cut in a string or brackets) ends instead before the line
    where the error says the string or bracket opens, or else is made twice as long. None when the text is not cut
    (short, ``\\r`` or form feeds), or a piece still does not parse after a few tries: then the caller parses the whole text, whose errors are the
    ones reported (``consume`` has seen some pieces then: the caller drops what it gathered).

    Exact: when every piece parses, so does the whole text, into the pieces' top-level statements in order (the
    skeleton's lines are shifted by the piece's first line). Each piece ends on a newline and parsed, so the
    tokenizer is at that point of the whole text in no string, bracket or line continuation; the next line starts
    at column 0, which closes every indented block, so the whole text's tokens from there on are the next piece's
    own; and a module is a sequence of statements, which a clause continuing the statement before the cut
    (``else`` / ``except`` ..., which the cut pattern avoids) or a decorator before it would break: such a piece
    does not parse. Python's parser checks nothing at module level that depends on another statement
    (``from __future__`` placement, ``return`` outside a function: the compiler's checks, not ``ast.parse``'s).
    tests/test_pieces.py compares the skeletons with whole parses."""
    piece = PIECE_CHARS if piece is None else piece  # (read when called: tests make it small)
    if len(text) <= 2 * piece or "\r" in text or "\f" in text:
        return None
    body: list[ast.stmt] = []
    start, line = 0, 0  # the piece's first character and its 0-based line in the text
    while start < len(text):
        end = _stdlib_end(text, start + piece, piece)
        tries = 0
        while True:
            back = None
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the linted code's own warnings are not ours
                    part = ast.parse(text[start:end])
                break
            except SyntaxError as exc:  # (an unterminated string or bracket: where it opens)
                back = _cut_before(text, start, end, exc.lineno)
            except Exception:  # noqa: BLE001 - whatever a piece says, the whole parse decides
                pass
            tries += 1
            if tries > _STDLIB_RETRIES:
                return None
            if back is not None:
                end = back  # the piece ends before the statement the string or bracket is in
            elif end == len(text):
                return None
            else:
                if end - start >= piece * _STDLIB_GROWTH:
                    return None  # (at the cap already: the whole parse decides)
                grown = start + piece * min(1 << tries, _STDLIB_GROWTH)  # (doubled at each retry, up to the cap)
                end = _stdlib_end(text, max(end, grown), piece)
        consume(part)
        body.extend(skeleton(part, line).body)
        del part
        line += text.count("\n", start, end)
        start = end
    return ast.Module(body=body, type_ignores=[])


def _stdlib_end(text: str, at: int, piece: int) -> int:
    """The end of a piece of the stdlib parse: the first cut line after ``at``, or the end of the text (also when
    less than half a piece would be left)."""
    found = _STDLIB_CUT.search(text, at)
    return found.end() if found is not None and len(text) - found.end() > piece // 2 else len(text)


def _cut_before(text: str, start: int, end: int, lineno: int | None) -> int | None:
    """The last cut line of ``text[start:end]`` at or before its line ``lineno`` (1-based; where the parse of that
    piece failed: the line an unterminated string or bracket opens on), if after ``start``."""
    if not lineno or lineno < 2:
        return None
    at = start
    for _ in range(lineno - 1):
        at = text.find("\n", at, end) + 1
        if at <= 0:
            return None
    last = None
    for found in _STDLIB_CUT.finditer(text, start, at + 1):
        last = found.end()
    return last if last is not None and start < last < end else None


def large(text: str) -> bool:
    """Is ``text`` a module parsed in pieces (and kept with a :func:`skeleton` of its stdlib tree)?"""
    return len(text) > 2 * PIECE_CHARS


def skeleton(tree: ast.Module, lines: int = 0) -> ast.Module:
    """The top level of ``tree`` without what lies below it: each top-level statement as a node of its own
    type holding its extent (``lineno``, ``col_offset``, ``end_lineno``, ``end_col_offset``), its decorators'
    lines and an empty ``body`` where it has one. That is all that :func:`parse_in_pieces` (cuts, default
    indentation) and the position table (``positions._statement_starts``) read of a tree; the whole stdlib
    tree of a large module takes ~80 bytes per byte of source (250 MB for a 3.1 MB module), the skeleton
    a few hundred bytes per top-level statement. ``lines``: added to every line number (a piece of a text)."""
    body: list[ast.stmt] = []
    for stmt in tree.body:
        node = type(stmt)()
        for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
            setattr(node, attr, getattr(stmt, attr, None))
        if lines:
            node.lineno += lines
            if node.end_lineno is not None:
                node.end_lineno += lines
        if "body" in stmt._fields:
            node.body = []  # type: ignore[attr-defined]
        decorators = getattr(stmt, "decorator_list", None)
        if decorators is not None:
            node.decorator_list = [ast.expr(lineno=d.lineno + lines, col_offset=d.col_offset)  # type: ignore[attr-defined]
                                   for d in decorators]
        body.append(node)
    return ast.Module(body=body, type_ignores=[])


__all__ = ["PIECE_CHARS", "cut_lines", "large", "parse_in_pieces", "skeleton", "stdlib_skeleton"]
