"""Large displays of numbers in a module parsed for another file's question (issue 15: one file's cost).

A module reached by another file's question (a call's target, a wrapper, a re-export: ``Engine._load_model``)
is parsed whole by LibCST, at about 30 us and 2 KB of memory per number of a literal table: a 294 KB module of
Hadamard matrices (18 one-line functions, each returning ``torch.FloatTensor([[+1,-1,...], ...])``) cost 8 s
and 600 MB to learn that its functions wrap no stream API.

Every question the analysis asks of a reached module is about names, calls, attributes, strings and the
shape of statements; a display holding numbers only (``int``, ``float``, ``complex`` literals, signed or not,
in nested lists, tuples, sets and dicts) names no stream, event, mode, tag, callable or module. Such a display
of at least :data:`MIN_NUMBERS` numbers is parsed as a display of the same kind holding one number (``[0]``,
``(0,)``, ``{0}``, ``{0:0}``, spread over its text: its brackets stay, the number and its comma or colon take
the next places that are no line break, every other character becomes a space except line breaks, which
stay: every line keeps its length and every node outside the display its position (the position table
generates code from the tree: the ranges are those of the whole text), the statement keeps its extent, and
the display stays a non-empty display of its kind.

Only for reached modules that the engine never lints: the byte prefilter skips them (no marker of an enabled
rule), so a reduced tree is never linted or fixed (fixes regenerate code from the tree), and a file has one
model in a run (a module linted after it was reached keeps the model other files' questions saw; a module
asked for itself, ``streamlint graph``, is parsed whole). The tree cache keeps no reduced tree. Displays inside f-strings, with a comment, a starred element or a ``**`` entry, and
tuples whose first bracket is not their own are left as they are.

Cost on modules without such a display: a byte translation and a search (a display of N numbers is a run of
at least 2N - 1 characters drawn from digits, signs, dots, commas, brackets, colons, ``xXjJeE_``, hex letters
and blanks); Python's parser runs only when the run is found.
"""

from __future__ import annotations

import ast
import re

MIN_NUMBERS = 1024  # a display of fewer numbers is parsed as it is (~30 ms of LibCST at this size)

_RUN = 2 * MIN_NUMBERS - 1
_NUMBER_BYTES = b"0123456789abcdefABCDEFxXjJ_.,+-:()[]{} \t\n\r\f\\"
_TABLE = bytes(0x31 if i in _NUMBER_BYTES else 0x30 for i in range(256))
_OPEN = {ast.List: "[0", ast.Set: "{0", ast.Tuple: "(0,", ast.Dict: "{0:0"}
_CLOSE = {"[": "]", "(": ")", "{": "}"}
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")  # the lines of the stdlib's line numbers


def may_hold(data: bytes) -> bool:
    """Could the text hold a display of :data:`MIN_NUMBERS` numbers (a run of ``2 * MIN_NUMBERS - 1`` bytes
    that such a display's text is made of)? False is sure; True needs :func:`displays`."""
    return len(data) >= _RUN and b"1" * _RUN in data.translate(_TABLE)


def _numbers(node: ast.AST) -> int | None:
    """How many numbers a display of numbers holds (a number: 1); None if ``node`` is anything else."""
    kind = type(node)
    if kind is ast.Constant:
        return 1 if type(node.value) in (int, float, complex) else None  # type: ignore[attr-defined]
    if kind is ast.UnaryOp:
        op, operand = node.op, node.operand  # type: ignore[attr-defined]
        return 1 if type(op) in (ast.UAdd, ast.USub) and type(operand) is ast.Constant \
            and type(operand.value) in (int, float, complex) else None
    if kind in (ast.List, ast.Tuple, ast.Set):
        parts = node.elts  # type: ignore[attr-defined]
    elif kind is ast.Dict:
        if any(key is None for key in node.keys):  # type: ignore[attr-defined]
            return None  # (`**mapping`)
        parts = [*node.keys, *node.values]  # type: ignore[attr-defined]
    else:
        return None
    total = 0
    for part in parts:
        count = _numbers(part)
        if count is None:
            return None
        total += count
    return total


def displays(tree: ast.Module, lines: list[str] | None = None) -> list[tuple[int, int, int, int, str]]:
    """The outermost displays of at least :data:`MIN_NUMBERS` numbers in ``tree``, not inside f-strings, as
    (first line, its column, last line, its column, the opener of the reduced display): 0-based lines, character
    columns (end exclusive). With ``lines`` (the text's lines, ends kept), only displays whose text is the plain
    display (its own brackets, no comment); the displays inside one that is not are looked at instead."""
    found: list[tuple[int, int, int, int, str]] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.JoinedStr:
            continue
        if kind in _OPEN:
            try:
                count = _numbers(node)
            except RecursionError:
                count = None
            if count is not None and count < MIN_NUMBERS:
                continue  # (every display inside it is smaller too)
            if count is not None:
                span = _span(node, lines) if lines is not None else (node.lineno - 1, 0, 0, 0, _OPEN[kind])
                if span is not None:
                    found.append(span)
                    continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def _column(line: str, offset: int) -> int:
    """The character column of UTF-8 byte ``offset`` of ``line`` (the stdlib's columns are bytes)."""
    return offset if line.isascii() else len(line.encode("utf-8")[:offset].decode("utf-8", "replace"))


def _span(node: ast.AST, lines: list[str]) -> tuple[int, int, int, int, str] | None:
    """Where a display's text is in ``lines``, if it is the plain display: its own brackets (not those of
    ``(1, 2), (3, 4)``'s first tuple), no comment."""
    end_line, end_offset = node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
    if end_line is None or end_offset is None or not 0 < node.lineno <= end_line <= len(lines):  # type: ignore
        return None
    first, last = node.lineno - 1, end_line - 1  # type: ignore[attr-defined]
    start, end = _column(lines[first], node.col_offset), _column(lines[last], end_offset)  # type: ignore
    text = _text(lines, first, start, last, end)
    opener = _OPEN[type(node)]
    if text[0] != opener[0] or text[-1] != _CLOSE[text[0]] or "#" in text \
            or len(text) - text.count("\n") - text.count("\r") <= len(opener):
        return None
    depth = 0
    for k, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return (first, start, last, end, opener) if k == len(text) - 1 else None
    return None


def _text(lines: list[str], first: int, start: int, last: int, end: int) -> str:
    if first == last:
        return lines[first][start:end]
    return lines[first][start:] + "".join(lines[first + 1:last]) + lines[last][:end]


def lightened(text: str, tree: ast.Module) -> str | None:
    """``text`` with each display of :func:`displays` reduced to one number as described above (None: none)."""
    if "\r" in text and re.search("\r(?!\n)", text):
        return None  # (a lone carriage return: how the stdlib's tokenizer counts its lines is not asked here)
    lines = _LINE.findall(text)
    found = displays(tree, lines)
    if not found:
        return None
    for first, start, last, end, opener in found:  # (disjoint; each keeps every line's length)
        span = _text(lines, first, start, last, end)
        chars = [ch if ch in "\r\n" else " " for ch in span]
        chars[0], chars[-1], k = span[0], span[-1], 1
        for ch in opener[1:]:  # (the reduced display's first number and its comma or colon: not on a line break)
            while chars[k] != " ":
                k += 1
            chars[k] = ch
            k += 1
        body = lines[first][:start] + "".join(chars) + lines[last][end:]
        lines[first:last + 1] = _LINE.findall(body)
    return "".join(lines)
