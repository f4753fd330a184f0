"""The result cache: per-file findings, reused while nothing they depend on has changed.

Layout (``cache-dir``, default ``.streamlint_cache/`` in the project root)::

    .streamlint_cache/
        CACHEDIR.TAG            # tells backup tools to skip the directory
        .gitignore              # "*": never committed
        v2/results-<key>.json   # one file per effective configuration (older formats are removed)
        v2/tree-<sha256>.bin    # LibCST trees of reached modules by content (streamlint/treecache.py)

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
  sites, environment settings), the stat digest of the project's files is unchanged;

or, when those fail, for an entry a serial run stored with the observations of its analysis (``"o"``,
``streamlint/observed.py``: the code of the modules parsed, the summaries read, the answers of the
project-wide scans, the file list), when a fresh project answers every observation the same way (the
command line only; the editor server checks the keys above).

Entries are JSON (a cache directory planted in a repository cannot run code) and are validated when
read: an entry of the wrong shape is a miss, never an error. Writes are atomic (temporary file +
``os.replace``), so concurrent runs (pre-commit, editor) never read a torn file; the last writer wins.

The directory is untrusted too (it may come from the linted repository, or be committed in it):

- a ``cache-dir`` set by a configuration file must resolve (symbolic links followed) to a directory
  strictly inside the directory of that file (the default one: inside the project root); only the user
  (``--cache-dir``, ``STREAMLINT_CACHE_DIR``) may point elsewhere;
- an existing directory is used only when it is ours (``CACHEDIR.TAG`` with exactly our content) or
  empty; the markers are written only into a directory created or found empty;
- only our own entries are ever deleted (``v<digits>/results-<20 hex>.json`` and our temporary files),
  never a directory tree: ``clean`` removes those, our two marker files, and then the folders if empty.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
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
                         "force_exclude", "min_confidence"})


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


GITIGNORE = b"# Automatically created by streamlint.\n*\n"
CACHE_DIR_ENV = "STREAMLINT_CACHE_DIR"
_ENTRY_RE = re.compile(r"(?:results|summaries|reach)-[0-9a-f]{20}\.json|words-[0-9a-f]{20}\.bin|tree-[0-9a-f]{64}\.bin")
_TEMP_RE = re.compile(r"\.(?:(?:results|summaries|reach)-[0-9a-f]{20}\.json|words-[0-9a-f]{20}\.bin|tree-[0-9a-f]{64}\.bin)"
                      r"\.[A-Za-z0-9_]+\.tmp")
_VERSION_RE = re.compile(r"v[0-9]+")


class CacheRefused(OSError):
    """The configured cache directory may not be used (outside the project, or not ours)."""


def cache_directory(settings: Settings) -> Path:
    directory = Path(settings.cache_dir or ".streamlint_cache")
    if not directory.is_absolute():
        directory = Path(settings.project_root) / directory
    return directory


def _inside(path: str, directory: str) -> bool:
    prefix = directory if directory.endswith(os.sep) else directory + os.sep
    return path.startswith(prefix)


def check_cache_directory(settings: Settings) -> Path:
    """The cache directory, if it may be used; else :class:`CacheRefused` saying why.

    Given by the user (command line, environment): anything. From a configuration file: strictly inside
    that file's directory; the default: strictly inside the project root (symbolic links resolved: a
    ``.streamlint_cache`` link committed in a repository cannot lead out). An existing directory must be
    one of ours or empty."""
    directory = cache_directory(settings)
    source = settings.provenance.get("cache-dir")
    if source != "command line":
        anchor = os.path.dirname(os.path.abspath(source)) if source else settings.project_root
        real, root = os.path.realpath(directory), os.path.realpath(anchor)
        if not _inside(real, root):
            where = f"{source}: cache-dir" if source else "the default cache directory"
            raise CacheRefused(f"{where} {str(directory)!r} leads outside the project ({real}); not used "
                               f"(only --cache-dir or ${CACHE_DIR_ENV} may choose such a place)")
    if directory.is_dir() and not is_ours(directory) and any(directory.iterdir()):
        raise CacheRefused(f"{directory} exists and is not a streamlint cache (no CACHEDIR.TAG of ours); "
                           "not used")
    return directory


def is_ours(directory: Path) -> bool:
    """The directory holds our cache marker, with exactly our content."""
    try:
        with open(directory / "CACHEDIR.TAG", "rb") as fh:
            return fh.read(len(CACHEDIR_TAG) + 1) == CACHEDIR_TAG.encode("ascii")
    except OSError:
        return False


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
        "h": f.hint,
        "d": [_abs(d) for d in f.depends_on],
    }


class InvalidEntry(ValueError):
    """A cache entry of the wrong shape: a miss."""


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidEntry(f"expected a string, got {type(value).__name__}")
    return value


def _decode_span(value: Any) -> Span:
    if not isinstance(value, list) or len(value) != 4 or not all(type(v) is int and v >= 0 for v in value):
        raise InvalidEntry("expected a span of four non-negative integers")
    return Span(*value)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidEntry(f"expected a list, got {type(value).__name__}")
    return value


def _pair_list(value: Any, size: int) -> list[list[Any]]:
    items = _list(value)
    if not all(isinstance(item, list) and len(item) == size for item in items):
        raise InvalidEntry(f"expected lists of {size} items")
    return items


def decode_finding(d: dict[str, Any], path: str) -> Finding:
    """A finding from its cache form; :class:`InvalidEntry` (a ``ValueError``) for any other shape or type
    than :func:`encode_finding` writes."""
    if not isinstance(d, dict):
        raise InvalidEntry("expected an object")
    fix = d.get("f")
    if fix is not None:
        if not isinstance(fix, list) or len(fix) != 3:
            raise InvalidEntry("expected a fix of three items")
        fix = Fix(_str(fix[0]), FixSafety(_str(fix[1])),
                  tuple(Edit(_decode_span(sp), _str(c)) for sp, c in _pair_list(fix[2], 2)))
    p = d.get("p")
    return Finding(
        code=_str(d.get("c")), name=_str(d.get("n")), message=_str(d.get("m")), severity=Severity(_str(d.get("s"))),
        confidence=Confidence(_str(d.get("k"))), path=path if p is None else _str(p), span=_decode_span(d.get("sp")),
        related=tuple(Location(_str(lp), _decode_span(sp), _str(m)) for lp, sp, m in _pair_list(d.get("r"), 3)),
        fix=fix,
        hint=_str(d.get("h", "")),
        depends_on=tuple(_str(dep) for dep in _list(d.get("d"))),
    )


def _valid_entry(entry: Any) -> bool:
    """The shape :meth:`ResultCache.store` writes (the findings are checked when decoded)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("h"), str) or not isinstance(entry.get("f"), list):
        return False
    deps = entry.get("d", {})
    if not isinstance(deps, dict) or not all(isinstance(v, str) for v in deps.values()):
        return False
    if "w" in entry and not isinstance(entry["w"], str):
        return False
    if "o" in entry and not isinstance(entry["o"], dict):
        return False
    seen = entry.get("s")
    return seen is None or (isinstance(seen, list) and len(seen) == 2 and all(type(v) is int for v in seen))


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
        """The cache of this configuration; :class:`CacheRefused` when its directory may not be used."""
        return cls(check_cache_directory(settings), run_key(settings, registry, ignore_noqa))

    def _load(self) -> None:
        try:
            if self.file.parent.is_symlink():
                return
            with open(self.file, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError, RecursionError):  # (very deep JSON: RecursionError)
            return
        if isinstance(data, dict) and data.get("key") == self.key and isinstance(data.get("files"), dict):
            self.entries = data["files"]

    def _entry(self, path: str) -> dict[str, Any] | None:
        """The entry of ``path`` if it has the shape this module writes; an invalid one is dropped (a miss,
        rewritten at the next save)."""
        key = os.path.abspath(path)
        entry = self.entries.get(key)
        if entry is None or _valid_entry(entry):
            return entry
        del self.entries[key]
        self.dirty = True
        return None

    def lookup(self, path: str, digest: str, dep_digest: Callable[[str], str],
               project_state: Callable[[], str],
               observed: Callable[[dict[str, Any]], bool] | None = None) -> list[Finding] | None:
        """The cached findings of ``path`` (content sha256 ``digest``) if still valid, else None (an entry
        of the wrong shape or types included: a miss, never an error). With ``observed``, an entry that kept
        the observations of its analysis (``streamlint/observed.py``) is valid when ``observed`` says they
        still hold, whatever else changed; without it, or for an entry without them, when its dependencies'
        contents and (after a project-wide read) the project's file stats are unchanged."""
        entry = self._entry(path)
        if entry is None or entry.get("h") != digest:
            self.misses += 1
            return None
        try:
            unchanged = all(dep_digest(dep) == dep_hash for dep, dep_hash in entry.get("d", {}).items()) \
                and (entry.get("w") is None or entry["w"] == project_state())
            # (the contents and stats first: cheap, and when they hold the observations do too)
            if not unchanged and (observed is None or "o" not in entry or not observed(entry["o"])):
                self.misses += 1
                return None
            findings = [decode_finding(f, path) for f in entry.get("f", ())]
        except (KeyError, TypeError, ValueError, RecursionError):
            self.entries.pop(os.path.abspath(path), None)
            self.dirty = True
            self.misses += 1
            return None
        self.hits += 1
        return findings

    def known_digest(self, path: str, st: os.stat_result | None) -> str | None:
        """The content digest recorded for ``path`` if the file's size and modification time are still
        the ones seen (before reading it) when the digest was recorded — no read, no hash."""
        entry = self._entry(path)
        if entry is None or st is None:
            return None
        seen = entry.get("s")
        if isinstance(seen, list) and seen == [st.st_size, st.st_mtime_ns]:
            digest = entry.get("h")
            return digest if isinstance(digest, str) else None
        return None

    def store(self, path: str, digest: str, findings: list[Finding], deps: dict[str, str],
              project_state: str | None = None, st: os.stat_result | None = None,
              observations: dict[str, Any] | None = None) -> None:
        try:
            encoded = [encode_finding(f, path) for f in findings]
        except (AttributeError, TypeError, ValueError):
            return  # something not serialisable: not cached, linted again next time
        entry: dict[str, Any] = {"h": digest, "f": encoded}
        if deps:
            entry["d"] = dict(sorted(deps.items()))
        if project_state is not None:
            entry["w"] = project_state
        if observations is not None:
            entry["o"] = observations
        _record_stat(entry, st)
        key = os.path.abspath(path)
        if self.entries.get(key) != entry:
            self.entries[key] = entry
            self.dirty = True

    def note_stat(self, path: str, st: os.stat_result | None) -> None:
        """After a hit by content digest: record the current (size, mtime) so that the next run need not
        read (replacing a stale record of a file touched without a content change)."""
        entry = self._entry(path)
        if entry is None:
            return
        before = entry.pop("s", None)  # a stale record (the file was touched, content unchanged) goes
        _record_stat(entry, st)
        self.dirty = self.dirty or entry.get("s") != before

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            if not prepare_directory(self.directory):
                return  # not ours (any more): nothing is written there
            if self.file.parent.is_symlink():
                return  # a planted link would lead the entries elsewhere
            self.file.parent.mkdir(exist_ok=True)
            payload = json.dumps({"key": self.key, "files": self.entries}, separators=(",", ":"))
            write_atomic(self.file, payload.encode("utf-8"))
            self.dirty = False
            for old in self.directory.iterdir():  # results of older cache formats are never read again
                if _VERSION_RE.fullmatch(old.name) and old.name != self.file.parent.name:
                    _remove_entries(old)
        except OSError:
            pass  # a read-only tree still lints, just without a cache


class SummaryCache:
    """Module summaries (:mod:`streamlint.model.summary`) by content sha256, shared by every run of the
    project whatever its configuration (a summary depends on the module's bytes and on the summary code
    only): ``v2/summaries-<key>.json``, ``<key>`` hashing that code. Read once, merged with what is on
    disk and written atomically once per run; an entry of the wrong shape is ignored."""

    MAX_ENTRIES = 100_000  # past this, only the summaries used by the last run are kept

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.file = directory / f"v{CACHE_FORMAT}" / f"summaries-{summary_key()}.json"

    def load(self) -> "dict[str, Any]":
        from streamlint.model.summary import ModuleSummary

        try:
            if self.file.parent.is_symlink():
                return {}
            with open(self.file, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict) or not isinstance(data.get("summaries"), dict):
            return {}
        found = {}
        for digest, value in data["summaries"].items():
            summary = ModuleSummary.from_json(value)
            if summary is not None and isinstance(digest, str):
                found[digest] = summary
        return found

    def save(self, store: Any) -> None:
        """Write the store's summaries (with the ones another run wrote meanwhile) when it gained any."""
        if not store.dirty:
            return
        try:
            if not prepare_directory(self.directory) or self.file.parent.is_symlink():
                return
            self.file.parent.mkdir(exist_ok=True)
            merged = {**self.load(), **store.entries}
            if len(merged) > self.MAX_ENTRIES:
                merged = {d: merged[d] for d in store.used}
            payload = json.dumps({"summaries": {d: s.to_json() for d, s in merged.items()}},
                                 separators=(",", ":"))
            write_atomic(self.file, payload.encode("utf-8"))
            store.dirty = False
        except OSError:
            pass


def summary_key() -> str:
    """What a module summary depends on besides the module: the summary code and the API catalogue."""
    from streamlint.model import apis, summary

    h = hashlib.sha256(f"{__version__}\0{summary.SUMMARY_FORMAT}\0".encode())
    for module in (summary, apis):
        try:
            with open(module.__file__ or "", "rb") as fh:
                h.update(fh.read())
        except OSError:
            h.update(repr(module).encode())
    return h.hexdigest()[:20]


def _record_stat(entry: dict[str, Any], st: os.stat_result | None) -> None:
    """(size, mtime) taken before the content was read: a later edit changes them. A file modified
    within the last seconds is not trusted by its stat (a same-size edit within the timestamp
    granularity would go unseen): it is read and hashed next time."""
    if st is not None and st.st_mtime_ns < time.time_ns() - _RACY_NS:
        entry["s"] = [st.st_size, st.st_mtime_ns]


def prepare_directory(directory: Path) -> bool:
    """Create the cache directory with its markers; False when an existing directory is not ours (and not
    empty): then nothing is written into it."""
    directory.mkdir(parents=True, exist_ok=True)
    if is_ours(directory):
        return True
    if any(directory.iterdir()):
        return False
    write_atomic(directory / ".gitignore", GITIGNORE)
    write_atomic(directory / "CACHEDIR.TAG", CACHEDIR_TAG.encode("ascii"))  # last: it claims the folder
    return True


def _remove_entries(folder: Path) -> bool:
    """Remove our entries (and temporary files) from ``folder``, then the folder if it is empty; a
    symbolic link or anything else is left alone. True when the folder is gone."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    for item in folder.iterdir():
        if (_ENTRY_RE.fullmatch(item.name) or _TEMP_RE.fullmatch(item.name)) and not item.is_symlink() \
                and item.is_file():
            try:
                item.unlink()
            except OSError:
                pass
    try:
        folder.rmdir()
    except OSError:
        return False
    return True


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


def clean(directory: Path) -> list[str]:
    """Remove the cache entries of a cache directory that is ours (our CACHEDIR.TAG), then our markers
    and the directory when nothing else is left in it. Returns what was left in place (not ours);
    raises OSError when the directory is not a streamlint cache."""
    if not directory.is_dir():
        return []
    if directory.is_symlink() or not is_ours(directory):
        raise OSError(f"{directory} does not look like a streamlint cache (no CACHEDIR.TAG of ours); not removed")
    for item in directory.iterdir():
        if _VERSION_RE.fullmatch(item.name):
            _remove_entries(item)
    ignore = directory / ".gitignore"
    try:
        if not ignore.is_symlink() and ignore.read_bytes() == GITIGNORE:
            ignore.unlink()
    except OSError:
        pass
    left = sorted(item.name for item in directory.iterdir() if item.name != "CACHEDIR.TAG")
    if not left:
        (directory / "CACHEDIR.TAG").unlink()
        directory.rmdir()
    return left
