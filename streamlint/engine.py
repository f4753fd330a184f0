"""The pipeline: read bytes → prefilter → parse once → model → rules → suppressions → sorted findings."""

from __future__ import annotations

import ast
import gc
import hashlib
import os
import stat
import traceback
import warnings
from time import perf_counter as _perf_counter, time_ns as _time_ns
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import pathspec

from streamlint import _lazy, numdisplays, pieces
from streamlint._lazy import cst
from streamlint.config import Settings
from streamlint.finding import Confidence, Finding, Severity, Span, fold_root_causes
from streamlint.model.apis import PatternMarker
from streamlint.model import syntax
from streamlint.model.file import FileModel
from streamlint.model.flow import elementsets
from streamlint.model.options import ModelOptions
from streamlint.model.paths import PathIndex
from streamlint.model.project import Project
from streamlint.model.projectscans import JOIN_AFTER
from streamlint.model.release import release
from streamlint.model.bytescan import may_compile_bytes
from streamlint.model.summary import MayCompile, ModuleSummary, SummaryParts, summarize
from streamlint.model.walk import forget_children
from streamlint.model.wordindex import Stamp, WordIndex, WordSearch, stamp_of, stamp_settled
from streamlint.profile import Profiler, phase as _phase
from streamlint.registry import Registry
from streamlint.rule import Rule, RuleContext
from streamlint.source import SourceFile, UndecodableSource
from streamlint.suppressions import SL_CODE, Suppression, parse_suppressions
from streamlint.treecache import TreeCache

META_CODES = {"SL000": "internal-error", "SL001": "syntax-error", "SL002": "unused-suppression",
              "SL003": "unknown-rule-code"}


@dataclass
class ParseFailure:
    message: str
    line: int = 1
    col: int = 0
    internal: bool = False  # streamlint's own bug (SL000, exit 2), not the file's fault (SL001)


@dataclass
class ParsedFile:
    source: SourceFile | None
    model: FileModel | None
    # the stdlib tree: statement extents for suppressions, statement starts for positions; of a large module
    # without suppression comments only its top level (pieces.skeleton: see _lighten), with ``summary``
    tree: ast.Module | None
    failure: ParseFailure | None = None
    starts: list[int] | None = None  # where each top-level statement's code begins (reparse.splice)
    summary: ModuleSummary | None = None  # the module summary, taken from the whole tree before it went
    lightened: bool = False  # parsed with its large displays of numbers reduced (numdisplays): not to be linted


def _lighten(text: str, data: bytes, tree: ast.Module | None) -> tuple[ast.Module | None, ModuleSummary | None]:
    """A large module's stdlib tree (``pieces.large``: ~80 bytes per byte of source, 250 MB for torch-npu's
    3.1 MB generated module) is let go as soon as what is read of it is taken: its module summary (the
    one :class:`~streamlint.model.summary.SummaryStore` would compute from it) and its top level
    (``pieces.skeleton``: the cuts of the piecewise parse and the position table's statement starts).
    Not when the text has a suppression comment (``parse_suppressions`` reads every statement's extent):
    then the whole tree stays, as for a smaller module."""
    if tree is None or not pieces.large(text) or "noqa" in text or "streamlint:" in text:
        return tree, None
    return pieces.skeleton(tree), summarize(data, tree)


def _lean_guard(text: str, data: bytes, profiler: Profiler | None) -> tuple[ast.Module | None, ModuleSummary | None]:
    """What :func:`_lighten` keeps of a large module's stdlib tree (its skeleton and its summary), taken without
    ever holding that tree: parsed in pieces (``pieces.stdlib_skeleton``, ``SummaryParts``), so the ~80 bytes
    per byte of source of the whole tree are never allocated (the peak of a whole-tree run, issue 15). (None,
    None) when that is not done: not a large module, a suppression comment (the suppressions read every
    statement's extent), a text not cut or a piece that does not parse, a module that may call a compile API
    (the summary's compile questions read the whole tree): the whole text is parsed, as before."""
    if not pieces.large(text) or "noqa" in text or "streamlint:" in text or may_compile_bytes(data):
        return None, None  # (may compile: the pieces would stop at the compile call, then the whole text parsed)
    parts = SummaryParts()
    with _phase(profiler, "guard-ast"):
        try:
            skeleton = pieces.stdlib_skeleton(text, parts.add)
        except MayCompile:
            return None, None
    summary = parts.summary() if skeleton is not None else None
    return (skeleton, summary) if summary is not None else (None, None)


def parse_source(path: str, data: bytes, module_name: str, is_package: bool,
                 profiler: Profiler | None = None, previous: ParsedFile | None = None,
                 editable: bool = False, guarded: bool = True, trees: "Trees | None" = None,
                 light: bool = False) -> ParsedFile:
    """Decode and parse one file, turning every failure into a ParseFailure (never raising).
    ``previous``: the file's last parse (an editor buffer before its latest edit): the statements the edit
    left alone are taken from its tree (:func:`streamlint.reparse.splice`). ``editable``: an editor buffer,
    whose next edit may be spliced into this parse (its statements' start lines are kept for that). ``guarded``
    False: the stdlib parser is known to accept ``data`` (a module summary of it says so) and its tree is not
    wanted (a small module parsed for another file's question), so the ``ast`` guard is not run; if LibCST then
    rejects the text, the file is parsed again with the guard (the failure it reports is the guarded one).
    ``trees``: (the tree cache, the sha256 of ``data``) for a module reached by another file's question: its
    LibCST tree is taken from the cache when the stdlib parser accepts the text (unguarded: known to), and
    kept there when parsed (:mod:`streamlint.treecache`). ``light``: a module reached by another file's question,
    whose large displays of numbers may be parsed reduced (:mod:`streamlint.numdisplays`; ``lightened`` says so)."""
    if profiler is not None and _lazy.pending(cst):
        with _phase(profiler, "import-libcst"):  # start-up cost of the first parse, shown on its own
            _lazy.load(cst)
    with _phase(profiler, "parse"):
        parsed = _parse_source(path, data, profiler, previous, guarded, trees, light)
        if parsed is None:  # (unguarded, LibCST rejected the text: as if never tried)
            parsed = _parse_source(path, data, profiler, previous, trees=trees, light=light)
    if isinstance(parsed, ParsedFile):
        return parsed
    source, module, tree, summary, lightened = parsed
    starts = None
    if tree is not None and editable:
        from streamlint.model.positions import _statement_starts

        starts = _statement_starts(module, tree)
    with _phase(profiler, "model"):
        try:
            model = FileModel(source, module, module_name, is_package)
            model.__dict__["_ast_tree"] = tree  # for positions, until the file's report is made
        except RecursionError:
            return ParsedFile(source, None, tree, ParseFailure("too deeply nested to analyse (recursion limit)"))
        except Exception as exc:  # a model bug must not stop other files
            return ParsedFile(source, None, tree, ParseFailure(
                f"building the semantic model crashed on this file: {type(exc).__name__}: {exc}", internal=True))
    return ParsedFile(source, model, tree, starts=starts, summary=summary, lightened=lightened)


def _no_validation(self: object) -> None:
    return None


def _shared_leaf(kind: "type[cst.CSTNode]", made: dict) -> "Callable[..., cst.CSTNode]":
    """``kind(value=...)`` for the parser, one node per value in the tree being parsed (see _parse_unvalidated)."""
    def make(**fields: object) -> "cst.CSTNode":
        value = fields.get("value")
        if len(fields) != 1 or not (value is None or type(value) is str):
            return kind(**fields)
        key = (kind, value)
        found = made.get(key)
        if found is None:
            found = made[key] = kind(**fields)
        return found
    return make


def _parse_unvalidated(text: str) -> "cst.Module":
    """``cst.parse_module`` without LibCST's per-node validation (``CSTNode.__post_init__`` checks each node
    as it is built: about a quarter of a parse). The parser only builds valid trees, so the tree is the same;
    node construction elsewhere (fixes) is validated as before once the parse returns. The whitespace leaves
    (``SimpleWhitespace``, ``Newline``: immutable, a string each, a third of a tree's nodes) are built once per
    value and shared within the tree (issue 15: a tree ~21 -> ~15 bytes per byte of source); nothing asks a
    leaf's identity (walks and positions skip trivia, no transformer runs on parsed trees), so the tree is the
    same (``deep_equals``, same code). The patch holds for the whole process while the parse runs: parses must
    stay on one thread (the LSP server parses on its one worker; ``-j`` uses processes)."""
    node = cst.CSTNode
    validate = node.__dict__["__post_init__"]
    leaves = {name: getattr(cst, name) for name in ("SimpleWhitespace", "Newline")}
    made: dict = {}
    node.__post_init__ = _no_validation
    for name, kind in leaves.items():  # (the native parser looks each node class up on the package)
        setattr(cst, name, _shared_leaf(kind, made))
    try:
        return cst.parse_module(text)
    finally:
        node.__post_init__ = validate
        for name, kind in leaves.items():
            setattr(cst, name, kind)


Trees = tuple[TreeCache, str]  # the tree cache and the sha256 of the bytes parsed


def _cached_tree(trees: "Trees | None", profiler: Profiler | None) -> "cst.Module | None":
    if trees is None:
        return None
    with _phase(profiler, "tree-cache"):
        return trees[0].get(trees[1])


def _keep_tree(trees: "Trees | None", module: "cst.Module", profiler: Profiler | None) -> None:
    if trees is not None:
        with _phase(profiler, "tree-cache"):
            trees[0].put(trees[1], module)


def _parse_source(path: str, data: bytes, profiler: Profiler | None = None, previous: ParsedFile | None = None,
                  guarded: bool = True, trees: "Trees | None" = None, light: bool = False) \
        -> "ParsedFile | tuple[SourceFile, cst.Module, ast.Module | None, ModuleSummary | None, bool] | None":
    try:
        source = SourceFile.from_bytes(path, data)
    except UndecodableSource as exc:
        return ParsedFile(None, None, None, ParseFailure(str(exc), exc.line, exc.col))
    if previous is not None or source.encoding != "utf-8" or source.bom or pieces.large(source.text):
        trees = None
    text, own = source.text, None  # (text: what LibCST parses; own: the stdlib tree of source.text, if made)
    if light and previous is None and numdisplays.may_hold(source.data):
        with _phase(profiler, "guard-ast"):
            own = _quiet_ast(source.text)
            reduced = numdisplays.lightened(source.text, own) if own is not None else None
        if reduced is not None:
            text, trees = reduced, None  # (the tree cache keeps whole trees only)
    if not guarded and trees is not None:
        module = _cached_tree(trees, profiler)
        if module is not None:
            return source, module, None, None, False
    if not guarded and previous is None and source.encoding == "utf-8" and not source.bom \
            and not pieces.large(source.text):
        try:
            module = _parse_unvalidated(text)
        except (cst.ParserSyntaxError, RecursionError, MemoryError):
            return None
        _keep_tree(trees, module, profiler)
        return source, module, None, None, text is not source.text
    tree, summary = _lighten(source.text, data, own) if own is not None \
        else _lean_guard(source.text, source.data, profiler)
    ast_error: SyntaxError | None = None
    if tree is None:
        try:
            with _phase(profiler, "guard-ast"), warnings.catch_warnings():  # LibCST's native parser crashes on
                warnings.simplefilter("ignore")  # some inputs ast rejects; the linted code's own warnings
                tree = ast.parse(source.text, filename=path)  # (SyntaxWarning, invalid escapes) are not ours
        except SyntaxError as exc:
            if "too many nested" in str(exc.msg):
                return ParsedFile(source, None, None, ParseFailure(f"too deeply nested to analyse: {exc.msg}",
                                                                    exc.lineno or 1, max((exc.offset or 1) - 1, 0)))
            ast_error = exc
        except (RecursionError, MemoryError):
            return ParsedFile(source, None, None, ParseFailure("too deeply nested to analyse (recursion limit)"))
        except ValueError as exc:
            return ParsedFile(source, None, None, ParseFailure(f"cannot parse: {exc}"))
        tree, summary = _lighten(source.text, data, tree)  # (before LibCST's parse: the two trees never coexist)
    if tree is not None and previous is not None and previous.source is not None and previous.model is not None:
        from streamlint.reparse import splice

        with _phase(profiler, "reparse"):
            module = splice(previous.source.text, previous.model.module, previous.starts, source.text,
                            _parse_unvalidated)
        if module is not None:
            return source, module, tree, summary, False
    if tree is not None and ast_error is None:  # (the stdlib parser accepts the text: the tree cache may answer)
        module = _cached_tree(trees, profiler)
        if module is not None:
            return source, module, tree, summary, False
    try:
        module = None
        if tree is not None and pieces.large(source.text):  # a large module: its parse's peak
            module = pieces.parse_in_pieces(text, tree, _parse_unvalidated)  # memory is a piece's
        if module is None:
            module = _parse_unvalidated(text)
    except cst.ParserSyntaxError as exc:
        if ast_error is not None:
            return ParsedFile(source, None, None, ParseFailure(
                f"syntax error: {ast_error.msg}", ast_error.lineno or 1, max((ast_error.offset or 1) - 1, 0)))
        if tree is not None:  # Python accepts the file: a LibCST limit (e.g. thousands of concatenated strings)
            return ParsedFile(source, None, None, ParseFailure(
                f"cannot analyse: valid Python that LibCST's parser rejects ({exc.message})", 1, 0))
        return ParsedFile(source, None, None, ParseFailure(f"syntax error: {exc.message}", exc.raw_line,
                                                          exc.raw_column))
    except (RecursionError, MemoryError):
        return ParsedFile(source, None, None, ParseFailure("too deeply nested to analyse (recursion limit)"))
    if tree is not None:
        _keep_tree(trees, module, profiler)
    return source, module, tree, summary, text is not source.text


@dataclass
class FileReport:
    path: str
    findings: list[Finding] = field(default_factory=list)
    source: SourceFile | None = None
    skipped: bool = False  # no marker of any enabled rule: not parsed
    data: bytes | None = None  # the bytes linted, kept for the report's excerpts when there are findings


class Engine:
    """Lints files of one project with one resolved configuration."""

    def __init__(self, settings: Settings, registry: Registry, *, project_root: str | None = None,
                 project_scope: Iterable[str] | None = None, ignore_noqa: bool = False) -> None:
        self.settings = settings
        self.registry = registry
        self.ignore_noqa = ignore_noqa
        enabled = settings.enabled_codes(registry)
        self.enabled_codes = frozenset(enabled)
        self.rules: list[type[Rule]] = [
            rule for code, rule in registry.rules.items() if code in enabled and not rule.engine_emitted
        ]
        # a rule without markers may fire on any file: then nothing can be skipped unparsed
        every = all(r.markers for r in self.rules)
        markers = {m for r in self.rules for m in r.markers if isinstance(m, bytes)}
        # a marker that contains another one adds nothing to the byte search
        markers = {m for m in markers if not any(o != m and o in m for o in markers)}
        self.markers: tuple[bytes, ...] = tuple(sorted(markers)) if every else ()
        patterns = {m.pattern.pattern: m for r in self.rules for m in r.markers if not isinstance(m, bytes)}
        self.marker_patterns: tuple[PatternMarker, ...] = (
            tuple(patterns[k] for k in sorted(patterns)) if every else ())
        self._last_prefilter: tuple[bytes, bool] | None = None
        self.root = Path(project_root or settings.project_root).absolute()
        self._overrides: dict[str, bytes] = {}
        self._read_stamps: dict[str, Stamp | None] = {}  # path -> stamp before its first read (read_stamp)
        self._parsed: dict[str, ParsedFile] = {}
        self._previous: dict[str, ParsedFile] = {}  # an edited buffer's last parse (reparse.splice)
        self._digests: dict[str, str] = {}  # sha256 of the parsed bytes, computed on request
        self._released = 0  # bytes of source of the trees let go since the last collection (release_models)
        self._heat: dict[str, float] = {}  # path -> how often the files of the last releases asked it (_keep_order)
        self._profiler: Profiler | None = None  # set by --profile
        self.trees: TreeCache | None = None  # reached modules' LibCST trees by content (set with the project cache)
        scope = frozenset(os.path.abspath(p) for p in project_scope) if project_scope is not None else None
        self.project = Project(
            self.root,
            self._load_model,
            scope=scope,
            options=ModelOptions(
                mode=settings.mode,
                per_path_mode=tuple(settings.per_path_mode),
                stream_switch_wrappers=tuple(settings.stream_switch_wrappers),
                wait_wrappers=tuple(settings.wait_wrappers),
            ),
        )
        self.project.reader = self.read
        # a word index built in memory, for the marker searches of a large tree without the project cache (which
        # replaces it with its own: parallel.py, lsp.py): each file read once for all of them, not once per marker
        self.project.words = WordSearch(WordIndex, self.word_stamp, self.read_stamp, after=JOIN_AFTER)
        # selectors (codes, prefixes, names, ALL) expanded to the codes they match
        self._per_file_ignores = [
            (pathspec.GitIgnoreSpec.from_lines([pattern]),
             tuple(sorted({rule.code for sel in selectors for rule in registry.lookup(sel)})))
            for pattern, selectors in settings.per_file_ignores
        ]

    @property
    def profiler(self) -> Profiler | None:
        return self._profiler

    @profiler.setter
    def profiler(self, value: Profiler | None) -> None:
        self._profiler = value
        self.project.profiler = value  # the module summaries are timed as a phase of their own

    # ---- reading and parsing
    def set_override(self, path: str, data: bytes | None) -> None:
        """Use ``data`` (an unsaved editor buffer, stdin) instead of the file on disk."""
        key = os.path.abspath(path)
        if data is None:
            self._overrides.pop(key, None)
        else:
            self._overrides[key] = data
        last = self._parsed.pop(key, None)
        self._previous.pop(key, None)
        if data is not None and last is not None and last.model is not None and last.starts is not None:
            self._previous[key] = last  # the next parse of this buffer reuses what the edit left alone
        self.project._files.pop(key, None)
        self.project.forget_bytes(key)
        self._read_stamps.pop(key, None)
        if self.project.words is not None:
            self.project.words.files_for = None  # (the word index checks every stamp again at the next search)
        self.project._uses.clear()
        self.project._symbols.clear()
        self.project._wrappers.clear()
        self.project._paths = None
        self.project._compiling = None  # from bytes: the changed file's may have changed
        self.project._renames.clear()
        self.project._marker_paths.clear()  # from bytes: the changed file's may have changed
        if data is None:  # the file changed on disk (or was created, deleted): module resolution too
            self.project._modules.clear()
            self.project._packages.clear()
            self.project._source_roots.clear()
            self.project._all_files = None

    def holds_parsed(self, path: str) -> bool:
        """Does the engine hold ``path`` parsed (for an earlier file's question)?"""
        return os.path.abspath(path) in self._parsed

    def parsed_bytes(self) -> int:
        """Source bytes of the files this engine holds parsed (their trees: what its memory grows with)."""
        return sum(len(p.source.data) for p in self._parsed.values() if p.source is not None)

    def release_models(self, keep: int = 0) -> None:
        """Let the parsed files and every project fact go (a long run's memory bound): the next
        questions parse again what they need. What depends on bytes only stays: the module summaries,
        the file list and the contents kept for byte searches; so do what the compile sites reach
        (``PathIndex.carried``: plain data, keyed by path and name) and the parsed files the last files asked
        most often, then most recently (:meth:`_keep_order`), up to ``keep`` bytes of source (the modules the next
        files most likely import: without them a large tree's run parsed its common modules again every few files). Answers do not change: the
        analysis of a file is the same whatever was analysed before it (tests/test_scale.py)."""
        self._released += self._let_go(keep)
        if self._released > keep:
            # a released tree is garbage in reference cycles (models, their functions and facts): the
            # collector's oldest generation, with millions of long-lived nodes, ran too seldom to free it
            # (issue 15: RSS grew ~1.3 MB per file without this); once per ``keep`` bytes of source let go
            self._released = 0
            gc.collect()

    def _let_go(self, keep: int) -> int:
        """release_models without the collection (its locals, the old project among them, are gone once it
        returns); the bytes of source of the trees let go."""
        old = self.project
        project = type(old)(self.root, self._load_model, scope=old.scope, options=old.options)
        carry_to = getattr(old, "carry_to", None)  # (a recording project: its observations go on, reachcache.py)
        if carry_to is not None:
            carry_to(project)
        carried = old._paths.carried() if old._paths is not None else None
        if carried is not None:
            project._paths = PathIndex(project, carried)
        kept: dict[str, ParsedFile] = {}
        for path in self._keep_order(old):
            parsed = self._parsed[path]
            size = len(parsed.source.data)
            if size <= keep:
                keep -= size
                kept[path] = parsed
        for path in kept:  # (the new project's _recent: only what its own questions ask)
            project._files[path] = old._files[path]
        project.reader = old.reader
        project.summaries = old.summaries
        project.words = old.words
        project.index_progress = old.index_progress
        project._scan_bytes, project._scan_kept = old._scan_bytes, old._scan_kept
        project._summary_digests = old._summary_digests
        project._all_files = old._all_files
        project._compiling = old._compiling  # from bytes and summaries only
        project._marker_paths = old._marker_paths  # from bytes only
        project._blob = old._blob
        project._renames = old._renames  # from bytes only
        # module resolution: from the file system only (an edit on disk clears it, set_override)
        project._packages, project._modules = old._packages, old._modules
        project._source_roots, project._checkout_dirs = old._source_roots, old._checkout_dirs
        project.profiler = self._profiler
        released = sum(len(parsed.source.data) for path, parsed in self._parsed.items()
                       if path not in kept and parsed.source is not None)
        self.project = project
        dropped = [parsed for path, parsed in self._parsed.items() if path not in kept]
        self._parsed = kept
        # the module-level memos of syntactic facts hold their nodes: they keep only those of the kept trees
        # (else every released tree stayed alive through them until thousands of answers later)
        live = {id(node) for parsed in kept.values() if parsed.model is not None
                for fn in parsed.model.functions.values() for node in (fn.node, fn.node.body)}
        syntax.forget_nodes(live)
        elementsets.forget_nodes(live)
        self._digests = {path: digest for path, digest in self._digests.items() if path in kept}
        # the old project and the models let go are emptied (their reference cycles broken): refcounting frees
        # their trees now, not at the next collection (model/release.py)
        kept_models = {id(parsed.model) for parsed in kept.values()}
        gone = {id(m): m for m in old._files.values() if m is not None and id(m) not in kept_models}
        gone.update((id(p.model), p.model) for p in dropped if p.model is not None and id(p.model) not in kept_models)
        release(old, gone.values())
        return released

    def _keep_order(self, old: Project) -> list[str]:
        """The parsed files a release may keep, the likeliest to be asked by the next files first: by their heat
        (each release adds 1 to the files its project was asked for, after taking a quarter off every file's heat:
        a module most files reach stays ahead of one that a single file reached, for a few files after the last
        one that asked it: 4 at most, below 1 after 5 releases that did not ask it), then the most recently asked. Only the
        recency (as before) let a tree whose files reach more than the budget drop the modules every file
        reaches, for the last file's own, and parse them again for the next file (sglang's slice: ~30% of its
        time re-parsing)."""
        heat = self._heat
        for path in list(heat):
            heat[path] *= 0.75
            if heat[path] < 0.01:
                del heat[path]
        asked = {path: i for i, path in enumerate(old._recent)}  # (its files asked this project, least recent first)
        for path in asked:
            heat[path] = heat.get(path, 0.0) + 1.0
        candidates = [path for path, parsed in self._parsed.items() if parsed.source is not None
                      and parsed.model is not None and old._files.get(path) is parsed.model]
        return sorted(candidates, key=lambda p: (heat.get(p, 0.0), asked.get(p, -1)), reverse=True)

    def word_stamp(self, path: str) -> Stamp | None:
        """A file's content stamp for the word index (size, mtime, inode, ctime: wordindex.stamp_of): None for
        an unsaved buffer or a file that is not a regular one (read every time)."""
        if os.path.abspath(path) in self._overrides:
            return None
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return None
        return stamp_of(st) if stat.S_ISREG(st.st_mode) else None

    def read(self, path: str) -> bytes:
        key = os.path.abspath(path)
        if key in self._overrides:
            return self._overrides[key]
        with open(path, "rb") as fh:
            if key not in self._read_stamps:  # (the first read's: any bytes kept of this file are as new or newer)
                try:
                    st = os.fstat(fh.fileno())
                    stamp = stamp_of(st)
                    trusted = stat.S_ISREG(st.st_mode) and stamp_settled(stamp, _time_ns() - 2_000_000_000)
                    self._read_stamps[key] = stamp if trusted else None
                except (OSError, ValueError):
                    self._read_stamps[key] = None
            return fh.read()

    def read_stamp(self, path: str) -> Stamp | None:
        """The content stamp (wordindex.stamp_of) taken before this engine first read ``path`` (None: not read by
        it, an editor buffer, not a regular file, or modified or replaced within 2 s of that read: not to be
        trusted), for the word index of bytes the project kept from an earlier read (model/wordindex.WordSearch)."""
        key = os.path.abspath(path)
        return None if key in self._overrides else self._read_stamps.get(key)

    def parse(self, path: str, data: bytes | None = None, reached: bool = False) -> ParsedFile:
        """The parsed file; ``data``: the bytes the caller read (and hashed) — parsed instead of a second
        read, which could fail or see another content than the one the result is recorded under. ``reached``:
        parsed for another file's question (``_load_model``, which drops the stdlib tree at once): without the
        ``ast`` guard when a module summary of the same content says the stdlib parser accepts it (the summary
        parsed it already, in this run or an earlier one: a module is not parsed twice by ``ast``)."""
        key = os.path.abspath(path)
        parsed = self._parsed.get(key)
        if parsed is not None and data is not None and (parsed.source is None or parsed.source.data != data):
            parsed = None  # parsed earlier (for another file's question) from other bytes
        if parsed is not None and parsed.lightened and not reached:
            parsed = None  # (not linted: the prefilter skips it; another question about the file itself)
        if parsed is None:
            name, is_pkg, _ = self.project.module_name(key)
            if data is None:
                try:
                    with _phase(self.profiler, "read"):
                        data = self.read(path)
                except OSError as exc:
                    parsed = ParsedFile(None, None, None, ParseFailure(f"cannot read file: {exc.strerror}"))
            digest = None
            if parsed is None:
                assert data is not None
                editable = key in self._overrides
                trees = None
                light = False  # (large number displays reduced: a module this engine never lints, numdisplays)
                if reached and not editable and key not in self._previous:
                    digest = hashlib.sha256(data).hexdigest()
                    reached = self.project.summaries.parsed_before(digest)
                    trees = (self.trees, digest) if self.trees is not None else None
                    light = numdisplays.may_hold(data) and not self.needs_analysis(data)
                parsed = parse_source(path, data, name, is_pkg, self.profiler, self._previous.pop(key, None),
                                      editable=editable, guarded=not reached, trees=trees, light=light)
            self._parsed[key] = parsed
            self._digests.pop(key, None)
            if digest is not None and parsed.source is not None:
                self._digests[key] = digest
        return parsed

    def content_digest(self, path: str) -> str | None:
        """The sha256 of the bytes the analysis parsed for ``path`` (None: not parsed, or unreadable): what
        a cached result that depends on the file is recorded under."""
        key = os.path.abspath(path)
        parsed = self._parsed.get(key)
        if parsed is None or parsed.source is None:
            return None
        digest = self._digests.get(key)
        if digest is None:
            digest = self._digests[key] = hashlib.sha256(parsed.source.data).hexdigest()
        return digest

    def _load_model(self, path: str, module_name: str, is_package: bool) -> FileModel | None:
        parsed = self.parse(path, reached=True)
        # a module parsed for another file's question keeps its LibCST tree, not its stdlib one (a third of
        # what a parsed module holds): that one serves the suppressions and the position shortcut of the
        # file's own report, and _lint_file parses it again if the module is linted later (a large module
        # keeps its skeleton and summary, which is all its own report reads: parsed once in a run)
        if parsed.summary is None:
            if parsed.tree is not None and parsed.model is not None and parsed.source is not None \
                    and parsed.source.encoding == "utf-8" and not parsed.source.bom \
                    and not pieces.large(parsed.source.text):  # (a large module's summary is made in parts)
                digest = self.content_digest(path)
                if digest is not None:
                    self.project.summaries.learn(digest, parsed.source.data, parsed.tree)
            parsed.tree = None
        if parsed.model is not None:
            parsed.model.__dict__.pop("_ast_tree", None)
        return parsed.model

    # ---- linting
    def relative(self, path: str) -> str:
        try:
            return Path(os.path.abspath(path)).relative_to(self.root).as_posix()
        except ValueError:
            return Path(path).as_posix()

    def lint_file(self, path: str, data: bytes | None = None) -> FileReport:
        """Lint one file; ``data`` is its content when the caller has read it already."""
        if self.profiler is None:
            return self._lint_file(path, data)
        started = _perf_counter()
        try:
            return self._lint_file(path, data)
        finally:
            self.profiler.file(path, _perf_counter() - started)

    def _lint_file(self, path: str, data: bytes | None) -> FileReport:
        report = FileReport(path)
        try:
            if data is None:
                with _phase(self.profiler, "read"):
                    data = self.read(path)
        except OSError as exc:
            failure = self._meta("SL001", path, f"cannot read file: {exc.strerror or exc}", Span(1, 0, 1, 0))
            report.findings = self._finish(path, [failure], [])
            return report
        if not self.needs_analysis(data):
            report.skipped = True
            # not parsed, but decoding is cheap: a binary or undecodable file is still reported
            if b"noqa" in data or b"streamlint:" in data or "SL001" in self.enabled_codes:
                try:
                    report.source = SourceFile.from_bytes(path, data)
                except UndecodableSource as exc:
                    failure = self._meta("SL001", path, str(exc), Span(exc.line, exc.col, exc.line, exc.col))
                    report.findings = self._finish(path, [failure], [])
                    return report
                raw: list[Finding] = []
                tree: ast.Module | None = None
                if "SL001" in self.enabled_codes:
                    # not analysed, but a file Python cannot parse is still reported: the stdlib parser
                    # is several times cheaper than LibCST's
                    with _phase(self.profiler, "syntax-check"):
                        tree, failure = _syntax_check(report.source.text, path)
                    if failure is not None:  # as for an analysed file: no suppression covers it
                        raw.append(self._meta("SL001", path, failure.message,
                                              Span(failure.line, failure.col, failure.line, failure.col)))
                        report.findings = self._finish(path, raw, [])
                        return report
                if not raw and b"noqa" not in data and b"streamlint:" not in data:
                    return report
                if tree is None and not raw:
                    tree = _quiet_ast(report.source.text)
                report.findings = self._finish(path, raw, parse_suppressions(report.source.text, tree))
            return report
        parsed = self.parse(path, data)
        report.source = parsed.source
        if parsed.failure is not None:
            f = parsed.failure
            failure = self._meta("SL000" if f.internal else "SL001", path, f.message,
                                 Span(f.line, f.col, f.line, f.col))
            report.findings = self._finish(path, [failure], [])  # select / ignore / per-file-ignores apply
            return report
        model = parsed.model
        assert model is not None
        if parsed.tree is None:  # parsed earlier for another file's question (_load_model)
            parsed.tree, parsed.summary = _lighten(model.source.text, model.source.data,
                                                   _quiet_ast(model.source.text))
        if "_positions" not in model.__dict__:
            model.__dict__["_ast_tree"] = parsed.tree
        self.project.add(model)
        store = self.project.summaries
        own = hashlib.sha256(model.source.data).hexdigest() if parsed.tree is not None else None
        if own is not None:  # its module summary, if a rule asks for it, is taken from this tree (or was)
            if parsed.summary is not None:
                store.made[own] = parsed.summary
            else:
                store.trees[own] = parsed.tree
        try:
            raw = self._run_rules(path, model)
        finally:
            store.trees.pop(own, None)
            store.made.pop(own, None)
            forget_children()  # (what walk.children kept for this file's questions)
        tree = parsed.tree
        suppressions = parse_suppressions(model.source.text, tree)
        report.findings = self._finish(path, raw, suppressions)
        # the model stays for other files' questions; what only this file's report needed goes (memory):
        # the stdlib tree (re-parsed if the file is linted again) and the position table (recomputed
        # if another file's finding points here)
        parsed.tree = parsed.summary = None
        for cached in ("_positions", "_lexical", "_local_nodes", "_ast_tree"):
            model.__dict__.pop(cached, None)
        return report

    def _run_rules(self, path: str, model: FileModel) -> list[Finding]:
        raw: list[Finding] = []
        for rule_cls in self.rules:
            ctx = RuleContext(rule_cls(), model, self.project, {**rule_cls.default_options(),
                                                                **self.settings.rule_options.get(rule_cls.code, {})})
            try:
                with _phase(self.profiler, rule_cls.code):
                    ctx.rule.check(ctx)
            except Exception as exc:  # a rule bug must not stop other rules or files
                where = traceback.extract_tb(exc.__traceback__)[-1]
                raw.append(self._meta(
                    "SL000", path,
                    f"rule {rule_cls.code} ({rule_cls.name}) crashed on this file: {type(exc).__name__}: {exc} "
                    f"[{os.path.basename(where.filename)}:{where.lineno}]",
                    Span(1, 0, 1, 0),
                ))
                continue
            raw.extend(ctx.findings)
        return raw

    def needs_analysis(self, data: bytes) -> bool:
        """The byte prefilter: does the file contain a marker of any enabled rule?"""
        last = self._last_prefilter
        if last is not None and last[0] is data:  # the parallel runner asked already for these bytes
            return last[1]
        with _phase(self.profiler, "prefilter"):
            result = (not self.markers and not self.marker_patterns) or any(m in data for m in self.markers) \
                or any(p.found(data) for p in self.marker_patterns)
        self._last_prefilter = (data, result)
        return result

    def _meta(self, code: str, path: str, message: str, span: Span) -> Finding:
        rule = self.registry.rules.get(code)
        severity = rule.severity if rule is not None else Severity.ERROR
        return Finding(code, META_CODES[code], message, severity, Confidence.HIGH, path, span)

    def _finish(self, path: str, raw: list[Finding], suppressions: list[Suppression]) -> list[Finding]:
        """Apply per-file ignores and suppressions; add SL002 / SL003; sort."""
        rel = self.relative(path)
        ignored = {code for spec, codes in self._per_file_ignores if spec.match_file(rel) for code in codes}
        kept: list[Finding] = []
        for finding in raw:
            if finding.code != "SL000" and (finding.code not in self.enabled_codes
                                             or self._ignored(finding.code, ignored)):
                continue  # a rule crash (SL000) is never hidden: the run must fail
            if not self.ignore_noqa and finding.code != "SL000":
                hit = next((s for s in suppressions if s.covers(finding.code, finding.span.start_line)), None)
                if hit is not None:
                    hit.used.add(finding.code)
                    continue
            kept.append(finding)
        kept = fold_root_causes(kept)
        # a crashed rule's findings are missing: its suppressions cannot be judged unused
        crashed = any(f.code == "SL000" for f in raw)
        if not self.ignore_noqa:
            for sup in suppressions:
                for code in sup.codes or ():
                    if not SL_CODE.match(code):
                        continue  # other tools' codes are left alone
                    known = code in self.registry.rules or any(c.startswith(code) for c in self.registry.rules)
                    if not known:
                        if "SL003" in self.enabled_codes and not self._ignored("SL003", ignored):
                            kept.append(self._meta("SL003", path, f"suppression names unknown rule code {code}",
                                                   sup.span))
                        continue
                    if sup.kind == "file":
                        continue  # file-level suppressions are a policy, not judged for use
                    # a code or a prefix (noqa with SL1): judged when a rule it names runs on this file
                    rule_enabled = any(c.startswith(code) and not self._ignored(c, ignored)
                                       for c in self.enabled_codes)
                    used = any(u.startswith(code) for u in sup.used)
                    if rule_enabled and not used and not crashed and "SL002" in self.enabled_codes \
                            and not self._ignored("SL002", ignored):
                        kept.append(self._meta("SL002", path, f"unused suppression for {code}", sup.span))
        kept.sort(key=lambda f: f.sort_key)
        return kept

    @staticmethod
    def _ignored(code: str, ignored: set[str]) -> bool:
        return any(code == c or code.startswith(c) for c in ignored)

    def lint_paths(self, files: list[str]) -> list[FileReport]:
        return [self.lint_file(path) for path in files]


def _syntax_check(text: str, path: str) -> tuple[ast.Module | None, ParseFailure | None]:
    """The stdlib parse of a file that is not analysed: (tree, None), or (None, why it is not Python)
    with the messages of the full parse. A recursion or memory limit says nothing about the file: no
    failure. A large module without suppression comments, whose tree nobody reads then, is parsed in pieces
    (``pieces.stdlib_skeleton``: valid exactly when the whole text is; no tree returned)."""
    if pieces.large(text) and "noqa" not in text and "streamlint:" not in text \
            and pieces.stdlib_skeleton(text, _ignore) is not None:
        return None, None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the linted code's own warnings are not ours
            return ast.parse(text, filename=path), None
    except SyntaxError as exc:
        line, col = exc.lineno or 1, max((exc.offset or 1) - 1, 0)
        if "too many nested" in str(exc.msg):
            return None, ParseFailure(f"too deeply nested to analyse: {exc.msg}", line, col)
        if _newer_grammar(text):
            return None, None
        return None, ParseFailure(f"syntax error: {exc.msg}", line, col)
    except ValueError as exc:
        return None, ParseFailure(f"cannot parse: {exc}")
    except (RecursionError, MemoryError):
        return None, None


def _ignore(tree: ast.Module) -> None:
    return None


def _newer_grammar(text: str) -> bool:
    """Does LibCST accept what this interpreter's ``ast`` rejects (the grammar of a newer Python: PEP 695 type
    parameters, ``type`` aliases), as the analysed path does? Then the file is not a syntax error."""
    try:
        _parse_unvalidated(text)
    except (cst.ParserSyntaxError, RecursionError, MemoryError, ValueError):
        return False
    return True


def _quiet_ast(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
