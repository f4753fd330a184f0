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
    # Other findings of this file (code, span) that the same remedy clears: one root cause, one finding. The
    # engine folds each into this one's related locations once suppressions are applied (``fold_root_causes``).
    absorbs: tuple[tuple[str, Span], ...] = field(default=(), compare=False)

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.span.start_line, self.span.start_col, self.code, self.message)

    def with_changes(self, **changes) -> "Finding":
        return replace(self, **changes)


SURE = {Confidence.HIGH: 2, Confidence.MEDIUM: 1, Confidence.LOW: 0}  # how sure, as a rank


def sure_enough(finding: "Finding", threshold: str) -> bool:
    """Is ``finding`` reported under the ``min-confidence`` setting ``threshold``? SL0xx (crashes, syntax errors,
    suppression problems) always are."""
    return finding.code.startswith("SL0") or SURE[finding.confidence] >= SURE[Confidence(threshold)]


def fold_root_causes(findings: list[Finding]) -> list[Finding]:
    """One defect, one finding: a finding whose remedy also clears others of the same file (``absorbs``) takes
    them as related locations, and they are not reported on their own. Not when the absorbed one is surer
    (a low finding must not hide a high one) or is itself absorbing (no chains: each fold is one step)."""
    if not any(f.absorbs for f in findings):
        return findings
    at = {(f.code, f.span): i for i, f in enumerate(findings)}
    folded: dict[int, list[int]] = {}
    gone: set[int] = set()
    for i, f in enumerate(findings):
        if i in gone:
            continue
        for key in f.absorbs:
            j = at.get(key)
            if j is None or j == i or j in gone or j in folded or findings[j].path != f.path \
                    or findings[j].absorbs or SURE[findings[j].confidence] > SURE[f.confidence]:
                continue
            folded.setdefault(i, []).append(j)
            gone.add(j)
    out = []
    for i, f in enumerate(findings):
        if i in gone:
            continue
        if i in folded:
            extra = tuple(Location(findings[j].path, findings[j].span,
                                   f"{findings[j].code}: {findings[j].message} (the same remedy clears it)")
                          for j in folded[i])
            f = replace(f, related=f.related + extra, absorbs=())
        out.append(f)
    return out
