"""What a released tree lets go at once (issue 15: memory must not grow with the tree).

A parsed module's objects refer to each other: a ``FunctionInfo`` lists its call sites, ``with`` items and
assignments, and each of those names the function back; a ``Project`` memoises analyses that hold the project.
Reference counting cannot free such cycles, only the cyclic collector can, and its oldest generation (millions
of long-lived LibCST nodes in a large run) runs seldom: so every tree an engine let go between two files
(``Engine.release_models``) stayed in memory, whole, until the engine's next ``gc.collect``, and a run's peak
held the kept trees, the released ones awaiting the collection and the current file's reach at once.

:func:`release` empties the objects that close those cycles (the project, each released model and its
functions): their trees, models and memoised analyses are freed by reference counting as the engine drops
them. The emptied objects become released stand-ins: any later attribute read raises :class:`ReleasedError`
(not ``AttributeError``, so ``getattr(x, name, default)`` cannot answer from an empty object). A use of a
released tree is a bug, reported as the crash of the rule that made it, never a silently different answer;
``isinstance`` and identity (``is``, hashing by ``id``) keep working. Only objects nothing live may ask are
released: the engine passes the project it replaced and the models it no longer holds.
"""

from __future__ import annotations

from typing import Iterable

from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.walk import forget_children


class ReleasedError(RuntimeError):
    """An object of a released tree (model/release.py) was asked something."""


def _refuse(self: object, name: str, *args: object) -> object:
    if name == "__class__":  # (isinstance asks it when the type itself does not match)
        return object.__getattribute__(self, name)
    raise ReleasedError(f"{type(self).__name__}.{name}: this object's tree was released (Engine.release_models)")


_STAND_INS: dict[type, type] = {}


def _stand_in(cls: type) -> type:
    """A subclass of ``cls`` with the same layout whose every attribute read or write raises."""
    found = _STAND_INS.get(cls)
    if found is None:
        found = _STAND_INS[cls] = type(f"Released{cls.__name__}", (cls,), {
            "__slots__": (), "__getattribute__": _refuse, "__setattr__": _refuse, "__delattr__": _refuse,
            "__repr__": lambda self: f"<released {cls.__name__}>"})
    return found


def _empty(obj: object) -> None:
    if type(obj) in _STAND_INS.values():
        return
    object.__getattribute__(obj, "__dict__").clear()
    object.__setattr__(obj, "__class__", _stand_in(type(obj)))


def release(project: object | None, models: Iterable[FileModel]) -> None:
    """Empty ``project`` (replaced by a new one) and ``models`` (held by nothing live any more) with every
    function of theirs, so that reference counting frees them and their trees now, not at the next collection."""
    forget_children()  # (walk.children's answers hold nodes)
    for model in models:
        if type(model) is not FileModel:
            continue  # (already released, or not a model)
        functions: dict[int, FunctionInfo] = {id(fn): fn for fn in model.functions.values()}
        for cls in model.classes.values():
            functions.update((id(fn), fn) for fn in cls.methods.values())
        for fn in model.function_of.values():  # (a function defined twice: only the last one is named)
            if fn is not None:
                functions[id(fn)] = fn
        for site in (*model.calls, *model.scopes, *model.assigns):
            if site.function is not None:
                functions[id(site.function)] = site.function
        for fn in functions.values():
            _empty(fn)
        _empty(model)
    if project is not None:
        _empty(project)
