"""Fields of a class that hold host values (a name, a port, a count, a table of binding names): judged from
what the class assigns to them and what it declares of them. Shared by the data flow's host fields
(``flow/hostfields.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.hostannotations import host_annotation
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.hostobjects import constructed_host_object
from streamlint.model.hostresults import _host_value, returns_host_values
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, param_named
from streamlint.model.tensors import return_kind

if TYPE_CHECKING:
    from streamlint.model.project import Project


def host_attr(project: Project, file: FileModel, cls: ClassInfo | None, attr: str) -> bool:
    """Does ``self.<attr>`` evidently hold a host value (a name, a port, a count)? Every assignment to it
    in the class is a literal (number, string, bool, ``None``) or a parameter of its method annotated with
    a host scalar (``world_name: str``), and at least one is not ``None``."""
    if cls is None:
        return False
    memo = derived(project, "host_attrs").setdefault(id(cls), {})
    prop = cls.methods.get(attr)
    if prop is not None and any(dotted(d.decorator) in ("property", "functools.cached_property", "cached_property")
                                for d in prop.node.decorators):
        return return_kind(file, prop) == "other" or returns_host_values(prop)  # `@property def size(self) -> int`
    if attr not in memo:
        values = [(m, a.value) for m in cls.methods.values() for a in m.assigns if a.target == f"self.{attr}"]
        values = [(m, v) for m, v in values if not (isinstance(v, cst.Name) and v.value == "None")]
        memo[attr] = bool(values) and all(_host_value(m, v, file=file) or constructed_host_object(project, file, m, v)
                                          or _declared_host(project, file, m, attr, v)
                                          for m, v in values)  # (an instance of a non-tensor class: hostobjects.py)
    return memo[attr]


def host_data_attr(project: Project, file: FileModel, cls: ClassInfo | None, attr: str) -> bool:
    """Does ``self.<attr>`` hold host data whose elements are host values too (``self.snapshot_np =
    snapshot.numpy()``, a list of ints)? Every assignment to it in the class (``None`` aside, one at least) is a
    host value of its own making (``hostresults._host_value``), none an empty container or a container built
    empty (``{}``, ``dict()``: its elements are stored elsewhere, device tensors maybe)."""
    if cls is None:
        return False
    values = [(m, a.value) for m in cls.methods.values() for a in m.assigns if a.target == f"self.{attr}"]
    values = [(m, v) for m, v in values if not (isinstance(v, cst.Name) and v.value == "None")]
    return bool(values) and all(_host_value(m, v, file=file) and not _container(v) for m, v in values)


def _container(v: cst.BaseExpression) -> bool:
    return isinstance(v, (cst.Dict, cst.List, cst.Set)) and not v.elements or isinstance(v, cst.Call) and (
        dotted(v.func) or "").rsplit(".", 1)[-1] in ("dict", "list", "set", "OrderedDict", "defaultdict")


def _host_declaration(fn: FunctionInfo, target: str) -> bool:
    """Is ``target`` (``self.names`` or a local name) annotated in ``fn`` with a type holding no tensor
    (``self.aliases: Dict[str, Tuple[str, str]] = ...``, ``names: List[str] = []``; a parameter too)?"""
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.AnnAssign) and dotted(node.target) == target:
            return host_annotation(node.annotation.annotation, bare_class=False, scalars_only=True)
    param = param_named(fn.node, target)
    return param is not None and param.annotation is not None \
        and host_annotation(param.annotation.annotation, bare_class=False, scalars_only=True)


def _declared_host(project: Project, file: FileModel, fn: FunctionInfo, attr: str, v: cst.BaseExpression) -> bool:
    """A field value whose declared type holds no tensor: the field's own annotation at the assignment, a local
    name or parameter annotated so (``self.outputs = names`` after ``names: List[str] = []``), or the result of
    a project function whose return annotation is a host type (``-> List[str]``: binding names, not tensors)."""
    if _host_declaration(fn, f"self.{attr}"):
        return True
    if isinstance(v, cst.Name):
        return _host_declaration(fn, v.value)
    if isinstance(v, cst.Call):
        site = file.call_site(v)
        found = project.call_target(file, site) if site is not None else None
        returns = found[0].node.returns if found is not None else None
        # `-> List[str]`, not a bare `-> list`
        return returns is not None and host_annotation(returns.annotation, bare_class=False, scalars_only=True)
    return False
