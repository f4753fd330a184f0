"""A field's tensor read on a side stream, left pending at the return, which another method of the object drops.

A tensor the object keeps in a field (``self._plan``: the step's block plan a metadata builder hands in, an
element of ``self._staged[rid]``, a double-buffered activation) lives as long as the field holds it. A method that
reads it (or a local alias of it, ``blocks = self._plan``) in work it queues on a side stream and returns with that
work pending -- no ``record_stream`` on that stream, no join of it into the allocating stream, no host
synchronisation -- leaves the block to whoever drops the field next: when another method of the class
(``plan()`` replacing it, ``disarm()`` setting it to ``None``, ``del self._plan``, ``self._staged.pop(rid)``) drops
the last reference with no join first, the caching allocator hands the block back to the allocating stream's pool
while the side stream may still read it. The missing ``record_stream`` is the reading method's: the finding is at
its first pending side-stream use of the field, the unjoined drop as related location, at medium confidence (the
order of the two methods' calls is not seen).

Silent (precision first) when:

- every method that drops the field first joins or synchronises (a wait -- an event's own ``.wait()`` too -- a
  host synchronisation, or a ``self`` call of a method that joins, before the drop in that method, or every
  ``self`` call of it after one); every seen caller of the reading method joins after its call; at least one drop outside construction
  (``__init__``, ``setup*``, ``build*``, ``load*``, ... and the methods only they call) must exist; storing an
  element (``self.f[k] = v``, ``self.f.append(v)``) is no drop;
- a value the field is bound to (or an element stored into it) is long-lived storage or a view of it
  (``self._plan = self._table[:n]``), evidently host memory (``.cpu()``, ``pin_memory``), made inside a stream
  scope (its memory is that stream's), or also kept elsewhere by the method that binds it
  (``self._history.append(blocks)``); a value handed in as a parameter is judged at the setter's callers in the
  project: each must hand a value of its own (not a field of its object, a view of one or its own parameter, nor
  one it keeps elsewhere), and at least one must be seen;
- the reading method binds the field itself (its own flow follows what the field holds), or keeps what it
  reads elsewhere (an in-flight list, another field);
- an element's field (``self.x[k].buf``, ``self.x.y``): its own storage, not the object's.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.results import Lifetime
from streamlint.model.heldslots import _INIT_METHODS, _after_joins, _class_call_streams, _join_lines, \
    _statements, _stream_at
from streamlint.model.streams import MAIN
from streamlint.model.stepstate import _bare_allocation, _construction
from streamlint.model.file import dotted
from streamlint.model.syntax import local_nodes, param_named, self_attribute
from streamlint.model.tensors import tensor_method, torch_returns_tensor
from streamlint.model.tensorvocab import _NON_TENSOR_RECEIVER_METHODS
from streamlint.model.tensoruse import tensor_annotation, tensor_only_method
from streamlint.model.tensorvocab import VIEW_ATTRS, VIEW_METHODS
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.flow.values import State, TVal
    from streamlint.model.project import Project

_PLAIN = re.compile(r"self\.(\w+)$")
_RELEASES = frozenset({"pop", "popitem", "popleft", "clear", "remove"})
_KEEPS = frozenset({"append", "extend", "insert", "appendleft", "add", "put", "put_nowait", "setdefault", "update"})
_HOST = frozenset({"cpu", "pin_memory", "numpy", "tolist", "item"})
_MAX_CALLERS = 8


class FieldDrops:
    """Fields read on a side stream and left pending at the return (mixin of
    :class:`~streamlint.model.flow.interp.Interp`). Interp state it uses: ``depth``, ``anchor``, ``lifetimes``,
    ``cfg``, ``project``, ``file``, ``fn``."""

    def access(self, st: State, tv: TVal, s: str, t: int, know: dict[str, int], write: bool) -> None:
        super().access(st, tv, s, t, know, write)  # type: ignore[misc]
        if self.depth or self.anchor is None or self.fn.class_name is None:  # type: ignore[attr-defined]
            return
        S = st.stores.get(tv.sid)
        if S is not None and S.kind == "long" and S.name and _PLAIN.match(S.name) and s != S.alloc \
                and not s.startswith(("<", "tag")):
            self.__dict__.setdefault("field_side_uses", []).append((tv.sid, s, t, self.anchor))  # type: ignore

    def finalize(self, st: State) -> None:
        super().finalize(st)  # type: ignore[misc]
        if self.__dict__.get("field_side_uses") and not self.depth:  # type: ignore[attr-defined]
            self.check_field_drops(st)

    def check_field_drops(self, st: State) -> None:
        fn: FunctionInfo = self.fn  # type: ignore[attr-defined]
        for sid, s, t, node in self.__dict__["field_side_uses"]:
            S = st.stores.get(sid)
            if S is None or not _on_path(S, s, t):
                continue  # (the use is on another path: this one never queued it)
            if s in S.recorded or st.know(S.alloc).get(s, -1) >= t or any(st.loose_rec.values()):
                continue  # recorded on the side stream, joined back, host-synchronised
            key = ("field-drop", S.name)
            if key in self.lifetimes or any(  # type: ignore[attr-defined]
                    x.node is node for x in self.lifetimes.values()):  # type: ignore[attr-defined]
                continue  # (the first pending use is the one reported; one finding per statement)
            field = _PLAIN.match(S.name).group(1)  # type: ignore[union-attr]
            drop = field_drop(self.project, self.file, fn, field)  # type: ignore[attr-defined]
            if drop is None:
                continue
            self.lifetimes[key] = Lifetime(node, S.name, S.alloc, s, "field-drop", drop,  # type: ignore
                                           False, self.cfg.mode, kind="field-drop")  # type: ignore[attr-defined]


def _on_path(S, s: str, t: int) -> bool:
    """Did this path's copy of storage ``S`` see the use on ``s`` at ``t`` (a read it still lists, or its last write)?
    The uses are gathered over every path; a path that never entered the side-stream scope must not be judged on
    them (a warm-up under ``if capture:`` synchronised inside its scope, the other arm doing nothing)."""
    w = S.last_write
    return any(r.stream == s and r.time == t for r in S.reads) or w is not None and w.stream == s and w.time == t


def field_drop(project: Project, file: FileModel, fn: FunctionInfo, field: str) -> cst.CSTNode | None:
    """The statement of another method of ``fn``'s class (or of ``fn`` before its first mention of the field) that
    drops what ``self.<field>`` holds with no join first, when the value dropped is the object's own (see the
    module docstring); None otherwise. Memoised per project."""
    memo = project.derived("field_drop")
    key = (id(fn), field)
    if key not in memo:
        memo[key] = None
        memo[key] = _field_drop(project, file, fn, field)
    return memo[key]


def _field_drop(project: Project, file: FileModel, fn: FunctionInfo, field: str) -> cst.CSTNode | None:
    cls = file.classes.get(fn.class_name or "")
    if cls is None or fn.node.name.value in _INIT_METHODS or _keeps_alias(fn, field):
        return None
    if _callers_join_after(project, file, fn):
        return None  # (every seen caller joins the side stream right after the call: nothing is left pending)
    drops: list[tuple[FunctionInfo, cst.CSTNode]] = []
    construction = _construction(cls) | set(_INIT_METHODS) | {"__del__"}
    stepped = False  # some binding is a computed value (not a bare allocation)
    for name, method in cls.methods.items():
        for stmt in _statements(method.node.body):
            value = _binding(stmt, field)
            if value is _NOT:
                continue
            if method is fn:
                return None  # (the function binds the field itself: its own flow follows what the field holds)
            if value is _UNKNOWN:
                return None  # an item unpacked from a call's result: not evidently the object's own tensor
            stored = isinstance(value, _Stored)
            value = value.value if stored else value
            if value is not None and not _own_value(project, file, method, value, field, stmt):
                return None  # a value that is long-lived, host memory, kept elsewhere too, or made on a side stream
            if value is not None and not _tensor_value(project, file, method, value):
                return None  # (a meta object, a format tag: what a value of unknown type is, is not seen)
            if value is not None and not _bare_allocation(value):
                stepped = True
            if name not in construction and not stored and not _bare_allocation(value):
                drops.append((method, stmt))  # (a bare allocation is a lazy first one or a resize, not the step's)
    if not drops or not stepped:
        return None  # (only bare allocations bound: a scratch buffer the object keeps, freed at teardown)
    joins = _joins_through_helpers(file, cls)
    callers = None
    for method, stmt in drops:
        lines = joins.get(method.qualname)
        if lines is None:
            lines = joins[method.qualname] = _join_lines(file, method)
        if lines and any(j < file.span(stmt).start_line for j in lines):
            continue
        if callers is None:
            callers = _class_call_streams(project, file, cls)
        name = method.node.name.value
        if name in callers and _after_joins(file, callers[name][1], joins):
            continue
        return stmt
    return None


def _own_joins(file: FileModel, method: FunctionInfo) -> list[int]:
    """The lines of the method's joins: a synchronisation, a stream or event wait, and an event's own ``.wait()``
    (``self.done.wait()``: the current stream waits for it; a thread event's wait is taken for one too, which
    only silences)."""
    return _join_lines(file, method) + [file.span(site.node).start_line for site in method.calls
                                        if site.method == "wait"]


def _callers_join_after(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Is the reading method called at least once in the project, and does every seen caller join (wait,
    synchronise) after its call, before it returns?"""
    sites = list(callers_of(project, file, fn) or ())
    if not sites or len(sites) > _MAX_CALLERS:
        return False
    for model, site in sites:
        if site.function is None:
            return False
        line = model.span(site.node).start_line
        if not any(j >= line for j in _own_joins(model, site.function)):
            return False
    return True


def _joins_through_helpers(file: FileModel, cls) -> dict[str, list[int]]:
    """The join lines of each method of the class: its own joins (a wait, a synchronisation) and its ``self``
    calls of a method that joins itself (``self.fence()`` before ``self.plan(...)``)."""
    own = {m.qualname: _own_joins(file, m) for m in cls.methods.values()}
    out: dict[str, list[int]] = {}
    for method in cls.methods.values():
        lines = list(own[method.qualname])
        for site in method.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                    and func.attr.value in cls.methods and cls.methods[func.attr.value] is not method \
                    and own[cls.methods[func.attr.value].qualname]:
                lines.append(file.span(site.node).start_line)
        out[method.qualname] = lines
    return out


_NOT = object()
_UNKNOWN = object()


def _binding(stmt: cst.CSTNode, field: str):
    """The value ``stmt`` binds to ``self.<field>`` or stores into it (``self.f[k] = v``, ``self.f.append(v)``); None
    for a drop of what it holds (``del``, a binding to ``None``, ``self.f.pop(k)``, ``self.f.clear()``); ``_NOT``
    when it does neither."""
    if isinstance(stmt, cst.Del):
        targets = stmt.target.elements if isinstance(stmt.target, cst.Tuple) else [stmt.target]
        for t in targets:
            t = t.value if isinstance(t, cst.Element) else t
            if self_attribute(t.value if isinstance(t, cst.Subscript) else t) == field:
                return None
        return _NOT
    if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call) and isinstance(stmt.value.func, cst.Attribute) \
            and self_attribute(stmt.value.func.value) == field:
        method = stmt.value.func.attr.value
        if method in _RELEASES:
            return None
        if method in _KEEPS and stmt.value.args:
            return _Stored(stmt.value.args[-1].value)
        return _NOT
    if isinstance(stmt, (cst.Assign, cst.AnnAssign)) and stmt.value is not None:
        targets = [t.target for t in stmt.targets] if isinstance(stmt, cst.Assign) else [stmt.target]
        for target in targets:
            names = target.elements if isinstance(target, (cst.Tuple, cst.List)) else None
            if names is not None:
                for i, el in enumerate(names):
                    if self_attribute(el.value) != field:
                        continue
                    values = stmt.value.elements if isinstance(stmt.value, (cst.Tuple, cst.List)) else None
                    if values is None or len(values) != len(names) or isinstance(values[i], cst.StarredElement):
                        return _UNKNOWN  # (`self.fmt, caches = discover(...)`: which item, of what type, is not seen)
                    value = values[i].value
                    return None if isinstance(value, cst.Name) and value.value == "None" else value
            elif self_attribute(target) == field:
                value = stmt.value
                return None if _empty(value) else value
            elif isinstance(target, cst.Subscript) and self_attribute(target.value) == field:
                value = stmt.value
                return None if isinstance(value, cst.Name) and value.value == "None" else _Stored(value)
    return _NOT


def _empty(value: cst.BaseExpression) -> bool:
    """``None``, an empty dict / list / tuple display, ``dict()`` / ``list()``: nothing the field then holds."""
    return (isinstance(value, cst.Name) and value.value == "None") or (
        isinstance(value, (cst.Dict, cst.List, cst.Tuple)) and not value.elements) or (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
        and value.func.value in ("dict", "list", "OrderedDict", "deque") and not value.args)


class _Stored:
    """A value stored into a container field (an element, not a rebinding of the field: no drop)."""

    __slots__ = ("value",)

    def __init__(self, value: cst.BaseExpression) -> None:
        self.value = value


def _root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The object a chain of views, subscripts and attributes starts from (``self._table[:n].view(-1)``:
    ``self``)."""
    while True:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Attribute):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
                and expr.func.attr.value in VIEW_METHODS | VIEW_ATTRS:
            expr = expr.func.value
        else:
            return expr


def _own_value(project: Project, file: FileModel, method: FunctionInfo, value: cst.BaseExpression,
               field: str, stmt: cst.CSTNode | None = None, depth: int = 0) -> bool:
    """Is the value bound to the field the object's own, which the field's rebinding frees: not a view of
    long-lived storage (a field, a global), not host memory, not kept elsewhere by the binding method; a
    parameter only when every seen caller of the method hands one of its own; made on the current stream (not in
    a stream scope of the method: its memory would belong to that stream). Locals that alias each other in a
    cycle (``b = a; a = b``) are followed a few steps only: past that, not evidently the object's own."""
    if depth > 3:
        return False
    if _stream_at(project, file, method, stmt if stmt is not None else value, MAIN) != MAIN:
        return False
    if any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _HOST
           for n in local_nodes(value)) or any(isinstance(n, cst.Arg) and n.keyword is not None
                                               and n.keyword.value == "pin_memory" for n in local_nodes(value)):
        return False
    root = _root(value)
    if isinstance(root, cst.Name) and root.value == "self" and not isinstance(value, cst.Call):
        return False  # a field, or a view of one
    if isinstance(root, cst.Name) and root.value == "self" and isinstance(value, cst.Call) \
            and _root(value) is not value:
        return False  # (`self.table[:n].view(-1)`)
    if not isinstance(value, cst.Name):
        return True  # a call's result, an expression: a new tensor (or what the analysis takes for one)
    name = value.value
    if _stored_elsewhere(method, name, field):
        return False
    if name in method.all_params:
        return _callers_hand_own(project, file, method, name)
    values = method.name_assigns.get(name, [])
    return bool(values) and all(v is not None and _own_value(project, file, method, v, field, v, depth + 1)
                                for v in values)


def _tensor_value(project: Project, file: FileModel, fn: FunctionInfo, value: cst.BaseExpression,
                  depth: int = 0) -> bool:
    """Is ``value`` (an expression of ``fn``) evidently a device tensor: a torch op's result, a method only a tensor
    has (``.index_select``, ``.flatten()``; ``.to(torch.int64)``), an item of one, a local bound only so, a parameter
    annotated as a tensor or that every seen caller hands such a value, a module function of the file whose every
    return is one?"""
    if depth > 3:
        return False
    if isinstance(value, cst.Subscript):
        return _tensor_value(project, file, fn, value.value, depth + 1)
    if isinstance(value, cst.Call):
        func = value.func
        target = file.resolve(func, fn) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if target and target.split(".")[0] in ("torch", "torch_npu"):
            return torch_returns_tensor(target)
        if isinstance(func, cst.Attribute):
            name = func.attr.value
            if tensor_only_method(name):
                return True
            if tensor_method(name) and name not in _NON_TENSOR_RECEIVER_METHODS \
                    and _tensor_value(project, file, fn, func.value, depth + 1):
                return True  # (`torch.as_tensor(ids, device=dev).long()`: a method of a tensor)
            if name == "to" and any((dotted(a.value) or "").startswith("torch.") and dotted(a.value) != "torch.device"
                                    for a in value.args):
                return True  # (`.to(torch.int64)`: a dtype cast; a module is moved to a device)
            return False
        if isinstance(func, cst.Name):
            callee = file.functions.get(func.value)
            if callee is None or callee.class_name is not None:
                return False
            returns = [n.value for n in local_nodes(callee.node.body) if isinstance(n, cst.Return)
                       and n.value is not None and not _empty(n.value)]  # (`return None`: no value to keep)
            return bool(returns) and all(_tensor_value(project, file, callee, r, depth + 1) for r in returns)
        return False
    if isinstance(value, cst.Name):
        if value.value in fn.all_params:
            param = param_named(fn.node, value.value)
            if param is not None and param.annotation is not None:
                return tensor_annotation(param.annotation.annotation)
            return _callers_hand_tensor(project, file, fn, value.value, depth)
        values = [v for v in fn.name_assigns.get(value.value, []) if v is None or not _empty(v)]
        return bool(values) and all(v is not None and _tensor_value(project, file, fn, v, depth + 1) for v in values)
    return False


def _callers_hand_tensor(project: Project, file: FileModel, fn: FunctionInfo, param: str, depth: int) -> bool:
    params = (fn.params[1:] if fn.params[:1] == ("self",) else fn.params) + fn.kwonly
    sites = list(callers_of(project, file, fn) or ())[:_MAX_CALLERS]
    for model, site in sites:
        expr = bind_arguments(params, site.node, kwonly=fn.kwonly).get(param)
        if expr is None or site.function is None or not _tensor_value(project, model, site.function, expr, depth + 1):
            return False
    return bool(sites)


def _stored_elsewhere(method: FunctionInfo, name: str, field: str) -> bool:
    """Does ``method`` also keep what ``name`` holds somewhere else than ``self.<field>`` (another field, a
    container, an alias)?"""
    for stmt in _statements(method.node.body):
        if isinstance(stmt, (cst.Assign, cst.AnnAssign)) and stmt.value is not None:
            targets = [t.target for t in stmt.targets] if isinstance(stmt, cst.Assign) else [stmt.target]
            if all(self_attribute(t) == field for t in targets):
                continue
            if any(isinstance(n, cst.Name) and n.value == name for n in local_nodes(stmt.value)) \
                    and any(isinstance(t, (cst.Attribute, cst.Subscript)) for t in targets):
                return True
    for site in method.calls:
        if site.method in _KEEPS and any(isinstance(n, cst.Name) and n.value == name
                                         for a in site.node.args for n in local_nodes(a.value)):
            return True
    return False


def _callers_hand_own(project: Project, file: FileModel, method: FunctionInfo, param: str) -> bool:
    """Does every seen caller of the setter hand, for ``param``, a value of its own that it keeps nowhere (a local
    or a temporary, not a field of its object or a view of one), and is at least one seen?"""
    params = (method.params[1:] if method.params[:1] == ("self",) else method.params) + method.kwonly
    sites = callers_of(project, file, method) or ()
    seen = 0
    for _model, site in sites:
        if site.function is None or seen >= _MAX_CALLERS:
            return False
        expr = bind_arguments(params, site.node, kwonly=method.kwonly).get(param)
        if expr is None:
            return False
        root = _root(expr)
        if isinstance(root, cst.Name) and (root.value in ("self", "cls") or root.value in site.function.all_params):
            return False  # its object's field, or what its own caller handed it
        if isinstance(expr, cst.Name) and _stored_elsewhere(site.function, expr.value, ""):
            return False
        seen += 1
    return seen > 0


def _keeps_alias(fn: FunctionInfo, field: str) -> bool:
    """Does the reading function keep what the field holds elsewhere (``self._inflight.append(blocks)`` with
    ``blocks = self._plan``, ``self._last = self._plan``)?"""
    aliases = {name for name, values in fn.name_assigns.items()
               if values and all(v is not None and self_attribute(v) == field for v in values)}
    for stmt in _statements(fn.node.body):
        if isinstance(stmt, (cst.Assign, cst.AnnAssign)) and stmt.value is not None:
            targets = [t.target for t in stmt.targets] if isinstance(stmt, cst.Assign) else [stmt.target]
            if any(isinstance(t, (cst.Attribute, cst.Subscript)) and self_attribute(t) != field for t in targets) \
                    and (self_attribute(stmt.value) == field
                         or isinstance(stmt.value, cst.Name) and stmt.value.value in aliases):
                return True
    for site in fn.calls:
        if site.method in _KEEPS and any(self_attribute(a.value) == field or isinstance(a.value, cst.Name)
                                         and a.value.value in aliases for a in site.node.args):
            return True
    return False


__all__ = ["FieldDrops", "field_drop"]
