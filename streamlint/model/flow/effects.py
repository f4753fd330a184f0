"""Stream effects of callees at their call sites.

A helper that queues work on a stream (``with torch.cuda.stream(self.stream): ...``), waits, records an
event or hands back a value produced on a side stream has those effects in every caller: the caller is
analysed with the helper run inline (:meth:`~streamlint.model.flow.calls.Calls.inline`), so the helper's
side-stream work, its waits and what it returns or stores reach the caller's orderings, in any module.

This module decides which calls carry such effects without running the interpreter:

* the callee is a project function :meth:`Project.call_target` resolves: a module function (imported
  from any module), a method of the same object (``self._prefetch(x)``) or a method of an object the
  class holds (``self.exchange.dispatch(x)`` with ``self.exchange = TokenExchange(...)`` in
  ``__init__``);
* or a method of a local object the function builds from a project class (``plan = CopyPlan(...)``, then
  ``plan.launch(x)``: :func:`local_method`), every binding of the name being that construction;
* its body (or a callee's, one level down) has stream work: a stream or capture scope, a wait, an
  event record, a ``record_stream``, a tagged event or a ``npu_wait_tensor``.

A call whose callee cannot be resolved (a module handed in, an object of unknown class) has no known
effect: the caller stays silent about it, as everywhere in the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.streams import derived

if TYPE_CHECKING:
    from streamlint.model.project import Project


def held_object(e: cst.BaseExpression) -> bool:
    """``self.exchange`` in ``self.exchange.dispatch(x)``: an object the class holds (its class resolved by
    :meth:`Project.call_target` from the class's ``__init__``)."""
    return isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self"


def local_method(project: Project, file: FileModel, fn: FunctionInfo,
                 func: cst.BaseExpression) -> tuple[FunctionInfo, FileModel] | None:
    """``plan.launch(x)`` where every assignment of ``plan`` in ``fn`` is ``CopyPlan(...)``, a project class:
    that class's method (inherited ones through the class's own bases are not searched)."""
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    name = func.value.value
    values = fn.name_assigns.get(name)
    if not values or name in fn.all_params:
        return None
    classes: set[str] = set()
    for value in values:
        if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
            return None
        qualname = file.resolve(value.func, fn)
        if qualname is None:
            return None
        classes.add(qualname)
    if len(classes) != 1:
        return None
    sym = project.symbol(classes.pop(), file)
    if sym is None or not isinstance(sym[0], ClassInfo):
        return None
    method = sym[0].methods.get(func.attr.value)
    if method is None or method.params[:1] != ("self",):
        return None
    return method, sym[1]


def effect_call(fn: FunctionInfo, callee: FunctionInfo, func: cst.BaseExpression) -> bool:
    """Is this call one the interpreter runs inline (the receivers :meth:`Calls.inline_target` accepts)?
    A method through ``self`` or through an object ``self`` holds; a function called by name."""
    if callee is fn:
        return False
    if callee.class_name is not None and callee.params[:1] == ("self",):
        return isinstance(func, cst.Attribute) and callee.node.name.value == func.attr.value and (
            isinstance(func.value, cst.Name) and func.value.value == "self" or held_object(func.value))
    return isinstance(func, (cst.Name, cst.Attribute))


def effect_callees(project: Project, file: FileModel, fn: FunctionInfo,
                   has_work: Callable[[Project, FileModel, FunctionInfo], bool]) -> list[tuple[FunctionInfo, FileModel]]:
    """The project helpers ``fn`` calls (and runs inline) that have stream work of their own (cached per
    function: asked for every function of a linted file, and again for its execution path)."""
    memo = derived(project, "effect_callees")
    found = memo.get(id(fn))
    if found is not None and found[0] is fn and found[1] is has_work:
        return found[2]
    out = _effect_callees(project, file, fn, has_work)
    memo[id(fn)] = (fn, has_work, out)
    return out


def _effect_callees(project: Project, file: FileModel, fn: FunctionInfo,
                    has_work: Callable[[Project, FileModel, FunctionInfo], bool]) -> list[tuple[FunctionInfo, FileModel]]:
    from streamlint.model.flow.duckmethods import duck_method

    out: list[tuple[FunctionInfo, FileModel]] = []
    for site in fn.calls:
        found = project.call_target(file, site)
        if found is None:
            found = local_method(project, file, fn, site.node.func) or duck_method(project, file, fn, site.node.func)
            if found is not None and has_work(project, found[1], found[0]) and all(found[0] is not g for g, _ in out):
                out.append(found)
            continue
        if effect_call(fn, found[0], site.node.func) and has_work(project, found[1], found[0]) \
                and all(found[0] is not g for g, _ in out):
            out.append(found)
    return out


def calls_stream_work(project: Project, file: FileModel, fn: FunctionInfo,
                      has_work: Callable[[Project, FileModel, FunctionInfo], bool]) -> bool:
    """Does ``fn`` call a project helper with stream work of its own (so the helper's effects, run inline,
    may race with what ``fn`` does before or after the call)?"""
    return bool(effect_callees(project, file, fn, has_work))


def inherited_modes(project: Project, file: FileModel, fn: FunctionInfo,
                    has_work: Callable[[Project, FileModel, FunctionInfo], bool],
                    modes_of: Callable[[Project, FileModel, FunctionInfo], frozenset[str]]) -> frozenset[str]:
    """A function whose own calls name no API family (its path unknown) runs on the path of the helpers
    whose stream work it runs inline, when they all agree on one known path (``self.exchange.dispatch(x)``
    switching to a ``torch.cuda.stream``: the caller is CUDA code); helpers of unknown path (a ``wait()``
    that only joins the current stream) do not decide. Else unknown (empty)."""
    paths = {modes_of(project, mod, g) for g, mod in effect_callees(project, file, fn, has_work)} - {frozenset()}
    if len(paths) == 1:
        return next(iter(paths))
    return frozenset()


# ---- what a function does to each of its event / stream parameters

_RECORD, _WAIT, _SYNC = "record", "wait", "sync"


def param_effects(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> dict[str, frozenset[str]]:
    """Per parameter of ``fn``: what it does to the event (or stream) it is handed, on some path: ``record``
    (``s.record_event(p)``, ``p.record(s)``), ``wait`` (``s.wait_event(p)``, ``p.wait(s)``), ``sync``
    (``p.synchronize()``), also through a project helper it hands the parameter to (two levels). The summary a
    call site applies: ``self.ready`` handed as ``post_event=`` to a helper that records it is recorded there,
    whatever the helper's name says. Memoised per project."""
    memo = derived(project, "param_effects")
    found = memo.get(id(fn))
    if found is not None and found[0] is fn:
        return found[1]
    if _depth == 0:  # (only a whole summary is kept: one cut short at the depth limit would answer for it later)
        memo[id(fn)] = (fn, {})  # (a recursion sees nothing)
    params = set(fn.all_params) - {"self", "cls"}
    out: dict[str, set[str]] = {}

    def note(expr: cst.BaseExpression | None, effect: str) -> None:
        if isinstance(expr, cst.Name) and expr.value in params:
            out.setdefault(expr.value, set()).add(effect)

    for site in fn.calls:
        node, method = site.node, site.method
        positional = [a.value for a in node.args if a.keyword is None]
        receiver = node.func.value if isinstance(node.func, cst.Attribute) else None
        if method == "record_event" and positional:
            note(positional[0], _RECORD)
        elif method == "record" and receiver is not None:
            note(receiver, _RECORD)
        elif method == "wait_event" and positional:
            note(positional[0], _WAIT)
        elif method == "wait" and receiver is not None:
            note(receiver, _WAIT)
        elif method == "synchronize" and receiver is not None:
            note(receiver, _SYNC)
        if _depth >= 2 or not any(isinstance(a.value, cst.Name) and a.value.value in params for a in node.args):
            continue
        target = project.call_target(file, site)
        if target is None or target[0] is fn:
            continue
        g, gmod = target
        gparams = list(g.params[1:] if g.class_name is not None and g.params[:1] in (("self",), ("cls",))
                       else g.params) + list(g.kwonly)
        inner = param_effects(project, gmod, g, _depth + 1)
        from streamlint.model.uses import bind_arguments

        for q, e in bind_arguments(gparams, node, kwonly=g.kwonly).items():
            if isinstance(e, cst.Name) and e.value in params and q in inner:
                out.setdefault(e.value, set()).update(inner[q])
    result = {p: frozenset(v) for p, v in out.items()}
    if _depth == 0:
        memo[id(fn)] = (fn, result)
    return result


def recorded_through_call(project: Project, file: FileModel, fn: FunctionInfo, site, expr_text: str) -> bool:
    """Does the call ``site`` (in ``fn``) hand ``expr_text`` (``self.ready``) to a parameter the project
    callee records (:func:`param_effects`)?"""
    from streamlint.model.uses import bind_arguments

    target = project.call_target(file, site) or local_method(project, file, fn, site.node.func)
    if target is None:
        return False
    g, gmod = target
    gparams = list(g.params[1:] if g.class_name is not None and g.params[:1] in (("self",), ("cls",))
                   else g.params) + list(g.kwonly)
    effects = param_effects(project, gmod, g)
    return any(e is not None and file.code(e) == expr_text and _RECORD in effects.get(q, ())
               for q, e in bind_arguments(gparams, site.node, kwonly=g.kwonly).items())


def class_records_through_helpers(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """Does a method of ``cls`` hand ``self.<attr>`` to a project helper that records the event it is given
    (``self.stage(xs, stream, post_event=self.ready)`` with ``stream.record_event(post_event)`` inside)?"""
    text = f"self.{attr}"
    for m in cls.methods.values():
        for site in m.calls:
            if any(file.code(a.value) == text for a in site.node.args) \
                    and recorded_through_call(project, file, m, site, text):
                return True
    return False


def syncs_device(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> bool:
    """Does ``fn`` synchronise the whole device on every path (``torch.cuda.synchronize()`` as a statement of
    its body under no condition, directly or through a project helper it calls that way: ``def sync(self):
    self.disk.synchronize(); torch.cuda.synchronize()``)? Memoised per project."""
    from streamlint.model import apis

    memo = derived(project, "syncs_device")
    found = memo.get(id(fn))
    if found is not None and found[0] is fn:
        return found[1]
    if _depth == 0:  # (only a whole answer is kept: one cut short at the depth limit would answer for it later)
        memo[id(fn)] = (fn, False)
    out = False
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else ()
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
                continue
            site = file.call_site(small.value)
            if site is None:
                continue
            if any(u.role is apis.Role.DEVICE_SYNCHRONIZE for u in project.api_uses(file, site)):
                out = True
            elif _depth < 2:
                target = project.call_target(file, site)
                out = target is not None and target[0] is not fn and syncs_device(project, target[1], target[0],
                                                                                   _depth + 1)
            if out:
                break
        if out:
            break
    if _depth == 0:
        memo[id(fn)] = (fn, out)
    return out
