"""Where the instances of a class can be: confined to one field of the objects that build them.

A codec, a sampler, a copy engine built once by a runtime and kept in ``self._codec`` is reached only as
``self._codec.run(...)``. Its methods' callers are then exactly those calls (and the class's own ``self.m()``),
however common the method's name: :func:`callers_of` counts every ``x.run(...)`` of the project on a receiver it
cannot type, and a name mentioned anywhere may be a callback. :func:`confined_callers` proves the confinement:

- every construction is seen (:func:`~streamlint.model.flow.provenance._unseen_construction`: no class named as a
  value, no ``cls(...)``, no project subclass) and is assigned straight to ``self.<f>`` of a class (not to a
  local, a container, an argument, a return);
- every mention of ``.<f>`` in the project is ``self.<f>`` in such a class, followed by a member (a method called,
  not taken by reference; an attribute read) or an assignment; no other file names a field ``<f>``;
- the class's own methods use ``self`` only to reach their members (``self`` is never handed on, returned or
  stored; no method of it is taken by reference).

The ambient stream of such a method (:mod:`~streamlint.model.flow.ambient`) is then read from those calls when the
name-based search cannot answer."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.fieldfacts import MAX_SITES
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.provenance import _unseen_construction

if TYPE_CHECKING:
    from streamlint.model.project import Project


def confined_callers(project: Project, file: FileModel, fn: FunctionInfo) -> list | None:
    """The calls of the method ``fn`` when every instance of its class is confined to one field of its builder:
    each construction (all seen: :func:`_unseen_construction`) is assigned straight to ``self.<f>`` of a class,
    every mention of ``.<f>`` in the project is ``self.<f>.<name>`` in such a class (a call of a method, a read of
    an attribute: the object never handed on, no method taken by reference) or an assignment to it, and the
    class's own methods never hand ``self`` or a bound method of it on. The calls are then the ``self.<f>.m(...)``
    of those classes and the ``self.m(...)`` of the class itself, however common the method's name (``run``);
    None when not so."""
    cls = file.classes.get(fn.class_name or "")
    name = fn.node.name.value
    if cls is None or fn.parent is not None or fn.params[:1] != ("self",) or name.startswith("__"):
        return None
    memo = project.derived("provenance_confined")
    if id(fn) not in memo:
        memo[id(fn)] = None
        memo[id(fn)] = _confined(project, file, cls, name)
    return memo[id(fn)]


def _confined(project: Project, file: FileModel, cls: ClassInfo, name: str) -> list | None:
    init = cls.methods.get("__init__")
    if init is None or _unseen_construction(project, file, cls) or not _keeps_self(file, cls):
        return None
    built = callers_of(project, file, init)
    if not built or len(built) > MAX_SITES:
        return None
    holders: dict[str, tuple[FileModel, set[str]]] = {}  # field -> (file, holder class names)
    for model, site in built:
        caller = site.function
        target = next((a.target for a in (caller.assigns if caller is not None else ())
                       if a.value is site.node and re.fullmatch(r"self\.\w+", a.target)), None)
        if target is None or caller.class_name is None or caller.parent is not None:
            return None  # (built into a local, a container, an argument: it may go anywhere)
        model_of, names = holders.setdefault(target[5:], (model, set()))
        if model_of is not model:
            return None
        names.add(caller.class_name)
    sites = [(file, site) for m in cls.methods.values() for site in m.calls
             if site.method == name and isinstance(site.receiver, cst.Name) and site.receiver.value == "self"]
    for field, (model, names) in holders.items():
        if not _only_held(project, model, names, field, cls):
            return None
        sites += [(model, site) for c in names for m in model.classes[c].methods.values() for site in m.calls
                  if site.method == name and dotted(site.receiver) == f"self.{field}"]
    return sites or None


def _keeps_self(file: FileModel, cls: ClassInfo) -> bool:
    """Do the class's methods use ``self`` only to reach its members, calling (not taking) its methods?"""
    code = file.code(cls.node).encode()
    for m in re.finditer(rb"\bself\b(\s*\.\s*(\w+)(\s*\()?)?", code):
        if m.group(1) is None and not _is_param_self(code, m.start()):
            return False
        if m.group(1) is not None and m.group(2).decode() in cls.methods and m.group(3) is None \
                and not _is_property(cls, m.group(2).decode()):
            return False
    return True


def _is_param_self(code: bytes, pos: int) -> bool:
    before = code[code.rfind(b"\n", 0, pos) + 1:pos]
    return bool(re.search(rb"def\s+\w+\s*\($", before.rstrip()))


def _is_property(cls: ClassInfo, name: str) -> bool:
    m = cls.methods.get(name)
    return m is not None and any(d.rsplit(".", 1)[-1] in ("property", "cached_property") for d in m.decorators)


def _only_held(project: Project, model: FileModel, holders: set[str], field: str, cls: ClassInfo) -> bool:
    """Is every mention of ``.<field>`` in the project ``self.<field>`` inside a holder class of ``model``,
    followed by a member (a method called, not taken) or an assignment?"""
    paths = project.paths_containing((f".{field}".encode(),))
    if paths != [model.path]:
        return False  # (another file names a field of that name: it may hold the object too)
    if project.paths_containing((f'"{field}"'.encode(), f"'{field}'".encode())):
        return False  # (named in a string: `getattr(rt, "_detok")` reaches it unseen)
    data = model.code(model.module).encode()
    spans = [(model.code(c.node).encode(), c.name) for c in model.classes.values()]
    for code, owner in spans:
        if owner in holders:
            continue
        if re.search(rb"\." + re.escape(field.encode()) + rb"\b", code):
            return False
    pat = re.compile(rb"(\w+)?\." + re.escape(field.encode()) + rb"\b(\s*\.\s*(\w+)(\s*\()?|\s*=(?!=))?")
    for m in pat.finditer(data):
        if m.group(1) != b"self" or m.group(2) is None:
            return False
        member = m.group(3)
        if member is not None and member.decode() in cls.methods and m.group(4) is None \
                and not _is_property(cls, member.decode()):
            return False
    return True


__all__ = ["confined_callers"]
