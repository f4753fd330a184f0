"""Applying fixes: select, apply, verify, iterate to a fixpoint, write atomically; and `--add-noqa`.

A finding's :class:`~streamlint.finding.Fix` is a set of text edits on code-point spans of the file as it
was linted. Per round, the fixes allowed by the policy are taken in finding order; a fix whose edits
overlap an already chosen one waits for the next round (first in sort order wins). The chosen edits are
applied together; the result must encode in the file's encoding and parse (``ast`` and LibCST), and
re-linting it (through :meth:`Engine.set_override`, so the rest of the project is read from disk) must
not report the fixed findings again. A fix failing any check is discarded, reported, and never tried
again; the others are re-applied without it. Rounds repeat until nothing changes (at most
``MAX_ROUNDS``). Writing keeps the encoding, the BOM and the line endings (edits' ``"\\n"`` become the
file's newline) and goes through a temporary file in the same folder and ``os.replace``.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import io
import os
import re
import stat
import tempfile
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from streamlint._lazy import cst

from streamlint.finding import Finding, FixSafety, sure_enough
from streamlint.source import SourceFile, UndecodableSource

if TYPE_CHECKING:
    from streamlint.config import Settings
    from streamlint.engine import Engine, FileReport
    from streamlint.registry import Registry

MAX_ROUNDS = 5
_NEWLINES = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class FixPolicy:
    """Which fixes may be applied: the codes allowed by ``fixable``/``unfixable`` and the safety level."""

    codes: frozenset[str]
    unsafe: bool = False
    min_confidence: str = "low"  # a finding `min-confidence` hides is not fixed either

    @classmethod
    def from_settings(cls, settings: "Settings", registry: "Registry", unsafe: bool | None = None) -> "FixPolicy":
        codes = {r.code for sel in settings.fixable for r in registry.lookup(sel)}
        codes -= {r.code for sel in settings.unfixable for r in registry.lookup(sel)}
        return cls(frozenset(codes), settings.unsafe_fixes if unsafe is None else unsafe, settings.min_confidence)

    def safety(self, finding: Finding, registry: "Registry | None" = None) -> FixSafety | None:
        """The effective safety of a finding's fix: unsafe when either the fix or its rule says so."""
        if finding.fix is None:
            return None
        rule = registry.rules.get(finding.code) if registry is not None else None
        if finding.fix.safety is FixSafety.UNSAFE or (rule is not None and rule.fix_safety is FixSafety.UNSAFE):
            return FixSafety.UNSAFE
        return FixSafety.SAFE

    def allows(self, finding: Finding, registry: "Registry | None" = None) -> bool:
        safety = self.safety(finding, registry)
        if safety is None or not finding.fix.edits or finding.code not in self.codes:  # type: ignore[union-attr]
            return False
        if not sure_enough(finding, self.min_confidence):
            return False
        return self.unsafe or safety is FixSafety.SAFE


@dataclass(frozen=True)
class RejectedFix:
    finding: Finding
    reason: str


@dataclass
class FixResult:
    path: str
    source: SourceFile | None  # the file as read before fixing
    text: str | None  # the fixed text (None: unchanged)
    applied: list[Finding] = field(default_factory=list)
    rejected: list[RejectedFix] = field(default_factory=list)
    report: "FileReport | None" = None  # the findings that remain after fixing
    original: "FileReport | None" = None  # the findings before fixing (reported when the file is not written)

    def not_written(self) -> None:
        """The fixed text could not be written: the file and its findings are as they were."""
        self.text = None
        self.applied = []
        self.report = self.original or self.report

    @property
    def changed(self) -> bool:
        return self.source is not None and self.text is not None and self.text != self.source.text

    def new_bytes(self) -> bytes:
        assert self.source is not None and self.text is not None
        return self.source.encode(self.text)

    def diff(self, name: str) -> str:
        """A unified diff (``a/name`` → ``b/name``); empty when unchanged."""
        if not self.changed:
            return ""
        assert self.source is not None and self.text is not None
        return unified_diff(self.source.text, self.text, name)


def unified_diff(old: str, new: str, name: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{name}", tofile=f"b/{name}")
    out = []
    for line in lines:
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out)


# ---- edits on one text

@dataclass(frozen=True)
class _Candidate:
    finding: Finding
    edits: tuple[tuple[int, int, str], ...]  # (start offset, end offset, content) sorted, non-overlapping
    key: tuple


def _candidate(finding: Finding, source: SourceFile) -> _Candidate | str:
    assert finding.fix is not None
    edits = []
    for edit in finding.fix.edits:
        start = source.offset(edit.span.start_line, edit.span.start_col)
        end = source.offset(edit.span.end_line, edit.span.end_col)
        if end < start:
            return "edit range ends before it starts"
        edits.append((start, end, _NEWLINES.sub(source.newline, edit.content)))
    edits.sort(key=lambda e: (e[0], e[1]))
    for (s1, e1, _), (s2, e2, _) in zip(edits, edits[1:], strict=False):
        if _overlap(s1, e1, s2, e2):
            return "the fix's own edits overlap"
    key = (finding.code, " ".join(source.line_text(finding.span.start_line).split()), finding.fix.title,
           tuple(e.content for e in finding.fix.edits))
    return _Candidate(finding, tuple(edits), key)


def _overlap(s1: int, e1: int, s2: int, e2: int) -> bool:
    if max(s1, s2) < min(e1, e2):
        return True
    # an insertion touching another edit has no well-defined order: treat it as a conflict
    if s1 == e1 and s2 <= s1 <= e2:
        return True
    return s2 == e2 and s1 <= s2 <= e1


def _conflicts(a: _Candidate, b: _Candidate) -> bool:
    return any(_overlap(s1, e1, s2, e2) for s1, e1, _ in a.edits for s2, e2, _ in b.edits)


def _apply(text: str, candidates: Iterable[_Candidate]) -> str:
    edits = sorted((e for c in candidates for e in c.edits), key=lambda e: (e[0], e[1]), reverse=True)
    for start, end, content in edits:
        text = text[:start] + content + text[end:]
    return text


def _map_offset(offset: int, candidates: Iterable[_Candidate]) -> int:
    """Where ``offset`` of the old text lands in the text after applying ``candidates``."""
    shift = 0
    for c in candidates:
        for start, end, content in c.edits:
            if end <= offset and not (start == end == offset):
                shift += len(content) - (end - start)
            elif start < offset < end:
                shift += start - offset  # inside a replaced range: its start
    return offset + shift


def _problem(source: SourceFile, text: str) -> str | None:
    """Why ``text`` cannot replace the file's content (None if it can)."""
    try:
        source.encode(text)
    except UnicodeEncodeError:
        return f"the fixed text cannot be encoded as {source.encoding}"
    try:
        ast.parse(text)
        cst.parse_module(text)
    except (SyntaxError, ValueError, cst.ParserSyntaxError) as exc:
        return f"the fixed file would not parse ({type(exc).__name__}: {str(exc).splitlines()[0]})"
    except (RecursionError, MemoryError):
        return "the fixed file would be too deeply nested to parse"
    return None


class _Lines:
    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in _NEWLINES.finditer(text)]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)


# ---- one file

def fix_file(engine: "Engine", path: str, policy: FixPolicy, *, max_rounds: int = MAX_ROUNDS,
             restore: bytes | None = None) -> FixResult:
    """Fix ``path`` in memory (nothing is written). The result holds the new text, what was fixed,
    what was rejected and the findings that remain. Afterwards the engine reads the file from disk, or
    from ``restore`` when given (an editor buffer that stays open)."""
    report = engine.lint_file(path)
    result = FixResult(path, report.source, None, report=report, original=report)
    if report.source is None:
        return result
    original = report.source
    text = original.text
    rejected: dict[tuple, RejectedFix] = {}
    overridden = False  # setting an override drops the project's caches: only when a fix is tried
    try:
        for _ in range(max_rounds):
            current = SourceFile(original.path, original.data, text, original.encoding, original.bom)
            pending: list[_Candidate] = []
            for finding in report.findings:
                if not policy.allows(finding, engine.registry):
                    continue
                cand = _candidate(finding, current)
                if isinstance(cand, str):
                    key = (finding.code, finding.span, finding.fix.title if finding.fix else "")
                    rejected.setdefault(key, RejectedFix(finding, cand))
                    continue
                if cand.key not in rejected:
                    pending.append(cand)
            progressed = False
            while pending:
                chosen: list[_Candidate] = []
                for cand in pending:
                    if not any(_conflicts(cand, other) for other in chosen):
                        chosen.append(cand)
                new_text = _apply(text, chosen)
                problem = _problem(current, new_text)
                if problem is not None:
                    culprits = [c for c in chosen if _problem(current, _apply(text, [c])) is not None]
                    if not culprits:  # only their combination fails: keep the first, retry the rest later
                        culprits = chosen[1:]
                        for c in culprits:
                            pending.remove(c)
                        continue
                    for c in culprits:
                        rejected[c.key] = RejectedFix(c.finding, _problem(current, _apply(text, [c])) or problem)
                        pending.remove(c)
                    continue
                engine.set_override(path, current.encode(new_text))
                overridden = True
                new_report = engine.lint_file(path)
                failed = _not_fixed(report.findings, chosen, new_text, new_report.findings, current)
                reason = "re-linting the fixed file still reports it"
                crashes = sum(f.code == "SL000" for f in new_report.findings)
                if crashes > sum(f.code == "SL000" for f in report.findings):
                    failed, reason = list(chosen), "a rule crashed on the fixed file"
                if failed:
                    for c in failed:
                        rejected[c.key] = RejectedFix(c.finding, reason)
                        pending.remove(c)
                    engine.set_override(path, current.encode(text) if text != original.text else restore)
                    continue
                text, report = new_text, new_report
                result.applied.extend(c.finding for c in chosen)
                progressed = True
                break
            if not progressed:
                break
    finally:
        if overridden:
            engine.set_override(path, restore)
    result.text = text
    result.report = report
    result.rejected = sorted(rejected.values(), key=lambda r: r.finding.sort_key)
    return result


def _not_fixed(before: list[Finding], chosen: list[_Candidate], new_text: str, after: list[Finding],
               source: SourceFile) -> list[_Candidate]:
    """The chosen fixes whose finding (same code, mapped to the same line) is still reported."""
    lines = _Lines(new_text)

    def where(f: Finding) -> tuple[str, int]:
        offset = source.offset(f.span.start_line, f.span.start_col)
        return f.code, lines.line(_map_offset(offset, chosen))

    fixed_ids = {id(c.finding) for c in chosen}
    expected = Counter(where(f) for f in before if id(f) not in fixed_ids)
    actual = Counter((f.code, f.span.start_line) for f in after)
    return [c for c in chosen if actual[where(c.finding)] > expected[where(c.finding)]]


# ---- writing

class WriteRefused(Exception):
    """A fixed file is not written; the message says why (per file: the other files are still written)."""

    def __init__(self, message: str, error: bool = False) -> None:
        super().__init__(message)
        self.error = error  # True: the write failed (exit 2); False: a deliberate refusal (a warning)


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def write_fixed(path: str, original: bytes, data: bytes, root: str | None = None) -> None:
    """Write the fixed ``data`` of ``path``, read as ``original``; :class:`WriteRefused` when not written.

    - a symbolic link is written through to its target, if that is inside ``root`` (else refused);
    - a read-only file is not rewritten;
    - the content is compared with ``original`` right before writing: a file changed on disk meanwhile
      (an editor, another tool) is not overwritten;
    - the file keeps its inode where that matters: a file with several hard links, or owned by someone
      else, is rewritten in place (same inode, owner, mode, links); else through a temporary file in
      the same folder and ``os.replace``, with the file's mode and group (and in place when the folder is
      not writable)."""
    target = path
    if os.path.islink(path):
        target = os.path.realpath(path)
        if root is not None and not _inside(target, os.path.realpath(root)):
            raise WriteRefused(f"a symbolic link to {target}, outside the project; not rewritten")
    try:
        st = os.stat(target)
        if not stat.S_ISREG(st.st_mode):
            raise WriteRefused("not a regular file; not rewritten")
        if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(target, os.W_OK):
            raise WriteRefused("read-only file; not rewritten")
        with open(target, "rb") as fh:
            current = fh.read()
    except OSError as exc:
        raise WriteRefused(f"cannot write the fixes: {exc.strerror or exc}", error=True) from None
    if current != original:
        raise WriteRefused("changed on disk since it was read; not rewritten (run again)")
    try:
        in_place = st.st_nlink > 1 or (hasattr(os, "geteuid") and st.st_uid != os.geteuid())
        if not in_place:
            try:
                write_atomic(target, data, st)
            except PermissionError:
                in_place = True  # a folder we may not create files in: the file itself may be writable
        if in_place:
            with open(target, "r+b") as fh:
                fh.write(data)
                fh.truncate()
                fh.flush()
                os.fsync(fh.fileno())
    except OSError as exc:
        raise WriteRefused(f"cannot write the fixes: {exc.strerror or exc}", error=True) from None


def write_atomic(path: "str | os.PathLike[str]", data: bytes, st: "os.stat_result | None" = None) -> None:
    """Replace ``path`` by ``data`` through a temporary file in the same folder (keeping the mode of the
    file it replaces, and with ``st`` its group too)."""
    path = os.fspath(path)
    if st is None:
        try:
            st = os.stat(path)
        except OSError:
            st = None
    fd, tmp = tempfile.mkstemp(prefix=".streamlint-", suffix=".tmp", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if st is not None:
            if hasattr(os, "chown") and hasattr(os, "getegid") and st.st_gid != os.getegid():
                os.chown(tmp, -1, st.st_gid)
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---- --add-noqa

_NOQA_CODES = re.compile(r"#\s*noqa:\s*[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*", re.IGNORECASE)
_BLANKET_NOQA = re.compile(r"#\s*noqa(?!:)", re.IGNORECASE)


def add_noqa_text(source: SourceFile, findings: Iterable[Finding]) -> tuple[str, int, list[Finding]]:
    """Append ``# noqa: CODE`` (merged into an existing noqa comment) on each finding's start line.

    Returns (new text, number of lines changed, findings that could not get one — a line ending inside
    a multi-line string or with a backslash continuation, or a file that does not tokenize)."""
    edits, skipped = noqa_edits(source, findings)
    text = source.text
    for start, end, content in sorted(edits, reverse=True):
        text = text[:start] + content + text[end:]
    return text, len(edits), skipped


def noqa_edits(source: SourceFile, findings: Iterable[Finding]) -> tuple[list[tuple[int, int, str]], list[Finding]]:
    """The text edits (start offset, end offset, content) that add ``# noqa`` comments for ``findings``,
    and the findings that cannot get one."""
    by_line: dict[int, list[Finding]] = {}
    for f in findings:
        if f.code in ("SL000", "SL001"):
            continue
        by_line.setdefault(f.span.start_line, []).append(f)
    if not by_line:
        return [], []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source.text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [], [f for fs in by_line.values() for f in fs]
    comments: dict[int, tuple[int, str]] = {}
    inside_string: set[int] = set()
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = (tok.start[1], tok.string)
        elif tok.start[0] != tok.end[0]:
            inside_string.update(range(tok.start[0], tok.end[0]))
    edits: list[tuple[int, int, str]] = []
    skipped: list[Finding] = []
    for line, fs in sorted(by_line.items()):
        codes = sorted({f.code for f in fs})
        content = source.line_text(line)
        if line in inside_string or content.rstrip().endswith("\\"):
            skipped.extend(fs)
            continue
        if line in comments:
            col, comment = comments[line]
            if _BLANKET_NOQA.search(comment) and not _NOQA_CODES.search(comment):
                continue
            m = _NOQA_CODES.search(comment)
            if m:
                have = {c.upper() for c in re.split(r"[\s,:]+", m.group(0).split(":", 1)[1]) if c}
                new = [c for c in codes if c not in have]
                if new:
                    at = source.offset(line, col + m.end())
                    edits.append((at, at, ", " + ", ".join(new)))
                continue
        end = source.offset(line, len(content))
        stripped = len(content.rstrip())
        start = source.offset(line, stripped)
        edits.append((start, end, f"  # noqa: {', '.join(codes)}"))
    return edits, skipped


def add_noqa_file(engine: "Engine", path: str, findings: Iterable[Finding]) -> tuple[int, list[Finding]]:
    """Write ``# noqa`` comments for ``findings`` into ``path``; (lines changed, findings skipped)."""
    try:
        source = SourceFile.from_bytes(path, engine.read(path))
    except (OSError, UndecodableSource):
        return 0, list(findings)
    text, count, skipped = add_noqa_text(source, findings)
    if count:
        try:
            source.encode(text)
            ast.parse(text)
        except (UnicodeEncodeError, SyntaxError, ValueError):
            return 0, list(findings)
        write_fixed(path, source.data, source.encode(text), str(engine.root))
        engine.set_override(path, None)
    return count, skipped
