"""Finding the files to lint: recursion, .gitignore, exclude / extend-exclude, force-exclude."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pathspec

DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".hg", ".mypy_cache", ".nox", ".pants.d", ".pytype",
    ".ruff_cache", ".streamlint_cache", ".svn", ".tox", ".venv", "__pypackages__", "_build", "buck-out",
    "build", "dist", "node_modules", "site-packages", "venv", "__pycache__",
)
PYTHON_SUFFIXES = (".py", ".pyi")


@dataclass
class DiscoveryResult:
    files: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, message): exit status 2
    warnings: list[tuple[str, str]] = field(default_factory=list)


def spec_matcher(spec: pathspec.PathSpec) -> "Callable[[str], bool]":
    """``spec.match_file`` as one regular expression when no pattern negates (then a path is excluded
    as soon as any pattern matches, and the order and directory precedence of gitignore do not
    matter); else ``spec.match_file`` itself. 23 separate searches per file were most of discovery."""
    patterns = [p for p in spec.patterns if p.include is not None]
    if not all(p.include and p.regex is not None for p in patterns):
        return spec.match_file
    if not patterns:
        return lambda path: False
    combined = re.compile("|".join(f"(?:{p.regex.pattern.replace('(?P<ps_d>', '(?:')})" for p in patterns))
    if any(p.regex.flags & ~re.UNICODE != combined.flags & ~re.UNICODE for p in patterns):
        return spec.match_file  # a pattern compiled with other flags: keep pathspec's own matching
    return lambda path: combined.search(path) is not None


class _Ignorer:
    def __init__(self, root: Path, exclude: tuple[str, ...], respect_gitignore: bool) -> None:
        self.root = root
        self._root = os.path.abspath(root)
        self.exclude = spec_matcher(pathspec.GitIgnoreSpec.from_lines(exclude))
        self.respect_gitignore = respect_gitignore
        self._gitignores: dict[str, Callable[[str], bool] | None] = {}
        self._chains: dict[str, tuple[tuple[str, Callable[[str], bool]], ...]] = {}

    def _gitignore(self, directory: str) -> Callable[[str], bool] | None:
        if directory not in self._gitignores:
            spec = None
            path = os.path.join(directory, ".gitignore")
            try:
                if stat.S_ISREG(os.stat(path).st_mode):  # a FIFO planted as .gitignore would block
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        spec = spec_matcher(pathspec.GitIgnoreSpec.from_lines(fh.read().splitlines()))
            except OSError:
                spec = None
            self._gitignores[directory] = spec
        return self._gitignores[directory]

    def _chain(self, directory: str) -> tuple[tuple[str, Callable[[str], bool]], ...]:
        """The ``.gitignore`` files that apply in ``directory``, innermost first: up to the repository
        top (a ``.git`` entry) or the project root. Cached per directory."""
        chain = self._chains.get(directory)
        if chain is None:
            spec = self._gitignore(directory)
            own = ((directory, spec),) if spec is not None else ()
            parent = os.path.dirname(directory)
            if os.path.exists(os.path.join(directory, ".git")) or directory == self._root or parent == directory:
                chain = own
            else:
                chain = own + self._chain(parent)
            self._chains[directory] = chain
        return chain

    def excluded(self, path: str, is_dir: bool, absolute: str | None = None) -> bool:
        """Is ``path`` excluded (``absolute``: its normalised absolute form, when the caller has it)?"""
        if absolute is None:
            absolute = os.path.abspath(path)
        slash = "/" if is_dir else ""
        # gitignore semantics on the root-relative path: `build` matches at any depth, `/build` only at
        # the root (matching the bare name too would make every anchored pattern match everywhere)
        if self.exclude(_relative_to(absolute, self._root) + slash):
            return True
        if self.respect_gitignore:
            for directory, spec in self._chain(os.path.dirname(absolute)):
                if spec(_relative_to(absolute, directory) + slash):
                    return True
        return False


class _PerDirectoryIgnorer:
    """Exclusion by the settings that govern each directory (nested configurations): an entry is
    judged by the rules of the directory that contains it. ``rules_for(directory)`` returns
    (root, exclude patterns, respect_gitignore); one :class:`_Ignorer` per distinct answer."""

    def __init__(self, rules_for: "Callable[[str], tuple[str, tuple[str, ...], bool]]") -> None:
        self.rules_for = rules_for
        self._by_dir: dict[str, _Ignorer] = {}
        self._ignorers: dict[tuple[str, tuple[str, ...], bool], _Ignorer] = {}

    def excluded(self, path: str, is_dir: bool, absolute: str | None = None) -> bool:
        if absolute is None:
            absolute = os.path.abspath(path)
        directory = os.path.dirname(absolute)
        ignorer = self._by_dir.get(directory)
        if ignorer is None:
            rules = self.rules_for(directory)
            ignorer = self._ignorers.get(rules)
            if ignorer is None:
                ignorer = self._ignorers[rules] = _Ignorer(Path(rules[0]), rules[1], rules[2])
            self._by_dir[directory] = ignorer
        return ignorer.excluded(path, is_dir, absolute)


def _relative_to(absolute: str, directory: str) -> str:
    """``absolute`` relative to ``directory`` in POSIX form (both absolute, normalised); outside it,
    the path without its leading slash."""
    if absolute == directory:
        return "."
    prefix = directory if directory.endswith(os.sep) else directory + os.sep
    rel = absolute[len(prefix):] if absolute.startswith(prefix) else absolute.lstrip(os.sep)
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


def discover(
    paths: list[str],
    root: Path,
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE,
    respect_gitignore: bool = True,
    force_exclude: bool = False,
    follow_external_symlinks: bool = False,
    rules_for: "Callable[[str], tuple[str, tuple[str, ...], bool]] | None" = None,
) -> DiscoveryResult:
    """Expand command-line paths into the sorted list of Python files to lint. With ``rules_for``
    (directory -> (root, exclude, respect_gitignore)), each entry is judged by the settings of its
    directory instead of ``root`` / ``exclude`` / ``respect_gitignore``.

    A symbolic link to a directory outside ``root`` (resolved) is not followed unless
    ``follow_external_symlinks`` (a warning names it); the paths given themselves are always walked."""
    ignorer: "_Ignorer | _PerDirectoryIgnorer" = (
        _PerDirectoryIgnorer(rules_for) if rules_for is not None else _Ignorer(root, exclude, respect_gitignore))
    inside = None if follow_external_symlinks else os.path.realpath(root)
    result = DiscoveryResult()
    seen: set[str] = set()
    for given in paths:
        if not os.path.lexists(given):
            result.errors.append((given, "no such file or directory"))
            continue
        if os.path.isdir(given):
            if force_exclude and ignorer.excluded(given, True):
                continue
            for path, real in _walk(given, ignorer, result, inside):
                if real not in seen:
                    seen.add(real)
                    result.files.append(path)
        else:
            if force_exclude and ignorer.excluded(given, False):
                continue
            if not os.path.exists(given):
                result.errors.append((given, "broken symbolic link"))
                continue
            problem = _unreadable(given)
            if problem:
                result.errors.append((given, problem))
                continue
            real = os.path.realpath(given)
            if real not in seen:
                seen.add(real)
                result.files.append(given)
    result.files.sort()
    return result


def _unreadable(path: str) -> str | None:
    """Why a file named on the command line cannot be linted (exit status 2), or None."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return "not a regular file"
        with open(path, "rb"):
            pass
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return None


def _walk(top: str, ignorer: "_Ignorer | _PerDirectoryIgnorer", result: DiscoveryResult,
          inside: str | None = None) -> Iterator[tuple[str, str]]:
    """(path, real path) of the Python files under ``top``; symbolic-link loops are reported once. With
    ``inside`` (a real path), a symbolic link to a directory outside it is not followed (a warning)."""
    visited: set[tuple[int, int]] = set()
    stack = [top]
    while stack:
        directory = stack.pop()
        try:
            st = os.stat(directory)
        except OSError as exc:
            result.warnings.append((directory, f"cannot access directory: {exc.strerror}"))
            continue
        key = (st.st_dev, st.st_ino)
        if key in visited:
            result.warnings.append((directory, "symbolic link loop: directory already visited"))
            continue
        visited.add(key)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            result.warnings.append((directory, f"cannot list directory: {exc.strerror}"))
            continue
        subdirs = []
        real_dir = os.path.realpath(directory).rstrip(os.sep)
        abs_dir = os.path.abspath(directory)
        abs_prefix = abs_dir if abs_dir.endswith(os.sep) else abs_dir + os.sep
        for entry in entries:
            path = entry.path
            absolute = abs_prefix + entry.name
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if not ignorer.excluded(path, True, absolute):
                    if inside is not None and entry.is_symlink() and _leads_outside(path, inside):
                        result.warnings.append((path, "symbolic link to a directory outside the project, not "
                                                      "followed (--follow-external-symlinks follows it)"))
                        continue
                    subdirs.append(path)
            elif entry.name.endswith(PYTHON_SUFFIXES):
                if ignorer.excluded(path, False, absolute):
                    continue
                try:
                    if not entry.is_file():
                        if entry.is_symlink() and not os.path.exists(path):
                            result.warnings.append((path, "broken symbolic link"))
                        continue
                    real = os.path.realpath(path) if entry.is_symlink() else real_dir + os.sep + entry.name
                except OSError:
                    continue
                yield path, real
        stack.extend(reversed(subdirs))


def _leads_outside(path: str, directory: str) -> bool:
    real = os.path.realpath(path)
    return not (real == directory or real.startswith(directory.rstrip(os.sep) + os.sep))


def iter_python_files(root: Path) -> Iterator[str]:
    """All project Python files under ``root`` with the default excludes (for project-wide facts)."""
    yield from (os.path.abspath(p) for p in discover([str(root)], root).files)
