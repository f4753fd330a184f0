"""Benchmark streamlint on a large deterministic corpus and print a table against the targets.

    python bench/run.py [--files 5000] [--corpus bench/corpus] [--jobs N] [--skip-peers] [--skip-lsp]
                        [--json OUT]

Measures, each as a fresh process with its own wall timer (peak memory of the largest process from
``/usr/bin/time -v`` when present, else ``resource.getrusage(RUSAGE_CHILDREN)``; the process tree's
summed RSS and summed PSS are sampled from /proc every 20 ms):

- cold run (cache cleared) and warm run (nothing changed) of the whole tree with every rule;
- one file of the project (``streamlint path/to/file.py``), with and without the cache;
- the bare ``libcst.parse_module`` of the files that pass the prefilter, and streamlint's own analysis
  time on those files (``--profile -j 1``: parse + model + rules);
- what the lean model costs: LibCST parse, stdlib ``ast.parse``, the FileModel traversal and the
  position computation (``FileModel.span``) against LibCST's ``PositionProvider``;
- the language server: ``didOpen`` of a 3,000-line file → ``publishDiagnostics``, warm server
  (``bench/lsp_latency.py``; ``--skip-lsp`` leaves it out);
- ruff and Fixit (one trivial rule) on the same corpus when installed, as ratios.

No number here is asserted by the test suite; the table is for people.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TIME_V = "/usr/bin/time"
# measured as installed: bytecode cached (pip writes .pyc at install time; an environment that sets
# PYTHONDONTWRITEBYTECODE would otherwise compile every streamlint module from source on each run)
MEASURED_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _bin(name: str) -> str | None:
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    return shutil.which(name)


class TreeRss:
    """Samples the memory of a process and its descendants from /proc, every ``interval`` seconds.

    Two sums over the tree, each kept at its peak:

    - ``peak_kb``: summed RSS. A forked pool worker shares its copy-on-write pages with the parent
      (the interpreter, imported modules, the registry), so every shared page is counted once per
      process: this over-states what the tree costs;
    - ``peak_pss_kb``: summed PSS (``Pss:`` of ``/proc/PID/smaps_rollup``): a page shared by N
      processes counts 1/N in each, so the sum counts it once. Where smaps_rollup cannot be read
      (kernel < 4.14, permissions) that process's RSS is used instead and ``pss_exact`` turns False.
    """

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kb = 0
        self.peak_pss_kb = 0
        self.pss_exact = True
        self.samples = 0
        self.cpu_s = 0.0  # CPU time of the sampling thread itself (it competes with what it measures)
        self._page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "TreeRss":
        if os.path.isdir("/proc"):
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _pss_kb(self, pid: int, rss_kb: int) -> int:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Pss:"):
                        return int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            return 0  # exited since its stat was read
        except (OSError, ValueError, IndexError):
            pass
        self.pss_exact = False
        return rss_kb

    def _run(self) -> None:
        started = time.thread_time()
        try:
            self._sample()
        finally:
            self.cpu_s = time.thread_time() - started

    def _rss_kb(self, pid: int) -> int | None:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return int(fh.read().rsplit(")", 1)[1].split()[21]) * self._page_kb
        except (OSError, IndexError, ValueError):
            return None

    def _tree_children(self) -> dict[int, int] | None:
        """RSS of the tree, walked through /proc/PID/task/TID/children: cost grows with the tree only."""
        rss: dict[int, int] = {}
        todo = [self.pid]
        while todo:
            pid = todo.pop()
            kb = self._rss_kb(pid)
            if kb is None:
                continue
            rss[pid] = kb
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/children") as fh:
                        todo.extend(int(c) for c in fh.read().split())
                except FileNotFoundError:
                    if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                        continue  # the thread ended
                    return None  # no CONFIG_PROC_CHILDREN: scan all of /proc instead
                except (OSError, ValueError):
                    continue
        return rss

    def _tree_scan(self) -> dict[int, int]:
        """RSS of the tree, found by reading the parent of every process in /proc."""
        parents: dict[int, int] = {}
        rss: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
                rss[int(entry)] = int(fields[21]) * self._page_kb
            except (OSError, IndexError, ValueError):
                continue
        tree = {self.pid}
        changed = True
        while changed:
            changed = False
            for pid, ppid in parents.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    changed = True
        return {p: rss[p] for p in tree if p in rss}

    def _sample(self) -> None:
        use_children = True
        while not self._stop.is_set():
            rss = self._tree_children() if use_children else None
            if rss is None:
                use_children = False
                rss = self._tree_scan()
            # /usr/bin/time itself is tiny; count everything below it
            self.peak_kb = max(self.peak_kb, sum(rss.values()))
            self.peak_pss_kb = max(self.peak_pss_kb, sum(self._pss_kb(p, kb) for p, kb in rss.items()))
            self.samples += 1
            self._stop.wait(self.interval)


def measure(cmd: list[str], cwd: Path | None = None, timeout: float | None = None) -> dict:
    """Wall seconds, peak RSS of the largest process (MB), peak summed RSS and peak summed PSS of the
    whole tree (MB)."""
    use_time = os.path.exists(TIME_V)
    full = [TIME_V, "-v", *cmd] if use_time else cmd
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    proc = subprocess.Popen(full, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            env=MEASURED_ENV)
    timed_out = False
    with TreeRss(proc.pid) as tree:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)  # the group of our own child: it and its pool workers
            out, err = proc.communicate()
    wall = time.perf_counter() - started
    max_kb = 0.0
    if use_time:
        m = re.search(rb"Maximum resident set size \(kbytes\): (\d+)", err)
        if m:
            max_kb = float(m.group(1))
    if not max_kb:
        after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        max_kb = float(after if after > before else 0)
    return {"wall": wall, "rss_mb": max_kb / 1024, "tree_mb": tree.peak_kb / 1024,
            "tree_pss_mb": tree.peak_pss_kb / 1024, "pss_exact": tree.pss_exact,
            "sampler_cpu_s": tree.cpu_s, "samples": tree.samples, "rc": proc.returncode,
            "timed_out": timed_out,
            "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace")}


def python_files(root: Path) -> list[str]:
    return sorted(os.path.join(d, f) for d, dirs, fs in os.walk(root)
                  for f in fs if f.endswith(".py") and ".streamlint_cache" not in d)


PARSE_SCRIPT = r"""
import json, sys, time, ast
import libcst as cst
files = json.load(open(sys.argv[1]))
texts = [open(p, encoding="utf-8").read() for p in files]
t = time.perf_counter()
for text in texts:
    cst.parse_module(text)
print(json.dumps({"parse": time.perf_counter() - t}))
"""

LEAN_SCRIPT = r"""
import json, sys, time, ast
import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider
from streamlint.model.file import FileModel
from streamlint.source import SourceFile
files = json.load(open(sys.argv[1]))
sources = [SourceFile.from_bytes(p, open(p, "rb").read()) for p in files]
out = {}
t = time.perf_counter(); modules = [cst.parse_module(s.text) for s in sources]; out["libcst_parse"] = time.perf_counter() - t
t = time.perf_counter(); [ast.parse(s.text) for s in sources]; out["ast_parse"] = time.perf_counter() - t
t = time.perf_counter(); models = [FileModel(s, m, "bench", False) for s, m in zip(sources, modules)]; out["file_model"] = time.perf_counter() - t
# FileModel.span: the first call pays for the positions of the whole module
t = time.perf_counter()
for model in models:
    node = model.calls[-1].node if model.calls else model.module
    model.span(node)
out["span_positions"] = time.perf_counter() - t
t = time.perf_counter(); [MetadataWrapper(m, unsafe_skip_copy=True).resolve(PositionProvider) for m in modules]; out["libcst_position_provider"] = time.perf_counter() - t
t = time.perf_counter(); [m.code for m in modules]; out["libcst_codegen"] = time.perf_counter() - t
print(json.dumps(out))
"""


def fixit_config(directory: Path) -> Path:
    """A Fixit configuration enabling exactly one trivial rule."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "fixit.toml"
    path.write_text('[tool.fixit]\nroot = true\ndisable = ["fixit.rules"]\nenable = ["fixit.rules:NoInheritFromObject"]\n',
                    encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description="streamlint benchmark")
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--corpus", type=Path, default=HERE / "corpus")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=0, help="streamlint -j (0: CPU count)")
    parser.add_argument("--skip-peers", action="store_true", help="do not run ruff / Fixit")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the corpus even if present")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers as JSON")
    parser.add_argument("--peer-timeout", type=float, default=900.0, help="seconds before ruff / Fixit are stopped")
    parser.add_argument("--skip-lsp", action="store_true", help="do not measure the language server (lsp_latency.py)")
    parser.add_argument("--lsp-runs", type=int, default=5, help="distinct 3,000-line files opened in the LSP run")
    args = parser.parse_args()

    from bench.make_corpus import build

    corpus: Path = args.corpus.absolute()
    stamp = corpus / ".corpus-spec"
    spec = f"files={args.files} seed={args.seed}"
    if args.rebuild or not stamp.is_file() or stamp.read_text() != spec:
        print(f"building corpus in {corpus} ({spec}) ...", flush=True)
        build(corpus, args.files, args.seed)
        stamp.write_text(spec)
    files = python_files(corpus)
    size_mb = sum(os.path.getsize(p) for p in files) / 1e6
    streamlint = _bin("streamlint") or "streamlint"
    base = [streamlint, "check", str(corpus), "--isolated", "--exit-zero", "--output-format", "concise"]
    if args.jobs:
        base += ["-j", str(args.jobs)]
    results: dict[str, object] = {"files": len(files), "mb": round(size_mb, 2), "cpus": os.cpu_count()}

    # which files need analysis: the union of the enabled rules' markers
    from streamlint.config import Settings
    from streamlint.engine import Engine
    from streamlint.registry import load_registry

    engine = Engine(Settings(project_root=str(corpus)), load_registry(), project_root=str(corpus))
    analysed = [p for p in files if engine.needs_analysis(open(p, "rb").read())]
    results["analysed_files"] = len(analysed)
    results["analysed_mb"] = round(sum(os.path.getsize(p) for p in analysed) / 1e6, 2)
    listing = corpus.parent / f".{corpus.name}-analysed.json"
    listing.write_text(json.dumps(analysed))

    # untimed: writes the bytecode of every module a run imports (LibCST included), as an install would
    subprocess.run([streamlint, "check", "--isolated", "--no-cache", "--exit-zero", str(analysed[0])],
                   capture_output=True, env=MEASURED_ENV, check=False)
    print("cold run ...", flush=True)
    subprocess.run([streamlint, "clean", str(corpus), "--isolated"], capture_output=True)
    cold = measure(base)
    print("warm run ...", flush=True)
    warm = measure(base)
    findings = len([line for line in cold["stdout"].splitlines() if re.search(r":\d+:\d+: SL\d+", line)])
    same = cold["stdout"] == warm["stdout"]
    one = next((p for p in analysed if "utils" not in p), analysed[0] if analysed else files[0])
    print("single file ...", flush=True)
    single = measure([streamlint, "check", one, "--isolated", "--exit-zero", "--no-cache"])
    single_cached = measure([streamlint, "check", one, "--isolated", "--exit-zero"])
    print("analysis profile (-j 1, no cache) ...", flush=True)
    prof = measure([*base, "--no-cache", "-j", "1", "--profile"])
    phases = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\s+(\S+)\s+([\d.]+) s ", prof["stderr"], re.M)}
    # parse (+ the ast guard) + model + rules; LibCST's one-off import is start-up, as in the bare parse
    analysis = sum(v for k, v in phases.items() if k not in ("discover", "read", "prefilter", "cache", "report",
                                                               "suppressions", "import-libcst"))
    print("bare parse of the analysed files ...", flush=True)
    bare = json.loads(subprocess.run([sys.executable, "-c", PARSE_SCRIPT, str(listing)], capture_output=True,
                                     text=True, check=True).stdout)
    print("lean-model costs ...", flush=True)
    lean = json.loads(subprocess.run([sys.executable, "-c", LEAN_SCRIPT, str(listing)], capture_output=True,
                                     text=True, check=True, cwd=str(HERE.parent)).stdout)
    lsp: dict | None = None
    lsp_error = ""
    if not args.skip_lsp:
        print("language server: didOpen of 3,000-line files ...", flush=True)
        try:
            done = subprocess.run([sys.executable, str(HERE / "lsp_latency.py"), "--runs", str(args.lsp_runs),
                                   "--timeout", "300", "--json", "-"],
                                  capture_output=True, text=True, timeout=360, cwd=str(HERE.parent), check=False)
            if done.returncode == 0 and done.stdout.strip():
                lsp = json.loads(done.stdout.strip().splitlines()[-1])
            else:
                lsp_error = (done.stderr.strip().splitlines() or [f"rc {done.returncode}"])[-1]
        except subprocess.TimeoutExpired:
            lsp_error = "timed out"
        if lsp_error:
            print(f"  LSP measurement failed: {lsp_error}", flush=True)
    results["lsp"] = lsp if lsp is not None else {"skipped": args.skip_lsp, "error": lsp_error}
    results.update(
        cold_s=cold["wall"], warm_s=warm["wall"], files_per_s=len(files) / cold["wall"],
        peak_rss_mb=cold["rss_mb"], peak_tree_rss_mb=cold["tree_mb"],
        peak_tree_pss_mb=cold["tree_pss_mb"], tree_pss_exact=cold["pss_exact"],
        sampler_cpu_s=cold["sampler_cpu_s"], warm_identical=same, findings=findings,
        single_file_s=single["wall"], single_file_cached_s=single_cached["wall"], single_file=one,
        single_file_rss_mb=single["rss_mb"], serial_no_cache_s=prof["wall"], phases=phases,
        analysis_s=analysis, bare_parse_s=bare["parse"], lean=lean,
    )

    # ---- the table
    def row(name: str, value: str, target: str = "", ok: bool | None = None) -> str:
        mark = "" if ok is None else ("yes" if ok else "NO")
        return f"| {name:<52} | {value:>22} | {target:<24} | {mark:<4} |"

    lines = [f"| {'metric':<52} | {'value':>22} | {'target':<24} | {'met':<4} |", "|" + "-" * 54 + "|" + "-" * 24 + "|" + "-" * 26 + "|" + "-" * 6 + "|"]
    lines.append(row("files / MB", f"{len(files)} / {size_mb:.1f} MB"))
    lines.append(row("files passing the prefilter / MB", f"{len(analysed)} / {results['analysed_mb']} MB"))
    lines.append(row("findings", str(findings)))
    lines.append(row("cold wall (cache cleared)", f"{cold['wall']:.2f} s"))
    lines.append(row("files/s (cold)", f"{len(files) / cold['wall']:.0f}"))
    lines.append(row("warm wall (nothing changed)", f"{warm['wall']:.2f} s ({100 * warm['wall'] / cold['wall']:.0f}%)",
                     "< 10% of cold", warm["wall"] < 0.1 * cold["wall"]))
    lines.append(row("warm output identical to cold", str(same), "True", same))
    lines.append(row("peak RSS, largest process (cold)", f"{cold['rss_mb']:.0f} MB", "< 300 MB",
                     cold["rss_mb"] < 300))
    # summed RSS counts every copy-on-write page shared by the forked workers once per process: shown,
    # not judged; PSS splits a shared page among its sharers, so the tree's sum counts it once
    lines.append(row("peak summed RSS, whole process tree (cold)", f"{cold['tree_mb']:.0f} MB"))
    pss_note = "" if cold["pss_exact"] else " (RSS fallback)"
    lines.append(row("peak PSS, whole process tree (cold)", f"{cold['tree_pss_mb']:.0f} MB{pss_note}", "< 300 MB",
                     cold["tree_pss_mb"] < 300 if cold["tree_pss_mb"] else None))
    lines.append(row("  /proc sampler CPU during the cold run", f"{cold['sampler_cpu_s']:.2f} s ({cold['samples']} samples)"))
    lines.append(row("single file in the project (no cache)", f"{single['wall']:.2f} s", "< 0.5 s",
                     single["wall"] < 0.5))
    lines.append(row("single file in the project (cache)", f"{single_cached['wall']:.2f} s", "< 0.5 s",
                     single_cached["wall"] < 0.5))
    lines.append(row("serial run, no cache (-j 1)", f"{prof['wall']:.2f} s"))
    lines.append(row("  analysis of prefiltered files (-j 1)", f"{analysis:.2f} s"))
    lines.append(row("  bare libcst.parse_module of those files", f"{bare['parse']:.2f} s"))
    ratio = analysis / bare["parse"] if bare["parse"] else float("inf")
    lines.append(row("  analysis / bare parse", f"{ratio:.2f}x", "<= 2x", ratio <= 2))
    for name in ("libcst_parse", "ast_parse", "file_model", "span_positions", "libcst_position_provider",
                 "libcst_codegen"):
        lines.append(row(f"  lean: {name}", f"{lean[name]:.2f} s"))
    if lsp is not None:
        lines.append(row("LSP first diagnostics, 3,000-line file (warm server)", f"{lsp['median_ms']:.0f} ms",
                         "< 150 ms (median)", lsp["median_ms"] < 150))
        lines.append(row(f"  min / max over {len(lsp['samples_ms'])} distinct files",
                         f"{lsp['min_ms']:.0f} / {lsp['max_ms']:.0f} ms"))
        lines.append(row("  Engine.lint_file alone on those buffers (median)", f"{lsp['engine_only_median_ms']:.0f} ms"))
        lines.append(row("  same opens after `streamlint check` (result cache)", f"{lsp['cached_median_ms']:.0f} ms",
                         "< 150 ms (median)", lsp["cached_median_ms"] < 150 and lsp["cached_same_diagnostics"]))
    elif not args.skip_lsp:
        lines.append(row("LSP first diagnostics, 3,000-line file (warm server)", "failed", "< 150 ms (median)", False))
    print()
    print("\n".join(lines), flush=True)
    lines = []
    peers: dict[str, dict] = {}
    if not args.skip_peers:
        ruff = _bin("ruff")
        if ruff:
            print("ruff ...", flush=True)
            peers["ruff (E711)"] = measure([ruff, "check", "--isolated", "--no-cache", "--select", "E711",
                                            "--exit-zero", str(corpus)], timeout=args.peer_timeout)
        fixit = _bin("fixit")
        if fixit:
            print("Fixit (one trivial rule) ...", flush=True)
            cfg = fixit_config(corpus.parent / f".{corpus.name}-fixit")
            peers["Fixit (NoInheritFromObject)"] = measure(
                [fixit, "--config-file", str(cfg), "lint", str(corpus)], timeout=args.peer_timeout)
    results["peers"] = {k: {"wall": v["wall"], "rss_mb": v["rss_mb"], "tree_mb": v["tree_mb"],
                            "tree_pss_mb": v["tree_pss_mb"], "rc": v["rc"],
                            "timed_out": v["timed_out"]}
                        for k, v in peers.items()}

    for name, peer in peers.items():
        speedup = peer["wall"] / cold["wall"]
        target = ">= 4x faster" if name.startswith("Fixit") else ""
        over = "> " if peer["timed_out"] else ""
        lines.append(row(f"{name} wall", f"{over}{peer['wall']:.2f} s" + ("" if over else f" (rc {peer['rc']})")))
        lines.append(row(f"  {name} / streamlint cold", f"{over}{speedup:.2f}x", target,
                         speedup >= 4 if target else None))
    print("\n".join(lines))
    print("\nslowest phases of the -j 1 run:")
    for name, seconds in sorted(phases.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {name:<12} {seconds:8.2f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
