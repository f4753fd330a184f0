"""Suppression comments, applied by the engine after every rule ran (so unused ones are found).

- trailing ``# noqa: SL201, SL301`` on the line a finding starts (other tools' codes are ignored);
- own-line ``# streamlint: ignore[SL201]`` covering the whole next statement;
- file-level ``# streamlint: noqa`` / ``# streamlint: noqa: SL1`` among the first comment lines.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Iterator

from streamlint.finding import Span
from streamlint.source import split_lines

_NOQA_RE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_IGNORE_RE = re.compile(r"#\s*streamlint:\s*ignore\[(?P<codes>[^\]]*)\]")
# codes, then an optional free reason after them (e.g. "-- generated code")
_FILE_RE = re.compile(
    r"#\s*streamlint:\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?(?![:\w-])", re.IGNORECASE
)
_CODE_SPLIT = re.compile(r"[\s,]+")
SL_CODE = re.compile(r"^SL[0-9]+$")


@dataclass(eq=False)
class Suppression:
    kind: str  # "noqa" | "ignore" | "file"
    codes: tuple[str, ...] | None  # None: every code (blanket)
    first_line: int
    last_line: int
    span: Span  # the comment itself
    used: set[str] = field(default_factory=set)

    def covers(self, code: str, line: int) -> bool:
        if not (self.first_line <= line <= self.last_line):
            return False
        if self.codes is None:
            return True
        return any(code.startswith(c) for c in self.codes)  # a code or a prefix of codes


def _codes(raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    codes = tuple(c.upper() for c in _CODE_SPLIT.split(raw.strip()) if c)
    return codes or None


def parse_suppressions(text: str, tree: ast.Module | None) -> list[Suppression]:
    """Find suppression comments with tokenize (so `#` inside strings is not mistaken for one)."""
    if "noqa" not in text and "streamlint:" not in text:
        return []
    result: list[Suppression] = []
    statements = _statement_ranges(tree)
    lines = [line.rstrip("\r\n") for line in split_lines(text)]
    comments = _comments_fast(text, tree)
    if comments is None:
        comments = _comments_tokenized(text)
    for line, col, comment, header in comments:
        span = Span(line, col, line, col + len(comment))
        own_line = lines[line - 1][:col].strip() == "" if line - 1 < len(lines) else True
        m = _FILE_RE.search(comment)
        if m and own_line and header:
            result.append(Suppression("file", _codes(m.group("codes")), 1, 10**9, span))
            continue
        m = _IGNORE_RE.search(comment)
        if m and own_line:
            codes = _codes(m.group("codes"))
            inside = _simple_statement_around(tree, line)
            # inside a multi-line simple statement (between call arguments): the rest of that statement
            last = inside[1] if inside is not None else _next_statement_end(statements, line)
            result.append(Suppression("ignore", codes, line + 1, last, span))
            continue
        m = _NOQA_RE.search(comment)
        if m and not _FILE_RE.search(comment):
            codes = _codes(m.group("codes"))
            first, last = _enclosing_statement(statements, line)
            result.append(Suppression("noqa", codes, line, line, span))
            if (first, last) != (line, line):
                # a noqa on the last line of a multi-line statement covers findings starting in it
                result[-1].first_line = first if last == line else line
    return result


_HEADER_TOKENS = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING, tokenize.INDENT,
                  tokenize.DEDENT)


def _comments_tokenized(text: str) -> list[tuple[int, int, str, bool]]:
    """(line, column, text, among the header comments) of every comment, from the whole token stream."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    out = []
    header = True
    for tok in tokens:
        if tok.type not in _HEADER_TOKENS:
            header = False
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.start[1], tok.string, header))
    return out


# where a suppression comment may start (every one of the three patterns begins so)
_CANDIDATE_RE = re.compile(r"#\s*(?:noqa|streamlint:)", re.IGNORECASE)


def _comments_fast(text: str, tree: ast.Module | None) -> list[tuple[int, int, str, bool]] | None:
    """The comments :func:`_comments_tokenized` gives that may hold a suppression, without tokenizing the
    module (Python's tokenizer is pure Python here: ~0.25 s for a 100 KB module, more than the rest of a
    cached run): a line holding a candidate ``#`` has its comment at its first ``#`` outside every string
    literal of the stdlib tree; only the header (comments before the first code token) is tokenized.
    None when undecidable this way (no tree, a line ending other than ``\n``, a candidate inside a string
    literal's range: e.g. a comment between the parts of an implicitly concatenated string)."""
    if tree is None or "\r" in text:
        return None
    candidates: dict[int, list[int]] = {}  # line -> offsets of candidate `#`s in the text
    line, counted = 1, 0
    for m in _CANDIDATE_RE.finditer(text):
        line += text.count("\n", counted, m.start())
        counted = m.start()
        candidates.setdefault(line, []).append(m.start())
    if not candidates:
        return []  # (no comment can match any pattern)
    starts = [0, 0]  # line -> offset of its first character
    for _ in range(2, max(candidates) + 1):
        starts.append(text.index("\n", starts[-1]) + 1)
    raw_lines: dict[int, str] = {}

    def line_text(line: int) -> str:
        found = raw_lines.get(line)
        if found is None:
            end = text.find("\n", starts[line])
            found = raw_lines[line] = text[starts[line]:] if end < 0 else text[starts[line]:end]
        return found

    def column(line: int, byte_offset: int) -> int:
        s = line_text(line)
        return byte_offset if s.isascii() else len(s.encode("utf-8")[:byte_offset].decode("utf-8", "replace"))

    # string literal ranges, as (start line, start column, end line, end column) in characters
    ranges: list[tuple[int, int, int, int]] = []
    first = min(candidates)
    last = max(candidates)
    for node in _nodes_on_lines(tree, first, last):
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))):
            end_line = getattr(node, "end_lineno", None)
            end_col = getattr(node, "end_col_offset", None)
            if end_line is None or end_col is None:
                return None
            if end_line < first or node.lineno > last:
                continue
            ranges.append((node.lineno, column(node.lineno, node.col_offset) if node.lineno <= last else 0,
                           end_line, column(end_line, end_col) if end_line <= last else 0))

    def in_string(line: int, col: int) -> bool:
        return any((sl, sc) <= (line, col) < (el, ec) for sl, sc, el, ec in ranges)

    # the header: comments before the first code token (tokenized only that far)
    code_start: tuple[int, int] | None = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type not in _HEADER_TOKENS:
                code_start = tok.start
                break
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    out = []
    for line in sorted(candidates):
        s = line_text(line)
        found = None
        for offset in candidates[line]:
            col = offset - starts[line]
            if in_string(line, col):
                return None
        for col, ch in enumerate(s):
            if ch == "#" and not in_string(line, col):
                found = col
                break
        if found is None or found > candidates[line][0] - starts[line]:
            return None
        out.append((line, found, s[found:], code_start is None or (line, found) < code_start))
    return out


def _statement_ranges(tree: ast.Module | None) -> list[tuple[int, int]]:
    if tree is None:
        return []
    ranges = [(node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno) for node in _statements(tree)]
    ranges.sort()
    return ranges


# the fields that hold statements (a statement is never inside an expression): ``ast.walk`` without the
# expressions, which are most of a module's nodes
_SUITES = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(tree: ast.AST) -> Iterator[ast.stmt]:
    """Every statement of ``tree`` (the ``ast.stmt`` nodes ``ast.walk`` yields, in another order)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for name in _SUITES:
            suite = getattr(node, name, None)
            if type(suite) is list:
                for child in suite:
                    if isinstance(child, ast.stmt):
                        yield child
                    stack.append(child)  # (an except handler or a match case holds statements too)


def _nodes_on_lines(tree: ast.AST, first: int, last: int) -> Iterator[ast.AST]:
    """The nodes of ``ast.walk(tree)`` but those inside a statement that lies wholly before line ``first`` or
    after line ``last`` (its decorators included): every node of a statement lies within its lines."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            end = getattr(node, "end_lineno", None)
            if end is not None and (end < first or start > last):
                continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _simple_statement_around(tree: ast.Module | None, line: int) -> tuple[int, int] | None:
    """The (start, end) of a simple (non-compound) statement spanning ``line`` strictly after its start."""
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not hasattr(node, "body"):
            end = getattr(node, "end_lineno", None) or node.lineno
            if node.lineno < line <= end:
                return node.lineno, end
    return None


def _next_statement_end(statements: list[tuple[int, int]], line: int) -> int:
    for start, end in statements:
        if start > line:
            return end
    return line + 1


def _enclosing_statement(statements: list[tuple[int, int]], line: int) -> tuple[int, int]:
    best = (line, line)
    for start, end in statements:
        if start <= line <= end and not _is_compound_span(start, end, line):
            best = (start, end)
    return best


def _is_compound_span(start: int, end: int, line: int) -> bool:
    return False
