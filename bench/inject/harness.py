"""Run mutants through streamlint and score them.

Each package tree is copied once per worker into a scratch directory (the copy-on-write overlay):
a job writes one mutated file into the copy, runs ``streamlint --no-cache --output-format json <file>``
from the copy's root (so the file is linted in its project context: callers, callees, wrappers and
configs in the other modules are present), then restores the original bytes. The original file is
linted the same way first; its findings, carried to the mutant's lines, are not counted.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from bench.inject.mutate import EXPECT, KINDS, MARK, TORCHAIR_SCOPES, Site, sites

TOLERANCE = 3  # lines either side of the expected line or region
# Every mutation site needs one of these in its module's text (a cheap prefilter before LibCST parses it).
_MARKERS = ("stream(", "wait_event", "record_event", "record_stream", "npu_stream_switch", "NpuStreamSwitch",
            "npu_wait_tensor", "CompilerConfig", "super_kernel", "SuperKernelScope", "limit_core_num",
            "tagged_event", ".record(", ".wait(", "synchronize(")
_NPU = re.compile(r"torch_npu|torchair|torch\.npu")
_MULTISTREAM = re.compile(r"npu_stream_switch|NpuStreamSwitch|npu_prefetch")


@dataclass
class TreeRef:
    name: str
    version: str
    root: Path


def iter_trees(names: Iterable[str] | None, trees_dir: Path | None = None, offline: bool = False) -> Iterator[TreeRef]:
    """Trees from the real-code corpus (bench.realcode), or unpacked `<name>-<version>` dirs of `trees_dir`."""
    wanted = list(names) if names else None
    if trees_dir is not None:
        for d in sorted(p for p in trees_dir.iterdir() if p.is_dir()):
            name, _, version = d.name.rpartition("-")
            if wanted is None or name in wanted or d.name in wanted:
                yield TreeRef(name, version, d)
        return
    from bench.realcode.corpus import trees
    for tree in trees(wanted, offline=offline):
        yield TreeRef(tree.name, tree.version, Path(tree.root))


_SCOPE_KINDS = ("break-direct", "break-callee", "superkernel-nest")
_DEF = re.compile(r"^(?P<indent>[ \t]*)def (?P<name>\w+)\(", re.M)


def _def_body(text: str, name: str) -> str | None:
    """The text of the (last) top-level-or-nested `def name(` in `text`, up to the next def at its level."""
    found = None
    for m in _DEF.finditer(text):
        if m.group("name") != name:
            continue
        indent = len(m.group("indent").expandtabs())
        start = text.find("\n", m.end()) + 1
        end = len(text)
        for n in _DEF.finditer(text, start):
            if len(n.group("indent").expandtabs()) <= indent:
                end = n.start()
                break
        found = text[start:end]
    return found


def _imported_from(text: str, name: str) -> list[tuple[str, str]]:
    """(module, original name) pairs that bind `name` by `from module import ...` in `text`."""
    out: list[tuple[str, str]] = []
    for m in re.finditer(r"^[ \t]*from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", text, re.M):
        for part in m.group(2).strip("()").replace("\n", " ").split(","):
            bits = part.split("#")[0].split()
            if not bits:
                continue
            orig, bound = bits[0], bits[-1] if len(bits) == 3 and bits[1] == "as" else bits[0]
            if bound == name:
                out.append((m.group(1), orig))
    return out


class ScopeResolver:
    """Where a TorchAir-named scope of a module really goes: ``torchair`` (a TorchAir scope, directly or
    through a project wrapper), ``native`` (a project wrapper of ``torch.npu.stream``: eager code, which
    rules.md says SL101 must not flag) or ``unknown``. Text-level, one import hop and one wrapper deep."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._files: list[str] | None = None
        self._cache: dict[tuple[str, str], str] = {}

    def _module_file(self, module: str, importer: str) -> Path | None:
        if module.startswith("."):
            level = len(module) - len(module.lstrip("."))
            base = Path(importer).parent
            for _ in range(level - 1):
                base = base.parent
            rel = (base / module.lstrip(".").replace(".", "/")).as_posix() if module.lstrip(".") else base.as_posix()
            suffixes = [rel + ".py", rel + "/__init__.py"]
        else:
            tail = module.replace(".", "/")
            suffixes = [tail + ".py", tail + "/__init__.py"]
        if self._files is None:
            self._files = [p.relative_to(self.root).as_posix() for p in tree_files(self.root)]
        for f in self._files:
            if any(f == suf or f.endswith("/" + suf) for suf in suffixes):
                return self.root / f
        return None

    def resolve(self, file: str, name: str) -> str:
        key = (file, name)
        if key not in self._cache:
            self._cache[key] = self._resolve(file, name)
        return self._cache[key]

    def _resolve(self, file: str, name: str) -> str:
        """Follow `from m import name` (re-exports included, up to four hops) to the `def`, then classify it."""
        rel, want = file, name
        for _hop in range(5):
            try:
                text = (self.root / rel).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return "unknown"
            body = _def_body(text, want)
            if body is not None:
                return self._classify(text, body)
            sources = _imported_from(text, want)
            if any(mod.startswith("torchair") for mod, _ in sources):
                return "torchair"
            nxt = next(((path, orig) for mod, orig in sources
                        if (path := self._module_file(mod, rel)) is not None), None)
            if nxt is None:
                return "unknown"
            rel, want = nxt[0].relative_to(self.root).as_posix(), nxt[1]
        return "unknown"

    @staticmethod
    def _classify(text: str, body: str) -> str:
        called = set(re.findall(r"(\w+)\s*\(", body))
        if "torchair" in body or any(mod.startswith("torchair") for n in called for mod, _ in _imported_from(text, n)):
            return "torchair"
        if re.search(r"\.stream\(", body):
            return "native"
        return "unknown"


def scope_verdict(m: "Mutant", source_line: str, resolver: ScopeResolver | None) -> None:
    """Turn a scope mutant into an equivalent one when every TorchAir-named scope of its `with` line is a
    project wrapper of a native stream."""
    if resolver is None or not (m.kind in _SCOPE_KINDS or (m.kind == "mode-api" and m.detail.startswith("record_stream"))):
        return
    names = sorted(set(re.findall(r"(\w+)\s*\(", source_line)) & TORCHAIR_SCOPES)
    if names and all(resolver.resolve(m.file, n) == "native" for n in names):
        m.verdict = "equivalent"
        m.reason = f"`{names[0]}` here is the project's wrapper of torch.npu.stream: eager code, not a TorchAir scope"


_RECORD = re.compile(r"^\s*([\w.\[\]]+)\.record_stream\(")


def lifetime_verdict(m: "Mutant", lines: list[str]) -> None:
    """Refine a record_stream mutant's verdict from the text around it: inside an object's own
    `record_stream` method the caller decides which stream needs it (undecided); a loop variable over an
    attribute (`for ctx in self.contexts: ctx.record_stream(s)`) is an element of a long-lived object
    (equivalent, as `self.x` is)."""
    if m.kind not in ("delete-record-stream", "record-wrong-stream") or m.verdict != "defect":
        return
    if m.qualname.rsplit(".", 1)[-1] == "record_stream":
        m.verdict, m.reason = "undecided", "an object's own record_stream method: the caller decides the stream"
        return
    line = lines[m.line - 1] if 0 < m.line <= len(lines) else ""
    found = _RECORD.match(line)
    if found is None:
        return
    recv = re.escape(found.group(1))
    indent = len(line) - len(line.lstrip())
    for prev in reversed(lines[max(0, m.line - 80):m.line - 1]):
        stripped = prev.lstrip()
        if stripped.startswith("def ") and len(prev) - len(stripped) < indent:
            break
        loop = re.match(rf"for\s+(?:\w+\s*,\s*)*{recv}(?:\s*,\s*\w+)*\s+in\s+(.+):", stripped)
        if loop is not None:
            if re.match(r"(self\.|[\w]+\.)|.*\.(values|items)\(\)", loop.group(1)):
                m.verdict, m.reason = "equivalent", (f"`{found.group(1)}` iterates over {loop.group(1).strip()}: "
                                                     "an element of a long-lived object")
            return


_WAIT_TEXT = re.compile(r"wait_stream|wait_event|\.wait\(|npu_wait_tensor|npu_tagged_event_wait|ops\.wait\(")


# lines of a loop body that launch no work: comments, control flow, event records, continuation lines
_CONTROL_TEXT = re.compile(r"\s*(#|if\b|elif\b|else\s*:|try\s*:|except\b|finally\s*:|continue\b|break\b|pass\b|"
                           r"[)\]}]|[\w.\[\]]*\.record\(|.*\brecord_event\()")


def loop_verdict(m: "Mutant", lines: list[str]) -> None:
    """A skipped join-loop iteration is a defect only when the loop joins something per iteration: a wait
    in its body that names the loop variable (`wait_stream(streams[i])`, `s.wait_stream(...)` over
    `for s in streams`, `events[i].wait()`). A loop that waits on the same stream or event every time is
    undecided: the other iterations may cover the skipped one."""
    if not m.kind.startswith("join-loop") or m.verdict != "defect" or not 0 < m.line <= len(lines):
        return
    head = lines[m.line - 1]
    found = re.match(r"\s*(?:async\s+)?for\s+(.+?)\s+in\s", head)
    if found is None:
        return
    targets = set(re.findall(r"\w+", found.group(1)))
    indent = len(head) - len(head.lstrip())
    waits, work = [], []
    stmt, depth = "", 0
    for line in lines[m.line:]:
        if not depth and line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        code = line.split("#", 1)[0] if "#" in line and "'" not in line and '"' not in line else line
        stmt += code + "\n"
        depth = max(0, depth + code.count("(") + code.count("[") + code.count("{")
                    - code.count(")") - code.count("]") - code.count("}"))
        if depth:
            continue  # the statement goes on (a call split over lines)
        if _WAIT_TEXT.search(stmt):
            waits.append(stmt)
        elif stmt.strip() and not _CONTROL_TEXT.match(stmt):
            work.append(stmt)
        stmt = ""
    if work:
        m.verdict, m.reason = "equivalent", ("out of domain: the loop body does work besides its waits, so skipping an "
                                             "iteration drops that work with its wait (a functional change, not a "
                                             "lost join)")
        return
    if waits and not any(set(re.findall(r"\w+", w)) & targets for w in waits):
        m.verdict, m.reason = "undecided", ("each iteration waits on the same stream or event (no loop variable in "
                                            "the wait): the other iterations may cover the skipped one")


def tree_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if ".dist-info" not in p.as_posix() and p.is_file())


@dataclass
class Mutant:
    package: str
    version: str
    file: str
    qualname: str
    kind: str
    detail: str
    line: int
    api_family: str
    verdict: str
    reason: str
    key: str
    expected: tuple[str, ...] = ()
    window: tuple[int, int] = (0, 0)
    new: list[tuple[str, int]] = field(default_factory=list)
    caught_rule: bool = False
    caught_family: bool = False
    caught_in_file: bool = False
    caught_confidence: str = ""  # the confidence of the finding that caught it (what `--min-confidence` keeps)
    extras: list[tuple[str, int]] = field(default_factory=list)
    error: str = ""
    source: str = field(default="", repr=False)


def collect_sites(tree: TreeRef, kinds: set[str] | None = None, only: set[str] | None = None) -> list[Site]:
    """Sites of every stream-using function of the tree (of the files in `only`, when given; the tree-wide
    flags — NPU code, multi-stream code — are computed from every file either way)."""
    files = tree_files(tree.root)
    texts: dict[Path, str] = {}
    is_npu = multistream = False
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        is_npu = is_npu or bool(_NPU.search(text))
        multistream = multistream or bool(_MULTISTREAM.search(text))
        if any(m in text for m in _MARKERS):
            texts[path] = text
    out: list[Site] = []
    for path, text in texts.items():
        rel = path.relative_to(tree.root).as_posix()
        if only is not None and rel not in only:
            continue
        for site in sites(text, rel, tree_is_npu=is_npu, tree_multistream=multistream):
            if kinds is None or site.kind in kinds:
                out.append(site)
    return out


def sample(site_list: list[Site], cap: int, seed: int, package: str) -> list[Site]:
    """Deterministic: sites sorted by key, shuffled per kind with a seed derived from (seed, package),
    then taken round-robin over the kinds so that rare kinds are represented."""
    rng = random.Random(f"{seed}:{package}")
    by_kind: dict[str, list[Site]] = {}
    for s in sorted(site_list, key=lambda s: s.key):
        by_kind.setdefault(s.kind, []).append(s)
    for k in sorted(by_kind):
        rng.shuffle(by_kind[k])
    out: list[Site] = []
    queues = [by_kind[k] for k in KINDS if k in by_kind]
    while len(out) < cap and any(queues):
        for q in queues:
            if q and len(out) < cap:
                out.append(q.pop(0))
    return out


class Linter:
    """Per-thread scratch copies of one tree; `lint(rel, text)` runs streamlint on that text in place of
    the file and returns its findings (or raises RuntimeError)."""

    def __init__(self, root: Path, workdir: Path, timeout: float = 180.0) -> None:
        self.root = root
        self.workdir = workdir
        self.timeout = timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._count = 0

    def _scratch(self) -> Path:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            with self._lock:
                self._count += 1
                scratch = self.workdir / f"w{self._count}"
            shutil.copytree(self.root, scratch, ignore=shutil.ignore_patterns("*.dist-info", "__pycache__"))
            self._local.scratch = scratch
        return scratch

    def lint(self, rel: str, text: str | None) -> list[dict]:
        scratch = self._scratch()
        target = scratch / rel
        original = target.read_bytes()
        try:
            if text is not None:
                target.write_text(text, encoding="utf-8")
            # every confidence, whatever the default: the score records each catch's own (`caught_confidence`)
            cmd = [sys.executable, "-m", "streamlint", "--no-cache", "--min-confidence", "low", "--output-format",
                   "json", rel]
            proc = subprocess.run(cmd, cwd=scratch, capture_output=True, text=True, timeout=self.timeout,
                                  env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        finally:
            target.write_bytes(original)
        if not proc.stdout.strip():  # the JSON format always prints a list: no output is a crash, not "no findings"
            raise RuntimeError(f"streamlint exit {proc.returncode} without output: {proc.stderr.strip()[-300:]}")
        try:
            data = json.loads(proc.stdout)
        except json.JSONDecodeError as exc:
            raise RuntimeError(f"streamlint exit {proc.returncode}: {proc.stderr.strip()[-300:]}") from exc
        return [f for f in data if isinstance(f, dict)]


def line_map(old: list[str], new: list[str]) -> dict[int, int]:
    """1-based old line -> new line, for the lines the edit left alone."""
    out: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                out[i1 + k + 1] = j1 + k + 1
    return out


def _norm(msg: str) -> str:
    return re.sub(r"\d+", "#", msg)


def score(m: Mutant, site: Site, original_text: str, original: list[dict], mutated: list[dict]) -> None:
    old_lines = original_text.splitlines()
    new_lines = m.source.splitlines()
    mapping = line_map(old_lines, new_lines)
    marker = next((i + 1 for i, ln in enumerate(new_lines) if MARK in ln and "sl-inject-import" not in ln), None)
    at = marker or mapping.get(site.line, site.line)
    fstart = mapping.get(site.func_start, site.func_start)
    fend = mapping.get(site.func_end, site.func_end + len(new_lines) - len(old_lines))
    codes, shape = EXPECT[site.kind]
    lo, hi = {"line": (at, at), "line+1": (at, at + 1), "region": (at, fend),
              "function": (fstart, fend)}[shape]
    m.expected = codes
    m.window = (lo - TOLERANCE, hi + TOLERANCE)
    pool = [(f["code"], mapping.get(f["start"]["line"]), _norm(f.get("message", ""))) for f in original]
    new: list[tuple[str, int]] = []
    sureness: dict[tuple[str, int], str] = {}
    for f in mutated:
        code, line, msg = f["code"], f["start"]["line"], _norm(f.get("message", ""))
        hit = next((p for p in pool if p[0] == code and p[1] == line), None) or \
            next((p for p in pool if p[0] == code and p[2] == msg), None)
        if hit is not None:
            pool.remove(hit)
            continue
        new.append((code, line))
        sureness.setdefault((code, line), str(f.get("confidence", "")))
    m.new = new
    fams = {c[:3] for c in codes}
    inside = [(c, ln) for c, ln in new if m.window[0] <= ln <= m.window[1]]
    rule_hit = next(((c, ln) for c, ln in inside if c in codes), None)
    fam_hit = rule_hit or next(((c, ln) for c, ln in inside if c[:3] in fams), None)
    m.caught_rule = rule_hit is not None
    m.caught_confidence = sureness.get(rule_hit, "") if rule_hit is not None else ""
    m.caught_family = fam_hit is not None
    m.caught_in_file = any(c in codes for c, _ in new)
    extras = list(new)
    if fam_hit is not None:
        extras.remove(fam_hit)
    m.extras = extras


def package_relative(path: str, version: str) -> str:
    """A mutant's file path relative to its package root: without the release directory (`vllm_ascend-0.9.1/`,
    `megatron_core-0.16.1/`) when the tree has one, so the same file matches across releases."""
    head, sep, rest = path.partition("/")
    return rest if sep and head.endswith("-" + version) else path


def site_identity(key: str, version: str) -> str:
    """A mutant key without the release directory: file (package-relative), function and edit."""
    path, sep, rest = key.partition("::")
    return package_relative(path, version) + sep + rest


class Exclusion:
    """The sites of earlier samples (their raw results, JSON lines), so that a new sample is held out from
    them: a candidate is dropped when an earlier sample has the same key, the same file + function + line
    (any kind of edit), or the same site (package-relative file + function + edit) in another release of
    the same package."""

    REASONS = ("same key", "same file+function+line", "same site in another release")

    def __init__(self, rows: Iterable[dict]) -> None:
        self.keys: set[str] = set()
        self.lines: set[tuple[str, str, str, str, int]] = set()
        self.identities: dict[tuple[str, str], set[str]] = {}  # (package, identity) -> versions
        for r in rows:
            if "key" not in r:
                continue
            self.keys.add(r["key"])
            self.lines.add((r["package"], r["version"], r["file"], r["qualname"], int(r["line"])))
            self.identities.setdefault((r["package"], site_identity(r["key"], r["version"])), set()).add(r["version"])
        self.dropped: dict[str, int] = dict.fromkeys(self.REASONS, 0)

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> "Exclusion":
        rows: list[dict] = []
        for path in paths:
            rows += [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        return cls(rows)

    def reason(self, package: str, version: str, site: Site) -> str | None:
        """Why `site` of this release is excluded (one of REASONS), or None."""
        if site.key in self.keys:
            return self.REASONS[0]
        if (package, version, site.path, site.qualname, site.line) in self.lines:
            return self.REASONS[1]
        if self.identities.get((package, site_identity(site.key, version)), set()) - {version}:
            return self.REASONS[2]
        return None

    def filter(self, package: str, version: str, site_list: list[Site]) -> list[Site]:
        kept = []
        for s in site_list:
            why = self.reason(package, version, s)
            if why is None:
                kept.append(s)
            else:
                self.dropped[why] += 1
        return kept


def run_package(tree: TreeRef, *, cap: int, seed: int, kinds: set[str] | None, limit: int | None,
                jobs: int, workdir: Path, log=print, keys: set[str] | None = None,
                originals: dict[str, list[dict] | str] | None = None, exclude: Exclusion | None = None,
                lint: bool = True, fresh=None) -> list[Mutant]:
    """Sample (or, with `keys`, pick exactly those) mutants of one tree, lint each with its original and
    score it. `originals`, when given, receives the original files' findings (or an error string).
    `exclude` drops the sites of earlier samples before sampling, `fresh` (a `newcode.NewFunctions`) the sites
    in functions other releases of the package have; `lint=False` only samples and classifies."""
    t0 = time.perf_counter()
    only = {k.split("::", 1)[0] for k in keys} if keys is not None else None
    all_sites = collect_sites(tree, kinds, only)
    resolver = ScopeResolver(tree.root)
    if keys is not None:
        chosen = [s for s in all_sites if s.key in keys]
    else:
        n_sites = len(all_sites)
        if exclude is not None:
            all_sites = exclude.filter(tree.name, tree.version, all_sites)
            log(f"{tree.name}-{tree.version}: {n_sites - len(all_sites)} sites of earlier samples excluded")
        if fresh is not None:
            n_sites = len(all_sites)
            all_sites = fresh.filter(tree, all_sites)
            log(f"{tree.name}-{tree.version}: {n_sites - len(all_sites)} sites in functions other releases have")
        chosen = sample(all_sites, min(cap, limit) if limit else cap, seed, tree.name)
    log(f"{tree.name}-{tree.version}: {len(all_sites)} sites, {len(chosen)} sampled "
        f"({time.perf_counter() - t0:.1f}s to parse)")
    if not chosen:
        return []
    mutants: list[tuple[Mutant, Site]] = []
    for s in chosen:
        m = Mutant(tree.name, tree.version, s.path, s.qualname, s.kind, s.detail, s.line, s.api_family,
                   s.verdict, s.reason, s.key)
        try:
            m.source = s.apply()
            compile(m.source.removeprefix("\ufeff"), s.path, "exec")  # a UTF-8 BOM read as text: fine in the file
        except (SyntaxError, ValueError) as exc:
            m.error = f"mutant does not compile: {exc}"
        scope_verdict(m, _line_of(tree.root / s.path, s.line), resolver)
        lifetime_verdict(m, texts_lines(tree.root / s.path))
        loop_verdict(m, texts_lines(tree.root / s.path))
        mutants.append((m, s))
    apply_judged([m for m, _ in mutants])
    if not lint:
        return [m for m, _ in mutants]
    pkg_dir = Path(tempfile.mkdtemp(prefix=f"{tree.name}-", dir=workdir))
    linter = Linter(tree.root, pkg_dir)
    files = sorted({m.file for m, _ in mutants})
    originals = {} if originals is None else originals
    texts = {f: (tree.root / f).read_text(encoding="utf-8") for f in files}

    def lint_original(rel: str) -> None:
        try:
            originals[rel] = linter.lint(rel, None)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            originals[rel] = f"original: {exc}"

    def lint_mutant(pair: tuple[Mutant, Site]) -> None:
        m, s = pair
        if m.error:
            return
        base = originals.get(m.file)
        if isinstance(base, str):
            m.error = base
            return
        try:
            found = linter.lint(m.file, m.source)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            m.error = str(exc)[:300]
            return
        score(m, s, texts[m.file], base or [], found)

    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(lint_original, files))
            list(pool.map(lint_mutant, mutants))
    finally:
        shutil.rmtree(pkg_dir, ignore_errors=True)
    log(f"  {len(mutants)} mutants linted in {time.perf_counter() - t0:.1f}s")
    return [m for m, _ in mutants]


def to_json(m: Mutant) -> dict:
    d = asdict(m)
    d.pop("source")
    return d


def from_json(d: dict) -> Mutant:
    d = dict(d)
    d["expected"] = tuple(d.get("expected", ()))
    d["window"] = tuple(d.get("window", (0, 0)))
    for k in ("new", "extras"):
        d[k] = [tuple(x) for x in d.get(k, [])]
    return Mutant(**d)


@functools.lru_cache(maxsize=64)
def texts_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (UnicodeDecodeError, OSError):
        return []


def _line_of(path: Path, line: int) -> str:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (UnicodeDecodeError, OSError):
        return ""
    return lines[line - 1] if 0 < line <= len(lines) else ""


JUDGED = Path(__file__).resolve().parent / "judged.tsv"


def load_judged(path: Path = JUDGED) -> dict[str, tuple[str, str]]:
    """Verdicts decided by reading the code (`bench/inject/judged.tsv`: package, version, key, verdict,
    reason): they replace the mutator's automatic verdict for that mutant key. Keys are stable (file,
    function, edit, position in the function), so a judgement holds for every later run of the same sample."""
    judged: dict[str, tuple[str, str]] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return judged
    for line in text.splitlines()[1:]:
        cols = line.split("\t")
        if len(cols) >= 5 and cols[3] in ("defect", "equivalent", "undecided", "out-of-domain"):
            judged[cols[2]] = (cols[3], cols[4])
    return judged


def apply_judged(mutants: list[Mutant], judged: dict[str, tuple[str, str]] | None = None) -> int:
    """Replace the automatic verdicts by the judged ones; returns how many mutants were judged."""
    judged = load_judged() if judged is None else judged
    n = 0
    for m in mutants:
        if m.key in judged:
            verdict, reason = judged[m.key]
            # out-of-domain: a real defect maybe, but not a stream-ordering defect (a threading.Event, timing
            # events): outside what streamlint claims to find, so counted with the equivalent mutants.
            m.verdict = "equivalent" if verdict == "out-of-domain" else verdict
            m.reason = f"judged: {reason}"
            n += 1
    return n


def reclassify(mutants: list[Mutant], root_of: "Callable[[str, str], Path | None]") -> int:
    """Re-apply the harness-level verdicts (scope wrappers) to stored results; returns how many changed."""
    changed = 0
    resolvers: dict[tuple[str, str], ScopeResolver | None] = {}
    for m in mutants:
        key = (m.package, m.version)
        if key not in resolvers:
            root = root_of(m.package, m.version)
            resolvers[key] = ScopeResolver(root) if root is not None else None
        resolver = resolvers[key]
        if resolver is None:
            continue
        before = m.verdict
        scope_verdict(m, _line_of(resolver.root / m.file, m.line), resolver)
        lifetime_verdict(m, texts_lines(resolver.root / m.file))
        loop_verdict(m, texts_lines(resolver.root / m.file))
        changed += m.verdict != before
    apply_judged(mutants)
    return changed
