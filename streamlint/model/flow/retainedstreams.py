"""Whether a call hands on, as a stream argument, the stream its caller has made current (issue 16,
[retained-current-stream]).

Serving workers keep one stream current for a long stretch of code: a thread that runs ``set_stream(s)`` at its top
and then serves a queue (everything its helpers queue lands on ``s``), or a method that enters ``s`` through a scope
(``with self.decode_context():``, a helper of the object returning ``torch.cuda.stream(self.decode_stream)``). When
such code passes ``s`` itself to a launcher (``self.launcher.launch(codes, stream=self.decode_stream)``), the
launcher's ``with torch.cuda.stream(stream):`` switches to the stream already current: the tensors the caller made
there need no fork. The collecting run of the caller does not see a ``set_stream`` made by the thread's top-level
function, nor always a scope entered through a helper, and then takes the stream for another one.

:func:`names_current` reads it from the text: the argument (a ``self.*`` chain, a local bound once to one, or
``getattr(self.ctx, "stream", default)``, which reads that field when it is set) is the stream of the innermost
stream scope around the call (one that may run its block inline only where its stream is None: the argument is then
None too, and the callee enters nothing), else, outside every scope, of the last ``set_stream`` of the caller that is
run on every path to the call (or guarded only by ``if <stream> is not None:``), else, when the caller sets none, the
stream every project call of the caller is made under in its own caller, through ``self`` (so the field names one
object), up to :data:`MAX_DEPTH` callers. A caller that may be run by code the project does not show (handed by
reference as a thread target, a dunder) answers only from its own body. The answer only lowers a race to ``low``
(:mod:`~streamlint.model.flow.callerstreams`): the callers not seen may pass another stream."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import dotted
from streamlint.model.syntax import ancestry, contains, dominates

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

MAX_DEPTH = 2  # callers of a caller that sets no stream itself, followed up


def stream_text(caller: FunctionInfo, expr) -> str | None:
    """The ``self.*`` chain a stream argument names: itself, a local bound once to one by a plain assignment, or the
    field ``getattr(chain, "name", default)`` reads when it is set; else None."""
    if isinstance(expr, cst.Name) and expr.value not in caller.all_params:
        values = caller.name_assigns.get(expr.value) or []
        return stream_text(caller, values[0]) if len(values) == 1 and not isinstance(values[0], cst.Name) else None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "getattr" \
            and len(expr.args) in (2, 3) and isinstance(expr.args[1].value, cst.SimpleString):
        base = dotted(expr.args[0].value)
        name = expr.args[1].value.evaluated_value
        return f"{base}.{name}" if base is not None and base.startswith("self.") and name.isidentifier() else None
    text = dotted(expr) if isinstance(expr, cst.Attribute) else None
    return text if text is not None and text.startswith("self.") else None


def _set_streams(project: Project, model: FileModel, fn: FunctionInfo) -> list[tuple[object, str | None]]:
    """(call node, the ``self.*`` stream it names or None) of every ``set_stream`` call of ``fn``."""
    found = []
    for site in fn.calls:
        for use in project.api_uses(model, site):
            if use.role is apis.Role.SET_STREAM:
                arg = use.arg("stream")
                found.append((site.node, stream_text(fn, arg) if arg is not None else None))
    return found


def _set_before(fn: FunctionInfo, node, text: str, later) -> bool:
    """Is the ``set_stream(text)`` call ``node`` run on every path to ``later`` (or guarded only by a test that
    ``text`` is not None: where it is None, the stream handed on is None as well)?"""
    if later is None or dominates(fn.node.body, node, later):
        return True
    top = list(fn.node.body.body)
    at = next((i for i, stmt in enumerate(top) if contains(stmt, later)), None)
    return at is not None and any(
        isinstance(stmt, cst.If) and _idle(stmt.orelse) and _none_test(stmt.test, text) is False
        and len(stmt.body.body) == 1 and contains(stmt.body, node) for stmt in top[:at])


def _idle(orelse) -> bool:
    """Is an ``if``'s ``else`` absent or only ``pass``?"""
    return orelse is None or isinstance(orelse, cst.Else) and all(
        isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(small, cst.Pass) for small in stmt.body)
        for stmt in orelse.body.body)


def _thread_stream(project: Project, model: FileModel, fn: FunctionInfo, at, depth: int) -> str | None:
    """The ``self.*`` stream ``fn`` runs on at the call ``at`` (None: at its end) when it is outside every stream
    scope there: set by ``fn`` itself, else by every caller of ``fn`` through ``self``; None when unknown."""
    from streamlint.model.flow.callers import self_call_sites
    from streamlint.model.flow.callerscopes import _unseen

    sets = _set_streams(project, model, fn)
    if sets:
        last = [text for node, text in sets if text is not None and _set_before(fn, node, text, at)]
        return last[-1] if last and len(last) == len(sets) else None
    if depth >= MAX_DEPTH or fn.class_name is None or _unseen(project, model, fn):
        return None
    sites = self_call_sites(project, model, fn)  # (through another object: its fields are not this one's)
    if sites is None:
        return None
    found = None
    for cmodel, site in sites:
        text = _scope(project, cmodel, site)
        if text == "":
            text = _thread_stream(project, cmodel, site.function, site.node, depth + 1)
        if text is None or found not in (None, text):
            return None
        found = text
    return found


def _scope(project: Project, model: FileModel, site) -> str | None:
    """The ``self.*`` stream of the innermost stream scope around ``site`` when its block runs on that stream
    wherever it is not None (a wrapper that may run it inline only where it is None); ``""`` outside every stream
    scope; None for any other scope. Beside :func:`~streamlint.model.flow.ambient.plain_scope`'s scopes, one opened
    by a method of the object itself, taking nothing but ``self`` (``with self.decode_context():``), on a field of
    the object: the null context it may return instead only under a test that the field is None."""
    from streamlint.model.flow.ambient import may_run_inline
    from streamlint.model.flow.inlinewrappers import NONE_ONLY
    from streamlint.model.streams import on_self

    for scope in project.enclosing_scopes(model, site.scope):
        use = next((u for u in scope.uses if u.role in apis.STREAM_SCOPE_ROLES), None)
        if use is None:
            if scope.roles() & ({apis.Role.GRAPH_CAPTURE} | apis.NO_BREAK_SCOPE_ROLES):
                return None
            continue
        if use.role is not apis.Role.NATIVE_STREAM_CONTEXT or use.node is not scope.site.item.item:
            return None
        expr = use.arg("stream")
        if expr is not None:
            text = dotted(expr)
            return text if text is not None and text.startswith("self.") \
                and may_run_inline(project, use) in (False, NONE_ONLY) else None
        inner = use.receiver_attrs.get("stream")
        text = dotted(inner) if inner is not None and on_self(use) else None
        if text is None or not text.startswith("self.") or len(use.wrappers) != 1:
            return None
        found = project.function(use.wrappers[0], use.file)
        return text if found is not None and _null_only_if_none(found[1], found[0], text) else None
    return ""


def _null_only_if_none(model: FileModel, method: FunctionInfo, text: str) -> bool:
    """Does the scope method ``method`` return a null context only where its field ``text`` is None: under ``if
    text is None:``, or as the arm of ``... if text is not None else nullcontext()`` (either order)?"""
    from streamlint.model.ctxfactories import _null_call

    if method.params != ("self",) or method.kwonly or not method.returns or method.yields:
        return False
    for ret in method.returns:
        value = ret.value
        if isinstance(value, cst.IfExp) and isinstance(value.body, cst.Call) and isinstance(value.orelse, cst.Call):
            null = _null_call(model, method, value.body), _null_call(model, method, value.orelse)
            if null == (False, True) and _none_test(value.test, text) is False \
                    or null == (True, False) and _none_test(value.test, text) is True:
                continue
            return False
        if not isinstance(value, cst.Call):
            return False
        if _null_call(model, method, value) and not any(
                isinstance(n, cst.If) and _none_test(n.test, text) is True and contains(n.body, ret)
                for n in ancestry(method.node, ret) or ()):
            return False
    return True


def _none_test(test, text: str) -> bool | None:
    """``text is None`` -> True; ``text is not None`` or ``text`` itself -> False; else None."""
    if dotted(test) == text:
        return False
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and dotted(test.left) == text \
            and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
        op = test.comparisons[0].operator
        return True if isinstance(op, cst.Is) else False if isinstance(op, cst.IsNot) else None
    return None


def names_current(project: Project, model: FileModel, caller: FunctionInfo, site, expr) -> str | None:
    """How the stream argument ``expr`` of the call ``site`` in ``caller`` is the caller's current stream there:
    ``"scope"`` (the innermost stream scope around the call enters it), ``"thread"`` (outside every scope, a
    ``set_stream`` of the caller or of its callers made it current); None when that is not seen."""
    text = stream_text(caller, expr)
    if text is None:
        return None
    scope = _scope(project, model, site)
    if scope:
        return "scope" if scope == text else None
    return "thread" if scope == "" and _thread_stream(project, model, caller, site.node, 0) == text else None


__all__ = ["names_current", "stream_text"]
