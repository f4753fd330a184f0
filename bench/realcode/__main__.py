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
    p = sub.add_parser("report", help="lint every tree and print/write the report")
    p.add_argument("names", nargs="*", help="NAME or NAME==VERSION (default: all)")
    p.add_argument("--offline", action="store_true", help="use the cache only")
    p.add_argument("--timeout", type=int, default=300, help="seconds per package before it is capped")
    p.add_argument("--jobs", "-j", type=int, default=2)
    p.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    p.add_argument("--triage", default=None, help="triage file (default: triage.tsv here)")
    p.set_defaults(func=lambda a: __import__("bench.realcode.report", fromlist=["run"]).run(a))
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
