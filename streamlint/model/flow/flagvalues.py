"""What the seen callers hand a caller-supplied flag: the literal values that reach it (SL301's flag joins).

:mod:`~streamlint.model.flow.flagjoins` finds a lifetime hazard that exists only on the path where a caller's flag
(``sync``, ``blocking``) turns a join off, and reports it at medium: the hazard rests on what an unseen caller
passes. When the project's callers are all seen and each hands the flag a literal (``sync=True`` at the call, a
local bound only to literals, ``retrieve(..., sync=sync)`` after ``sync = True``), that is no longer unknown: a
path no caller can take is no hazard. The flag is followed through every call that forwards it (a parameter of
the caller handed on by name, ``**kwargs`` handed on whole: a loader's ``batched_load(starts, ends, **kwargs)``
under an engine's ``retrieve_layer(tokens, **kwargs)``), up to four callers deep.

A caller that does not pass a flag the function reads as ``kwargs["sync"]`` never reaches the hazard (the read
raises first); one that does not pass a parameter or ``kwargs.get("sync", d)`` hands it the default. Any value
that is not a literal (``sync=is_first``, a field, a call), a caller that cannot be seen, or a ``**`` of anything
but the caller's own keyword parameters leaves the answer unknown (None).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.callers import callers_of
from streamlint.model.syntax import local_nodes
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

_MAX_DEPTH = 4
_UNKNOWN = object()
_LITERALS = {"True": True, "False": False, "None": None}


def caller_flag_values(project: Project, file: FileModel, fn: FunctionInfo, name: str) -> frozenset | None:
    """The literal values the project's callers hand ``fn``'s caller-supplied flag ``name`` (a parameter, or a local
    bound once from ``kwargs["k"]`` / ``kwargs.get("k", d)`` of its ``**kwargs``), each as ``(value, test)``:
    ``test`` when a call on the way is in a test module (``tests/``, ``test_*.py``: a unit test driving the API, not
    the package's own protocol); None when any is unknown or no caller hands it one."""
    memo = project.derived("caller_flag_values")
    key = (id(fn.node), name)
    if key not in memo:
        form = _flag_form(fn, name)
        found = _values(project, file, fn, form, 0) if form is not None else _UNKNOWN
        memo[key] = None if found is _UNKNOWN or not found else frozenset(found)
    return memo[key]


def _flag_form(fn: FunctionInfo, name: str) -> tuple[str, str | None, object, bool] | None:
    """(parameter, key, default, required): ``("sync", None, d, False)`` for a parameter (``d``: its literal default,
    unknown when it has none), ``("kwargs", "sync", d, r)`` for a local read from the ``**kwargs`` parameter (``d``:
    ``.get``'s literal default, else None; ``r``: read by subscript, so a missing key raises)."""
    if name in fn.all_params:
        return name, None, _param_default(fn, name), False
    values = fn.name_assigns.get(name, ())
    if len(values) != 1 or _rebound(fn, name):
        return None
    v = values[0]
    star = fn.node.params.star_kwarg
    star_name = star.name.value if isinstance(star, cst.Param) else None
    if isinstance(v, cst.Subscript) and isinstance(v.value, cst.Name) and v.value.value == star_name \
            and len(v.slice) == 1 and isinstance(v.slice[0].slice, cst.Index):
        key = _string(v.slice[0].slice.value)
        return (star_name, key, None, True) if key is not None else None
    if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "get" \
            and isinstance(v.func.value, cst.Name) and v.func.value.value == star_name and v.args:
        key = _string(v.args[0].value)
        default = _literal(v.args[1].value) if len(v.args) > 1 else None
        return (star_name, key, default, False) if key is not None else None
    return None


def _values(project: Project, file: FileModel, fn: FunctionInfo, form, depth: int):
    """The set of literal values the callers of ``fn`` hand the flag of ``form``, or ``_UNKNOWN``."""
    if depth > _MAX_DEPTH:
        return _UNKNOWN
    sites = callers_of(project, file, fn)
    if not sites:
        return _UNKNOWN
    param, key, default, required = form
    params = fn.params[1:] if fn.class_name and fn.params[:1] in (("self",), ("cls",)) else fn.params
    out: set = set()
    for model, site in sites:
        call = site.node
        caller = site.function
        if key is None:
            expr = bind_arguments(params + fn.kwonly, call, kwonly=fn.kwonly).get(param)
            forward_key = param
        else:
            expr = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == key), None)
            forward_key = key
        if expr is not None:
            found = _evaluate(project, model, caller, expr, depth)
        else:
            stars = [a for a in call.args if a.star == "**"]
            if any(a.star == "*" for a in call.args) and key is None:
                return _UNKNOWN  # (`f(*args)`: may bind the parameter)
            if stars:
                own = _star_kwarg(caller)
                if caller is None or len(stars) != 1 or not isinstance(stars[0].value, cst.Name) \
                        or stars[0].value.value != own:
                    return _UNKNOWN
                found = _values(project, model, caller, (own, forward_key, default, required), depth + 1)
            elif required:
                continue  # `kwargs["sync"]` with no such key: the call raises before any hazard
            else:
                found = {default} if default is not _UNKNOWN else _UNKNOWN
        if found is _UNKNOWN:
            return _UNKNOWN
        test = test_module(project.relative(model.path))
        out |= {(v[0], v[1] or test) if isinstance(v, tuple) else (v, test) for v in found}
    return out


def test_module(path: str) -> bool:
    """A module of a test suite (``path`` relative to the project root): under a ``tests`` / ``test`` directory, or
    named ``test_*.py`` / ``*_test.py`` / ``conftest.py``."""
    parts = path.replace("\\", "/").split("/")
    base = parts[-1]
    return base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py" \
        or any(p in ("tests", "test") for p in parts[:-1])


def _evaluate(project, model, caller, expr: cst.BaseExpression, depth: int):
    """The literal values ``expr`` may have in the caller: a literal, a local bound only to literals, a parameter
    of the caller (what its own callers hand it)."""
    lit = _literal(expr)
    if lit is not _UNKNOWN:
        return {lit}
    if not isinstance(expr, cst.Name) or caller is None:
        return _UNKNOWN
    name = expr.value
    if name in caller.all_params:
        return _values(project, model, caller, (name, None, _param_default(caller, name), False), depth + 1)
    values = caller.name_assigns.get(name, ())
    if not values or _rebound(caller, name):
        return _UNKNOWN
    found = {_literal(v) for v in values}
    return _UNKNOWN if _UNKNOWN in found else found


def _rebound(fn: FunctionInfo, name: str) -> bool:
    """Is ``name`` bound in ``fn`` other than by a plain assignment (a loop target, an augmented or walrus
    assignment, a ``with ... as``, a tuple target, ``global`` / ``nonlocal``)?"""
    for n in local_nodes(fn.node.body):
        if isinstance(n, (cst.For, cst.CompFor)):
            if any(isinstance(x, cst.Name) and x.value == name for x in _names(n.target)):
                return True
        elif isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name) and n.target.value == name:
            return True
        elif isinstance(n, cst.NamedExpr) and isinstance(n.target, cst.Name) and n.target.value == name:
            return True
        elif isinstance(n, cst.AsName) and isinstance(n.name, cst.Name) and n.name.value == name:
            return True
        elif isinstance(n, (cst.Global, cst.Nonlocal)) and any(x.name.value == name for x in n.names):
            return True
        elif isinstance(n, cst.Assign) and any(isinstance(t.target, (cst.Tuple, cst.List))
                                               and any(x.value == name for x in _names(t.target)) for t in n.targets):
            return True
    return False


def _names(target: cst.BaseExpression) -> list:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _names(el.value)]
    return []


def _literal(e: cst.BaseExpression):
    if isinstance(e, cst.Name) and e.value in _LITERALS:
        return _LITERALS[e.value]
    if isinstance(e, cst.Integer):
        return int(e.value, 0)
    return _UNKNOWN


def _string(e: cst.BaseExpression) -> str | None:
    if isinstance(e, cst.SimpleString):
        value = e.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _param_default(fn: FunctionInfo, name: str):
    p = fn.node.params
    for param in (*p.posonly_params, *p.params, *p.kwonly_params):
        if param.name.value == name:
            return _literal(param.default) if param.default is not None else _UNKNOWN
    return _UNKNOWN


def _star_kwarg(fn: FunctionInfo | None) -> str | None:
    if fn is None:
        return None
    star = fn.node.params.star_kwarg
    return star.name.value if isinstance(star, cst.Param) else None


__all__ = ["caller_flag_values"]
