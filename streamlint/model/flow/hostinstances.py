"""Objects built for the host (issue 16 §3, "Only device data races").

A class whose constructor takes the device (``def __init__(self, ..., device)``, ``self.device = device``)
allocates its tensor fields there (``self.buf = torch.empty(n, device=self.device, pin_memory=pinned)``), and
the project builds one instance for the host and one for the device (``self.host_io = IOs(device=
torch.device("cpu"))``, ``self.device_io = IOs(device=device)``). A method of that class that runs only on
host-built instances -- every call site's receiver is a field or a local bound only to constructions passing a
host device, or ``self`` in a method that itself runs only on them -- sees host memory in those fields: no
stream produces them, so they take part in no device race and need no ``record_stream``
(:func:`host_instance_field`). Anything the project does not show (a call on a receiver of unknown origin, a
field also set from elsewhere, a device passed through a variable) leaves the field a device tensor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.devfields import constructed_class, member_values
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.placement import HOST_FACTORIES, names_host
from streamlint.model.syntax import is_none

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project

_MAX_DEPTH = 2  # `self.helper()` chains followed back to the host instance's call sites


def host_instance_field(project: Project, file: FileModel, cls: ClassInfo | None, fn: FunctionInfo,
                        attr: str) -> bool:
    """Is ``self.<attr>``, read in the method ``fn`` of ``cls``, host memory because every object ``fn`` runs
    on was built with a host device for the constructor parameter the field is allocated on?"""
    if cls is None or fn.class_name != cls.name:
        return False
    memo = project.derived("host_instance_field")
    key = (id(fn), attr)
    if key not in memo:
        param = _device_param(cls, attr)
        memo[key] = param is not None and _on_host_instances(project, file, cls, fn, param, 0)
    return memo[key]


def _device_param(cls: ClassInfo, attr: str) -> tuple[str, int] | None:
    """The constructor parameter (name, position after ``self``) every allocation of ``self.<attr>`` in the
    class places its tensor on (``device=self.device`` with ``self.device = device`` in ``__init__``, or
    ``device=device`` there); None when any assignment is something else."""
    init = cls.methods.get("__init__")
    if init is None:
        return None
    values = [(m, a.value) for m in cls.methods.values() for a in m.assigns if a.target == f"self.{attr}"]
    values = [(m, v) for m, v in values if not is_none(v)]
    found: set[str] = set()
    for m, v in values:
        device = _factory_device(v)
        if isinstance(device, cst.Name) and m is init and device.value in init.all_params:
            found.add(device.value)
        elif isinstance(device, cst.Attribute) and isinstance(device.value, cst.Name) \
                and device.value.value == "self":
            bound = [a.value for a in init.assigns if a.target == f"self.{device.attr.value}"]
            others = [a for mm in cls.methods.values() if mm is not init
                      for a in mm.assigns if a.target == f"self.{device.attr.value}"]
            if others or len(bound) != 1 or not isinstance(bound[0], cst.Name) \
                    or bound[0].value not in init.all_params:
                return None
            found.add(bound[0].value)
        else:
            return None
    if len(found) != 1:
        return None
    param = found.pop()
    position = init.params.index(param) - 1 if param in init.params else -1
    return param, position


def _factory_device(v: cst.BaseExpression) -> cst.BaseExpression | None:
    """The ``device=`` argument of a torch factory call (``torch.empty(n, device=d)``), else None."""
    if not isinstance(v, cst.Call):
        return None
    target = dotted(v.func) or ""
    last = target.rsplit(".", 1)[-1]
    if not target.startswith("torch.") or not (last in HOST_FACTORIES or last.endswith("_like")):
        return None
    return next((a.value for a in v.args if a.keyword is not None and a.keyword.value == "device"), None)


def _on_host_instances(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo,
                       param: tuple[str, int], depth: int) -> bool:
    """Does every call site of ``fn`` call it on an object of ``cls`` built with a host device for ``param``?"""
    sites = callers_of(project, file, fn)
    if not sites:
        return False
    for model, site in sites:
        func, caller = site.node.func, site.function
        if not isinstance(func, cst.Attribute) or caller is None:
            return False
        recv = func.value
        if isinstance(recv, cst.Name) and recv.value == "self":
            if caller.class_name != cls.name or depth >= _MAX_DEPTH \
                    or not _on_host_instances(project, model, cls, caller, param, depth + 1):
                return False
            continue
        if not _host_built(project, model, caller, recv, cls, param):
            return False
    return True


def _host_built(project: Project, model: FileModel, caller: FunctionInfo, recv: cst.BaseExpression,
                cls: ClassInfo, param: tuple[str, int]) -> bool:
    """Is the receiver ``recv`` (``self.host_io``, a local) bound only to host constructions of ``cls``?"""
    if isinstance(recv, cst.Attribute) and isinstance(recv.value, cst.Name) and recv.value.value == "self":
        owner = model.classes.get(caller.class_name or "")
        bindings = member_values(project, model, owner, recv.attr.value) if owner is not None else None
        values = [(mod, fn, v) for fn, mod, v in bindings or ()]
    elif isinstance(recv, cst.Name) and recv.value not in caller.all_params:
        values = [(model, caller, v) for v in caller.name_assigns.get(recv.value, [])]
    else:
        return False
    values = [(mod, fn, v) for mod, fn, v in values if not is_none(v)]
    return bool(values) and all(_host_construction(project, mod, fn, v, cls, param) for mod, fn, v in values)


def _host_construction(project: Project, mod: FileModel, fn: FunctionInfo, v: cst.BaseExpression,
                       cls: ClassInfo, param: tuple[str, int]) -> bool:
    sym = constructed_class(project, mod, fn, v)
    if sym is None or sym[0] is not cls or not isinstance(v, cst.Call):
        return False
    name, position = param
    for i, arg in enumerate(v.args):
        if arg.star:
            return False
        if (arg.keyword is not None and arg.keyword.value == name) or (arg.keyword is None and i == position):
            return names_host(arg.value)
    return False


__all__ = ["host_instance_field"]
