"""What the compile sites reach, kept in the project cache across runs (issue 15).

Every analysis that asks a function's execution path needs what the project's compile sites reach
(``PathIndex._reach``): the modules that may compile are found by byte searches and their ``ast`` summaries,
then parsed with LibCST and followed through the call graph. In a run of one file, with every module
summary cached, that was still a LibCST parse of each compiling module and of what they reach (torch-npu:
3 of the 5 modules a one-file run parsed; vllm-ascend: 5 of 13), although none of them changed.

So the facts (``ReachFacts``: plain data keyed by path and qualified name) are computed once in a fresh
:class:`RecordingProject` that notes every observation the computation makes of the tree:

- the content (sha256) of every module it parsed or read (``file``, ``file_bytes``, ``summary``…);
- the answers of the project-wide scans it asked, not the bytes they searched: which files may compile
  (``compiling_paths``), which contain a marker (``paths_containing``), which may call a name
  (``paths_calling``), the renames of a name (``renames``), a single ``may_contain``;
- the file list (``all_files``) and the file-system tests of module resolution (``_module_path``,
  ``_package_of``).

They are stored with those observations (``v2/reach-<run key>.json``, JSON: a cache directory planted in a
repository cannot run code). A later run asks the same questions of its own project, which is cheap (byte
searches and cached summaries, a hash of each parsed module); when every answer is the same, the
computation, a deterministic function of them, would give the same facts, and the stored ones are used.
An edit of a module the computation did not parse (a comment appended to a module the linted file
imports) keeps them; an edit of one it parsed, a new compile site anywhere, a new file: computed again.
A computation that read something not recorded (launch scripts for environment settings) is not stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from streamlint.finding import Location, Span
from streamlint.model.paths import PathIndex, ReachFacts
from streamlint.model.project import Project

if TYPE_CHECKING:
    from streamlint.engine import Engine

FORMAT = 2  # (2: the code of the modules parsed, the summaries read)


def _digest(data: bytes | None) -> str:
    return "" if data is None else hashlib.sha256(data).hexdigest()


def _list_digest(paths: list[str]) -> str:
    return hashlib.sha256("\0".join(paths).encode("utf-8", "surrogateescape")).hexdigest()


def _markers(markers: tuple[bytes, ...]) -> list[str]:
    return [m.decode("latin-1") for m in markers]


class RecordingProject(Project):
    """A fresh project (sharing the engine's parsed files and the summary store) that records what it
    observes of the tree; the byte reads inside a recorded scan are covered by the scan's answer."""

    def start(self) -> None:
        self.content: dict[str, str] = {}  # path -> sha256 of the bytes read
        self.code: dict[str, str] = {}  # path -> code_digest of a module parsed
        self.contains: dict[tuple[str, tuple[bytes, ...]], bool] = {}
        self.isfile: dict[str, tuple[str, bool]] = {}
        self.files: str | None = None
        self.scans: dict[str, list[Any]] = {}  # by kind and question: [kind, question, answer]
        self.summary_seen: dict[str, str] = {}  # path -> digest of the module summary read (not its bytes)
        self.env_read = False  # environment settings were searched (launch scripts: not recorded)
        self._quiet = 0
        self._files_digested: tuple[list[str], int] | None = None  # (the file list whose digest `files` is)

    def carry_to(self, project: "RecordingProject") -> None:
        """Give a project replacing this one (``Engine.release_models``) the observations made so far: what
        the old one learnt and the new one inherits (summaries, byte-search memos) was observed here."""
        project.content, project.contains, project.isfile = self.content, self.contains, self.isfile
        project.code = self.code
        project.files, project.scans, project.summary_seen = self.files, self.scans, self.summary_seen
        project.env_read = self.env_read or self.searched_env()
        project._quiet = 0

    def searched_env(self) -> bool:
        """Were environment settings searched (``environment.env_settings``: launch scripts and YAML, read
        outside these observations)?"""
        return self.env_read or bool(self._paths is not None and self._paths.derived.get("env_settings"))

    def quiet(self) -> "contextlib.AbstractContextManager[None]":
        """Reads that decide no answer (a memory budget's look at file sizes): not observations."""
        return self._scan()

    @contextmanager
    def _scan(self) -> Iterator[None]:
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    def _answered(self, kind: str, question: list[Any], answer: Any) -> None:
        if self._quiet:
            return  # (a scan inside another: the outer one's answer covers what it read)
        self.scans.setdefault(json.dumps([kind, question]), [kind, question, answer])

    def _note_content(self, path: str) -> None:
        if path not in self.content:
            with self._scan():
                self.content[path] = _digest(Project._bytes(self, path))

    def file(self, path: str):
        key = os.path.abspath(path)
        if key not in self.code:
            with self._scan():
                self.code[key] = code_digest(Project._bytes(self, key))
        return super().file(path)

    def _bytes(self, path: str) -> bytes | None:
        if not self._quiet:
            self._note_content(path)
        return super()._bytes(path)

    def may_contain(self, path: str, markers: tuple[bytes, ...]) -> bool:
        found = super().may_contain(path, markers)
        if not self._quiet:
            self.contains.setdefault((path, markers), found)
        return found

    def all_files(self) -> list[str]:
        files = super().all_files()
        if self._files_digested is None or self._files_digested[0] is not files \
                or self._files_digested[1] != len(files):  # (the same list again: its digest is known)
            self._files_digested = (files, len(files))
            self.files = _list_digest(files)
        elif self.files is None:
            self.files = _list_digest(files)
        return files

    def _module_path(self, module: str, root: str) -> str | None:
        rel = module.replace(".", os.sep)
        for candidate in (os.path.join(root, rel + ".py"), os.path.join(root, rel, "__init__.py")):
            self.isfile[candidate] = ("m", os.path.isfile(candidate) and self.in_project(candidate))
        return super()._module_path(module, root)

    def _package_of(self, directory: str) -> tuple[str, str]:
        init = os.path.join(directory, "__init__.py")
        self.isfile[init] = ("p", os.path.isfile(init))
        return super()._package_of(directory)

    def summary(self, path: str):
        with self._scan():
            found = super().summary(path)
        if not self._quiet:
            self.summary_seen.setdefault(os.path.abspath(path), summary_digest(found))
        return found

    def compiling_paths(self):
        with self._scan():
            found = super().compiling_paths()
        if not self._quiet:  # (every time: the answer may be a memo of an earlier question)
            self._answered("compiling", [], [path for path, _ in found])
            for path, summary in found:  # their summaries are read (ModuleSummary.moded, .compiles_callers_args)
                self.summary_seen.setdefault(path, summary_digest(summary))
        return found

    def paths_containing(self, markers: tuple[bytes, ...]) -> list[str]:
        with self._scan():
            found = super().paths_containing(markers)
        self._answered("containing", [_markers(markers)], list(found))
        return found

    def paths_calling(self, name: str, limit: int | None = None) -> list[str] | None:
        with self._scan():
            found = super().paths_calling(name, limit)
        self._answered("calling", [name, limit], found)
        return found

    def ask(self, kind: str, question: "tuple[str | None, ...]", answer: "Callable[[], bool]") -> bool:
        with self._scan():
            found = answer()
        self._answered(kind, list(question), found)
        return found

    def renames(self, name: str) -> frozenset[bytes]:
        with self._scan():
            found = super().renames(name)
        self._answered("renames", [name], sorted(_markers(tuple(found))))
        return found


def code_digest(data: bytes | None) -> str:
    """The sha256 of a module's bytes less its trailing lines that are blank or a comment at column 0 (LibCST's
    ``Module.footer``, which no question reads: a parse of either text gives the same statements at the same
    positions, and the same nodes: a deeper comment belongs to the last block and is kept). A stripped line is
    plain ASCII without a quote (it could close a string), a ``\\r`` or a backslash, is not one of the first two
    lines (an encoding declaration), and the text kept does not end in a continuation; else it is kept."""
    if data is None:
        return ""
    end = len(data)
    floor = data.find(b"\n", data.find(b"\n") + 1) + 1  # (the start of the third line; 0: there is none)
    while end > floor > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        line = data[start:end].rstrip(b"\r\n")
        if start < floor or not line.isascii() or any(c in line for c in (b"'", b'"', b"\r", b"\\")):
            break
        if line.strip() and not line.startswith(b"#"):
            break
        end = start
    kept = data[:end].rstrip(b"\r\n")
    return hashlib.sha256(data if kept.endswith(b"\\") else kept).hexdigest()


def summary_digest(summary: Any) -> str:
    """What a module summary says, as a digest (equal summaries, equal digests): what a reader of the summary
    depends on, whatever else of the module's bytes changed (a comment, a function it does not describe)."""
    if summary is None:
        return ""
    return hashlib.sha256(json.dumps(summary.to_json(), sort_keys=True).encode("utf-8")).hexdigest()


# the questions of ``Project.ask``: kind -> the function answering it (module, name), called with the project and
# the question's arguments; each a deterministic function of the project's bytes and file list
ASKED = {
    "stream-scoped": ("streamlint.model.flow.sidecalls", "stream_scoped"),
    "referenced": ("streamlint.model.flow.fieldfacts", "referenced_scan"),
    "rebound-outside": ("streamlint.model.flow.fieldfacts", "rebound_scan"),
    "mutated": ("streamlint.model.flow.fieldfacts", "mutated_scan"),
}


def _well_formed(kind: Any, args: Any) -> bool:
    """A recorded question of a known shape (the record lives in the linted repository: untrusted)."""
    if not isinstance(args, list):
        return False
    if kind == "compiling":
        return not args
    if kind == "containing":
        return len(args) == 1 and isinstance(args[0], list) and all(isinstance(m, str) for m in args[0])
    if kind == "calling":
        return len(args) == 2 and isinstance(args[0], str) and args[0].isidentifier() \
            and (args[1] is None or isinstance(args[1], int))
    if kind == "renames":
        return len(args) == 1 and isinstance(args[0], str) and args[0].isidentifier()
    return kind in ASKED and all(a is None or isinstance(a, str) for a in args)


def _answer(project: Project, kind: str, args: list[Any]) -> Any:
    if kind == "compiling":
        return [path for path, _ in project.compiling_paths()]
    if kind == "containing":
        return list(project.paths_containing(tuple(m.encode("latin-1") for m in args[0])))
    if kind == "calling":
        return project.paths_calling(args[0], args[1])
    if kind == "renames":
        return sorted(_markers(tuple(project.renames(args[0]))))
    if kind in ASKED:
        module, function = ASKED[kind]
        return getattr(importlib.import_module(module), function)(project, *args)
    raise ValueError(kind)


def still_true(record: dict[str, Any], project: Project, keep: Callable[[Any], Any] | None = None) -> bool:
    """Does ``project`` answer every recorded observation as recorded (so the facts are the same)? ``keep``:
    how the record keeps the scans' answers (as they are when None; ``observed`` keeps a digest)."""
    try:  # (every computation lists the project's files: a record without the list is of another shape)
        if not isinstance(record["files"], str) or _list_digest(project.all_files()) != record["files"]:
            return False
        for path, (kind, expected) in record["isfile"].items():
            found = os.path.isfile(path) and (kind == "p" or project.in_project(path))
            if found != expected:
                return False
        files = set(project.all_files())  # (only the project's own files are read for a record)
        for path, markers, expected in record["contains"]:
            if path not in files or not all(isinstance(m, str) for m in markers):
                return False
            if project.may_contain(path, tuple(m.encode("latin-1") for m in markers)) != expected:
                return False
        for path, digest in record["content"].items():
            if path not in files or _digest(project.file_bytes(path)) != digest:
                return False
        for path, digest in record["code"].items():
            if path not in files or code_digest(project.file_bytes(path)) != digest:
                return False
        for path, digest in record.get("summaries", {}).items():
            if path not in files or not isinstance(digest, str) or summary_digest(project.summary(path)) != digest:
                return False
        return all(_well_formed(kind, args)
                   and (_answer(project, kind, args) if keep is None else keep(_answer(project, kind, args)))
                   == expected for kind, args, expected in record["scans"])
    except Exception:  # noqa: BLE001 - a record of another shape (or a planted one): a miss
        return False


def _encode(facts: ReachFacts) -> list[Any]:
    return [[path, qualname, sorted(modes),
             [[os.path.abspath(loc.path), [loc.span.start_line, loc.span.start_col, loc.span.end_line,
                                           loc.span.end_col], loc.message] for loc in locs]]
            for (path, qualname), (modes, locs) in facts.reached.items()]


def _decode(value: Any) -> ReachFacts:
    reached: dict[tuple[str, str], tuple[set[str], list[Location]]] = {}
    for path, qualname, modes, locs in value:
        if not (isinstance(path, str) and isinstance(qualname, str) and all(isinstance(m, str) for m in modes)):
            raise ValueError("reach record")
        reached[(path, qualname)] = (set(modes), [
            Location(str(lp), Span(*(int(v) for v in span)), str(message)) for lp, span, message in locs])
    return ReachFacts(reached, None)


class ReachCache:
    """``v2/reach-<key>.json`` in the cache directory: the last computed facts with their observations."""

    def __init__(self, directory: Path, key: str) -> None:
        from streamlint.cache import CACHE_FORMAT

        self.directory = directory
        self.file = directory / f"v{CACHE_FORMAT}" / f"reach-{key}.json"

    def load(self) -> dict[str, Any] | None:
        try:
            if self.file.parent.is_symlink():
                return None
            with open(self.file, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) and data.get("format") == FORMAT else None

    def save(self, record: dict[str, Any]) -> None:
        from streamlint.cache import prepare_directory, write_atomic

        try:
            if not prepare_directory(self.directory) or self.file.parent.is_symlink():
                return
            self.file.parent.mkdir(exist_ok=True)
            write_atomic(self.file, json.dumps(record, separators=(",", ":")).encode("utf-8"))
        except OSError:
            pass


def _compute(engine: "Engine") -> dict[str, Any] | None:
    """The reach facts computed in a fresh recording project, with its observations (None: not storable)."""
    real = engine.project
    fresh = RecordingProject(real.root, engine._load_model, scope=real.scope, options=real.options)
    fresh.start()
    fresh.reader, fresh.summaries, fresh.profiler = real.reader, real.summaries, real.profiler
    fresh._scan_bytes, fresh._scan_kept = real._scan_bytes, real._scan_kept  # (bytes: no answer in them)
    fresh._summary_digests = real._summary_digests
    # the word index (its answers are the scan's: recorded the same)
    fresh.words = real.words
    index = fresh.path_index
    index._reach()
    facts = index.carried()
    real._scan_kept = fresh._scan_kept
    if facts is None or index.derived.get("env_settings"):
        return None
    return {"format": FORMAT, "files": fresh.files,
            "isfile": {path: list(v) for path, v in fresh.isfile.items()},
            "contains": [[path, _markers(markers), found] for (path, markers), found in fresh.contains.items()],
            "content": fresh.content, "code": fresh.code, "summaries": fresh.summary_seen, "scans": list(fresh.scans.values()),
            "reached": _encode(facts)}


def install(engine: "Engine", directory: Path, key: str) -> dict[str, Any] | None:
    """Give the engine's project the stored reach facts when they still hold; else compute and store them.
    Not for editor buffers (``Engine.set_override``) nor a project whose facts exist already. Returns the
    record installed (its observations: what the facts depend on), None when none was."""
    project = engine.project
    if engine._overrides or project._paths is not None:
        return None
    cache = ReachCache(directory, key)
    record = cache.load()
    # (a recording project is given the record's observations as they are, observed.merge: the checks' reads
    # are not observations of their own, or a module the computation parsed would count by all its bytes)
    with project.quiet() if isinstance(project, RecordingProject) else contextlib.nullcontext():
        holds = record is not None and still_true(record, project)
    if record is not None and holds:
        try:
            project._paths = PathIndex(project, _decode(record["reached"]))
            return record
        except (KeyError, TypeError, ValueError):
            pass
    try:
        record = _compute(engine)
    except Exception:  # noqa: BLE001 - the analysis computes them as before and reports what fails there
        return None
    if record is not None:
        project._paths = PathIndex(project, _decode(record["reached"]))
        cache.save(record)
    return record


__all__ = ["RecordingProject", "ReachCache", "install", "still_true", "code_digest", "summary_digest"]
