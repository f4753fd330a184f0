"""Reading a file: bytes → text (PEP 263) with a line index, without ever executing it."""

from __future__ import annotations

import codecs
import io
import re
import tokenize
from dataclasses import dataclass
from functools import cached_property

from streamlint.finding import Span


_NEWLINE = re.compile(r"(\r\n|\r|\n)")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where Python's tokenizer splits: at ``\r\n``, ``\r`` and ``\n``
    only (``str.splitlines`` also splits at form feeds, ``\x1c``, ``\u2028``…, which would shift every
    line number after one of them)."""
    parts = _NEWLINE.split(text)
    lines = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2)]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


class UndecodableSource(Exception):
    def __init__(self, message: str, line: int = 1, col: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.col = col


@dataclass
class SourceFile:
    """The decoded text of one file plus what is needed to write it back unchanged."""

    path: str
    data: bytes
    text: str
    encoding: str
    bom: bool

    @classmethod
    def from_bytes(cls, path: str, data: bytes) -> "SourceFile":
        if b"\x00" in data:
            raise UndecodableSource("binary file: contains NUL bytes")
        bom = data.startswith(codecs.BOM_UTF8)
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as exc:
            raise UndecodableSource(f"bad coding declaration: {exc}") from None
        if encoding == "utf-8-sig":
            encoding = "utf-8"
        payload = data[len(codecs.BOM_UTF8):] if bom else data
        try:
            text = payload.decode(encoding)
        except UnicodeDecodeError as exc:
            line = payload[: exc.start].count(b"\n") + 1
            col = exc.start - (payload.rfind(b"\n", 0, exc.start) + 1)
            raise UndecodableSource(
                f"cannot decode as {encoding}: byte 0x{payload[exc.start]:02x} at offset {exc.start}",
                line,
                col,
            ) from None
        except LookupError:
            raise UndecodableSource(f"unknown encoding {encoding!r}") from None
        return cls(path=path, data=data, text=text, encoding=encoding, bom=bom)

    @cached_property
    def lines(self) -> list[str]:
        return split_lines(self.text) or [""]

    @cached_property
    def newline(self) -> str:
        match = re.search(r"\r\n|\r|\n", self.text)
        return match.group(0) if match else "\n"

    def line_text(self, line: int) -> str:
        if 1 <= line <= len(self.lines):
            return self.lines[line - 1].rstrip("\r\n")
        return ""

    @cached_property
    def _line_offsets(self) -> list[int]:
        offsets = [0]
        for text in self.lines:
            offsets.append(offsets[-1] + len(text))
        return offsets

    def offset(self, line: int, col: int) -> int:
        """Code-point offset of a 1-based line / 0-based column."""
        line = max(1, min(line, len(self.lines) + 1))
        base = self._line_offsets[line - 1] if line - 1 < len(self._line_offsets) else len(self.text)
        return min(base + col, len(self.text))

    def apply_edits(self, edits: "list[tuple[Span, str]]") -> str:
        """Apply non-overlapping edits (given in any order) and return the new text."""
        text = self.text
        for span, content in sorted(edits, key=lambda e: (e[0].start_line, e[0].start_col), reverse=True):
            start = self.offset(span.start_line, span.start_col)
            end = self.offset(span.end_line, span.end_col)
            text = text[:start] + content + text[end:]
        return text

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data
