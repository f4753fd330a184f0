"""An object whose results leave it only through a method that waits its event first.

A future-like class records an event after the work that fills its result (``self._ev.record(s)`` in its
constructor) and hands the result out through an accessor that makes the reader's stream wait that event
before returning it (``def result(self): cur.wait_event(self._ev); return self._out``). Dropping the event in
another method (``self._ev = None`` in a cleanup) then loses no join: no reader of the result gets it without
passing the accessor's wait, and the cleanup runs on a future nobody can read any more, or after the wait.

:func:`served_joined` says so only when the class shows it: at least one method hands a field out (returns it,
other than the event), EVERY method handing a field out has the reader's stream or the host wait the event
(``current_stream().wait_event(self.ev)``, ``self.ev.wait()``, ``self.ev.synchronize()``; not another stream's
``self._post.wait_event(...)``) before the ``return`` -- unguarded, or guarded only by a "not yet waited" flag of
the object that the guarded block sets (``if not self._done: self._done = True; cur.wait_event(...)``) --, no other
method but the one recording the event, in the class or a subclass, names a handed-out field before such a wait
(``self.weight.copy_(self._out)`` in an ``apply()``), and no code outside the class names it (``fut._out`` read
directly skips the wait). A class with an accessor that returns the result unjoined (``peek()``), one whose
wait sits under some other test (``if block:``), or whose result is read from outside keeps the finding."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo

if TYPE_CHECKING:
    from streamlint.model.project import Project

_SELF_FIELD = re.compile(r"\bself\.(\w+)\b(?!\s*\()")


def _norm(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _wait_line(project: Project, file: FileModel, fn: FunctionInfo, event: str) -> int | None:
    """The first line of ``fn`` where the stream current there (the reader's: ``current_stream().wait_event(ev)``,
    ``ev.wait()``) or the host (``ev.synchronize()``) waits ``event`` (``self.ev``), with no guard but a "not yet
    waited" flag the guarded block sets, else None. A wait by another stream (``self._post.wait_event(ev)``) joins
    that stream, not the reader's."""
    best = None
    for site in fn.calls:
        node = site.node
        if not isinstance(node.func, cst.Attribute):
            continue
        if site.method == "wait_event" and node.args and _current(project, file, fn, node.func.value):
            waited = _norm(file.code(node.args[0].value))
        elif site.method == "wait" and (not node.args or _current(project, file, fn, node.args[0].value)) \
                or site.method == "synchronize" and not node.args:
            waited = _norm(file.code(node.func.value))
        else:
            continue
        if waited != event or not all(_once_flag(file, fn, g) for g in site.guards):
            continue
        line = file.span(node).start_line
        best = line if best is None else min(best, line)
    return best


def _current(project: Project, file: FileModel, fn: FunctionInfo, expr, depth: int = 0) -> bool:
    """Is ``expr`` the stream current in ``fn``: as :func:`~streamlint.model.streams.is_current_stream` knows it, or
    a call of a method named ``current_stream`` (``AcceleratorContext.get().current_stream()``, a backend
    wrapper's getter), or a local assigned only from those?"""
    from streamlint.model.streams import is_current_stream

    if isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Attribute, cst.Name)) \
            and (expr.func.attr.value if isinstance(expr.func, cst.Attribute) else expr.func.value) == "current_stream":
        return True
    if isinstance(expr, cst.Name) and depth < 2:
        values = fn.name_assigns.get(expr.value)
        if values and all(_current(project, file, fn, v, depth + 1) for v in values):
            return True
    try:
        return bool(is_current_stream(project, file, fn, expr))
    except Exception:  # (a shape the classifier does not expect: not known current)
        return False


def _once_flag(file: FileModel, fn: FunctionInfo, guard) -> bool:
    """``if not self.flag:`` whose block sets ``self.flag = True`` (the wait runs once, the first time)."""
    test = guard.test
    if guard.negated or not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
        return False
    flag = _norm(file.code(test.expression))
    if not re.fullmatch(r"self\.\w+", flag):
        return False
    return any(a.target == flag and isinstance(a.value, cst.Name) and a.value.value == "True"
               and any(g.test is test for g in a.guards) for a in fn.assigns)


def _handed(file: FileModel, node, event: str) -> set[str]:
    """The ``self.*`` fields a ``return`` / ``yield`` node hands out (the event itself excepted)."""
    value = getattr(node, "value", None)
    if value is None:
        return set()
    return {m.group(1) for m in _SELF_FIELD.finditer(file.code(value))} - {event[5:]}


def _named_outside(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """Does code other than ``self`` name ``.attr`` in the class's module or a module naming the class?"""
    pattern = re.compile(rf"(?<![\w.])(?!(?:self|cls)\b)[A-Za-z_]\w*(?:\[[^\]]*\])?\.{re.escape(attr)}\b")
    naming = set(project.paths_containing((cls.name.encode(),)))
    for path in project.paths_containing((f".{attr}".encode(),)):
        if os.path.abspath(path) != os.path.abspath(file.path) and path not in naming:
            continue
        data = project.file_bytes(path)
        if data is None or pattern.search(data.decode("utf-8", "replace")):
            return True
    return False


def served_joined(project: Project, file: FileModel, cls: ClassInfo, event: str) -> bool:
    """Does every method of ``cls`` handing out one of its fields wait ``event`` (``self.ev``) first, with at least
    one such method and no code outside the class naming those fields (module docstring)?"""
    handed: set[str] = set()
    for m in cls.methods.values():
        if m.params[:1] != ("self",) or m.parent is not None:
            continue
        ends = [(file.span(n).start_line, fields) for n in [*m.returns, *m.yields] if (fields := _handed(file, n, event))]
        if not ends:
            continue
        line = _wait_line(project, file, m, event)
        if line is None or any(end < line for end, _fields in ends):
            return False  # (an accessor handing a field out before, or without, the wait)
        handed.update(*(fields for _end, fields in ends))
    readers = [(file, cls), *_subclasses_of(project, file, cls)]
    return bool(handed) and not any(_named_outside(project, file, cls, attr)
                                    or any(_read_unjoined(project, f, c, attr, event) for f, c in readers)
                                    for attr in sorted(handed))


def _subclasses_of(project: Project, file: FileModel, cls: ClassInfo, depth: int = 0) -> list:
    """(file, class) of the project classes deriving from ``cls`` (three levels): their methods read its fields
    as ``self.attr`` too."""
    from streamlint.model.accelerators import direct_subclasses

    if depth > 2:
        return []
    out = []
    for sub, model in direct_subclasses(project, file, cls):
        out += [(model, sub), *_subclasses_of(project, model, sub, depth + 1)]
    return out


def _read_unjoined(project: Project, file: FileModel, cls: ClassInfo, attr: str, event: str) -> bool:
    """Does a method of the class (or of a subclass) other than one recording ``event`` (the producer) name
    ``self.attr`` before any wait of the event in it (``self.weight.copy_(self._out)`` in an ``apply()``: a reader
    inside the class)?"""
    ref = re.compile(rf"\bself\.{re.escape(attr)}\b")
    for m in cls.methods.values():
        if m.parent is not None or _records_event(file, m, event):
            continue
        text = file.code(m.node)
        found = ref.search(text)
        if found is None:
            continue
        line = file.span(m.node).start_line + text.count("\n", 0, found.start())
        wait = _wait_line(project, file, m, event)
        if wait is None or wait > line:
            return True
    return False


def _records_event(file: FileModel, fn: FunctionInfo, event: str) -> bool:
    return any(site.method == "record" and isinstance(site.node.func, cst.Attribute)
               and _norm(file.code(site.node.func.value)) == event for site in fn.calls)


__all__ = ["served_joined"]
