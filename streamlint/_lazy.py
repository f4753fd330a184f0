"""LibCST, imported on first use.

Importing LibCST takes ~0.25 s (it builds a few hundred dataclasses), more than everything else
streamlint imports. A run that parses nothing — every file skipped by the prefilter or answered by the
cache — should not pay it. Modules write ``from streamlint._lazy import cst`` and use ``cst.X`` as
usual; the real import happens at the first attribute access. Nothing may touch ``cst.X`` at module
level (class bases, constant tuples): defer those to first use. Once LibCST is loaded, its node classes take
exact type tests (:mod:`streamlint.nodechecks`: the same answers without ABCMeta's per-test cost).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Callable


class _Then:
    """A loader running ``then(module)`` once the module executed (a lazy import's first use)."""

    def __init__(self, loader, then: Callable[[ModuleType], object]) -> None:
        self.loader, self.then = loader, then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.then(module)


def lazy_module(name: str, then: Callable[[ModuleType], object] | None = None) -> ModuleType:
    """``name`` from sys.modules when imported already, else a module that executes on first use;
    ``then(module)`` runs once it executed (at once for a module imported already)."""
    found = sys.modules.get(name)
    if found is not None:
        if then is not None and not pending(found):
            then(found)
        return found
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader if then is None else _Then(spec.loader, then))
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


# the class a lazily loaded module has until its first use (an implementation detail of importlib: if
# it is ever missing, every module simply counts as loaded)
_LAZY_TYPE: type | tuple[()] = getattr(importlib.util, "_LazyModule", ())


def load(module: ModuleType) -> bool:
    """Import a lazy module now (to time its import on its own); False if it was imported already."""
    if not pending(module):
        return False
    getattr(module, "__name__")
    return True


def pending(module: ModuleType) -> bool:
    """Is ``module`` still waiting for its first use?"""
    return isinstance(module, _LAZY_TYPE)


if TYPE_CHECKING:
    import libcst as cst
else:
    from streamlint.nodechecks import install as _exact_node_checks

    cst = lazy_module("libcst", _exact_node_checks)  # (node type tests without ABCMeta's: nodechecks.py)

__all__ = ["cst", "lazy_module", "load", "pending"]
