"""Repository scale (issue 15): what linting one file, ten files or a whole tree costs in a big repository.

    python bench/scale.py TREE [--file REL] [--import REL] [--whole] [--json OUT]
    python bench/scale.py --corpus 1000,2000,5000,10000        # repo-shaped corpora, whole tree cold
    python bench/scale.py --lsp                                 # bench/lsp_latency.py (3,000-line file)

TREE is copied to a temporary directory first (the rows edit files and write a cache there; the tree
itself is never touched). Every row is a fresh ``streamlint`` process timed by this script (wall clock;
CPU time, user + system, from ``/usr/bin/time``: on a shared machine the number that load does not inflate),
peak RSS of the largest process from ``/usr/bin/time -f %M`` and the per-phase times of ``--profile``:

- one file, no cache at all (``--no-cache``);
- one file, project cache warm after a run of *another* file (the file's own result is not cached: the
  module summaries are);
- one file again, nothing changed (its cached result);
- pre-commit: 10 changed files (a comment appended to each), cache warm;
- one file after editing a module it imports;
- with ``--whole``: the whole tree cold, ``-j 2``.

No number here is asserted by the test suite. The machine is shared: compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
_PHASE = re.compile(r"^\s+(\S+)\s+([0-9.]+) s\s+[0-9.]+%\s+\((\d+) calls\)", re.M)


def streamlint(cwd: Path, args: list[str]) -> dict:
    """Run ``streamlint check ARGS --isolated -q --exit-zero --profile`` in ``cwd``: wall, peak RSS, phases."""
    cmd = [sys.executable, "-m", "streamlint", "check", "--isolated", "--exit-zero", "--profile", *args]
    timed = ["/usr/bin/time", "-f", "@@RSS %M %U %S"] + cmd if os.path.exists("/usr/bin/time") else cmd
    start = time.perf_counter()
    proc = subprocess.run(timed, cwd=cwd, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - start
    rss = re.search(r"@@RSS (\d+) ([0-9.]+) ([0-9.]+)", proc.stderr)
    phases = {name: (float(sec), int(calls)) for name, sec, calls in _PHASE.findall(proc.stderr)}
    return {"wall": round(wall, 3), "rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else None,
            "cpu": round(float(rss.group(2)) + float(rss.group(3)), 2) if rss else None,
            "parsed": phases.get("parse", (0, 0))[1], "summaries": phases.get("summary", (0, 0))[1],
            "phases": {k: round(v[0], 3) for k, v in sorted(phases.items(), key=lambda kv: -kv[1][0])[:6]},
            "rc": proc.returncode, **({"error": proc.stderr[-600:]} if proc.returncode else {})}


def _append(path: Path, text: str = "\n# edited by bench/scale.py\n") -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def _stream_files(root: Path, limit: int) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        if b"stream" in data and 2_000 < len(data) < 200_000:
            found.append(path)
        if len(found) >= limit:
            break
    return found


def _first_import(root: Path, path: Path) -> Path | None:
    """A project module ``path`` imports (``from . import x`` / ``from pkg.mod import y``)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    for m in re.finditer(r"^from\s+(\.*)([\w.]*)\s+import\s+(\w+)", text, re.M):
        dots, module, name = m.groups()
        base = path.parent
        for _ in range(max(len(dots) - 1, 0)):
            base = base.parent
        parts = [p for p in module.split(".") if p]
        candidates = [base.joinpath(*parts, name + ".py"), base.joinpath(*parts).with_suffix(".py")] if dots \
            else [root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")]
        for c in candidates:
            if parts or dots:
                if c.is_file() and c != path:
                    return c
    return None


def rows_for_tree(tree: Path, file: str | None, imported: str | None, whole: bool) -> dict:
    work = Path(tempfile.mkdtemp(prefix="sl-scale-"))
    root = work / tree.name
    shutil.copytree(tree, root, symlinks=True)
    # a file changed (here: created, its ctime) within 2 s of a run is not trusted by its stamp (wordindex.stamp_settled,
    # the result cache's _RACY_NS): without this wait the run of "another file" stored the words of the last files
    # copied untrusted, and the warm row read them again (up to the whole tree: word-index 0.3 s of a ~1 s row)
    time.sleep(2.1)
    try:
        files = _stream_files(root, 11)
        target = root / file if file else files[0]
        others = [f for f in files if f != target][:10]
        rel = str(target.relative_to(root))
        dep = root / imported if imported else _first_import(root, target)
        out: dict = {"tree": str(tree), "files": sum(1 for _ in root.rglob("*.py")), "file": rel,
                     "imported": str(dep.relative_to(root)) if dep else None}
        out["one file, no cache"] = streamlint(root, ["--no-cache", "-j", "1", rel])
        streamlint(root, ["-j", "1", str(others[0].relative_to(root))])  # another file: summaries cached
        out["one file, cache warm (another file ran before)"] = streamlint(root, ["-j", "1", rel])
        out["one file, again (its result cached)"] = streamlint(root, ["-j", "1", rel])
        streamlint(root, [str(f.relative_to(root)) for f in others])
        for f in others:
            _append(f)
        out["pre-commit: 10 changed files, cache warm"] = streamlint(root, [str(f.relative_to(root)) for f in others])
        if dep is not None:
            _append(dep)
            out["one file after editing a module it imports"] = streamlint(root, ["-j", "1", rel])
        if whole:
            out["whole tree, cold, -j 2"] = streamlint(root, ["--no-cache", "-j", "2", "."])
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def corpus_rows(sizes: list[int]) -> dict:
    from bench.make_corpus import build_repo

    out = {}
    for n in sizes:
        work = Path(tempfile.mkdtemp(prefix="sl-corpus-"))
        try:
            build_repo(work, n)
            out[f"repo-shaped corpus, {n} files, whole tree cold, -j 2"] = streamlint(work, ["--no-cache", "-j", "2", "."])
            out[f"repo-shaped corpus, {n} files, one file no cache"] = streamlint(
                work, ["--no-cache", "-j", "1", str(_stream_files(work, 1)[0].relative_to(work))])
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", nargs="?", type=Path)
    parser.add_argument("--file", default=None, help="the one file (relative to TREE); default: a stream module")
    parser.add_argument("--import", dest="imported", default=None, help="the imported module to edit")
    parser.add_argument("--whole", action="store_true", help="also the whole tree cold (-j 2)")
    parser.add_argument("--corpus", default=None, help="comma-separated sizes of repo-shaped corpora")
    parser.add_argument("--lsp", action="store_true", help="run bench/lsp_latency.py too")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    result: dict = {}
    if args.tree is not None:
        result.update(rows_for_tree(args.tree.resolve(), args.file, args.imported, args.whole))
    if args.corpus:
        result.update(corpus_rows([int(n) for n in args.corpus.split(",")]))
    if args.lsp:
        proc = subprocess.run([sys.executable, str(HERE / "lsp_latency.py"), "--json", "-"], env=ENV,
                              capture_output=True, text=True)
        try:
            result["lsp"] = json.loads(proc.stdout[proc.stdout.index("{"):])
        except ValueError:
            result["lsp"] = proc.stdout[-2000:] + proc.stderr[-2000:]
    for key, row in result.items():
        if isinstance(row, dict) and "wall" in row:
            if row.get("error"):
                print(f"{key}: exit {row['rc']}: {row['error']}")
            print(f"{key:<58} {row['wall']:8.2f} s {row.get('cpu') or 0:6.2f} s CPU {row['rss_mb'] or 0:7.1f} MB  parsed {row['parsed']:5}  summaries {row.get('summaries', 0):5}  "
                  + ", ".join(f"{k} {v:.2f}" for k, v in row["phases"].items()))
        else:
            print(f"{key}: {row}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
