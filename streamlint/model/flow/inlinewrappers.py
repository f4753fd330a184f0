"""Stream-scope wrappers that run their block inline only when they have no stream, and fields that may be None.

A project wrapper such as::

    @contextlib.contextmanager
    def on_stream(stream):
        if stream is None:
            yield
        else:
            with torch.cuda.stream(stream):
                yield

runs the block on the caller's current stream, but only where its stream argument is None: it behaves as
``torch.cuda.stream(stream)`` does (a None stream switches nothing). A wrapper with an enabling flag, a null arm
under any other test or a forwarding call guarded by another condition may run the block inline while it holds
a stream: that one is a scope on its argument only when the argument is the very stream asked about.

:mod:`~streamlint.model.flow.callerscopes` asks it when a caller enters such a scope on a stream that may be the
callee's own ``self.*`` stream: if the two are one object, the caller's stream is None exactly when the callee's
is, and the callee's own scopes on it are then no-ops too, so the block and the callee run on one stream either
way. That reasoning needs the callee's stream to be able to be None at all (:func:`may_hold_none`): a field only
ever bound to ``torch.cuda.Stream()`` / ``current_stream()`` is never None, so a caller whose argument is None is
running the call on another stream (a real race on that path; the finding keeps its confidence)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo, Guard
from streamlint.model.syntax import contains, is_none
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project
    from streamlint.model.wrappers import WrapperSpec

NONE_ONLY = "none-only"  # a wrapper runs its block inline only where its stream argument is None
_FIELD = re.compile(r"self\.\w+")
_NEVER_NONE = frozenset({apis.Role.STREAM_NEW, apis.Role.CURRENT_STREAM, apis.Role.DEFAULT_STREAM})


def _about(expr, param: str, negated: bool) -> bool | None:
    """True when the condition (``expr``, ``negated``) says ``param`` is None, False when it says it is not,
    None when it says something else."""
    if isinstance(expr, cst.Name) and expr.value == param:
        return negated  # (`if stream:` — a stream object is truthy, only None is false here)
    if isinstance(expr, cst.Comparison) and isinstance(expr.left, cst.Name) and expr.left.value == param \
            and len(expr.comparisons) == 1 and is_none(expr.comparisons[0].comparator):
        op = expr.comparisons[0].operator
        if isinstance(op, cst.Is):
            return not negated
        if isinstance(op, cst.IsNot):
            return negated
    return None


def _path(root, node) -> list | None:
    """The nodes from ``root`` down to ``node``."""
    if root is node:
        return [root]
    for child in children(root):
        if contains(child, node):
            rest = _path(child, node)
            return None if rest is None else [root, *rest]
    return None


def _branch_conditions(fn: FunctionInfo, node) -> list[tuple]:
    """The (test, negated) conditions of every ``if`` around ``node`` in ``fn``."""
    path = _path(fn.node, node) or []
    found = []
    for i, step in enumerate(path[:-1]):
        if isinstance(step, cst.If):
            nxt = path[i + 1]
            if nxt is step.body:
                found += Guard(step.test, False).conditions()
            elif nxt is step.orelse:  # (an `else:` block, or the `if` of an `elif`)
                found += Guard(step.test, True).conditions()
    return found


def none_only(fn: FunctionInfo, spec: WrapperSpec, calls: set[int]) -> bool:
    """Does the wrapper ``fn`` (its forwarding calls ``calls``) run its block outside its stream scope only
    where the stream it forwards is None: one parameter forwarded as the stream, never rebound, every guard of a
    forwarding call saying it is not None, every ``yield`` outside the wrapper's scopes under a test saying it
    is None?"""
    params = {v.param_map["stream"].param if "stream" in v.param_map else None
              for v in spec.variants if v.call is not None and id(v.call) in calls}
    if len(params) != 1:
        return False
    (param,) = params
    if param is None or param in fn.name_assigns:
        return False
    for site in fn.calls:
        if id(site.node) in calls and any(
                _about(e, param, n) is not False for g in site.guards for e, n in g.conditions()):
            return False  # (a forwarding call under another test: a flag may skip the stream)
    outside = [y for y in fn.yields if not any(contains(s.with_node, y) for s in fn.scopes)]
    return all(any(_about(e, param, n) is True for e, n in _branch_conditions(fn, y)) for y in outside)


def may_hold_none(project: Project, file: FileModel, cls, key: str) -> bool:
    """May the callee's stream ``key`` be None (or is it unknown)? Not when it is a field of ``cls`` every binding
    of which is a stream constructor, ``current_stream()`` or ``default_stream()`` call, or a choice among those
    (:func:`_never_none`)."""
    from streamlint.model.flow.fieldfacts import _assigns

    if cls is None or not _FIELD.fullmatch(key):
        return True
    built = _assigns(cls, key)
    if not built:
        return True
    return not all(_never_none(file, method, value) for method, value in built)


def _never_none(file: FileModel, method: FunctionInfo, value) -> bool:
    """Is ``value`` a stream constructor / ``current_stream()`` / ``default_stream()`` call, or a choice that can
    only give one: both arms of ``x if c else y``, the last operand of ``a or b`` (an earlier one is taken only
    when truthy, and None is not)?"""
    if isinstance(value, cst.IfExp):
        return _never_none(file, method, value.body) and _never_none(file, method, value.orelse)
    if isinstance(value, cst.BooleanOperation) and isinstance(value.operator, cst.Or):
        return _never_none(file, method, value.right)
    spec = apis.lookup(file.resolve(value.func, method)) if isinstance(value, cst.Call) else None
    return spec is not None and spec.role in _NEVER_NONE


__all__ = ["NONE_ONLY", "may_hold_none", "none_only"]
