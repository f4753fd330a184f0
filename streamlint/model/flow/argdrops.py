"""Tensors a function leaves in use on a side stream at its return, which a caller then drops.

A function that reads a tensor parameter (or a view of one) in work it queues on a side stream and returns
while that work may still run -- no join of the side stream into the current one, no host synchronisation
of it, no ``record_stream`` on it -- leaves the argument's lifetime to its callers. The caching allocator
only knows the caller's stream: when a caller drops its reference right after the call, the block goes
back to that stream's pool while the side stream still reads it. Nothing in the function says so; with
its call sites it does.

Two questions, one per side of the call:

- the callee (:class:`PendingArgs`, a mixin of the interpreter; what keeps or joins an argument:
  :mod:`.argkeeps`): at each exit, the tensor parameters read
  on another stream by the function's own statements (a helper it inlines counts at its call: the helper's
  own uses are its own analysis's), neither recorded there nor joined back / host-synchronised after the
  use (also through the helpers it calls: the flow inlines them); not a use in a torch.distributed
  collective (c10d keeps its tensors alive), not a parameter the function stores itself;
- the caller (:func:`caller_drop`): some call site in the project that resolves to the function drops the
  argument right after the call, before any join, and may allocate on its stream before joining (a later
  statement, the rebinding itself, the next round of its loop: as in the function-local rule): a device
  temporary (``f(a * b)``, ``f(q.pop())``; not a host tensor), an attribute of another object rebound or
  deleted after the call (``f(p.grad)`` ... ``p.grad = None``; also through a local ``g = p.grad``), a
  fresh local of the caller that it deletes or rebinds. A caller keeps the tensor when the argument is (a
  view of) one of its object's fields, a local or attribute it stores, records, returns, or that it got from
  somewhere unknown (a call, a loop over a container); it joins when it waits, synchronises, records, or
  calls a project function that does (its effect, not its name). A stream parameter bound to the caller's
  current stream leaves nothing pending. A caller that hands its own parameter on unchanged is a
  forwarder: its callers are asked in turn (a few levels up).

The elements of a collection parameter the function walks (``for g in grads``, ``zip(grads, bufs)``:
``Storage.container``) are pending like a parameter (not when the function keeps or returns the element); a
caller drops them with a list / tuple display holding a dropped element (``f((a * s, b * s))``) or a local list
of fresh device tensors (``grads = [p.grad * s for p in ps]``) it deletes or rebinds before allocating.

The finding is the callee's (the missing ``record_stream`` is its root cause), at its first pending use,
with the first dropping caller as related location; it depends on a caller, so it is never ``high``; a
function that returns an event recorded after the use escapes (``escaped``: strict only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.flow.argkeeps import _collective_in, _hands_out_event, _kept, _statements
from streamlint.model.walk import descendants
from streamlint.model.flow.callerfrees import caller_reported_free
from streamlint.model.flow.callers import callers_of, orders_after
from streamlint.model.flow.effects import local_method, syncs_device
from streamlint.model.flow.results import Lifetime
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.tensorvocab import COPY_METHODS, MULTI_VIEW_METHODS, VIEW_ATTRS, VIEW_METHODS
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.flow.values import State, TVal
    from streamlint.model.project import Project

_MAX_DEPTH = 3
# methods that hand back the receiver's memory, or may (``x.float()`` is ``x`` when it is float already): the
# argument then lives as long as the receiver does
_VIEWS = VIEW_METHODS | MULTI_VIEW_METHODS | VIEW_ATTRS | (COPY_METHODS - {"clone", "cpu", "pin_memory"}) | frozenset({
    "type", "squeeze_", "unsqueeze_"})
_HOST_FACTORIES = frozenset({"tensor", "as_tensor", "from_numpy", "asarray", "frombuffer", "Tensor", "empty_like",
                             "device", "Size", "Generator", "Stream", "Event"})


class PendingArgs:
    """Tensor parameters left in use on a side stream at the return (mixin of
    :class:`~streamlint.model.flow.interp.Interp`). Interp state it uses: ``depth``, ``anchor``, ``lifetimes``,
    ``side_recorded``, ``cfg``, ``project``, ``file``, ``fn``."""

    def access(self, st: State, tv: TVal, s: str, t: int, know: dict[str, int], write: bool) -> None:
        super().access(st, tv, s, t, know, write)  # type: ignore[misc]
        if self.depth or self.anchor is None:  # type: ignore[attr-defined]
            return
        S = st.stores.get(tv.sid)
        if S is not None and S.kind == "arg" and (S.name or S.container) and s != S.alloc \
                and not s.startswith(("<", "tag")):
            self.__dict__.setdefault("arg_side_uses", []).append((tv.sid, s, t, self.anchor))  # type: ignore

    def finalize(self, st: State) -> None:
        super().finalize(st)  # type: ignore[misc]
        if self.__dict__.get("arg_side_uses") and not self.depth:  # type: ignore[attr-defined]
            self.check_pending_args(st)

    def check_pending_args(self, st: State) -> None:
        fn: FunctionInfo = self.fn  # type: ignore[attr-defined]
        recorded_somewhere: set[int] = self.side_recorded  # type: ignore[attr-defined]
        for sid, s, t, node in self.__dict__["arg_side_uses"]:
            S = st.stores.get(sid)
            param = (S.container or S.name) if S is not None else None
            if S is None or param not in fn.all_params or sid in recorded_somewhere or s in S.recorded \
                    or st.know(S.alloc).get(s, -1) >= t or any(st.loose_rec.values()):
                continue  # recorded (on some path, or values of untracked type recorded here), joined, synced
            elements = S.container is not None  # an element of a collection parameter (`for t in tensors`)
            if elements and (S.escaped or S.name and _kept(self.file, fn, S.name, None)):  # type: ignore
                continue  # the function keeps or hands back the element itself (or what may be it: `t.to(dev)`)
            key = ("caller-free", sid)
            if key in self.lifetimes:  # type: ignore[attr-defined]
                continue  # (the first pending use of this parameter is the one reported)
            if _collective_in(self.file, fn, node):  # type: ignore[attr-defined]
                continue  # c10d keeps the tensors of a collective alive until its work is done
            if _kept(self.file, fn, param, None):  # type: ignore[attr-defined]
                continue  # the function itself stores the parameter (`self.inflight.append((grad, ev))`)
            stream = s if s in _params(fn) else None
            drop = caller_drop(self.project, self.file, fn, param, stream, elements=elements)  # type: ignore
            drop = drop or (None if elements else caller_reported_free(self.project, self.file, fn, param))  # type: ignore
            if drop is None:  # (callerfrees: a caller's analysis reports the death at its call, this reports it)
                continue
            handed = drop[2][:7] != "caller " and _hands_out_event(fn)  # a returned event's waiter joins (strict)
            self.lifetimes[key] = Lifetime(node, S.name or param, S.alloc, s, drop[2], None, handed,  # type: ignore
                                           self.cfg.mode, kind="caller-free",  # type: ignore[attr-defined]
                                           entry=drop[:2] + drop[3:])


def _params(fn: FunctionInfo) -> tuple[str, ...]:
    method = fn.class_name is not None and fn.params[:1] in (("self",), ("cls",))
    return (fn.params[1:] if method else fn.params) + fn.kwonly


def caller_drop(project: Project, file: FileModel, fn: FunctionInfo, param: str, stream: str | None = None,
                _depth: int = 0, elements: bool = False) -> tuple | None:
    """(the caller's file, the statement that drops it, how, the call, the caller) for the first call site of ``fn`` in the project
    that drops what it binds to ``param`` right after the call with no join before; None when every caller
    keeps it, joins first, or the callers are not seen. Memoised per project."""
    if _depth > _MAX_DEPTH:
        return None  # (not memoised: the same question asked nearer the callee goes further up)
    memo = project.derived("caller_drop")
    key = (id(fn), param, stream, elements)
    if key in memo:
        return memo[key]
    memo[key] = None  # (a cycle adds nothing)
    found = _caller_drop(project, file, fn, param, stream, _depth, elements)
    memo[key] = found
    return found


def _caller_drop(project: Project, file: FileModel, fn: FunctionInfo, param: str, stream: str | None,
                 depth: int, elements: bool = False) -> tuple | None:
    if param not in _params(fn):
        return None
    for model, site in _call_sites(project, file, fn):
        caller = site.function
        if caller is None or caller is fn:
            continue
        target = project.call_target(model, site) or local_method(project, model, caller, site.node.func)
        if target is None or target[0] is not fn:
            continue  # only a call that resolves to this function: a method of the same name elsewhere is not it
        bound = bind_arguments(_params(fn), site.node, kwonly=fn.kwonly)
        expr = bound.get(param)
        if expr is None or (stream is not None and _current_stream(model, caller, bound.get(stream))):
            continue  # (the work runs on the caller's current stream: nothing is left pending elsewhere)
        found = _dropped(project, model, caller, site, expr, depth, elements)
        if found is not None:
            return found if len(found) > 3 else (*found, site.node, caller)
    return None


def _call_sites(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FileModel, object]]:
    """The call sites of ``fn`` (:func:`~streamlint.model.flow.callers.callers_of`); for a method whose name is
    too common to search the whole project for (``add``, ``push``), the calls that resolve to it in the files
    that also name its class (where its objects are made or typed) and in its own file."""
    sites = callers_of(project, file, fn)
    if sites is not None:
        return sites
    name = fn.node.name.value
    if fn.class_name is None or fn.parent is not None or name.startswith("__"):
        return []
    paths = [p for p in project.paths_containing((f".{name}(".encode(),))
             if p == file.path or project.may_contain(p, (fn.class_name.encode(),))]
    if len(paths) > MAX_CALLER_FILES:
        return []
    found = []
    for path in paths:
        model = project.file(path) if project.may_call(path, name) else None
        for site in model.calls if model is not None else ():
            target = project.call_target(model, site) if site.method == name else None
            if target is not None and target[0] is fn:
                found.append((model, site))
    return found


def _dropped(project: Project, model: FileModel, caller: FunctionInfo, site, expr: cst.BaseExpression,
             depth: int, elements: bool = False) -> tuple | None:
    """Does ``caller`` drop the argument ``expr`` of the call ``site`` right after the call, and may it allocate
    on its stream before joining (the in-function SL301's condition: a free followed by nothing that allocates
    before the return or a join frees a block nobody takes in time)? ``elements``: the function reads the elements
    of the collection ``expr``: a list display's elements are each an argument (``f([a * s, b])``), a local list
    of fresh tensors (``outs = [x * s for x in xs]``) is dropped as a fresh local is."""
    if elements:
        return _elements_dropped(project, model, caller, site, expr, depth)
    base = _base(expr)
    call_end = model.span(site.node).end_line
    joins = _join_lines(project, model, caller, call_end)
    first_join = min(joins, default=None)
    if _self_rooted(base):
        return None  # (a view of) a field of the caller's object: long-lived
    if _fresh(base):
        return _reused(model, caller, site.node, first_join, (model, site.node, "call end"))
    rebound = _rebound_by_result(model, caller, site.node, expr)
    if rebound is not None:
        return rebound
    if isinstance(base, cst.Attribute) and isinstance(base.value, cst.Name):
        if _kept(model, caller, model.code(base), site.node):
            return None  # `self.pending.append((ev, p.grad))` before `p.grad = None`
        return _unset_after(model, caller, site.node, base, first_join)
    if not isinstance(base, cst.Name):
        return None
    name = base.value
    if _kept(model, caller, name, site.node):
        return None
    if name in caller.all_params:
        if joins or name == "self":
            return None
        outer = caller_drop(project, model, caller, name, None, depth + 1)
        return outer
    value = _binding(model, caller, name, call_end)
    if value is None:
        return None
    value = _base(value)
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and not _self_rooted(value):
        if _kept(model, caller, model.code(value), site.node):
            return None
        return _unset_after(model, caller, site.node, value, first_join)
    if not _fresh(value):
        return None
    end = _name_dropped_after(model, caller, site.node, name, first_join)
    # (a local dying at the caller's return, nothing allocated after it there: silent, as in the function itself)
    return None if end is None else _reused(model, caller, end[1], first_join, end)


def _elements_dropped(project: Project, model: FileModel, caller: FunctionInfo, site, expr: cst.BaseExpression,
                      depth: int) -> tuple | None:
    """:func:`_dropped` for a collection argument whose elements the function reads."""
    if isinstance(expr, (cst.List, cst.Tuple)):  # `f([a * s, b])`: each element is an argument
        for el in expr.elements:
            if isinstance(el, cst.Element):
                found = _dropped(project, model, caller, site, el.value, depth)
                if found is not None:
                    return found
        return None
    rebound = _rebound_by_result(model, caller, site.node, expr)
    if rebound is not None:
        return rebound
    if not isinstance(expr, cst.Name) or _kept(model, caller, expr.value, site.node):
        return None
    name = expr.value
    call_end = model.span(site.node).end_line
    joins = _join_lines(project, model, caller, call_end)
    if name in caller.all_params:
        if joins or name == "self":
            return None
        return caller_drop(project, model, caller, name, None, depth + 1, elements=True)
    value = _binding(model, caller, name, call_end)
    if not _fresh_elements(value):
        return None
    first_join = min(joins, default=None)
    end = _name_dropped_after(model, caller, site.node, name, first_join)
    # (a local list dying at the caller's return, nothing allocated after it there: silent, as for a tensor)
    return None if end is None else _reused(model, caller, end[1], first_join, end)


def _fresh_elements(value: cst.BaseExpression | None) -> bool:
    """Is ``value`` a list / tuple display or comprehension whose elements are fresh device tensors nobody else
    holds (``[h * s for h in hs]``, ``[x.clone(), y + 1]``)?"""
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return _fresh(_base(value.elt))
    if isinstance(value, (cst.List, cst.Tuple)):
        return any(isinstance(el, cst.Element) and _fresh(_base(el.value)) for el in value.elements)
    return False


def _reused(model: FileModel, caller: FunctionInfo, drop: cst.CSTNode, first_join: int | None,
            found: tuple) -> tuple | None:
    """``found`` when the caller may allocate on its stream after the drop before its first join: a later
    statement, the rebinding itself, or the next round of a loop holding the drop; else None."""
    if found[2] == "rebinding" and _allocates(getattr(drop, "value", None)):
        return found
    start = model.span(drop).end_line
    stop = first_join if first_join is not None else 1 << 30
    loop = _loop_of(caller, drop)
    again = loop is not None and (first_join is None or first_join > model.span(loop).end_line)
    low = model.span(loop).start_line if again else start + 1
    for node in _statements(caller.node.body):
        if not isinstance(node, cst.BaseSmallStatement):
            continue
        line = model.span(node).start_line
        if (start < line < stop or again and low <= line <= start and _path_to(loop, node) is not None) \
                and _allocates(node):
            return found
    return None


def _loop_of(caller: FunctionInfo, node: cst.CSTNode) -> cst.CSTNode | None:
    path = _path_to(caller.node.body, node) or []
    return next((n for n in path if isinstance(n, (cst.For, cst.While))), None)


# calls that allocate no device memory on the current stream
_NO_ALLOC = frozenset({"len", "print", "range", "enumerate", "zip", "isinstance", "getattr", "hasattr", "setattr",
                       "int", "float", "str", "bool", "id", "min", "max", "debug", "info", "warning", "error",
                       "append", "record", "record_stream", "wait_stream", "wait_event", "wait", "synchronize",
                       "numel", "size", "dim", "item", "perf_counter", "time", "format"})


def _allocates(node: cst.CSTNode | None) -> bool:
    """May ``node`` allocate on the current stream: a call (other than a join, a record or a builtin of host
    values), arithmetic on something other than literals?"""
    for n in descendants(node) if node is not None else ():
        if isinstance(n, cst.Call):
            name = (n.func.attr.value if isinstance(n.func, cst.Attribute) else dotted(n.func) or "").rsplit(".")[-1]
            if name not in _NO_ALLOC:
                return True
        elif isinstance(n, cst.BinaryOperation) and not isinstance(n.left, (cst.SimpleString, cst.FormattedString)) \
                and not all(isinstance(x, (cst.Integer, cst.Float)) for x in (n.left, n.right)):
            return True
    return False


def _base(expr: cst.BaseExpression) -> cst.BaseExpression:
    """What the argument's memory belongs to: the receiver of a view (``g.view(-1)``, ``x[:n]``,
    ``x.split(k)[0]``)."""
    for _ in range(8):
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _VIEWS:
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            expr = expr.value
        else:
            break
    return expr


def _self_rooted(expr: cst.BaseExpression) -> bool:
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value in ("self", "cls")


# torch factories: a device tensor only with a device that is not the host, and not pinned
_FACTORIES = frozenset({"empty", "zeros", "ones", "full", "arange", "rand", "randn", "randint", "randperm",
                        "linspace", "logspace", "eye", "empty_strided", "tensor", "as_tensor"})
# calls that make or hand back a host tensor: an argument built from one lives in host memory
_HOST_MAKERS = frozenset({"from_numpy", "frombuffer", "asarray", "numpy", "cpu", "pin_memory", "Tensor"})


def _fresh(expr: cst.BaseExpression) -> bool:
    """Is ``expr`` evidently a device tensor nobody else holds: arithmetic, a clone, a torch op that allocates
    on the device, an element taken out of a container (``q.pop(0)``)? A host tensor (a factory with no device
    or a pinned one, an op on ``torch.from_numpy(a)``) is not: a pinned non_blocking copy is kept by the host
    caching allocator until it is done, a pageable one is synchronous."""
    if _host_made(expr):
        return False
    if isinstance(expr, cst.BinaryOperation):
        return not isinstance(expr.left, (cst.SimpleString, cst.FormattedString))
    if isinstance(expr, cst.UnaryOperation):
        return not isinstance(expr.operator, cst.Not)
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("clone", "pop", "popleft"):
        return True
    name = dotted(func) or ""
    head, _, op = name.partition(".")
    if head != "torch" or "." in op or op in _HOST_FACTORIES - {"tensor", "as_tensor"} or op in _VIEWS \
            or not op[:1].islower():
        return False
    if op in _FACTORIES or op.endswith("_like"):
        kw = {a.keyword.value: a.value for a in expr.args if a.keyword is not None}
        device = kw.get("device")
        if op.endswith("_like"):
            return device is None or not _host_device(device)
        return device is not None and not _host_device(device)
    return True


def _host_made(expr: cst.BaseExpression) -> bool:
    """Does ``expr`` build on a host tensor (``torch.from_numpy``, ``.cpu()``, ``pin_memory=True``, a torch
    factory with no device)?"""
    for n in descendants(expr):
        if isinstance(n, cst.Call):
            last = (n.func.attr.value if isinstance(n.func, cst.Attribute) else dotted(n.func) or "").rsplit(".")[-1]
            if last in _HOST_MAKERS or any(a.keyword is not None and a.keyword.value == "pin_memory"
                                           and not (isinstance(a.value, cst.Name) and a.value.value == "False")
                                           for a in n.args):
                return True
            if n is not expr and (dotted(n.func) or "").partition(".")[2] in _FACTORIES \
                    and (dotted(n.func) or "").startswith("torch.") and not _fresh(n):
                return True
    return False


def _host_device(expr: cst.BaseExpression) -> bool:
    text = expr.value.strip("\'\"") if isinstance(expr, cst.SimpleString) else None
    return text is not None and text.split(":")[0] == "cpu"


def _join_lines(project: Project, model: FileModel, caller: FunctionInfo, after: int) -> list[int]:
    """The lines after ``after`` where the caller joins or records: a wait or synchronisation
    (:func:`~streamlint.model.flow.callers.orders_after`), a ``record_stream``, or a call of a project function
    that does one of those in its body (``self.stage.barrier()`` with a ``wait_stream`` inside) or synchronises
    the device (:func:`~streamlint.model.flow.effects.syncs_device`)."""
    lines = []
    for site in caller.calls:
        line = model.span(site.node).start_line
        if line > after and _joins(project, model, caller, site, 0):
            lines.append(line)
    return lines


def _joins(project: Project, model: FileModel, fn: FunctionInfo, site, depth: int) -> bool:
    func = site.node.func
    name = func.attr.value if isinstance(func, cst.Attribute) else (dotted(func) or "").rsplit(".", 1)[-1]
    if orders_after(name) or name == "record_stream":
        return True
    target = project.call_target(model, site) or local_method(project, model, fn, func)
    if target is None or depth >= 2:
        return False
    g, gmod = target
    return syncs_device(project, gmod, g) or any(_joins(project, gmod, g, s, depth + 1) for s in g.calls)


def _rebound_by_result(model: FileModel, caller: FunctionInfo, call: cst.Call,
                       expr: cst.BaseExpression) -> tuple | None:
    """``batch.states[i] = move(dev, batch.states[i])``: the statement holding the call rebinds the very place
    (an attribute or an item of another object, not of ``self``: a field is the held-field analysis's) it hands
    as the argument to the call's own result: the caller's reference is dropped as the call returns, as by
    ``p.grad = None`` after it (reported as that rebinding is)."""
    if not isinstance(expr, (cst.Attribute, cst.Subscript)) or _self_rooted(expr):
        return None
    root = expr
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        root = root.value
    if not isinstance(root, cst.Name):
        return None
    path = _path_to(caller.node.body, call) or []
    stmt = next((n for n in path if isinstance(n, cst.Assign)), None)
    if stmt is None or stmt.value is not call:
        return None
    text = model.code(expr)
    if not any(model.code(t.target) == text for t in stmt.targets):
        return None
    return model, stmt, "unset"


def _unset_after(model: FileModel, caller: FunctionInfo, call: cst.Call, place: cst.Attribute,
                 first_join: int | None) -> tuple | None:
    """``p.grad = <new>`` (not made from the old value) or ``del p.grad`` after the call on its path (in its block
    or an enclosing one, not in a branch of its own), before any join."""
    text = model.code(place)
    for node in _following(caller, call):
        if first_join is not None and model.span(node).start_line >= first_join:
            break
        if isinstance(node, cst.Assign) and any(model.code(t.target) == text for t in node.targets) \
                and text not in model.code(node.value):
            return model, node, "unset"
        if isinstance(node, cst.Del) and _names_target(model, node.target, text):
            return model, node, "unset"
    return None


def _name_dropped_after(model: FileModel, caller: FunctionInfo, call: cst.Call, name: str,
                        first_join: int | None) -> tuple | None:
    for node in _following(caller, call):
        if first_join is not None and model.span(node).start_line >= first_join:
            break
        if isinstance(node, cst.Del) and _names_target(model, node.target, name):
            return model, node, "del"
        if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                for t in node.targets):
            return model, node, "rebinding"
    return None


def _following(caller: FunctionInfo, call: cst.Call) -> list[cst.CSTNode]:
    """The small statements that run after the one holding ``call`` on every path through it: those after it in
    its block, then after the enclosing compound statement in its block, up to the function body (none inside
    a later branch or loop: a conditional drop is not one every run makes)."""
    path = _path_to(caller.node.body, call)
    if path is None:
        return []
    out: list[cst.CSTNode] = []
    for child, parent in zip(path, path[1:]):  # (innermost first)
        body = getattr(parent, "body", None)
        if isinstance(parent, (cst.IndentedBlock, cst.Module)) and isinstance(body, (list, tuple)) and child in body:
            for stmt in body[body.index(child) + 1:]:
                if isinstance(stmt, cst.SimpleStatementLine):
                    out.extend(stmt.body)
        if isinstance(parent, cst.SimpleStatementLine) and child in parent.body:
            out[:0] = list(parent.body[parent.body.index(child) + 1:])
    return out


def _path_to(root: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The nodes from ``target`` up to ``root`` (``target`` first; nested functions are not entered)."""
    stack = [(root, [root])]
    while stack:
        node, path = stack.pop()
        if node is target:
            return list(reversed(path))
        for child in node.children:
            if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            stack.append((child, path + [child]))
    return None


def _names_target(model: FileModel, target: cst.BaseExpression, text: str) -> bool:
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_names_target(model, e.value, text) for e in target.elements)
    return model.code(target) == text


def _binding(model: FileModel, caller: FunctionInfo, name: str, before: int) -> cst.BaseExpression | None:
    """The value of the last plain ``name = value`` before line ``before``; None when the name is bound
    otherwise there (a loop target, an unpacking, a ``with`` item) or not at all."""
    found = None
    for node in _statements(caller.node.body):
        if model.span(node).start_line >= before:
            continue
        if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                found = node.value if not isinstance(node, cst.AugAssign) else None
            elif any(_binds(t, name) for t in targets):
                found = None
        elif isinstance(node, (cst.For, cst.With)) and _binds_in(node, name):
            found = None
    return found


def _binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(e.value, name) for e in target.elements)
    if isinstance(target, cst.StarredElement):
        return _binds(target.value, name)
    return False


def _binds_in(node: cst.For | cst.With, name: str) -> bool:
    if isinstance(node, cst.For):
        return _binds(node.target, name)
    return any(i.asname is not None and _binds(i.asname.name, name) for i in node.items)


def _current_stream(model: FileModel, caller: FunctionInfo, expr: cst.BaseExpression | None) -> bool:
    """Is the stream argument ``expr`` the caller's current stream (``torch.cuda.current_stream()``, or a local
    bound only to that)?"""
    if isinstance(expr, cst.Name) and expr.value not in caller.all_params:
        values = caller.name_assigns.get(expr.value) or []
        return bool(values) and all(_current_stream(model, caller, v) for v in values if v is not expr)
    if not isinstance(expr, cst.Call):
        return False
    last = (dotted(expr.func) or "").rsplit(".", 1)[-1]
    return last in ("current_stream", "default_stream")


__all__ = ["PendingArgs", "caller_drop"]
