"""A call on an untyped parameter whose every binding the project shows is an object of another class.

The callers of a method are searched by name: ``runtime.launch(batch)`` on a receiver the project cannot type
counts as a call of every project method ``launch`` its arguments can bind to (:func:`~streamlint.model.flow.
callers.may_bind`). A module-level helper taking ``runtime: Any`` is then a caller of each model's runtime, even
when every call of the helper hands it ``self`` of one runtime class (a warm-up probe of one model), and a fact
every real caller shares (the stream scope around the call) is lost to it. The stream scopes of the callers
(:mod:`~streamlint.model.flow.callerscopes`) leave such calls out.

:func:`foreign_receiver` says the call cannot run a method of class ``C`` when the receiver is a parameter of the
calling function, never rebound there, and every project call of that function (a module-level function, not
nested, not handed by reference, ``partial(probe, self)`` in another module included: :func:`_handed_by_name`) binds it to ``self`` of a
class that is neither ``C`` nor a base nor a subclass of it (by the bases the project declares), or to a parameter
of its own caller that is so in turn (three callers up). Any other binding (a default, a starred argument, another
expression, a related class, a class forwarding its attributes with ``__getattr__``, a caller that may be unseen)
keeps the call."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.fieldfacts import _referenced
from streamlint.model.flow.guardedwork import _bases, _related
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.project import Project

MAX_DEPTH = 3
MAX_BINDINGS = 12


def foreign_receiver(project: Project, model: FileModel, site, fn: FunctionInfo) -> bool:
    """Is the receiver of ``site`` (a call of a method named as ``fn``) an object that cannot be of ``fn``'s class
    (module docstring)?"""
    receiver = site.receiver
    if fn.class_name is None or not isinstance(receiver, cst.Name) or site.function is None:
        return False
    return _bound_elsewhere(project, model, site.function, receiver.value, fn.class_name, 0)


def _bound_elsewhere(project: Project, model: FileModel, caller: FunctionInfo, param: str, cls: str,
                     depth: int) -> bool:
    if depth > MAX_DEPTH or caller.class_name is not None or caller.parent is not None \
            or param not in caller.all_params or param in caller.name_assigns:
        return False
    memo = project.derived("foreign_receivers")
    key = (id(caller), param, cls)
    if key in memo:
        return memo[key]
    memo[key] = False  # (a cycle through the callers: not shown)
    found = False
    name = caller.node.name.value
    sites = None if _referenced(project, name, model.path) or _handed_by_name(project, name) \
        else callers_of(project, model, caller)
    if sites and len(sites) <= MAX_BINDINGS:
        found = True
        for m2, s2 in sites:
            arg = bind_arguments(caller.params, s2.node, caller.kwonly).get(param)
            outer = s2.function
            while outer is not None and outer.parent is not None and "self" not in outer.all_params:
                outer = outer.parent  # (`self` of the method a nested def or a lambda closes over)
            if isinstance(arg, cst.Name) and arg.value == "self" and outer is not None and outer.class_name:
                if _related(project, outer.class_name, cls) or _forwards(project, outer.class_name):
                    found = False
            elif not (isinstance(arg, cst.Name) and s2.function is not None
                      and _bound_elsewhere(project, m2, s2.function, arg.value, cls, depth + 1)):
                found = False
            if not found:
                break
    memo[key] = found
    return found


def _handed_by_name(project: Project, name: str) -> bool:
    """Is the module-level function ``name`` mentioned in some file other than called, defined or imported on one
    line (``partial(probe, self)``, ``pool.submit(probe, rt)``, a table of probes)? Its callers are then unseen.
    (:func:`~streamlint.model.flow.fieldfacts._referenced` asks this of a method, and counts only attribute
    mentions outside the defining file: a function imported by name is handed on as a bare name.)"""
    from streamlint.model.flow.hookfields import _mentions

    paths = project.paths_containing((name.encode(),))
    if not paths or len(paths) > MAX_CALLER_FILES:
        return True
    for path in paths:
        found = _mentions(project, path, name)
        if found is None:
            return True
        for before, after in found:
            if re.match(rb"\s*\(", after) or re.match(rb"\s*(?:from\s+[\w.]+\s+)?import\s[^(]*$", before) \
                    and re.match(rb"\s*(?:,|as\b|$)", after):
                continue  # (a call or its def; a one-line import)
            return True
    return False


def _forwards(project: Project, name: str) -> bool:
    """May an object of the class named ``name`` answer for another one: does it, or a base the project declares,
    define ``__getattr__`` / ``__getattribute__`` (a wrapper forwarding its attributes to the runtime it holds), or
    is the class not found?"""
    found = False
    for cname in {name} | _bases(project, name):
        for model in filter(None, map(project.file, project.paths_containing((f"class {cname}".encode(),)))):
            klass = model.classes.get(cname)
            if klass is None:
                continue
            found = found or cname == name
            if "__getattr__" in klass.methods or "__getattribute__" in klass.methods:
                return True
    return not found


__all__ = ["foreign_receiver"]
