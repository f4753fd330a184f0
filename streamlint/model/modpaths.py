"""Which file a dotted module name leads to, seen from a file: its ``__init__.py`` chain (its source root),
the checkouts between that root and the project root, the project root and ``src/``, and, for a namespace
package linted from outside its tree, the folder above the nearest directory named like the import's
top-level package. Path tests only (each cached); :class:`~streamlint.model.project.Project` holds the caches.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamlint.model.file import FileModel


class ModulePaths:
    """Module resolution of :class:`~streamlint.model.project.Project` (a mixin over its caches)."""

    root: Path
    _packages: dict[str, tuple[str, str]]
    _modules: dict[tuple[str, str], str | None]
    _source_roots: dict[str, str]
    _named_roots: dict[tuple[str, str], str | None]
    _checkout_dirs: dict[str, tuple[str, ...]]

    def file(self, path: str) -> "FileModel | None":
        raise NotImplementedError

    def in_project(self, path: str) -> bool:
        raise NotImplementedError

    def module_name(self, path: str) -> tuple[str, bool, str]:
        """(module name, is package, source root) of a file, from ``__init__.py`` chains."""
        p = os.path.abspath(path)
        directory, base = os.path.split(p)
        is_package = base == "__init__.py"
        package, root = self._package_of(directory)
        stem = base.rsplit(".", 1)[0] if "." in base else base
        if is_package:
            name = package or stem
        else:
            name = f"{package}.{stem}" if package else stem
        return name, is_package, root

    def _package_of(self, directory: str) -> tuple[str, str]:
        """(dotted package name, source root) of a directory: its ``__init__.py`` chain, cached."""
        found = self._packages.get(directory)
        if found is None:
            parent = os.path.dirname(directory)
            if parent != directory and os.path.isfile(os.path.join(directory, "__init__.py")):
                above, root = self._package_of(parent)
                name = os.path.basename(directory)
                found = (f"{above}.{name}" if above else name, root)
            else:
                found = ("", directory)
            self._packages[directory] = found
        return found

    def find_module(self, module: str, context: FileModel | None) -> FileModel | None:
        path = self.module_path(module, context)
        return self.file(path) if path is not None else None

    def module_path(self, module: str, context: FileModel | None) -> str | None:
        """The file ``module`` leads to from ``context`` (path tests only: nothing is read or parsed)."""
        first = None
        if context is not None:
            first = self._source_roots.get(context.path)
            if first is None:
                first = self._source_roots[context.path] = self._package_of(
                    os.path.dirname(os.path.abspath(context.path)))[1]
        for root in (first, *self._checkouts(first), self._root_str, self._src_str, self._named_root(module, first)):
            if root is None:
                continue
            key = (module, root)
            if key not in self._modules:
                self._modules[key] = self._module_path(module, root)
            path = self._modules[key]
            if path is not None:
                return path
        return None

    def _checkouts(self, first: str | None) -> tuple[str, ...]:
        """The directories between a file's source root and the project root, nearest first: a test or
        benchmark directory without ``__init__.py`` imports its project's package from the checkout
        above it (``repo/tests/v1/test_x.py`` importing ``pkg.utils`` of ``repo/pkg``), as it does once the
        package is installed; the project root may be a directory holding several checkouts."""
        if first is None:
            return ()
        found = self._checkout_dirs.get(first)
        if found is None:
            dirs: list[str] = []
            d, below = os.path.dirname(first), first
            while len(dirs) < 8 and d != below and d.startswith(self._root_str + os.sep):
                dirs.append(d)
                d, below = os.path.dirname(d), d
            found = self._checkout_dirs[first] = tuple(dirs)
        return found

    def _named_root(self, module: str, first: str | None) -> str | None:
        """The directory above the nearest folder, at or above a file's source root, named like the
        import's top-level package: a file of a namespace package (``pkg/sub/`` with no ``__init__.py``)
        linted from outside its tree imports ``pkg.sub.x`` from there, as it does once ``pkg`` is on the
        path. From the file's path only (no file-system test)."""
        if first is None:
            return None
        top = module.partition(".")[0]
        key = (top, first)
        found = self._named_roots.get(key, False)
        if found is False:
            found, d = None, first
            for _ in range(8):
                parent = os.path.dirname(d)
                if parent == d:
                    break
                if os.path.basename(d) == top:
                    found = parent
                    break
                d = parent
            self._named_roots[key] = found
        return found

    def _module_path(self, module: str, root: str) -> str | None:
        rel = module.replace(".", os.sep)
        for candidate in (os.path.join(root, rel + ".py"), os.path.join(root, rel, "__init__.py")):
            if os.path.isfile(candidate) and self.in_project(candidate):
                return candidate
        return None

    @cached_property
    def _root_str(self) -> str:
        return os.fspath(self.root)

    @cached_property
    def _src_str(self) -> str:
        return os.path.join(self.root, "src")

