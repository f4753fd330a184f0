"""Results the host has synchronised, and parameters every seen caller binds to one (issue 16, "caller protocols").

A serving pipeline runs the engine on an inference stream of its own and waits for it before handing the output on::

    def run_engine(engine, batch, stream, wait_done=True):
        with torch.cuda.stream(stream):
            out = engine(batch)
        if wait_done:
            stream.synchronize()
        return out

A stage that reads the output on yet another stream (``with torch.cuda.stream(decode_stream): ... raw[...]``) was
reported for an argument "used with no wait on the caller's stream": the callee alone cannot know what produced it.
When every seen call site binds the parameter to such a result, the host itself waited for its producer before the
call: nothing is pending on any stream and no wait is missing.

:func:`synced_result` reads it from a function's code: every ``return`` (``None`` aside, at least one other) hands
back

- a name bound only inside a stream scope on ``S`` (``with torch.cuda.stream(S):``, a project wrapper of it), the
  return directly preceded, in the function's own body, by ``S.synchronize()`` (or a device-wide synchronize,
  then the name may be bound anywhere), also under ``if flag:`` where ``flag`` is a parameter the call binds to
  ``True`` or leaves to a ``True`` default;
- the result (or an element: ``helper(...)[0]``) of a project helper that does, for this call's arguments;
- anything on a path taken only for a host device (under ``if device.type != "cuda":``): no stream at all.

:func:`synced_by_callers` asks it of every call site of a method or function, including the calls a base class makes
on ``self`` (``raw = self.forward(batch); return self.decode(raw, meta)`` in a base ``detect``): there the callee's
class (and each project subclass that inherits the method) resolves ``self.forward``. A call site binding the
parameter to anything else, a receiver class whose ``forward`` does not synchronise, or no call site seen at all
keeps the finding (precision first)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.accelerators import direct_subclasses
from streamlint.model.devobjects import class_chain, object_classes
from streamlint.model.file import FileModel, dotted, string_value
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.slotevents import scope_stream
from streamlint.model.streams import derived
from streamlint.model.syntax import contains, local_nodes
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.project import Project

_MAX_DEPTH = 4


def synced_by_callers(project: Project, file: FileModel, fn: FunctionInfo, param: str, _depth: int = 0) -> bool:
    """Does every seen call site of ``fn`` (at least one) bind ``param`` to a result the host synchronised
    (:func:`synced_result`), its ``self.<method>(...)`` calls resolved through each receiver class that runs
    ``fn``? A caller handing on a parameter of its own is asked the same of its callers (two levels)."""
    memo = derived(project, "synced_by_callers")
    key = (id(fn), param)
    if key not in memo:
        if _depth > 2:
            return False
        memo[key] = False
        method = fn.class_name is not None and fn.params[:1] == ("self",)
        params = (fn.params[1:] if method else fn.params) + fn.kwonly
        sites = _sites(project, file, fn)
        memo[key] = bool(sites) and all(
            (expr := bind_arguments(params, site.node, kwonly=fn.kwonly).get(param)) is not None
            and site.function is not None and all(_synced_expr(project, model, site.function, expr, cls, _depth)
                                                  for cls in receivers)
            for model, site, receivers in sites)
    return memo[key]


def synced_share(project: Project, file: FileModel, fn: FunctionInfo, param: str, _depth: int = 0) -> tuple[int, int]:
    """(call sites binding ``param`` to a result the host synchronised, seen call sites) of ``fn``, for a finding
    :func:`synced_by_callers` kept because not every caller is shown to: when most do, synchronised inputs are the
    callee's contract and the finding rests on the callers not shown to keep it (``(0, 0)``: none listed). A caller
    handing on a parameter of its own counts as its own callers (two levels)."""
    memo = derived(project, "synced_share")
    key = (id(fn), param)
    if key not in memo:
        memo[key] = (0, 0)  # (a recursive chain: none)
        method = fn.class_name is not None and fn.params[:1] == ("self",)
        params = (fn.params[1:] if method else fn.params) + fn.kwonly
        synced = seen = 0
        for model, site, receivers in _sites(project, file, fn) or []:
            expr = bind_arguments(params, site.node, kwonly=fn.kwonly).get(param)
            caller = site.function
            if isinstance(expr, cst.Name) and caller is not None and expr.value in caller.all_params \
                    and expr.value not in ("self", "cls") and _depth < 2 \
                    and not any(_binding_of(n, expr.value) for n in local_nodes(caller.node.body)):
                more, of = synced_share(project, model, caller, expr.value, _depth + 1)
                if of:
                    synced, seen = synced + more, seen + of
                    continue
            seen += 1
            synced += expr is not None and caller is not None and all(
                _synced_expr(project, model, caller, expr, cls, 0) for cls in receivers)
        memo[key] = (synced, seen)
    return memo[key]


def _sites(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FileModel, object, list]] | None:
    """(module, call site, receiver classes) of every call that may run ``fn``: its own call sites and the
    ``self.<name>(...)`` calls of the methods of ``fn``'s base classes that ``fn`` overrides (None when its own call
    sites cannot all be listed: :func:`~.callers.callers_of`'s limits). The receivers of a call
    on ``self`` are the classes (``fn``'s class and its project subclasses) that derive from the caller's class and
    whose ``<name>`` is ``fn``; ``[None]`` (resolved by the call's own target) for any other receiver. A call no such
    class can receive (a mixin's ``self.<name>(...)`` that ``fn``'s class does not mix in, a field declared to hold
    an unrelated project class) is no call of ``fn``. None when the subclasses cannot be listed."""
    own = file.classes.get(fn.class_name or "") if fn.class_name and fn.parent is None else None
    name = fn.node.name.value
    if name.startswith("__") or fn.parent is not None or len(project.paths_containing(
            (f"{'.' if fn.class_name else ''}{name}(".encode(),))) > MAX_CALLER_FILES:
        return None  # called in ways not seen (a dunder, a closure) or from too many files to look
    sites = [(model, site) for model, site in callers_of(project, file, fn) or ()]
    family: list | None = []
    if own is not None:
        for base, bmodel in _chain(project, file, own)[1:]:
            overridden = base.methods.get(fn.node.name.value)
            if overridden is not None and overridden is not fn:
                sites += [(model, site) for model, site in callers_of(project, bmodel, overridden) or ()
                          if _on_self(site)]
        family = _subclasses(project, file, own)
        if family is None:
            return None
        family = [(own, file), *family]
    out = []
    for model, site in sites:
        receivers = _receivers(project, file, fn, own, family, model, site)
        if receivers:
            out.append((model, site, receivers))
    return out


def _receivers(project: Project, file: FileModel, fn: FunctionInfo, own: ClassInfo | None, family: list,
               model: FileModel, site) -> list:
    caller = site.function
    cls = model.classes.get(caller.class_name or "") if caller is not None and caller.parent is None else None
    if own is None or cls is None:
        return [None]
    name = fn.node.name.value
    if _on_self(site):
        return [(c, m) for c, m in family if any(x is cls for x, _ in _chain(project, m, c))
                and _runs(project, m, c, name, fn)]
    func = site.node.func
    recv = func.value if isinstance(func, cst.Attribute) else None
    if isinstance(recv, cst.Call) and dotted(recv.func) == "super":  # a base class's method of the caller's class
        return [None] if any(c is own for c, _ in _chain(project, model, cls)[1:]) else []
    if isinstance(recv, cst.Attribute) and isinstance(recv.value, cst.Name) and recv.value.value == "self":
        held = _field_classes(project, model, cls, recv.attr.value)
        if held is not None and not any(_related(project, file, own, c, m) for c, m in held):
            return []
    return [None]


def _chain(project: Project, model: FileModel, cls: ClassInfo) -> list[tuple[ClassInfo, FileModel]]:
    """``cls`` and its project base classes, nearest first (generic bases included: ``Base[T, U]``)."""
    return class_chain(project, model, cls)


def _subclasses(project: Project, file: FileModel, cls: ClassInfo,
                _depth: int = 0) -> list[tuple[ClassInfo, FileModel]] | None:
    """The project classes deriving from ``cls`` at any depth (each level's direct subclasses searched in the files
    naming its class: a grandchild need not name ``cls``); None when too many files name one of them to look, or
    the hierarchy is deeper than five levels (a subclass unseen could override the method)."""
    if _depth > 5 or len(project.paths_containing((cls.name.encode(),))) > MAX_CALLER_FILES:
        return None
    out: list[tuple[ClassInfo, FileModel]] = []
    for sub, model in direct_subclasses(project, file, cls):
        deeper = _subclasses(project, model, sub, _depth + 1)
        if deeper is None:
            return None
        out += [(sub, model), *deeper]
    return out


def _runs(project: Project, model: FileModel, cls: ClassInfo, name: str, fn: FunctionInfo) -> bool:
    """Does ``self.<name>`` on an instance of ``cls`` run ``fn``?"""
    for c, _ in _chain(project, model, cls):
        method = c.methods.get(name)
        if method is not None:
            return method is fn
    return False


def _related(project: Project, file: FileModel, own: ClassInfo, cls: ClassInfo, model: FileModel) -> bool:
    return any(c is cls for c, _ in _chain(project, file, own)) \
        or any(c is own for c, _ in _chain(project, model, cls))


def _field_classes(project: Project, model: FileModel, cls: ClassInfo, attr: str) -> list | None:
    """The project classes the field ``self.<attr>`` holds when every assignment of it in the class stores a
    parameter annotated with project classes (``self._model = model``, ``model: "SegmentationModel"``); else
    None."""
    out: list = []
    values = [(m, a.value) for m in cls.methods.values() for a in m.assigns if a.target == f"self.{attr}"]
    for method, value in values:
        found = object_classes(project, model, method, value) if isinstance(value, cst.Name) \
            and value.value in method.all_params else None
        if found is None:
            return None
        out += found
    return out or None


def _on_self(site) -> bool:
    func = site.node.func
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"


def _synced_expr(project: Project, model: FileModel, caller: FunctionInfo, expr: cst.BaseExpression,
                 receiver: tuple[ClassInfo, FileModel] | None, depth: int) -> bool:
    """Is ``expr`` (an argument in ``caller``) a synchronised result: a local bound only to such calls, or a call
    itself (``self.<method>(...)`` resolved in ``receiver``'s class chain when given)?"""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    if isinstance(expr, cst.Name) and expr.value in caller.all_params:
        return expr.value not in ("self", "cls") \
            and not any(_binding_of(n, expr.value) for n in local_nodes(caller.node.body)) \
            and synced_by_callers(project, model, caller, expr.value, depth + 1)
    if isinstance(expr, cst.Name):
        bound = _bindings(caller, expr.value)
        return bound is not None and bool(bound) and all(
            _synced_call(project, model, caller, v, index, receiver) for v, index in bound)
    return _synced_call(project, model, caller, expr, None, receiver)


def _synced_call(project: Project, model: FileModel, caller: FunctionInfo, expr: cst.BaseExpression,
                 index: int | None, receiver: tuple[ClassInfo, FileModel] | None) -> bool:
    while isinstance(expr, cst.Subscript) and index is None:
        expr = expr.value
    if not isinstance(expr, cst.Call):
        return False
    found = _resolve(project, model, expr, receiver)
    # (an element of a whole synchronised result, or the element of the tuple each `return` builds)
    return found is not None and found[0] is not caller and (
        synced_result(project, found[1], found[0], expr)
        or index is not None and synced_result(project, found[1], found[0], expr, index=index))


def _bindings(fn: FunctionInfo, name: str) -> list[tuple[cst.BaseExpression, int | None]] | None:
    """What the local ``name`` is bound to: (value, None) for ``name = value``, (value, k) for the ``k``-th name
    of ``a, name = value``; None when something else binds it (a loop, a ``with``, a starred unpacking)."""
    out: list[tuple[cst.BaseExpression, int | None]] = []
    for node in local_nodes(fn.node.body):
        if isinstance(node, (cst.For, cst.CompFor)) and _binds(node.target, name) \
                or isinstance(node, cst.WithItem) and node.asname is not None and _binds(node.asname.name, name) \
                or isinstance(node, (cst.AugAssign, cst.NamedExpr)) and _binds(node.target, name):
            return None
        if not isinstance(node, (cst.Assign, cst.AnnAssign)) or node.value is None:
            continue
        for target in _targets(node):
            if isinstance(target, cst.Name):
                if target.value == name:
                    out.append((node.value, None))
            elif isinstance(target, (cst.Tuple, cst.List)) and _binds(target, name):
                names = [el.value for el in target.elements]
                k = next((i for i, n in enumerate(names) if isinstance(n, cst.Name) and n.value == name), None)
                if k is None or any(isinstance(el, cst.StarredElement) for el in target.elements):
                    return None
                out.append((node.value, k))
            elif _binds(target, name):
                return None
    return out


def _resolve(project: Project, model: FileModel, call: cst.Call,
             receiver: tuple[ClassInfo, FileModel] | None) -> tuple[FunctionInfo, FileModel] | None:
    func = call.func
    if receiver is not None and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
            and func.value.value == "self":
        for cls, cmodel in _chain(project, receiver[1], receiver[0]):
            method = cls.methods.get(func.attr.value)
            if method is not None:
                return method, cmodel
        return None
    site = model.call_site(call)
    return project.call_target(model, site) if site is not None else None


def _binds(target: cst.BaseExpression, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in local_nodes(target)) \
        if not isinstance(target, cst.Name) else target.value == name


def synced_result(project: Project, file: FileModel, fn: FunctionInfo, call: cst.Call | None,
                  _depth: int = 0, index: int | None = None) -> bool:
    """Does every ``return`` of ``fn``, called by ``call``, hand back what the host synchronised (module
    docstring)? With ``index``, the element ``index`` of the tuple each ``return`` builds."""
    if _depth > _MAX_DEPTH or fn.yields or fn.node.asynchronous is not None:
        return False
    memo = derived(project, "synced_result")
    key = (id(fn), id(call), index)
    if key in memo:
        return memo[key]
    memo[key] = False  # (a recursive helper: not known)
    given = [r for r in fn.returns if r.value is not None
             and not (isinstance(r.value, cst.Name) and r.value.value == "None")]
    memo[key] = bool(given) and all(_synced_return(project, file, fn, r, call, _depth, index) for r in given)
    return memo[key]


def _synced_return(project: Project, file: FileModel, fn: FunctionInfo, ret: cst.Return, call: cst.Call | None,
                   depth: int, index: int | None) -> bool:
    if _host_path(fn, ret):
        return True
    v = ret.value
    if index is not None:
        if not isinstance(v, (cst.Tuple, cst.List)) or len(v.elements) <= index \
                or any(isinstance(el, cst.StarredElement) for el in v.elements):
            return False
        v = v.elements[index].value
    while isinstance(v, cst.Subscript):  # an element of a synchronised result (`run(...)[0]`)
        v = v.value
    if isinstance(v, cst.Call):
        site = file.call_site(v)
        found = project.call_target(file, site) if site is not None else None
        return found is not None and found[0] is not fn and synced_result(project, found[1], found[0], v, depth + 1)
    if not isinstance(v, cst.Name) or v.value in fn.all_params:
        return False
    bound = _bindings(fn, v.value)
    if bound and all(_synced_call(project, file, fn, value, index, None) for value, index in bound):
        return True  # (`(logits,) = run_session(...)`: an element of a synchronised result)
    stream = _sync_before(project, file, fn, ret, call)
    if stream is None:
        return False
    if stream == "":
        return True  # a device-wide synchronize: every stream's work is done
    bindings = [n for n in local_nodes(fn.node.body) if _binding_of(n, v.value)]
    switched = [s.with_node for s in fn.scopes if scope_stream(project, file, s) is not None]
    if stream == _CURRENT:  # the current stream's: bound outside every stream scope
        return bool(bindings) and not any(contains(w.body, b) for w in switched for b in bindings)
    scopes = [s.with_node for s in fn.scopes if scope_stream(project, file, s) == stream]
    return bool(bindings) and all(any(contains(w.body, b) for w in scopes) for b in bindings)


def _binding_of(node: cst.CSTNode, name: str) -> bool:
    """Does ``node`` (a statement part) bind ``name``: an assignment (unpacking too), a loop / ``with`` target, an
    augmented assignment, a walrus?"""
    if isinstance(node, (cst.Assign, cst.AnnAssign)):
        return any(_binds(t, name) for t in _targets(node))
    if isinstance(node, (cst.For, cst.CompFor, cst.AugAssign, cst.NamedExpr)):
        return _binds(node.target, name)
    return isinstance(node, cst.WithItem) and node.asname is not None and _binds(node.asname.name, name)


def _targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    return [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]


_CURRENT = "<current>"


def _sync_before(project: Project, file: FileModel, fn: FunctionInfo, ret: cst.Return,
                 call: cst.Call | None) -> str | None:
    """The code of the stream the statement right before ``ret`` in its block synchronises (``""`` for the whole
    device, :data:`_CURRENT` for ``torch.cuda.current_stream(...).synchronize()``), or None. The statement may be
    guarded by a flag the call sets (``if synchronize:``) or by a CUDA-device test (``if device.type ==
    "cuda":``: the other path runs on the host)."""
    block = next((b for b in local_nodes(fn.node.body) if isinstance(b, cst.IndentedBlock)
                  and any(isinstance(x, cst.SimpleStatementLine) and any(y is ret for y in x.body) for x in b.body)),
                 None)
    if block is None and isinstance(fn.node.body, cst.IndentedBlock):
        block = fn.node.body
    body = list(block.body) if block is not None else []
    i = next((k for k, x in enumerate(body) if isinstance(x, cst.SimpleStatementLine)
              and any(y is ret for y in x.body)), None)
    if not i:
        return None
    stmt = body[i - 1]
    if isinstance(stmt, cst.If) and stmt.orelse is None and isinstance(stmt.body, cst.IndentedBlock) \
            and len(stmt.body.body) == 1 and (_true_flag(fn, stmt.test, call) or _device_test(stmt.test)):
        stmt = stmt.body.body[0]
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, cst.Call)):
        return None
    sync = stmt.body[0].value
    site = file.call_site(sync)
    if site is None or site.method != "synchronize":
        return None
    if any(u.role is apis.Role.DEVICE_SYNCHRONIZE for u in project.api_uses(file, site)):
        return ""  # (`torch.cuda.synchronize(device)`: the device of the work, as far as the syntax tells)
    recv = site.receiver
    if isinstance(recv, cst.Call) and not sync.args:
        inner = file.call_site(recv)
        if inner is not None and any(u.role is apis.Role.CURRENT_STREAM for u in project.api_uses(file, inner)):
            return _CURRENT
    return file.code(recv) if recv is not None and not sync.args else None


def _device_test(test: cst.BaseExpression) -> bool:
    """``device.type == "cuda"``: true exactly when the work went to a CUDA device (else no stream ran it)."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    comp = test.comparisons[0]
    return (dotted(test.left) or "").endswith(".type") and isinstance(comp.operator, cst.Equal) \
        and string_value(comp.comparator) in ("cuda", "npu", "xpu")


def _true_flag(fn: FunctionInfo, test: cst.BaseExpression, call: cst.Call | None) -> bool:
    """``test`` is a parameter of ``fn`` that ``call`` binds to ``True`` or leaves to a ``True`` default."""
    if call is None or not isinstance(test, cst.Name) or test.value not in fn.all_params:
        return False
    method = fn.class_name is not None and fn.params[:1] == ("self",)
    params = (fn.params[1:] if method else fn.params) + fn.kwonly
    if any(a.star for a in call.args):
        return False
    bound = bind_arguments(params, call, kwonly=fn.kwonly).get(test.value)
    if bound is None:
        ps = fn.node.params
        param = next((p for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params) if p.name.value == test.value),
                     None)
        bound = param.default if param is not None else None
    return isinstance(bound, cst.Name) and bound.value == "True"


def _host_path(fn: FunctionInfo, ret: cst.Return) -> bool:
    """Is ``ret`` in the body of an ``if`` whose test holds only for a host device (``device.type != "cuda"``,
    ``x.device.type == "cpu"``)?"""
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.If) and _host_test(node.test) and contains(node.body, ret):
            return True
    return False


def _host_test(test: cst.BaseExpression) -> bool:
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    left, comp = test.left, test.comparisons[0]
    if not (dotted(left) or "").endswith(".type"):
        return False
    sv = string_value(comp.comparator)
    return isinstance(comp.operator, cst.NotEqual) and sv in ("cuda", "npu", "xpu") \
        or isinstance(comp.operator, cst.Equal) and sv == "cpu"


__all__ = ["synced_by_callers", "synced_result", "synced_share"]
