"""`python -m bench.realcode report`: lint every corpus tree with streamlint and tabulate the findings.

Definitions (also in README.md here):

- **stream-using function**: a ``def`` (methods and nested functions counted on their own, the body of a
  nested ``def``/``class`` not counted for the outer one) whose body calls a stream/event API of
  streamlint's API table (``streamlint/model/apis.py``) -- a qualified name (after the module's imports
  are resolved and the table's aliases applied) whose role is one of ``STREAM_API_ROLES`` below -- or a
  method named ``wait_stream``, ``wait_event``, ``record_event`` or ``record_stream`` (the unambiguous
  stream/tensor method names of the table). Counted with a cheap ``ast`` pass, independent of the
  linter's own model.
- **findings**: what ``streamlint check --select SL --isolated --no-cache --min-confidence low --output-format json -j N``
  reports on the tree. SL0xx (internal errors, syntax errors, suppression bookkeeping) are counted
  separately from the analysis rules.
- **per 1k**: findings of the analysis rules per 1,000 stream-using functions.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from streamlint.model import apis

from .corpus import CorpusError, IndexUnreachable, cache_dir, ensure_tree, load_manifest, select

HERE = Path(__file__).parent
RESULTS = HERE / "RESULTS.md"
TRIAGE = HERE / "triage.tsv"
MISSES = HERE / "misses.tsv"

R = apis.Role
STREAM_API_ROLES = frozenset({
    R.STREAM_SWITCH, R.NATIVE_STREAM_CONTEXT, R.WAIT_TENSOR, R.OPS_RECORD, R.OPS_WAIT, R.TAGGED_EVENT_CREATE,
    R.TAGGED_EVENT_RECORD, R.TAGGED_EVENT_WAIT, R.RECORD_TAGGED_STREAM, R.STREAM_NEW, R.EVENT_NEW,
    R.CURRENT_STREAM, R.DEFAULT_STREAM, R.SET_STREAM, R.DEVICE_SYNCHRONIZE, R.PREFETCH,
})
STREAM_METHOD_NAMES = frozenset({"wait_stream", "wait_event", "record_event"}) | apis.TENSOR_LIFETIME_METHODS
FAMILIES = {"SL1": "graph breaks SL1xx", "SL2": "joins and waits SL2xx", "SL3": "lifetimes SL3xx",
            "SL4": "configs SL4xx", "SL5": "API style/mode SL5xx", "SL0": "internal SL0xx"}


# ------------------------------------------------------------------------------ stream-using functions

def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _aliases(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    head = a.name.split(".")[0]
                    out.setdefault(head, head)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name != "*":
                    out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _is_stream_call(call: ast.Call, aliases: dict[str, str]) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in STREAM_METHOD_NAMES:
        return True
    dotted = _dotted(func)
    if dotted is None:
        return False
    head, _, rest = dotted.partition(".")
    qual = aliases.get(head, head) + ("." + rest if rest else "")
    spec = apis.lookup(qual)
    return spec is not None and spec.role in STREAM_API_ROLES


class _Counter(ast.NodeVisitor):
    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases
        self.functions = 0
        self.stream_functions = 0
        self.names: list[tuple[str, int]] = []

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions += 1
        if self._uses_streams(node):
            self.stream_functions += 1
            self.names.append((node.name, node.lineno))
        self.generic_visit(node)

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    def _uses_streams(self, fn: ast.AST) -> bool:
        stack = list(ast.iter_child_nodes(fn))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Call) and _is_stream_call(node, self.aliases):
                return True
            stack.extend(ast.iter_child_nodes(node))
        return False


def count_stream_functions(root: Path, stream_files: list[Path] | None = None) -> tuple[int, int, int]:
    """(python files, functions, stream-using functions) under root; the files holding at least one
    stream-using function are appended to ``stream_files`` when given."""
    files = functions = stream = 0
    for path in sorted(root.rglob("*.py")):
        files += 1
        try:
            data = path.read_bytes()
            tree = ast.parse(data, filename=str(path))
        except (SyntaxError, ValueError, OSError, RecursionError):
            continue
        counter = _Counter(_aliases(tree))
        counter.visit(tree)
        functions += counter.functions
        stream += counter.stream_functions
        if stream_files is not None and counter.stream_functions:
            stream_files.append(path)
    return files, functions, stream


# ------------------------------------------------------------------------------------------- linting

@dataclass
class PackageResult:
    name: str
    version: str
    files: int = 0
    functions: int = 0
    stream_functions: int = 0
    findings: list[dict] = field(default_factory=list)
    wall: float = 0.0
    status: str = "ok"

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"

    def by_rule(self) -> Counter:
        return Counter(f["code"] for f in self.findings)


def normalise(findings: list[dict], root: Path) -> list[dict]:
    """Report every filename relative to the tree root (streamlint prints some absolute)."""
    prefixes = {str(root).rstrip("/") + "/", os.path.realpath(root).rstrip("/") + "/"}  # the cache may be a link
    for f in findings:
        name = str(f.get("filename", ""))
        for prefix in prefixes:
            if name.startswith(prefix):
                f["filename"] = name[len(prefix):]
                break
    return findings


def lint_tree(root: Path, jobs: int, timeout: int, paths: list[Path] | None = None) -> tuple[list[dict], float, str]:
    targets = [str(p.relative_to(root)) for p in paths] if paths is not None else [str(root)]
    cmd = [sys.executable, "-m", "streamlint", "check", *targets, "--select", "SL", "--isolated", "--no-cache",
           "--min-confidence", "low", "--output-format", "json", "-j", str(jobs), "--exit-zero"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True, cwd=root)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return [], time.perf_counter() - start, f"capped at {timeout}s"
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        return [], wall, f"streamlint exit {proc.returncode}: {tail[0][:120]}"
    try:
        findings = json.loads(out or b"[]")
    except json.JSONDecodeError:
        return [], wall, "unparsable json output"
    return normalise(findings, root), wall, "ok"


# ----------------------------------------------------------------------------------------- precision

def read_triage(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    with open(path, encoding="utf-8", newline="") as fh:
        for line in fh:
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.rstrip("\n").split("\t")
            if cols[0] == "package":
                continue
            if len(cols) < 6:
                continue
            rows.append({"package": cols[0], "version": cols[1], "rule": cols[2], "location": cols[3],
                         "verdict": cols[4], "reason": "\t".join(cols[5:])})
    return rows


def fp_class(reason: str) -> str:
    """The analysis-gap class of a false positive: the reason's leading `[class]` tag."""
    reason = reason.strip()
    if reason.startswith("[") and "]" in reason:
        return reason[1:reason.index("]")]
    return "unclassified"


def precision_table(rows: list[dict]) -> list[str]:
    fam: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        fam[r["rule"][:3]][r["verdict"]] += 1
    lines = ["| family | triaged | bug | false-positive | unsure | precision (bug / (bug+fp)) |",
             "|---|---:|---:|---:|---:|---:|"]
    for key in sorted(fam):
        c = fam[key]
        decided = c["bug"] + c["false-positive"]
        prec = f"{c['bug'] / decided:.2f}" if decided else "n/a"
        lines.append(f"| {FAMILIES.get(key, key)} | {sum(c.values())} | {c['bug']} | {c['false-positive']} | "
                     f"{c['unsure']} | {prec} |")
    return lines


_TIERS = ("high", "medium", "low")


def current_precision(results: list["PackageResult"], triage: list[dict], misses: list[dict]) -> list[str]:
    """Precision and recall of this run's findings, judged by the triage: a finding takes the verdict of
    its triage line (package, version, rule, file:line); one with no line is `untriaged` (a new finding,
    to be triaged). Recall here is only over the known bugs: the triaged bugs and the recorded misses of
    the packages in this run (the injection harness, bench/inject, measures recall at scale)."""
    verdicts = {(r["package"], r["version"], r["rule"], r["location"]): r["verdict"] for r in triage}
    ran = {(res.name, res.version) for res in results if res.status.startswith("ok") or ": ok" in res.status}
    fam: dict[str, Counter] = defaultdict(Counter)
    tiers: dict[tuple[str, str], Counter] = defaultdict(Counter)  # (family, confidence) -> verdicts
    found_bugs = set()
    for res in results:
        for f in res.findings:
            if f["code"].startswith("SL0"):
                continue
            key = (res.name, res.version, f["code"], f"{f['filename']}:{f['start']['line']}")
            verdict = verdicts.get(key, "untriaged")
            fam[f["code"][:3]][verdict] += 1
            tiers[(f["code"][:3], str(f.get("confidence", "?")))][verdict] += 1
            if verdict == "bug":
                found_bugs.add(key)
    lines = ["| family | findings | bug | false-positive | unsure | untriaged | precision (bug / (bug+fp)) | "
             "pessimistic (untriaged as fp) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key in sorted(fam):
        c = fam[key]
        decided = c["bug"] + c["false-positive"]
        prec = f"{c['bug'] / decided:.2f}" if decided else "n/a"
        low = f"{c['bug'] / (decided + c['untriaged']):.2f}" if decided + c["untriaged"] else "n/a"
        lines.append(f"| {FAMILIES.get(key, key)} | {sum(c.values())} | {c['bug']} | {c['false-positive']} | "
                     f"{c['unsure']} | {c['untriaged']} | {prec} | {low} |")
    lines += ["", "By confidence (what `--min-confidence` keeps):", "",
              "| family | confidence | bug | false-positive | unsure | untriaged | precision (bug / (bug+fp)) |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for (family, sure), c in sorted(tiers.items(), key=lambda kv: (kv[0][0], _TIERS.index(kv[0][1]) if kv[0][1] in _TIERS else 3)):
        decided = c["bug"] + c["false-positive"]
        prec = f"{c['bug'] / decided:.2f}" if decided else "n/a"
        lines.append(f"| {FAMILIES.get(family, family)} | {sure} | {c['bug']} | {c['false-positive']} | "
                     f"{c['unsure']} | {c['untriaged']} | {prec} |")
    known = [r for r in triage if r["verdict"] == "bug" and (r["package"], r["version"]) in ran]
    missed = [r for r in misses if (r["package"], r["version"]) in ran]
    lines += ["", f"Triaged bugs of these packages still reported: {len(found_bugs)} of {len(known)}; "
                  f"recorded misses (misses.tsv) of these packages: {len(missed)}."]
    return lines


def fp_classes(rows: list[dict]) -> list[str]:
    counts = Counter(fp_class(r["reason"]) for r in rows if r["verdict"] == "false-positive")
    lines = ["| FP class | count | rules |", "|---|---:|---|"]
    for cls, n in counts.most_common():
        rules = Counter(r["rule"] for r in rows if r["verdict"] == "false-positive" and fp_class(r["reason"]) == cls)
        lines.append(f"| `{cls}` | {n} | {', '.join(f'{k}×{v}' for k, v in sorted(rules.items()))} |")
    return lines


# ------------------------------------------------------------------------------------------- report

def render(results: list[PackageResult], triage: list[dict], misses: list[dict], jobs: int) -> str:
    analysis = lambda res: [f for f in res.findings if not f["code"].startswith("SL0")]  # noqa: E731
    rules = sorted({f["code"] for res in results for f in analysis(res)})
    out = ["# Real-code corpus: streamlint on pinned public releases", "",
           f"Generated by `python -m bench.realcode report` (streamlint `--select SL --isolated --no-cache --min-confidence low -j {jobs}`,"
           " 2 shared cores). Definitions: bench/realcode/README.md.", "",
           "## Per package", "",
           "| package | version | .py files | functions | stream-using fns | findings | per 1k stream fns | SL0xx | triaged | wall s | status |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    triaged_keys = {(r["package"], r["version"], r["rule"], r["location"]) for r in triage}
    tot = Counter()
    for res in results:
        n = len(analysis(res))
        sl0 = len(res.findings) - n
        per = f"{1000 * n / res.stream_functions:.1f}" if res.stream_functions else "n/a"
        tri = sum(1 for f in res.findings if (res.name, res.version, f["code"],
                                               f"{f['filename']}:{f['start']['line']}") in triaged_keys)
        out.append(f"| {res.name} | {res.version} | {res.files} | {res.functions} | {res.stream_functions} | {n} | "
                   f"{per} | {sl0} | {tri} | {res.wall:.1f} | {res.status} |")
        tot["triaged"] += tri
        tot.update(files=res.files, functions=res.functions, stream=res.stream_functions, findings=n, sl0=sl0)
        tot["wall"] += res.wall
    per = f"{1000 * tot['findings'] / tot['stream']:.1f}" if tot["stream"] else "n/a"
    out.append(f"| **total** | | {tot['files']} | {tot['functions']} | {tot['stream']} | {tot['findings']} | {per} | "
               f"{tot['sl0']} | {tot['triaged']} | {tot['wall']:.1f} | |")
    out += ["", "## Per rule (findings per package)", ""]
    if rules:
        out.append("| package | " + " | ".join(rules) + " |")
        out.append("|---|" + "---:|" * len(rules))
        for res in results:
            c = res.by_rule()
            out.append(f"| {res.key} | " + " | ".join(str(c.get(r, 0)) for r in rules) + " |")
        allc = Counter(f["code"] for res in results for f in analysis(res))
        out.append("| **total** | " + " | ".join(str(allc[r]) for r in rules) + " |")
        out.append("| **per 1k stream fns** | " + " | ".join(
            f"{1000 * allc[r] / tot['stream']:.1f}" if tot["stream"] else "n/a" for r in rules) + " |")
    else:
        out.append("(no findings)")
    sl0 = Counter(f["code"] for res in results for f in res.findings if f["code"].startswith("SL0"))
    if sl0:
        out += ["", "SL0xx: " + ", ".join(f"{k} ×{v}" for k, v in sorted(sl0.items()))]
    out += ["", "## Precision now: this run's findings judged by the triage", ""]
    out += current_precision(results, triage, misses)
    out += ["", "## Precision at triage time (every line of bench/realcode/triage.tsv)", ""]
    out += precision_table(triage) if triage else ["(triage file empty)"]
    if triage:
        out += ["", "### False-positive classes (analysis gaps), by count", ""] + fp_classes(triage)
    out += ["", f"Known misses recorded in misses.tsv: {len(misses)}", ""]
    return "\n".join(out)


def _load_raw(path: Path) -> dict | None:
    """A previous run's raw result for one package (cache/reports/KEY.json), or None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if isinstance(data, dict) and isinstance(data.get("findings"), list):
        return data
    return None


def run(args: argparse.Namespace) -> int:
    if getattr(args, "triaged", False):
        from .compare import triaged_releases
        args.names = list(args.names or []) + [n for n in triaged_releases() if n not in (args.names or [])]
    releases = select(load_manifest(args.manifest), args.names or None)
    results: list[PackageResult] = []
    raw_dir = cache_dir() / "reports"
    raw_dir.mkdir(parents=True, exist_ok=True)
    for rel in releases:
        try:
            root = ensure_tree(rel, offline=args.offline)
        except IndexUnreachable as exc:
            print(f"skip: {exc}", file=sys.stderr)
            return 3
        except CorpusError as exc:
            print(f"skip {rel.key}: {exc}", file=sys.stderr)
            results.append(PackageResult(rel.name, rel.version, status=f"skipped: {exc}"[:80]))
            continue
        res = PackageResult(rel.name, rel.version)
        slice_files: list[Path] = []
        res.files, res.functions, res.stream_functions = count_stream_functions(root, slice_files)
        raw = raw_dir / f"{rel.key}.json"
        cached = _load_raw(raw) if args.reuse else None
        status = str(cached.get("status", "")) if cached is not None else ""
        if cached is not None and (status == "ok" or status.endswith(": ok")):
            res.findings, res.wall = normalise(cached["findings"], root), float(cached["wall"])
            res.status = status + " (reused)"
        else:
            if res.files > args.max_files and not args.no_slice:
                # Too large for the 2 shared cores within the cap: lint the files that hold a
                # stream-using function (cross-module facts from the other files are then missing).
                res.findings, res.wall, status = lint_tree(root, args.jobs, args.timeout, slice_files)
                res.status = f"stream-function slice ({len(slice_files)} of {res.files} files): {status}"
            else:
                res.findings, res.wall, res.status = lint_tree(root, args.jobs, args.timeout)
                if res.status.startswith("capped") and not args.no_slice:
                    first = res.status
                    findings, wall, status = lint_tree(root, args.jobs, args.timeout, slice_files)
                    res.findings, res.wall = findings, res.wall + wall
                    res.status = (f"whole tree {first}; stream-function slice ({len(slice_files)} of {res.files} "
                                  f"files): {status}")
            raw.write_text(json.dumps({"findings": res.findings, "wall": res.wall, "status": res.status,
                                       "timeout": args.timeout, "jobs": args.jobs}, indent=1), encoding="utf-8")
        print(f"{rel.key:30} files={res.files:5} stream_fns={res.stream_functions:5} "
              f"findings={len(res.findings):4} wall={res.wall:6.1f}s {res.status}", file=sys.stderr)
        results.append(res)
    triage = read_triage(Path(args.triage) if args.triage else TRIAGE)
    misses = read_triage(MISSES)
    text = render(results, triage, misses, args.jobs)
    print(text)
    if not args.no_write and not args.names:
        RESULTS.write_text(text, encoding="utf-8")
    return 0
