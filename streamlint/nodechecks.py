"""``isinstance(node, cst.X)`` at the cost of a plain class check, with the same answers.

Every LibCST node class derives from ``abc.ABC``, so ``isinstance(node, cst.If)`` that does not hold (the
common case in a walk: most nodes are not the kind asked) runs ``ABCMeta.__instancecheck__``, a Python
function, then its C cache look-ups: measured ~2x the cost of the same test on a class without it, and
the analysis makes ~0.5 million such tests on one 100 KB module (issue 15: ~0.1 s of a ~1.1 s warm run).

ABC machinery can only change an answer through virtual subclasses (``register``) or a ``__subclasshook__``.
When no LibCST node class (nor any subclass of one) has either, ``ABCMeta.__instancecheck__`` /
``__subclasscheck__`` answer exactly what ``type.__instancecheck__`` / ``type.__subclasscheck__`` answer (the
class in the instance's ``__mro__``, also through ``__class__``). :func:`install` then gives those classes a
metaclass that is ``ABCMeta`` (abstract methods, ``register``, ``_abc_*`` data unchanged) with those two
methods taken from ``type`` (C slots: no Python frame). It checks the condition first and installs nothing
when it does not hold (another library registered a class, a LibCST version with a hook): the tests are then
the slower ones, with the same answers. LibCST's behaviour does not depend on the speed of its checks.
"""

from __future__ import annotations

import abc
from types import ModuleType


class ExactNodeMeta(abc.ABCMeta):
    """``ABCMeta`` whose instance and subclass tests are ``type``'s (see the module docstring)."""

    __instancecheck__ = type.__instancecheck__  # type: ignore[assignment]
    __subclasscheck__ = type.__subclasscheck__  # type: ignore[assignment]


def _plain(classes: list[type]) -> bool:
    """Are ``classes`` ABCs whose answers cannot differ from their MRO: no virtual subclass registered, no
    ``__subclasshook__`` of their own or of a base below ``object``, and the same for every subclass of theirs?
    (Each class of the hierarchy checked once.)"""
    seen: set[int] = set()
    todo = list(classes)
    while todo:
        c = todo.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        try:
            registry = abc._get_dump(c)[0]  # type: ignore[attr-defined]  (the C implementation of abc)
        except (AttributeError, TypeError):
            return False  # (the pure-Python abc, or something unexpected: do not assume)
        if registry or any("__subclasshook__" in vars(b) for b in c.__mro__ if b is not object and b is not abc.ABC):
            return False
        todo.extend(type.__subclasses__(c))
    return True


def install(module: ModuleType) -> int:
    """Give the node classes of ``module`` (LibCST: the subclasses of ``CSTNode`` in its top-level namespace) the
    exact metaclass; the number of classes changed (0: the condition did not hold, nothing changed)."""
    base = getattr(module, "CSTNode", None)
    classes = [v for v in vars(module).values()
               if isinstance(v, type) and type(v) is abc.ABCMeta and base is not None and base in v.__mro__]
    if not classes or not _plain(classes):
        return 0
    for c in classes:
        c.__class__ = ExactNodeMeta
    return len(classes)


__all__ = ["ExactNodeMeta", "install"]
