"""Where a member of a project object comes from (issue 16 §3, "streams held through device layers").

A device layer keeps the device module, a stream or an event in a *member* of an object and reaches it
elsewhere: ``self.device_module = torch.get_device_module(t)`` in ``__init__`` and
``self.device_module.Stream()`` in a hook; ``context.device_handle`` where ``context: _Context`` is a
dataclass built by ``cls(device_handle=torch.get_device_module(d), ...)``; ``@property def s0(self):
return self.device_module.current_stream()``. :func:`member_values` lists every expression the project
binds to ``<obj of cls>.<attr>`` -- with the function it is evaluated in, so the caller resolves it with
its own step (device module, stream kind) -- from:

- ``self.<attr> = v`` / ``cls.<attr> = v`` in any method of the class or a project base class;
- a property ``<attr>`` of the class (or a base): each value it returns;
- a construction of the class with the keyword ``<attr>=v`` in the class's own module (``cls(...)`` in
  its class methods, ``Cls(...)`` anywhere in the module): a dataclass / NamedTuple field.

None when the class binds the member nowhere the project sees (a value passed from outside stays
unknown). :func:`holder_classes` says which project classes a receiver may be: a parameter annotated
with project classes (``context: _Context``, ``Optional[...]``), or a local the function binds only to
constructions of project classes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import devobjects
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.syntax import is_none

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project

Binding = "tuple[FunctionInfo, FileModel, cst.BaseExpression]"  # (a string: LibCST is imported lazily)


def member_values(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> list[Binding] | None:
    """Every (function, module, expression) bound to ``attr`` of an object of ``cls``; None: none seen."""
    memo = project.derived("device_member_values")
    key = (file.path, cls.name, attr)
    if key in memo:
        return memo[key]
    memo[key] = None
    out: list[Binding] = []
    targets = {f"self.{attr}", f"cls.{attr}"}
    for c, mod in devobjects.class_chain(project, file, cls):
        targets.add(f"{c.name}.{attr}")
        getter = c.methods.get(attr)
        if getter is not None and any(d.rsplit(".", 1)[-1] in ("property", "cached_property")
                                      for d in getter.decorators):
            out += [(getter, mod, r.value) for r in getter.returns if r.value is not None]
        for method in c.methods.values():
            out += [(method, mod, a.value) for a in method.assigns
                    if a.target in targets and a.value is not None and not is_none(a.value)]
        out += _keyword_constructions(mod, c, attr)
    memo[key] = out or None
    return memo[key]


def holder_classes(project: Project, file: FileModel, fn: FunctionInfo | None,
                   recv: cst.BaseExpression) -> list[tuple[ClassInfo, FileModel]] | None:
    """The project classes the object ``recv`` (a name) may be: an annotated parameter, a module-level
    object (:func:`devobjects.object_classes`), or a local bound only to constructions of project classes."""
    found = devobjects.object_classes(project, file, fn, recv)
    if found or not isinstance(recv, cst.Name):
        return found
    owner = devobjects.binder(fn, recv.value)
    values = owner.name_assigns.get(recv.value) if owner is not None else None
    if not values or recv.value in owner.all_params:
        return None
    out: list[tuple[ClassInfo, FileModel]] = []
    for value in values:
        sym = constructed_class(project, file, owner, value)
        if sym is None:
            return None
        out.append(sym)
    return out


def constructed_class(project: Project, file: FileModel, fn: FunctionInfo | None,
                      value: cst.BaseExpression) -> tuple[ClassInfo, FileModel] | None:
    """The project class ``value`` constructs (``Backend(dev)``), else None."""
    if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
        return None
    qualname = file.resolve(value.func, fn)
    sym = project.symbol(qualname, file) if qualname else None
    return sym if sym is not None and isinstance(sym[0], ClassInfo) else None


def _keyword_constructions(mod: FileModel, cls: ClassInfo, attr: str) -> list[Binding]:
    """``cls(attr=v)`` in the class's class methods and ``Cls(attr=v)`` in its module."""
    out: list[Binding] = []
    for site in mod.calls:
        fn = site.function
        func = site.node.func
        own = fn is not None and fn.class_name == cls.name and isinstance(func, cst.Name) and func.value == "cls"
        if not own and not (isinstance(func, cst.Name) and func.value == cls.name
                            and site.target == f"{mod.module_name}.{cls.name}"):
            continue
        for arg in site.node.args:
            if arg.keyword is not None and arg.keyword.value == attr and fn is not None and not is_none(arg.value):
                out.append((fn, mod, arg.value))
    return out


__all__ = ["Binding", "constructed_class", "holder_classes", "member_values"]
