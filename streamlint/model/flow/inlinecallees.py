"""Which project function may a call run inline? (the resolvers :meth:`~streamlint.model.flow.calls.Calls.inline_target`
asks, in one place: :mod:`~streamlint.model.flow.producerbound` bounds the code of a run with the same answer).

A call is run inline only for a function one of these finds, in the frame the call is evaluated in: the project's
call target (:meth:`Project.call_target`), a method of a parameter's annotated class
(:func:`~.paramfields.declared_method`) or of the one class defining that name (:func:`~.duckmethods.duck_method`), a
method of a local object built from a project class (:func:`~.effects.local_method`). ``inline_target`` then drops
some (depth, recursion, receivers, helpers with no stream effect), never adds one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.duckmethods import duck_method
from streamlint.model.flow.effects import local_method
from streamlint.model.flow.paramfields import declared_method

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project


def inline_callee(project: Project, file: FileModel, fn: FunctionInfo, site) \
        -> tuple[tuple[FunctionInfo, FileModel] | None, tuple[FunctionInfo, FileModel] | None]:
    """(the function the call at ``site``, evaluated in the frame of ``fn``, may run inline; the same when only
    :func:`~.effects.local_method` found it), before ``inline_target``'s depth, recursion, receiver and relevance tests."""
    func = site.node.func
    found = project.call_target(file, site) or declared_method(project, file, fn, func) \
        or (duck_method(project, file, fn, func) if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            else None)
    built = None if found is not None else local_method(project, file, fn, func)
    return found or built, built


__all__ = ["inline_callee"]
