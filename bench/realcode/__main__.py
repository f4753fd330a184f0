"""python -m bench.realcode {fetch,list,report} ..."""

from __future__ import annotations

import argparse
import sys

from .corpus import CorpusError, IndexUnreachable, cache_dir, ensure_tree, load_manifest, select


def _fetch(args: argparse.Namespace) -> int:
    releases = select(load_manifest(args.manifest), args.names or None)
    failed = 0
    for rel in releases:
        try:
            root = ensure_tree(rel, offline=args.offline)
        except IndexUnreachable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 3
        except CorpusError as exc:
            print(f"error: {rel.key}: {exc}", file=sys.stderr)
            failed += 1
            continue
        n = sum(1 for _ in root.rglob("*.py"))
        print(f"{rel.key:32} {n:6} .py files  {root}")
    return 1 if failed else 0


def _list(args: argparse.Namespace) -> int:
    for rel in load_manifest(args.manifest):
        extra = f" --platform {rel.platform}" if rel.platform else ""
        extra += f" --python-version {rel.python_version}" if rel.python_version else ""
        print(f"{rel.key:32} {rel.kind:5} {rel.filename}{extra}")
    print(f"cache: {cache_dir()}")
    return 0


def _pending(args: argparse.Namespace) -> int:
    """Findings of the last lint (cache/reports) that triage.tsv does not cover yet; with --sample N, a
    seeded random sample of at most N per rule (the sample a large rule is triaged on)."""
    import json
    import random
    from collections import defaultdict

    from .corpus import tree_dir
    from .report import TRIAGE, normalise, read_triage

    done = {(r["package"], r["version"], r["rule"], r["location"]) for r in read_triage(TRIAGE)}
    per_rule: dict[str, list[tuple]] = defaultdict(list)
    for rel in select(load_manifest(args.manifest), args.names or None):
        raw = cache_dir() / "reports" / f"{rel.key}.json"
        if not raw.exists():
            continue
        data = json.loads(raw.read_text(encoding="utf-8"))
        findings = normalise(data["findings"] if isinstance(data, dict) else data, tree_dir(rel))
        for f in findings:
            loc = f"{f['filename']}:{f['start']['line']}"
            key = (rel.name, rel.version, f["code"], loc)
            per_rule[f"{rel.key}:{f['code']}"].append((key, key in done, f["message"]))
    for group in sorted(per_rule):
        items = sorted(per_rule[group])
        chosen = items
        if args.sample and len(items) > args.sample:
            chosen = random.Random(f"{args.seed}:{group}").sample(items, args.sample)
            print(f"# {group}: {len(items)} findings, seeded sample of {args.sample} (seed {args.seed!r})")
        for key, triaged, message in sorted(chosen):
            if not triaged:
                print("\t".join(key) + "\t" + message)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from .compare import main as compare
    return compare(args.before, args.after, args.triage)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.realcode")
    parser.add_argument("--manifest", default=None, help="manifest file (default: the pinned one)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("fetch", help="download, verify and unpack the pinned releases")
    p.add_argument("names", nargs="*", help="NAME or NAME==VERSION (default: all)")
    p.add_argument("--offline", action="store_true", help="use the cache only")
    p.set_defaults(func=_fetch)
    p = sub.add_parser("list", help="show the manifest")
    p.set_defaults(func=_list)
    p = sub.add_parser("pending", help="list findings not yet in triage.tsv (optionally a seeded sample per rule)")
    p.add_argument("names", nargs="*")
    p.add_argument("--sample", type=int, default=0, help="at most N findings per package and rule (seeded random sample)")
    p.add_argument("--seed", default="16")
    p.set_defaults(func=_pending)
    p = sub.add_parser("report", help="lint every tree and print/write the report")
    p.add_argument("names", nargs="*", help="NAME or NAME==VERSION (default: all)")
    p.add_argument("--offline", action="store_true", help="use the cache only")
    p.add_argument("--timeout", type=int, default=300, help="seconds per package before it is capped")
    p.add_argument("--jobs", "-j", type=int, default=2)
    p.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    p.add_argument("--no-slice", action="store_true",
                   help="always lint whole trees (no stream-function slice for large or capped trees)")
    p.add_argument("--max-files", type=int, default=2500,
                   help="trees with more .py files are linted as their stream-function slice (default 2500)")
    p.add_argument("--reuse", action="store_true",
                   help="reuse a package's previous complete lint result from the cache (cache/reports/)")
    p.add_argument("--triage", default=None, help="triage file (default: triage.tsv here)")
    p.add_argument("--triaged", action="store_true",
                   help="add every release with a line in triage.tsv / misses.tsv to NAMES (the judged set)")
    p.set_defaults(func=lambda a: __import__("bench.realcode.report", fromlist=["run"]).run(a))

    p = sub.add_parser("compare", help="compare two runs' raw results (cache/reports dirs) by the triage")
    p.add_argument("before", help="directory of raw results (KEY.json), e.g. CACHE/reports of a run at main")
    p.add_argument("after", help="directory of raw results of the other run")
    p.add_argument("--triage", default=None, help="triage file (default: triage.tsv here)")
    p.set_defaults(func=_compare)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except IndexUnreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
