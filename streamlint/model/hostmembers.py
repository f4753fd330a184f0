"""Members of project objects that hold host tensors (issue 16 §3, "Only device data races").

An optimizer that keeps its master weights on the host builds, per parameter, a record of host buffers
(``shadow = torch.empty(p.shape, dtype=p.dtype, pin_memory=pin)``, ``_Slot(None, shadow, group)``; a class whose
``__init__`` stores ``self.shadow = torch.zeros(n)``) and later writes them in host code
(``slot.shadow.copy_(master)``) before copying them to the device on a side stream. The tensor was built on the
host: no stream produces it, and its host write needs no stream wait. :func:`host_member` says whether every value
the project binds to ``<obj of cls>.<attr>`` is a tensor built in host memory -- a torch factory without a device
(or ``device="cpu"``, ``pin_memory=...``), ``.cpu()`` / ``.pin_memory()`` / ``.to("cpu")`` (blocking) / ``.numpy()``
results, a local bound only to one -- from ``self.<attr> = v`` in the class (and its bases), keyword and positional
constructions of a dataclass / NamedTuple, the ``__init__`` parameter the field is stored from bound at every
construction, and assignments ``obj.<attr> = v`` in the class's module. Precision first: a value of another kind, a
construction or assignment in another module that names the class, or none seen leaves the member unknown (device).
:func:`host_place` applies it to a flow key: ``self.<attr>`` in a method, ``<name>.<attr>`` for a parameter or local
whose project class is known (:func:`~streamlint.model.devfields.holder_classes`).

A member the module fills by a non-blocking copy (``slot.host_grad.copy_(grad, non_blocking=True)`` on a side stream)
is device work to order -- its later host reads need the copy's event -- and stays device memory here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import devobjects
from streamlint.model.devfields import holder_classes, member_values
from streamlint.model.file import ClassInfo, FileModel, FunctionInfo, dotted
from streamlint.model.placement import HOST_RESULT_METHODS, copy_destination, host_factory, non_blocking, \
    settled_host_value
from streamlint.model.syntax import is_none
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project

# Methods of a host tensor whose result is host memory too (a view, a cast, a fill): ``torch.empty(n).view(-1)``.
_KEEPS_PLACE = frozenset({"view", "reshape", "flatten", "contiguous", "clone", "detach", "float", "half", "bfloat16",
                          "long", "int", "zero_", "fill_", "share_memory_", "pin_memory", "narrow", "view_as"})
_MAX_DEPTH = 4


def host_tensor_value(file: FileModel, fn: FunctionInfo | None, v: cst.BaseExpression, depth: int = 0) -> bool:
    """Is ``v`` (evaluated in ``fn``) a tensor in host memory no stream has produced: a torch factory without a
    device (``torch.empty(n, pin_memory=pin)``, ``torch.zeros(n, device="cpu")``), a blocking ``.cpu()`` /
    ``.to("cpu")`` / ``.pin_memory()`` / ``.numpy()`` result, a view or cast of one, or a local bound only to one?"""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(v, cst.Call):
        if settled_host_value(v):
            return True
        if isinstance(v.func, cst.Attribute):
            method = v.func.attr.value
            if method in HOST_RESULT_METHODS and not v.args:
                return True  # `x.numpy()`: a host array whatever `x` is (the host waited for it)
            if method in _KEEPS_PLACE and not non_blocking(v):
                return host_tensor_value(file, fn, v.func.value, depth + 1)
        target = file.resolve(v.func, fn) if isinstance(v.func, (cst.Name, cst.Attribute)) else None
        # `torch.tensor(data)` / `as_tensor(data)` keep a tensor argument's device: not judged here
        return host_factory(target, v) and not (target or "").endswith((".tensor", ".as_tensor", ".asarray"))
    if isinstance(v, cst.Name) and fn is not None:
        owner = devobjects.binder(fn, v.value)
        values = owner.name_assigns.get(v.value) if owner is not None else None
        return bool(values) and v.value not in owner.all_params \
            and all(not is_none(x) and host_tensor_value(file, owner, x, depth + 1) for x in values)
    return False


def host_member(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """Does every value the project binds to ``<obj of cls>.<attr>`` (one at least) hold host memory?"""
    memo = project.derived("host_member")
    key = (file.path, cls.name, attr)
    if key not in memo:
        memo[key] = False
        memo[key] = _host_member(project, file, cls, attr)
    return memo[key]


def _host_member(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    if not attr.isidentifier() or _named_elsewhere(project, file, cls):
        return False
    if _filled_asynchronously(file, attr):
        return False
    values = list(member_values(project, file, cls, attr) or ())
    positional = _positional_constructions(file, cls, attr)
    if positional is None:
        return False
    values += positional
    for a in file.assigns:  # `lane.shadow = buf` in the module: the member rebound from outside the class
        if a.target.endswith(f".{attr}") and not a.target.startswith(("self.", "cls.")) and a.value is not None:
            values.append((a.function, file, a.value))
    out = []
    for fn, mod, v in values:
        if is_none(v):
            continue
        if isinstance(v, cst.Name) and fn is not None and fn.node.name.value == "__init__" \
                and fn.class_name == cls.name and v.value in fn.all_params:
            init = _init_bindings(file, cls, fn, v.value)  # `self.shadow = shadow`: what every construction passes
            if init is None:
                return False
            out += init
            continue
        out.append((fn, mod, v))
    return bool(out) and all(host_tensor_value(mod, fn, v) for fn, mod, v in out)


def _filled_asynchronously(file: FileModel, attr: str) -> bool:
    """Does the module fill a member ``attr`` by a non-blocking copy (``slot.host_grad.copy_(g, non_blocking=True)``,
    ``self.pool[k].copy_(...)``, through a local view ``out = self.buf[:n]``)? A device-to-host copy a stream may still run: that member is device work to order
    (its later reads need the copy's event), tracked as device memory."""
    for site in file.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "copy_" and non_blocking(site.node):
            dest = copy_destination(func.value)
            dests = [dest] if not isinstance(dest, cst.Name) or site.function is None else \
                [copy_destination(v) for v in site.function.name_assigns.get(dest.value, ())]  # `out = self.buf[:n]`
            if any(isinstance(d, cst.Attribute) and d.attr.value == attr for d in dests):
                return True
    return False


def _named_elsewhere(project: Project, file: FileModel, cls: ClassInfo) -> bool:
    """Does a module other than the class's own name it (it may construct or fill instances there)? A module that
    never names the class's module (``grad.py`` defining a ``_Lane`` of its own) cannot import it; a package
    ``__init__`` re-exporting it names both, and counts."""
    own = file.module_name.rsplit(".", 1)[-1].encode()
    paths = project.paths_containing((cls.name.encode(),))
    return any(p != file.path and own in (project.file_bytes(p) or own) for p in paths)


def _constructions(file: FileModel, cls: ClassInfo):
    for site in file.calls:
        func = site.node.func
        if isinstance(func, cst.Name) and func.value == cls.name and site.target == f"{file.module_name}.{cls.name}":
            yield site
        elif isinstance(func, cst.Name) and func.value == "cls" and site.function is not None \
                and site.function.class_name == cls.name:
            yield site


def _record_fields(cls: ClassInfo) -> tuple[str, ...] | None:
    """The fields of a dataclass / NamedTuple in declaration order (its constructor's parameters); None for
    another class."""
    record = any((dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "")
                 .rsplit(".", 1)[-1] == "dataclass" for d in cls.node.decorators) \
        or any(b.rsplit(".", 1)[-1] == "NamedTuple" for b in cls.bases)
    if not record:
        return None
    out = []
    for stmt in cls.node.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                        and "ClassVar" not in (dotted(small.annotation.annotation) or ""):
                    out.append(small.target.value)
    return tuple(out)


def _positional_constructions(file: FileModel, cls: ClassInfo, attr: str) -> list | None:
    """The values positional constructions of a record class bind to its field ``attr`` (keyword ones are
    :func:`member_values`'); None when a construction unpacks its arguments (``Slot(*parts)``)."""
    fields = _record_fields(cls)
    if fields is None or attr not in fields:
        return []
    out = []
    for site in _constructions(file, cls):
        if any(a.star for a in site.node.args):
            return None
        value = bind_arguments(fields, site.node).get(attr)
        if value is not None and not any(a.keyword is not None and a.keyword.value == attr for a in site.node.args):
            out.append((site.function, file, value))
    return out


def _init_bindings(file: FileModel, cls: ClassInfo, init: FunctionInfo, param: str) -> list | None:
    """What every construction of ``cls`` in its module binds to ``__init__``'s ``param``; None when one binds
    nothing there (a default, unpacked arguments) or there is no construction."""
    params = init.params[1:] if init.params[:1] == ("self",) else init.params
    out = []
    for site in _constructions(file, cls):
        if any(a.star for a in site.node.args):
            return None
        value = bind_arguments(params + init.kwonly, site.node, kwonly=init.kwonly).get(param)
        if value is None:
            return None
        out.append((site.function, file, value))
    return out or None


def host_place(project: Project, file: FileModel, fn: FunctionInfo, key: str) -> bool:
    """Is the flow key ``self.<attr>`` (``fn`` a method) or ``<name>.<attr>`` (a parameter annotated with, or a
    local built as, project classes) a member every one of whose classes holds host memory there?"""
    if key.count(".") != 1 or "[" in key:
        return False
    root, attr = key.split(".")
    if root == "self":
        cls = file.classes.get(fn.class_name or "") if fn.parent is None else None
        return cls is not None and cls.methods.get(fn.node.name.value) is fn and host_member(project, file, cls, attr)
    if not root.isidentifier():
        return False
    classes = holder_classes(project, file, fn, cst.Name(root))
    return bool(classes) and all(host_member(project, mod, c, attr) for c, mod in classes)


__all__ = ["host_member", "host_place", "host_tensor_value"]
