"""The data every stage exchanges: spans, findings, fixes."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


class Confidence(str, enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class FixSafety(str, enum.Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Span:
    """A source range: 1-based lines, 0-based columns counted in code points."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Location:
    path: str
    span: Span
    message: str = ""


@dataclass(frozen=True)
class Edit:
    """Replace the text covered by ``span`` with ``content``."""

    span: Span
    content: str


@dataclass(frozen=True)
class Fix:
    title: str
    safety: FixSafety
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    severity: Severity
    confidence: Confidence
    path: str
    span: Span
    related: tuple[Location, ...] = ()
    fix: Fix | None = None
    # What to do, in one sentence naming the place (printed as the ``fix:`` line when there is no edit,
    # so the message itself stays one short line).
    hint: str = ""
    # Files other than ``path`` whose content the finding depends on (cache invalidation).
    depends_on: tuple[str, ...] = field(default=(), compare=False)

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.span.start_line, self.span.start_col, self.code, self.message)

    def with_changes(self, **changes) -> "Finding":
        return replace(self, **changes)
