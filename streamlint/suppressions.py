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
    header = True
    lines = [line.rstrip("\r\n") for line in split_lines(text)]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return result
    for tok in tokens:
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING):
            if tok.type != tokenize.INDENT and tok.type != tokenize.DEDENT:
                header = False
        if tok.type != tokenize.COMMENT:
            continue
        line, col = tok.start
        comment = tok.string
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


def _statement_ranges(tree: ast.Module | None) -> list[tuple[int, int]]:
    if tree is None:
        return []
    ranges = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            ranges.append((node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno))
    ranges.sort()
    return ranges


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
