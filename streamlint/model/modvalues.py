"""Modules held as values (issue 16 §3, class module-as-value).

A lazy loader hands the framework's module back as a value: ``def load_torch_npu(): import torch; import
torch_npu; ...; return torch`` in a platform module, ``self._torch = load_torch_npu()`` in a controller, then
``with self._torch.npu.stream(s):`` / ``self._torch.npu.Event()``. The file using it imports neither torch nor
torch_npu, so the call's name resolves to nothing the API table knows. :func:`module_target` gives the name the
call reaches through the module value: ``torch.npu.stream``.

An expression holds module ``M`` (:func:`module_value`) when it is

- a name the file or the function imports (``torch``, ``torch.npu`` through ``from torch import npu``), if ``M``
  is a namespace of the API table (``torch``, ``torch.cuda``, ``torch_npu``, ``torchair``: a module whose
  stream API the linter knows, never an arbitrary symbol);
- a call of a project function every return of which holds ``M`` (and whose body cannot fall off its end
  returning None): the loader, in any module;
- a local every binding of which holds ``M`` (not a parameter; ``None`` bindings aside: the expression is
  always a receiver, and a path on which the local is ``None`` never gets past the attribute); bindings to
  the device modules ``torch.cuda`` / ``torch.npu`` on different branches (device-generic code) hold the
  first one;
- a member of ``self`` every binding of which in the class, its project bases, properties and keyword
  constructions (:func:`~streamlint.model.devfields.member_values`) holds ``M``.

Sound only when every source agrees: one return of another value (``return None`` on a platform without the
device, a stub object) and the expression holds no module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis, devfields, devobjects
from streamlint.model.file import FileModel
from streamlint.model.filefacts import CallSite, FunctionInfo
from streamlint.model.syntax import is_none

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project

_MAX_DEPTH = 5


def module_target(project: Project, file: FileModel, site: CallSite) -> str | None:
    """``torch.npu.stream`` for ``self._torch.npu.stream(s)`` where ``self._torch`` holds ``torch``; None when no
    receiver in the call's attribute chain holds a module."""
    chain: list[str] = []
    e = site.node.func
    while isinstance(e, cst.Attribute):
        chain.append(e.attr.value)
        e = e.value
        if isinstance(e, cst.Name) and file.resolve(e, site.function) is not None and not _local(site.function, e):
            return None  # an imported name: the call's own target already says what it is
        module = module_value(project, file, site.function, e)
        if module is not None:
            return ".".join([module, *reversed(chain)])
    return None


def module_value(project: Project, file: FileModel, fn: FunctionInfo | None, expr: cst.BaseExpression,
                 depth: int = 0) -> str | None:
    """The module ``expr`` holds (see the module docstring), else None."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, (cst.Name, cst.Attribute)) and not _self_member(expr) and not _local(fn, _head(expr)):
        qualname = file.resolve(expr, fn)
        return qualname if qualname is not None and _namespace(qualname) else None
    if isinstance(expr, cst.Name):
        owner = devobjects.binder(fn, expr.value)
        if owner is None or expr.value in owner.all_params:
            return None
        # (a ``None`` binding is dropped: the expression is a receiver, ``device_mod.stream(s)``, and no path
        # on which the local is still ``None`` gets past the attribute; ``device_mod = None`` then
        # ``if is_cuda: device_mod = torch.cuda``)
        found = [module_value(project, file, owner, v, depth + 1)
                 for v in owner.name_assigns.get(expr.value, ()) if not is_none(v)]
        return _agreed(found) or _one_device(found)
    method = _method(fn)  # (`self` of a closure is its enclosing method's)
    if _self_member(expr) and method is not None and method.class_name in file.classes:
        memo = project.derived("module_members")
        key = (file.path, method.class_name, expr.attr.value)
        if key not in memo:
            memo[key] = None  # (a member bound from itself)
            bound = devfields.member_values(project, file, file.classes[method.class_name], expr.attr.value)
            memo[key] = _agreed([module_value(project, m, f, v, depth + 1) for f, m, v in bound or ()])
        return memo[key]
    if isinstance(expr, cst.Call) and not expr.args:
        qualname = file.resolve(expr.func, fn)
        target = project.function(qualname, file) if qualname else None
        if target is None or target[0].class_name is not None:
            return None
        getter, mod = target
        memo = project.derived("module_getters")
        key = (mod.path, getter.qualname)
        if key not in memo:
            memo[key] = None
            values = [r.value for r in getter.returns]
            if values and all(v is not None for v in values) and _ends_closed(getter):
                memo[key] = _agreed([module_value(project, mod, getter, v, depth + 1) for v in values])
        return memo[key]
    return None


def _agreed(found: list[str | None]) -> str | None:
    return found[0] if found and found[0] is not None and all(f == found[0] for f in found) else None


_DEVICE_MODULES = frozenset({"torch.cuda", "torch.npu"})


def _one_device(found: list[str | None]) -> str | None:
    """``device_mod = torch.cuda`` / ``elif npu: device_mod = torch.npu``: device-generic code, one device per
    run, the same stream API under either name. The first binding's module stands for both (each run takes
    one arm; what the code does with the module is the same on either). This, and setting ``None`` bindings
    aside, hold because every caller of ``module_value`` today reads the local as a receiver (``places.
    module_receiver``, ``ctxfactories._through_module``, ``receiver_qualname``); a new caller asking about any
    other use of the local must not get these answers."""
    if len(found) > 1 and all(f is not None and apis.canonical(f) in _DEVICE_MODULES for f in found):
        return found[0]
    return None


def _namespace(qualname: str) -> bool:
    """Is ``qualname`` a module of the API table (some known API lives under it)?"""
    if not _NAMESPACES:
        _NAMESPACES.update(part for spec in apis.SPECS.values() for part in _prefixes(spec.qualname))
    return apis.canonical(qualname) in _NAMESPACES


_NAMESPACES: set[str] = set()


def _prefixes(qualname: str) -> list[str]:
    parts = qualname.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _ends_closed(fn: FunctionInfo) -> bool:
    """Does every path through ``fn``'s body end in a ``return`` or ``raise`` (its last statement is one)?"""
    body = fn.node.body
    last = body.body[-1] if isinstance(body, cst.IndentedBlock) and body.body else None
    return isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], (cst.Return, cst.Raise))


def _method(fn: FunctionInfo | None) -> FunctionInfo | None:
    """The method whose ``self`` ``fn`` sees: itself, or the method a closure is nested in (no rebinding between)."""
    while fn is not None and not (fn.class_name and fn.params[:1] == ("self",)):
        if "self" in fn.all_params or "self" in fn.locals:
            return None
        fn = fn.parent
    return fn


def _self_member(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _head(expr: cst.BaseExpression) -> str:
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else ""


def _local(fn: FunctionInfo | None, name: cst.BaseExpression | str) -> bool:
    """Is ``name`` bound by an assignment in ``fn`` or an enclosing function (not by an import there)?"""
    text = name if isinstance(name, str) else name.value if isinstance(name, cst.Name) else ""
    while fn is not None:
        if text in fn.local_aliases:
            return False
        if text in fn.locals or text in fn.all_params:
            return True
        fn = fn.parent
    return False


__all__ = ["module_target", "module_value"]
