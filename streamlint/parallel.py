"""Linting many files: cache lookups and the prefilter in the parent, analysis in a process pool.

The parent stats every file and answers what the cache can without reading (unchanged size and mtime:
the recorded digest), reads and hashes the rest, and lints the files without a marker of any enabled
rule itself (a read and a byte search). The files that need analysis go to a pool of ``jobs`` worker
processes (serial below :data:`SERIAL_BELOW` files or with ``jobs == 1``). Where processes fork, the
parent first gathers the project-wide facts (compile sites and what they reach) and the workers inherit
its engine, so those facts — and the modules parsed for them — are computed once; elsewhere each worker
builds an :class:`~streamlint.engine.Engine` from the parent's settings. A worker keeps its engine for
all its chunks, so its lazy project index is shared by every file it analyses, until the trees it holds
pass :data:`MODEL_BYTES_KEPT` of source: then it lets them go (memory does not grow with the tree). The
module summaries a worker makes go back to the parent, which saves them in the project cache. Chunks are contiguous
runs of the sorted file list (a package's modules share their imports). Reports come back in input
order with findings sorted, so the output is identical for every ``jobs``.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

from streamlint import observed
from streamlint.cache import ResultCache, SummaryCache, project_digest, sha256
from streamlint.model.wordindex import WordSearch
from streamlint.wordcache import WordCache
from streamlint.config import Settings
from streamlint.engine import Engine, FileReport
from streamlint.finding import Finding
from streamlint.model.project import Project
from streamlint.profile import ProfileData, Profiler, phase
from streamlint.reachcache import install as install_reach
from streamlint.registry import load_registry
from streamlint.treecache import TreeCache

if TYPE_CHECKING:
    import multiprocessing.context

SLOW_FILE_SECONDS = 5.0
SERIAL_BELOW = 30  # fewer files needing analysis than this: no pool
# files without a marker still get a stdlib syntax check (SL001): this many of them justify a pool
LIGHT_SERIAL_BELOW = 400
CHUNKS_PER_JOB = 4
# source bytes of parsed files one engine keeps across the files it analyses: past this, between two files,
# it lets every tree go (Engine.release_models) and parses again what the next files need. LibCST trees
# and models take ~100-150x their source, but most files of a tree reach the same modules: at 3 MB the
# whole vllm-ascend 0.23.0 tree (-j 2) took 59 s and 530 MB peak, at 12 MB 20 s and 416 MB (as unbounded),
# and the vllm / sglang slices went past 300 s from ~100 s (re-parsing the shared modules for every file).
# Since the modules parsed for other files' questions keep no stdlib tree (Engine._load_model), a process
# grows by ~35-45 MB of RSS per MB kept (sglang 0.5.23 slice, -j 1) on ~150-200 MB of start-up, summaries
# and contents kept for byte searches: 6 MB keeps a whole-tree run near the 400 MB of issue 15 between
# files (one file's own reach comes on top: it cannot be let go while that file is analysed)
MODEL_BYTES_KEPT = 6 << 20


@dataclass(frozen=True)
class Result:
    """What a worker sends back for one file (plain data: picklable)."""

    path: str
    findings: tuple[Finding, ...]
    skipped: bool
    # absolute paths of project files the analysis could reach, with the sha256 of the bytes it parsed
    # (None: not parsed here; the parent hashes the file on disk)
    deps: tuple[tuple[str, str | None], ...]
    project_wide: bool  # read project-wide facts (Project.note_wide_read)
    seconds: float = 0.0  # wall time of the file's analysis (slow files are named)
    # what the analysis observed of the project (streamlint/observed.py; None: not recorded, a pool's worker)
    observations: dict | None = None


@dataclass
class RunStats:
    files: int = 0
    analysed: int = 0
    cached: int = 0
    skipped: int = 0  # no marker of an enabled rule: read, searched and syntax-checked only
    jobs: int = 1
    slow: list[tuple[str, float]] = field(default_factory=list)  # (path, seconds) over SLOW_FILE_SECONDS
    profile: list[ProfileData] = field(default_factory=list)


def default_jobs() -> int:
    return os.cpu_count() or 1


def dependencies(project: Project, path: str) -> tuple[str, ...]:
    """Project files whose content the analysis of ``path`` could depend on.

    The import closure of the file over the modules the project index has loaded: every cross-module
    question (wrappers, symbols, call targets, attribute types, bases) resolves a name through an
    import table, so the modules it can reach are among the loaded ones named by a prefix of an
    imported qualified name, transitively. An over-approximation, never an under-approximation.
    """
    loaded: dict[str, list[str]] = {}
    for file_path, model in project._files.items():
        if model is not None:
            loaded.setdefault(model.module_name, []).append(file_path)
    start = os.path.abspath(path)
    seen = {start}
    stack = [start]
    while stack:
        model = project._files.get(stack.pop())
        if model is None:
            continue
        names = set(model.names.values())
        for fn in model.functions.values():
            names.update(fn.local_aliases.values())
        for cls in model.classes.values():
            names.update(cls.attr_types.values())
            names.update(b for b in cls.bases if b)
        modules: set[str] = set()
        for qualname in names:
            parts = qualname.split(".")
            modules.update(".".join(parts[:cut]) for cut in range(1, len(parts) + 1))
        if model.module_name:
            parts = model.module_name.split(".")
            modules.update(".".join(parts[:cut]) for cut in range(1, len(parts)))  # parent packages
        for module in modules:
            for dep in loaded.get(module, ()):
                if dep not in seen:
                    seen.add(dep)
                    stack.append(dep)
    seen.discard(start)
    return tuple(sorted(seen))


# a module this large that a file reaches through its imports is counted in the kept budget before the file is analysed
LARGE_REACH = 1 << 20
_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([\w., \t*]*)|import[ \t]+([\w., \t]+))", re.M)


def _imports(data: bytes, module: str, is_package: bool) -> tuple[tuple[str, bool], ...]:
    """The modules the import statements of ``data`` (module ``module``) may load, each with whether a star import
    names it: ``from M import a`` names ``M`` and ``M.a`` (a submodule?), ``import a.b as c`` names ``a.b``. A byte
    scan (no parse): a line it misreads only changes what the kept budget counts, never an answer."""
    out: list[tuple[str, bool]] = []
    package = module.split(".") if is_package else module.split(".")[:-1]
    for found in _IMPORT.finditer(data):
        dots, base, names, plain = (g.decode("ascii", "replace") if g is not None else None for g in found.groups())
        if plain is not None:
            out.extend((part.split()[0], False) for part in plain.split(",") if part.split())
            continue
        if dots:
            base = ".".join([*package[:len(package) - len(dots) + 1], *([base] if base else [])])
        if not base:
            continue
        listed = [part.split()[0] for part in (names or "").split(",") if part.split()]
        out.append((base, "*" in listed))
        out.extend((f"{base}.{name}", False) for name in listed if name != "*")
    return tuple(out)


def _large_reach(engine: Engine, path: str, data: bytes) -> int:
    """Bytes of source of the modules over :data:`LARGE_REACH` that the file's imports lead to and the engine does
    not hold parsed: analysed, the file parses them on top of the kept trees (torch-npu's 3 KB custom op files reach
    its 3.1 MB generated module through ``ge_apis``' star import: +70 MB on a full budget). Followed: the modules its
    import statements name, then their star imports, two steps (a star import makes every name of the module
    reachable); not the plain imports of a module further on (counted for most of a tree's files, a budget cut
    for modules few of them parse). The imports of a module are memoised by path (from its bytes)."""
    project = engine.project
    memo = engine.__dict__.setdefault("_import_memo", {})
    name, is_package, _ = project.module_name(path)
    counted: set[str] = set()
    seen: set[str] = set()
    frontier = [(m, path) for m, _star in _imports(data, name, is_package)]
    for step in range(3):
        nxt = []
        for module, origin in frontier:
            found = project.module_path(module, _Context(origin))
            if found is None or found in seen:
                continue
            seen.add(found)
            try:
                size = os.path.getsize(found)
            except OSError:
                continue
            if size > LARGE_REACH:
                if not engine.holds_parsed(found):
                    counted.add(found)
                continue
            if step == 2:
                continue
            imports = memo.get(found)
            if imports is None:
                raw = project.file_bytes(found) or b""
                sub, sub_pkg, _ = project.module_name(found)
                imports = memo[found] = tuple(m for m, star in _imports(raw, sub, sub_pkg) if star)
            nxt.extend((m, found) for m in imports)
        frontier = nxt
    return sum(os.path.getsize(p) for p in counted)


@dataclass(frozen=True)
class _Context:
    path: str  # (what module resolution reads of a FileModel: ModulePaths.module_path)


def _bounded(engine: Engine, path: str | None = None, data: bytes | None = None) -> None:
    """Bound a long run's memory: the engine lets its trees go once they pass MODEL_BYTES_KEPT, less the large modules
    the file about to be analysed (``path``, its bytes ``data``) reaches and the engine does not hold
    (:func:`_large_reach`): their trees come on top of the kept ones while it is analysed."""
    budget = MODEL_BYTES_KEPT
    if path is not None and data is not None and engine.needs_analysis(data):
        quiet = getattr(engine.project, "quiet", None)  # (sizes for the budget: no observation, observed.py)
        with quiet() if quiet is not None else nullcontext():
            budget = max(0, budget - _large_reach(engine, path, data))
    if engine.parsed_bytes() > budget:
        # a release keeps the most often, then most recently used models up to the bound (Engine._keep_order;
        # consecutive files of a package import the same modules, which a release of everything made the next file parse again, with the
        # compile index that a release now keeps too: the sglang 0.5.23 slice went from 189 s past 1500 s
        # at 6 MB). What a run holds between files stays within the bound; past it, a release per file
        # costs less than the parses it saves (sglang slice files 81-140, -j 1: CPU 121 -> 101 s keeping
        # half, less again keeping all of it, same peak RSS)
        engine.release_models(budget)


def _result(engine: Engine, path: str, data: bytes | None) -> Result:
    wide_before = engine.project.wide_reads
    started = time.perf_counter()
    report = engine.lint_file(path, data)
    seconds = time.perf_counter() - started
    deps: tuple[tuple[str, str | None], ...] = ()
    if not report.skipped:
        explicit = {os.path.abspath(d) for f in report.findings for d in f.depends_on}
        deps = tuple((dep, engine.content_digest(dep))
                     for dep in sorted(set(dependencies(engine.project, path)) | explicit))
    return Result(path, tuple(report.findings), report.skipped, deps, engine.project.wide_reads != wide_before,
                  seconds)


# ---- worker side (one Engine per worker process, kept across its chunks)
_WORKER: dict[str, Engine] = {}


def _worker_init(settings: Settings, project_root: str | None, ignore_noqa: bool, profile: bool) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (one line, exit 130)
    inherited = _WORKER.get("parent")
    if inherited is not None:  # forked: the parent's engine, with the project facts it gathered
        _WORKER["engine"] = inherited
        return
    registry = load_registry()
    engine = Engine(settings, registry, project_root=project_root, ignore_noqa=ignore_noqa)
    if profile:
        engine.profiler = Profiler()
    _WORKER["engine"] = engine


def _worker_run(chunk: list[tuple[str, bytes]]) -> tuple[list[Result], ProfileData | None, dict]:
    engine = _WORKER["engine"]
    if engine.profiler is not None:
        engine.profiler = Profiler()  # one snapshot per chunk: the parent sums them
    results = []
    for path, data in chunk:
        _bounded(engine, path, data)
        results.append(_result(engine, path, data))
    # the module summaries made here go back to the parent, which saves them in the project cache
    return results, engine.profiler.snapshot() if engine.profiler is not None else None, \
        engine.project.summaries.take_new()


def _chunks(items: list[tuple[str, bytes]], jobs: int) -> list[list[tuple[str, bytes]]]:
    count = max(1, min(len(items), jobs * CHUNKS_PER_JOB))
    size = -(-len(items) // count)
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    # largest first: a chunk with a 4,000-line module must not be the one that starts last
    return sorted(chunks, key=lambda c: -sum(len(d) for _, d in c))


def silence_thread_errors() -> None:
    """After an interrupt, the worker pool's helper threads see their pipes close as the workers exit: what
    they raise then is the interrupt's echo, not news (the CLI's one line is the whole report). Installed
    before the workers are stopped, so no thread can start printing a traceback first."""
    import threading

    threading.excepthook = lambda args: None


def _pool_context() -> multiprocessing.context.BaseContext:
    import multiprocessing  # (with the pool only: a serial run does not import it)

    if sys.platform == "linux":
        return multiprocessing.get_context("fork")  # rules and libcst already imported: no start-up cost
    return multiprocessing.get_context()


def mostly_read(engine: Engine) -> bool:
    """Did this run read at least half of the project's files (so indexing the rest costs at most as much)?"""
    files = engine.project.all_files()
    return 2 * sum(1 for path in files if path in engine._read_stamps) >= len(files)


def lint_files(
    engine: Engine,
    files: list[str],
    *,
    jobs: int | None = None,
    cache: ResultCache | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[FileReport], RunStats]:
    """Lint ``files`` with ``engine``'s settings; reports in input order."""
    profiler = engine.profiler
    jobs = default_jobs() if jobs is None or jobs <= 0 else jobs
    stats = RunStats(files=len(files), jobs=1)
    reports: dict[str, FileReport] = {}
    contents: dict[str, bytes] = {}
    digests: dict[str, str] = {}
    pending: list[tuple[str, bytes]] = []
    advance = progress or (lambda n: None)

    seen_stats: dict[str, os.stat_result | None] = {}
    # a serial run with the cache records what each analysis observes, kept with its result (observed.py)
    recording = cache is not None and observed.start(engine)
    checking: list = []

    def still_observed(record: dict) -> bool:
        if not checking:
            checking.append(observed.checker(engine))
        return observed.holds(record, checking[0])

    check = still_observed if recording else None

    def stat_of(path: str) -> os.stat_result | None:
        key = os.path.abspath(path)
        if key not in seen_stats:
            try:
                seen_stats[key] = os.stat(key)
            except OSError:
                seen_stats[key] = None
        return seen_stats[key]

    def dep_digest(path: str) -> str:
        if path not in digests:
            known = cache.known_digest(path, stat_of(path)) if cache is not None else None
            if known is not None:
                digests[path] = known
                return known
            st = stat_of(path)
            try:
                if st is None or not stat.S_ISREG(st.st_mode):
                    raise OSError("not a regular file")  # (a path from the cache: never a FIFO or device)
                with open(path, "rb") as fh:
                    digests[path] = sha256(fh.read())
            except (OSError, ValueError):
                digests[path] = ""
        return digests[path]

    summaries = SummaryCache(cache.directory) if cache is not None else None
    if summaries is not None and engine.project.summaries.source is None and not engine.project.summaries.entries:
        engine.project.summaries.source = summaries.load
    if cache is not None and engine.trees is None:  # reached modules' LibCST trees by content (treecache.py)
        engine.trees = TreeCache.open(cache.directory, engine.root)
    words = WordCache(cache.directory, engine.root) if cache is not None else None
    if words is not None and (engine.project.words is None or engine.project.words.after):
        engine.project.words = WordSearch(words.load, engine.word_stamp, engine.read_stamp)

    project_state: list[str] = []
    light: list[tuple[str, bytes]] = []  # files without a marker, to be syntax-checked only
    check_syntax = "SL001" in engine.enabled_codes and jobs > 1

    def whole_project() -> str:
        if not project_state:
            project_state.append(project_digest(engine.root, skip=[cache.directory] if cache else [],
                                                known=seen_stats))
        return project_state[0]

    for path in files:
        if cache is not None:
            with phase(profiler, "cache"):  # unchanged size and mtime: the recorded digest, no read
                known = cache.known_digest(path, stat_of(path))
                cached = None if known is None else cache.lookup(path, known, dep_digest, whole_project, check)
            if cached is not None:
                digests[os.path.abspath(path)] = known
                reports[path] = FileReport(path, cached)
                stats.cached += 1
                advance(1)
                continue
        try:
            with phase(profiler, "read"):
                data = engine.read(path)
        except OSError:
            reports[path] = engine.lint_file(path)  # reports the read error
            advance(1)
            continue
        if cache is not None:
            with phase(profiler, "cache"):
                digest = digests[os.path.abspath(path)] = sha256(data)
                cached = cache.lookup(path, digest, dep_digest, whole_project, check)
                if cached is not None:
                    cache.note_stat(path, stat_of(path))
            if cached is not None:
                reports[path] = FileReport(path, cached)
                stats.cached += 1
                advance(1)
                continue
        engine.project.remember_bytes(path, data)  # (kept up to projectscans.SCAN_BYTES_KEPT in all)
        if engine.needs_analysis(data):
            contents[path] = data
            pending.append((path, data))
            continue
        if check_syntax:
            light.append((path, data))  # the syntax check: in the pool when there is one
            continue
        report = engine.lint_file(path, data)
        reports[path] = report
        if cache is not None:
            cache.store(path, digests[os.path.abspath(path)], report.findings, {}, st=stat_of(path))
        advance(1)

    if cache is not None and pending:
        with phase(profiler, "reach"):  # what the compile sites reach, from the project cache when it holds
            reach = install_reach(engine, cache.directory, cache.key)
            if reach is not None:
                observed.merge(engine.project, reach)  # (the facts the analyses are given come from its observations)
    results: list[Result] = []
    if jobs == 1 or len(pending) + len(light) < 2 or (len(pending) < max(SERIAL_BELOW, 2)
                                                      and len(light) < max(LIGHT_SERIAL_BELOW, 1)):
        for path, data in [*light, *pending]:
            _bounded(engine, path, data)
            res = _result(engine, path, data)
            if recording and not res.skipped:  # (cumulative: what the files before it left in memos included)
                res = replace(res, observations=observed.snapshot(engine.project))
            results.append(res)
            advance(1)
    else:
        stats.jobs = min(jobs, max(len(pending), len(light)))
        context = _pool_context()
        if context.get_start_method() == "fork":
            # project facts gathered once, here; the forked workers inherit them (and the modules parsed
            # for them) instead of each recomputing them
            with phase(profiler, "project-facts"):
                engine.project.path_index.prepare()
            for rule in engine.rules:
                rule.prepare()  # (the rules' model modules, imported once here: the workers inherit them)
            _WORKER["parent"] = engine
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(stats.jobs, mp_context=context, initializer=_worker_init,
                                 initargs=(engine.settings, str(engine.root), engine.ignore_noqa,
                                           profiler is not None)) as pool:
            try:
                chunks = (_chunks(pending, stats.jobs) if pending else []) + (_chunks(light, stats.jobs) if light else [])
                for chunk_results, snapshot, summaries_made in pool.map(_worker_run, chunks):
                    results.extend(chunk_results)
                    engine.project.summaries.add(summaries_made)
                    if snapshot is not None and profiler is not None:
                        profiler.merge(snapshot)
                    advance(len(chunk_results))
            except KeyboardInterrupt:  # the workers ignore Ctrl-C: stop them now rather than wait for them
                silence_thread_errors()  # before the pool's manager thread sees its workers die
                for process in list(getattr(pool, "_processes", {}).values()):
                    process.terminate()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            finally:
                _WORKER.pop("parent", None)
    stats.analysed = sum(1 for r in results if not r.skipped)
    stats.skipped = len(files) - stats.analysed - stats.cached
    stats.slow = sorted(((r.path, r.seconds) for r in results if r.seconds >= SLOW_FILE_SECONDS),
                        key=lambda ps: -ps[1])
    for res in results:
        reports[res.path] = FileReport(res.path, list(res.findings), skipped=res.skipped,
                                       data=contents.get(res.path) if res.findings else None)
        if cache is not None:
            with phase(profiler, "cache"):
                deps = {dep: digest if digest is not None else dep_digest(dep) for dep, digest in res.deps}
                cache.store(res.path, digests[os.path.abspath(res.path)], list(res.findings), deps,
                            whole_project() if res.project_wide else None, st=stat_of(res.path),
                            observations=res.observations)
    if cache is not None:
        with phase(profiler, "cache"):
            cache.save()
            if summaries is not None:
                summaries.save(engine.project.summaries)
            if engine.trees is not None:
                engine.trees.trim()
            if words is not None:
                search = engine.project.words
                if search is not None and search.index is None and results and not words.file.exists() \
                        and mostly_read(engine):
                    # (a first analysing run with the cache that asked no marker search but read most of the
                    # tree anyway indexes it, so a run of any file after it finds the index warm: ~0.6 s of CPU
                    # for torch-npu's 1,700 files; a run of a few files does not read the rest for it)
                    with phase(profiler, "word-index"):
                        search.current(engine.project, engine.project.all_files(), keep=False)
                if search is not None and search.index is not None:
                    words.save(search.index)
    return [reports[path] for path in files], stats
