"""Restrict a draw to functions new to the corpus (`--new-functions`).

A held-out sample taken from another release of a corpus package must only hold code the corpus has not seen:
a candidate site is dropped when its function — package-relative file path + qualified name (`Class.method`,
nested defs dotted as the mutator names them), or for a method the same qualified name in any file (a class moved
to another module) — exists in another release it is compared against:

- every release of the same package that the manifest pins and that this draw does not select (its tree in
  the cache; a release never fetched is reported and skipped, it cannot be compared);
- the releases named on the command line (`--new-functions telellm==0.1.2`: a redistribution of the package
  under another name, compared by the same package-relative path);
- a selected release of the same package drawn earlier in this run, so a function shared by two new releases
  is drawn once (in the first).

Only the function's existence is compared (its body may have changed): an edited function is not new code.
The release directory of an sdist (`vllm-0.6.6/`) is not part of the path, so an sdist and a wheel compare.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterable

from bench.inject.harness import TreeRef, package_relative
from bench.inject.mutate import Site


def qualnames(text: str) -> set[str]:
    """Every function's dotted class / def path in a module (the mutator's `qualname`)."""
    try:
        tree = ast.parse(text.removeprefix("\ufeff"))
    except (SyntaxError, ValueError):
        return set()
    out: set[str] = set()

    def walk(node: ast.AST, stack: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.add(".".join((*stack, child.name)))
                walk(child, (*stack, child.name))
            elif isinstance(child, ast.ClassDef):
                walk(child, (*stack, child.name))
            else:
                walk(child, stack)

    walk(tree, ())
    return out


class _Release:
    """One release compared against: its functions per package-relative path, read on demand."""

    def __init__(self, name: str, version: str, root: Path) -> None:
        self.name, self.version, self.root = name, version, root
        self._heads = [d for d in root.iterdir() if d.is_dir() and d.name.endswith("-" + version)] \
            if root.is_dir() else []
        self._cache: dict[str, set[str]] = {}
        self._texts: dict[Path, str] | None = None

    def functions(self, rel: str) -> set[str]:
        if rel not in self._cache:
            found: set[str] = set()
            for base in (self.root, *self._heads):
                path = base / rel
                if path.is_file():
                    found |= qualnames(path.read_text(encoding="utf-8", errors="replace"))
            self._cache[rel] = found
        return self._cache[rel]

    def has(self, rel: str, qualname: str) -> bool:
        """The function at the same path, or a method of the same class (same qualified name) in any file: a
        class moved to another module keeps its methods (`PipelinedForward.__call__` moved out of `utils.py`)."""
        if qualname in self.functions(rel):
            return True
        cls = qualname.split(".", 1)[0]
        if "." not in qualname:
            return False
        if self._texts is None:
            self._texts = {}
            for path in self.root.rglob("*.py"):
                try:
                    self._texts[path] = path.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
        marker = re.compile(rf"^[ \t]*class {re.escape(cls)}\b", re.M)
        return any(qualname in qualnames(text) for text in self._texts.values() if marker.search(text))


class NewFunctions:
    """Drops the sites whose function another release already has (see the module docstring)."""

    REASONS = ("in an unselected release of the package", "in a named release", "in an earlier selected release")

    def __init__(self, against: Iterable[tuple[str, str, Path]] = (), named: Iterable[tuple[str, str, Path]] = ()) -> None:
        """`against`: (package, version, tree root) of the unselected releases; `named`: the named ones."""
        self.against: dict[str, list[_Release]] = {}  # package -> unselected releases
        for name, version, root in against:
            self.against.setdefault(name, []).append(_Release(name, version, root))
        self.named = [_Release(name, version, root) for name, version, root in named]
        self.drawn: dict[str, list[_Release]] = {}  # package -> selected releases already drawn
        self.dropped: dict[str, int] = dict.fromkeys(self.REASONS, 0)

    @classmethod
    def from_manifest(cls, selected: Iterable[str] | None, extra: Iterable[str] = (), log=print) -> "NewFunctions":
        """Compared against the manifest's other releases of the selected packages (cached trees) and `extra`."""
        from bench.realcode.corpus import load_manifest, select, tree_dir
        manifest = load_manifest()
        chosen = {(r.name, r.version) for r in select(manifest, list(selected) if selected else None)}
        named = {(r.name, r.version) for r in select(manifest, list(extra))} if extra else set()
        against, extra_rel = [], []
        for r in manifest:
            if (r.name, r.version) in chosen:
                continue
            is_named = (r.name, r.version) in named
            if not is_named and r.name not in {n for n, _ in chosen}:
                continue
            if not tree_dir(r).is_dir():
                log(f"new-functions: {r.key} is not in the cache: not compared")
                continue
            (extra_rel if is_named else against).append((r.name, r.version, tree_dir(r)))
        return cls(against, extra_rel)

    def reason(self, package: str, version: str, site: Site) -> str | None:
        rel = package_relative(site.path, version)
        groups = (self.against.get(package, []), self.named, self.drawn.get(package, []))
        for why, releases in zip(self.REASONS, groups):
            if any(r.has(rel, site.qualname) for r in releases):
                return why
        return None

    def filter(self, tree: TreeRef, site_list: list[Site]) -> list[Site]:
        """The sites of `tree` in functions new to the corpus; `tree` then counts as drawn for its package."""
        kept = []
        for s in site_list:
            why = self.reason(tree.name, tree.version, s)
            if why is None:
                kept.append(s)
            else:
                self.dropped[why] += 1
        self.drawn.setdefault(tree.name, []).append(_Release(tree.name, tree.version, tree.root))
        return kept
