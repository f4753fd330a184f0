"""python -m bench.inject [--packages NAME ...] [--kinds KIND ...] [--limit N] ...

Defect injection into the real-code corpus (issue 16 §2): writes bench/inject/RESULTS.md,
bench/inject/undecided.tsv and the raw results (JSON lines) under --out.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

from bench.inject.harness import Exclusion, from_json, iter_trees, reclassify, run_package, to_json
from bench.inject.mutate import KINDS
from bench.inject.report import results_md, undecided_tsv

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.inject", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packages", nargs="+", metavar="NAME", help="corpus names (or name==version); default all")
    ap.add_argument("--kinds", nargs="+", choices=KINDS, metavar="KIND", help=f"mutation kinds: {', '.join(KINDS)}")
    ap.add_argument("--cap", type=int, default=20, help="mutants per release (default 20)")
    ap.add_argument("--limit", type=int, help="stop after N mutants in all (a quick look)")
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=2, help="parallel streamlint runs (default 2)")
    ap.add_argument("--trees-dir", type=Path, help="use unpacked <name>-<version> dirs instead of the corpus cache")
    ap.add_argument("--offline", action="store_true", help="only releases already in the corpus cache")
    ap.add_argument("--out", type=Path, default=HERE / "out", help="raw results (default bench/inject/out)")
    ap.add_argument("--no-report", action="store_true", help="do not rewrite RESULTS.md / undecided.tsv")
    ap.add_argument("--results", default="RESULTS", metavar="NAME",
                    help="report pair to write under bench/inject: NAME.md and the undecided list (default RESULTS: "
                         "RESULTS.md + undecided.tsv; e.g. HELDOUT for the held-out sample: HELDOUT.md + "
                         "heldout-undecided.tsv)")
    ap.add_argument("--report-from", type=Path, metavar="JSONL",
                    help="only rewrite the reports from the raw results of an earlier run")
    ap.add_argument("--rerun", type=Path, metavar="JSONL",
                    help="lint again exactly the mutants of an earlier run's raw results (filtered by --packages, "
                         "--kinds, --missed), instead of sampling")
    ap.add_argument("--missed", action="store_true",
                    help="with --rerun: only the defects that run did not catch (rule)")
    ap.add_argument("--exclude-sample", nargs="+", type=Path, metavar="JSONL",
                    help="hold the sample out from earlier samples (their raw results): drop every site with the "
                         "same key, the same file + function + line, or the same site (package-relative file + "
                         "function + edit) in another release of the package")
    ap.add_argument("--new-functions", nargs="*", metavar="NAME==VERSION",
                    help="keep only sites in functions new to the corpus: drop a site whose function (package-"
                         "relative file + qualified name) exists in a pinned release of the package not selected, "
                         "in a release named here (a redistribution under another name), or in a selected release "
                         "of the package drawn earlier in the run (see bench/inject/newcode.py)")
    ap.add_argument("--sample-only", action="store_true",
                    help="only sample and classify (no lint): the raw results carry the verdicts, no findings; "
                         "lint them later with --rerun")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"),
                    help="compare two runs' raw results (JSON lines): recall per key, new findings on every mutant")
    ap.add_argument("--show", metavar="KEY", nargs="+",
                    help="print the diff of these mutants (keys from the raw results) and exit")
    args = ap.parse_args(argv)
    if args.show:
        return _show(args.show, args.trees_dir)
    if args.compare:
        from bench.inject.report import compare_runs
        missing = [str(p) for p in args.compare if not p.is_file()]
        if missing:  # (a run that never finished, or a results.jsonl's directory given instead of the file)
            print(f"bench.inject: no results file: {', '.join(missing)}", file=sys.stderr)
            return 2
        print(compare_runs(*args.compare))
        return 0
    command = "python -m bench.inject " + shlex.join(argv if argv is not None else sys.argv[1:])
    if args.report_from is not None:
        rows = [json.loads(line) for line in args.report_from.read_text(encoding="utf-8").splitlines() if line]
        meta = rows[0] if rows and "meta" in rows[0] else {"meta": {}}
        mutants = [from_json(r) for r in rows if "meta" not in r]
        changed = reclassify(mutants, lambda name, version: _root_of(name, version, args.trees_dir))
        print(f"{changed} verdicts changed by the scope-wrapper check")
        packages = sorted({f"{m.package} {m.version}" for m in mutants})
        text = _write_reports(mutants, meta["meta"].get("command", command), meta["meta"].get("seconds", 0.0),
                              packages, write=not args.no_report, before=args.rerun, name=args.results)
        if args.no_report:  # (nothing written: the report goes to the terminal)
            print(text)
        return 0

    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    kinds = set(args.kinds) if args.kinds else None
    wanted = _rerun_keys(args.rerun, kinds, args.missed) if args.rerun is not None else None
    if wanted is not None and args.packages is None:
        args.packages = sorted({f"{name}=={version}" for name, version in wanted})
    exclude = Exclusion.from_files(args.exclude_sample) if args.exclude_sample else None
    fresh = None
    if args.new_functions is not None and wanted is None:
        from bench.inject.newcode import NewFunctions
        fresh = NewFunctions.from_manifest(args.packages, args.new_functions, log=lambda s: print(s, flush=True))
    mutants = []
    packages = []
    raw = args.out / "results.jsonl"
    with tempfile.TemporaryDirectory(prefix="sl-inject-") as work, open(raw, "w", encoding="utf-8") as fh:
        for tree in iter_trees(args.packages, args.trees_dir, args.offline):
            left = None if args.limit is None else args.limit - len(mutants)
            if left is not None and left <= 0:
                break
            keys = None
            if wanted is not None:
                keys = wanted.get((tree.name, tree.version))
                if not keys:
                    continue
            packages.append(f"{tree.name} {tree.version}")
            done = run_package(tree, cap=args.cap, seed=args.seed, kinds=kinds, limit=left,
                               jobs=args.jobs, workdir=Path(work), log=lambda s: print(s, flush=True), keys=keys,
                               exclude=exclude, lint=not args.sample_only, fresh=fresh)
            for m in done:  # written as each release finishes: an interrupted run still has its results
                fh.write(json.dumps(to_json(m)) + "\n")
            fh.flush()
            mutants += done
    seconds = time.perf_counter() - start
    if exclude is not None:
        print("excluded (sites of earlier samples): " + ", ".join(f"{n} {why}" for why, n in exclude.dropped.items()))
    if fresh is not None:
        print("excluded (functions not new): " + ", ".join(f"{n} {why}" for why, n in fresh.dropped.items()))
    if args.sample_only:
        print(f"{len(mutants)} mutants sampled in {seconds:.0f}s (not linted); raw results in {raw}")
        return 0
    text = _write_reports(mutants, command.strip(), seconds, packages, write=not args.no_report, before=args.rerun,
                          name=args.results)
    print(text.split("### Per mutation kind")[0])
    print(f"done in {seconds:.0f}s; raw results in {raw}")
    return 0


def _cached_trees(trees_dir: Path | None):
    """The release trees present (the corpus cache's `trees/` when no directory is given): a release of the
    manifest that was never fetched is skipped, not an error (`--show` looks a key up, it downloads nothing)."""
    from bench.realcode.corpus import cache_dir
    root = trees_dir if trees_dir is not None else cache_dir() / "trees"
    return iter_trees(None, root) if root.is_dir() else iter(())


def _show(keys: list[str], trees_dir: Path | None) -> int:
    """Print each mutant's edit as a unified diff (the key names the release file, function and edit)."""
    import difflib
    from bench.inject.mutate import sites
    for key in keys:
        rel = key.split("::", 1)[0]
        found = False
        for tree in _cached_trees(trees_dir):
            path = tree.root / rel
            if not path.is_file():
                continue
            src = path.read_text(encoding="utf-8", errors="replace")
            for s in sites(src, rel, tree_multistream=True):
                if s.key == key:
                    found = True
                    print(f"===== {key} [{s.verdict}: {s.reason}] ({tree.name} {tree.version})")
                    print("".join(difflib.unified_diff(src.splitlines(True), s.apply().splitlines(True),
                                                       rel, rel + " (mutant)", n=4)))
            if found:
                break
        if not found:
            print(f"===== {key}: not found in the cached trees")
    return 0


def _rerun_keys(path: Path, kinds: set[str] | None, missed: bool) -> dict[tuple[str, str], set[str]]:
    """The mutant keys of an earlier run, per release: the same mutants are rebuilt and linted again."""
    keys: dict[tuple[str, str], set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line) if line.strip() else {}
        if "key" not in row or (kinds and row["kind"] not in kinds):
            continue
        if missed and (row["verdict"] != "defect" or row.get("caught_rule")):
            continue
        keys.setdefault((row["package"], row["version"]), set()).add(row["key"])
    return keys


def _root_of(name: str, version: str, trees_dir: Path | None) -> Path | None:
    if trees_dir is not None:
        root = trees_dir / f"{name}-{version}"
        return root if root.is_dir() else None
    from bench.realcode.corpus import load_manifest, tree_dir
    for release in load_manifest():
        if release.name == name and release.version == version and tree_dir(release).is_dir():
            return tree_dir(release)
    return None


def _write_reports(mutants: list, command: str, seconds: float, packages: list[str], write: bool = True,
                   before: Path | None = None, name: str = "RESULTS") -> str:
    earlier = None
    if before is not None and before.is_file():
        rows = [json.loads(line) for line in before.read_text(encoding="utf-8").splitlines() if line.strip()]
        earlier = {r["key"]: from_json(r) for r in rows if "key" in r}
    text = results_md(mutants, command=command, seconds=seconds, packages=packages, before=earlier,
                      before_name=before.name if before is not None else "")
    if write:
        undecided = "undecided.tsv" if name == "RESULTS" else f"{name.lower()}-undecided.tsv"
        (HERE / f"{name}.md").write_text(text, encoding="utf-8")
        (HERE / undecided).write_text(undecided_tsv(mutants), encoding="utf-8")
    return text


if __name__ == "__main__":
    sys.exit(main())
