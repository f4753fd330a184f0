"""Context managers that fork the stream they switch to (issue 16 §1, FP class wrapper-fork-unseen).

A project ``@contextmanager`` that switches the caller's with-body onto a stream of its own is a stream
scope for the flow (model/wrappers.py), which runs only the body. What the wrapper does before its
``yield`` is not run; when that prelude makes the very stream it then switches to wait on the current
stream (``side.wait_stream(torch.npu.current_stream())``, possibly under ``if current != side:``, the test
that skips only the wait on a stream already current), the with-body is ordered after everything the caller
queued before the ``with``: :func:`forks_on_entry` says so, and the flow starts the scope with that wait.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.apis import Role
from streamlint.model.file import FileModel, FunctionInfo
from streamlint.model.streams import derived, is_current_stream
from streamlint.model.syntax import lexical_index, local_nodes

if TYPE_CHECKING:
    from streamlint.model.project import Project
    from streamlint.model.uses import ApiUse


def forks_on_entry(project: Project, file: FileModel, use: ApiUse) -> bool:
    """Does the project context manager called by ``use`` (a stream scope reached through wrappers, in
    ``file``) make its scope stream wait on the entering current stream before it switches?"""
    if not use.wrappers:
        return False
    site = file.call_site(use.node)
    found = project.call_target(file, site) if site is not None else None
    if found is None:
        return False
    fn, model = found
    memo, key = derived(project, "wrapper_forks_on_entry"), (model.path, fn.qualname)  # (not id(): a re-parsed
    if key not in memo:  # module's new functions may reuse a dead one's id)
        memo[key] = _forks(project, model, fn)
    return memo[key]


def _forks(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    order = lexical_index(fn.node)
    waits: dict[str, int] = {}  # stream text -> where it is made to wait on the current stream
    for s in fn.calls:
        if s.method == "wait_stream" and isinstance(s.node.func, cst.Attribute) and len(s.node.args) == 1 \
                and s.scope is None and is_current_stream(project, file, fn, s.node.args[0].value) \
                and all(_identity_guard(file, g.test, g.negated, s.node) for g in s.guards):
            waits.setdefault(file.code(s.node.func.value), order[id(s.node)][0])
    if not waits:
        return False
    for node in local_nodes(fn.node):
        if not isinstance(node, cst.With) or not any(isinstance(n, cst.Yield) for n in local_nodes(node.body)):
            continue
        for item in node.items:
            scope = file.scope_site(item)
            for u in project.scope_use(file, scope).uses if scope is not None else ():
                arg = u.arg("stream") if u.role is Role.NATIVE_STREAM_CONTEXT else None
                if arg is not None and waits.get(file.code(arg), order[id(node)][0]) < order[id(node)][0]:
                    return True
    return False


def _identity_guard(file: FileModel, test: cst.BaseExpression, negated: bool, wait: cst.Call) -> bool:
    """``if current != side:`` (or the else of ``current == side``) around ``side.wait_stream(current)``: the
    wait is skipped only where the two are one stream, where no fork is needed."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    op = test.comparisons[0].operator
    differ = isinstance(op, (cst.NotEqual, cst.IsNot)) != negated
    if not differ or not isinstance(op, (cst.NotEqual, cst.IsNot, cst.Equal, cst.Is)):
        return False
    sides = {file.code(test.left), file.code(test.comparisons[0].comparator)}
    return sides == {file.code(wait.func.value), file.code(wait.args[0].value)}  # type: ignore[attr-defined]


__all__ = ["forks_on_entry"]
