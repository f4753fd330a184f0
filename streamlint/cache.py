"""The result cache: per-file findings, reused while nothing they depend on has changed.

Layout (``cache-dir``, default ``.streamlint_cache/`` in the project root)::

    .streamlint_cache/
        CACHEDIR.TAG            # tells backup tools to skip the directory
        .gitignore              # "*": never committed
        v2/results-<key>.json   # one file per effective configuration (older formats are removed)

``<key>`` hashes the streamlint version, the code of streamlint and of every registered rule module
(size and mtime: editing a rule invalidates), the layout of :class:`~streamlint.finding.Finding`, and
the effective settings minus output-only fields. An entry of the file is valid when

- the sha256 of the file's content equals the recorded one (read and hashed only when the file's size
  and mtime differ from the ones recorded with it; files modified within 2 s of being recorded are
  always read, as a same-size edit within the timestamp granularity would go unseen),
- every dependency still has its recorded sha256 (dependencies: the project modules the file's
  analysis could reach, i.e. the import closure of the file over the modules the project index had
  loaded, plus every ``Finding.depends_on``), and
- for an analysis that read project-wide facts (``Project.note_wide_read``: the file list, compile
  sites, environment settings), the stat digest of the project's files is unchanged.

Entries are JSON (a cache directory planted in a repository cannot run code); writes are atomic
(temporary file + ``os.replace``), so concurrent runs (pre-commit, editor) never read a torn file; the
last writer wins.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from streamlint import __version__
from streamlint.config import Settings
from streamlint.finding import Confidence, Edit, Finding, Fix, FixSafety, Location, Severity, Span
from streamlint.registry import Registry

CACHE_FORMAT = 2
_RACY_NS = 2_000_000_000  # files modified this recently are not trusted by their stat
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by streamlint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
# Settings fields that do not change what is found in a file.
OUTPUT_ONLY = frozenset({"output_format", "provenance", "cache_dir", "baseline", "fixable",
                         "unfixable", "unsafe_fixes", "exclude", "extend_exclude", "respect_gitignore",
                         "force_exclude"})


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cache_directory(settings: Settings) -> Path:
    directory = Path(settings.cache_dir or ".streamlint_cache")
    if not directory.is_absolute():
        directory = Path(settings.project_root) / directory
    return directory


def settings_fingerprint(settings: Settings) -> str:
    """A stable text form of the settings that influence findings."""
    values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.name not in OUTPUT_ONLY}
    return json.dumps(values, sort_keys=True, default=repr)


def code_fingerprint(registry: Registry) -> str:
    """Version plus size and mtime of streamlint's modules and of every rule module."""
    paths: set[str] = set()
    package = Path(__file__).resolve().parent
    for directory, _, names in os.walk(package):
        paths.update(os.path.join(directory, n) for n in names if n.endswith(".py"))
    for rule in registry.rules.values():
        module = sys.modules.get(rule.__module__)
        filename = getattr(module, "__file__", None)
        if filename:
            paths.add(os.path.abspath(filename))
    parts = [__version__, str(CACHE_FORMAT), ",".join(f.name for f in dataclasses.fields(Finding))]
    for path in sorted(paths):
        try:
            st = os.stat(path)
        except OSError:
            continue
        parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(parts)


def run_key(settings: Settings, registry: Registry, ignore_noqa: bool = False) -> str:
    text = "\n".join([code_fingerprint(registry), settings_fingerprint(settings), f"ignore_noqa={ignore_noqa}"])
    return sha256(text.encode("utf-8"))[:20]


def project_digest(root: str | Path, skip: Iterable[str] = (),
                   known: dict[str, os.stat_result | None] | None = None) -> str:
    """A cheap digest (path, size, mtime) of every file under ``root``: the state an analysis depends on
    when it read project-wide facts (compile sites, environment settings in launch scripts and YAML).

    Directories excluded by default (VCS, virtualenvs, caches, build output) and ``skip`` are not
    walked. Conservative: any edit in the tree changes it. ``known``: stats the caller took already
    (absolute path -> stat), not taken again.
    """
    from streamlint.discovery import DEFAULT_EXCLUDE

    pruned = set(DEFAULT_EXCLUDE)
    skipped = {os.path.abspath(p) for p in skip}
    h = hashlib.sha256()
    stack = [os.path.abspath(root)]
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in pruned and entry.path not in skipped:
                        stack.append(entry.path)
                elif entry.is_file():
                    st = known.get(entry.path) if known is not None else None
                    if st is None:
                        st = entry.stat()
                    h.update(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
            except OSError:
                continue
    return h.hexdigest()


# ---- findings <-> JSON
def _span(s: Span) -> list[int]:
    return [s.start_line, s.start_col, s.end_line, s.end_col]


def _abs(path: str) -> str:
    return path if path == "-" else os.path.abspath(path)


def encode_finding(f: Finding, path: str) -> dict[str, Any]:
    # other paths are stored absolute: an entry must mean the same from any current directory
    return {
        "c": f.code, "n": f.name, "m": f.message, "s": f.severity.value, "k": f.confidence.value,
        "p": None if f.path == path else _abs(f.path), "sp": _span(f.span),
        "r": [[_abs(loc.path), _span(loc.span), loc.message] for loc in f.related],
        "f": None if f.fix is None else [f.fix.title, f.fix.safety.value,
                                          [[_span(e.span), e.content] for e in f.fix.edits]],
        "d": [_abs(d) for d in f.depends_on],
    }


def decode_finding(d: dict[str, Any], path: str) -> Finding:
    fix = d["f"]
    return Finding(
        code=d["c"], name=d["n"], message=d["m"], severity=Severity(d["s"]), confidence=Confidence(d["k"]),
        path=path if d["p"] is None else d["p"], span=Span(*d["sp"]),
        related=tuple(Location(p, Span(*sp), m) for p, sp, m in d["r"]),
        fix=None if fix is None else Fix(fix[0], FixSafety(fix[1]), tuple(Edit(Span(*sp), c) for sp, c in fix[2])),
        depends_on=tuple(d["d"]),
    )


class ResultCache:
    """Per-file results of one configuration, loaded once and saved once per run."""

    def __init__(self, directory: Path, key: str) -> None:
        self.directory = directory
        self.key = key
        self.file = directory / f"v{CACHE_FORMAT}" / f"results-{key}.json"
        self.entries: dict[str, dict[str, Any]] = {}
        self.dirty = False
        self.hits = 0
        self.misses = 0
        self._load()

    @classmethod
    def for_settings(cls, settings: Settings, registry: Registry, ignore_noqa: bool = False) -> "ResultCache":
        return cls(cache_directory(settings), run_key(settings, registry, ignore_noqa))

    def _load(self) -> None:
        try:
            with open(self.file, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("key") == self.key and isinstance(data.get("files"), dict):
            self.entries = data["files"]

    def lookup(self, path: str, digest: str, dep_digest: Callable[[str], str],
               project_state: Callable[[], str]) -> list[Finding] | None:
        """The cached findings of ``path`` (content sha256 ``digest``) if still valid, else None."""
        entry = self.entries.get(os.path.abspath(path))
        if entry is None or entry.get("h") != digest:
            self.misses += 1
            return None
        try:
            for dep, dep_hash in entry.get("d", {}).items():
                if dep_digest(dep) != dep_hash:
                    self.misses += 1
                    return None
            if entry.get("w") is not None and entry["w"] != project_state():
                self.misses += 1
                return None
            findings = [decode_finding(f, path) for f in entry.get("f", ())]
        except (KeyError, TypeError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return findings

    def known_digest(self, path: str, st: os.stat_result | None) -> str | None:
        """The content digest recorded for ``path`` if the file's size and modification time are still
        the ones seen (before reading it) when the digest was recorded — no read, no hash."""
        entry = self.entries.get(os.path.abspath(path))
        if entry is None or st is None:
            return None
        seen = entry.get("s")
        if isinstance(seen, list) and seen == [st.st_size, st.st_mtime_ns]:
            digest = entry.get("h")
            return digest if isinstance(digest, str) else None
        return None

    def store(self, path: str, digest: str, findings: list[Finding], deps: dict[str, str],
              project_state: str | None = None, st: os.stat_result | None = None) -> None:
        try:
            encoded = [encode_finding(f, path) for f in findings]
        except (AttributeError, TypeError, ValueError):
            return  # something not serialisable: not cached, linted again next time
        entry: dict[str, Any] = {"h": digest, "f": encoded}
        if deps:
            entry["d"] = dict(sorted(deps.items()))
        if project_state is not None:
            entry["w"] = project_state
        _record_stat(entry, st)
        key = os.path.abspath(path)
        if self.entries.get(key) != entry:
            self.entries[key] = entry
            self.dirty = True

    def note_stat(self, path: str, st: os.stat_result | None) -> None:
        """After a hit by content digest: record the current (size, mtime) so that the next run need not
        read (replacing a stale record of a file touched without a content change)."""
        entry = self.entries.get(os.path.abspath(path))
        if entry is None:
            return
        before = entry.pop("s", None)  # a stale record (the file was touched, content unchanged) goes
        _record_stat(entry, st)
        self.dirty = self.dirty or entry.get("s") != before

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            prepare_directory(self.directory)
            self.file.parent.mkdir(parents=True, exist_ok=True)
            payload = json.dumps({"key": self.key, "files": self.entries}, separators=(",", ":"))
            write_atomic(self.file, payload.encode("utf-8"))
            self.dirty = False
            for old in self.directory.glob("v*"):  # results of older cache formats are never read again
                if old.is_dir() and old.name[1:].isdigit() and old.name != self.file.parent.name:
                    shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass  # a read-only tree still lints, just without a cache


def _record_stat(entry: dict[str, Any], st: os.stat_result | None) -> None:
    """(size, mtime) taken before the content was read: a later edit changes them. A file modified
    within the last seconds is not trusted by its stat (a same-size edit within the timestamp
    granularity would go unseen): it is read and hashed next time."""
    if st is not None and st.st_mtime_ns < time.time_ns() - _RACY_NS:
        entry["s"] = [st.st_size, st.st_mtime_ns]


def prepare_directory(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tag = directory / "CACHEDIR.TAG"
    if not tag.exists():
        write_atomic(tag, CACHEDIR_TAG.encode("ascii"))
    ignore = directory / ".gitignore"
    if not ignore.exists():
        write_atomic(ignore, b"# Automatically created by streamlint.\n*\n")


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def clean(directory: Path) -> bool:
    """Remove a cache directory (only one that streamlint created: it has our CACHEDIR.TAG)."""
    tag = directory / "CACHEDIR.TAG"
    if not directory.is_dir():
        return False
    if not tag.is_file() or "streamlint" not in tag.read_text(encoding="utf-8", errors="replace"):
        raise OSError(f"{directory} does not look like a streamlint cache (no CACHEDIR.TAG); not removed")
    shutil.rmtree(directory)
    return True
