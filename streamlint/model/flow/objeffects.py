"""Effects of methods on objects: which argument a method called on an object writes, and whether it hands back
fresh device memory (issue: effects of methods on objects).

Training frameworks keep their state in objects of their own: a sharded module walks its parameter groups
(``for group in self._groups:``) and calls their methods, handing them buffers: ``buf = group.new_grad_buffer()``
on a reduce-scatter stream, ``group.pack_grads(buf)`` on the compute stream, ``group.reduce_grads(buf)`` back
on the reduce-scatter stream. Neither the receiver's class nor what the method does to its argument was known
at the call: an unresolved call only reads its tensor arguments, and ``buf``, returned by a method of an
unknown object, was no tensor at all. The joins between the three calls ordered nothing the analysis saw.

This module resolves such receivers and summarises what the method does, without running the interpreter:

* the receiver (:func:`object_method`) is a name bound by a loop over a container the object holds
  (``for group in self._groups:``, ``.values()``, ``enumerate(...)``) or an element of it
  (``self._groups[i]``), the element class declared (``_groups: tuple[ParamGroup, ...]`` in the class body, an
  annotated assignment) or built there (``self._groups = [ParamGroup(p) for p in ...]``, also through
  ``tuple(...)`` / ``list(...)`` / a module list, or a local name bound once to such a comprehension): the class
  is then exact. Else a name only one project class defines as a method, the receiver using nothing else
  (:mod:`duckmethods`' evidence, the name bound by the loop instead of a parameter): findings resting on
  it are medium;
* the method (:func:`method_effects`) has no stream work of its own (a method that switches streams, waits or
  records is left alone: its caller stays as silent about it as before); its summary is

  - ``writes``: the parameters whose memory it writes, on the caller's current stream: an in-place tensor
    method on an expression rooted at the parameter (``buf.chunk(i).copy_(g)``, ``buf.data.zero_()``, through
    getters and views, not through a copy such as ``.clone()`` / ``.to()``), ``out=`` it, a collective's output
    position, a subscript store (``buf[i] = x``), or the parameter handed whole to a project callee (a module
    function, a method of ``self``, a method of the parameter's annotated class) whose own summary writes it
    (two levels down);
  - ``fresh``: every ``return`` hands back new device memory: a ``torch`` factory with a device keyword that is
    no host placement, or the construction of a project class whose ``__init__`` stores such a factory on
    ``self`` (a flat gradient buffer).

At the call (:meth:`Expressions.dispatch`), a summary that writes or allocates is applied on the current
stream: the written arguments are written (not read), the others read as at any call, and a fresh result is
an allocation of the current stream (memory from its pool, :meth:`Storages.alloc`). A method that writes
nothing and allocates nothing keeps the generic reading.

Memoised per project (``derived``), per function object (kept with the answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.apis import COLLECTIVES
from streamlint.model.file import dotted
from streamlint.model.filefacts import ClassInfo
from streamlint.model.flow.duckmethods import behaves_as, distinctive, only_definition
from streamlint.model.flow.elementsets import element_origins
from streamlint.model.placement import host_placed
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes
from streamlint.model.tensors import tensor_method
from streamlint.model.tensorvocab import MULTI_VIEW_METHODS, VIEW_METHODS

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

_MAX_DEPTH = 2
_FLAG_SETTERS = frozenset({"requires_grad_", "share_memory_", "retain_grad_", "record_stream"})
_SEQUENCES = frozenset({"tuple", "list", "Tuple", "List", "Sequence", "Iterable", "MutableSequence"})
_WRAPPERS = frozenset({"tuple", "list", "ModuleList", "nn.ModuleList", "torch.nn.ModuleList"})
_FACTORIES = frozenset({"empty", "zeros", "ones", "full", "empty_strided", "rand", "randn", "arange"})


@dataclass(frozen=True)
class MethodEffects:
    writes: frozenset[str]  # the parameters whose memory the method writes (on the caller's current stream)
    fresh: bool  # every return hands back new device memory allocated on the caller's current stream


@dataclass(frozen=True)
class ObjectMethod:
    method: FunctionInfo
    module: FileModel
    exact: bool  # the receiver's class is declared / built there (else: resolved by the method's name)


# ---- receivers

def _class_of(project: Project, file: FileModel, expr: cst.BaseExpression | None, scope) -> tuple[ClassInfo, FileModel] | None:
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    qualname = file.resolve(expr, scope) or f"{file.module_name}.{dotted(expr) or ''}"
    sym = project.symbol(qualname, file)
    return sym if sym is not None and isinstance(sym[0], ClassInfo) else None


def _annotated_element(annotation: cst.BaseExpression) -> cst.BaseExpression | None:
    """``tuple[X, ...]`` / ``list[X]`` / ``Sequence[X]`` -> ``X`` (a string annotation is read too)."""
    if isinstance(annotation, cst.SimpleString):
        try:
            annotation = cst.parse_expression(annotation.evaluated_value)
        except Exception:  # noqa: BLE001 - (an annotation that is no expression: no element class)
            return None
    if not isinstance(annotation, cst.Subscript):
        return None
    head = dotted(annotation.value) or ""
    if head.rsplit(".", 1)[-1] not in _SEQUENCES or not annotation.slice:
        return None
    first = annotation.slice[0].slice
    if not isinstance(first, cst.Index):
        return None
    if head.rsplit(".", 1)[-1] in ("tuple", "Tuple") and len(annotation.slice) == 2:
        second = annotation.slice[1].slice
        if not (isinstance(second, cst.Index) and isinstance(second.value, cst.Ellipsis)):
            return None  # `tuple[A, B]`: a record of two, no element class
    elif len(annotation.slice) != 1:
        return None
    return first.value if isinstance(first.value, (cst.Name, cst.Attribute)) else None


def _built_elements(value: cst.BaseExpression, fn_node: cst.FunctionDef, _depth: int = 0) -> list[cst.BaseExpression] | None:
    """The constructors of the elements of a container expression: ``[X(p) for p in ps]``, ``(X(), X())``,
    ``tuple(X(p) for ...)``, ``nn.ModuleList([...])``, a local bound once to one; None when unknown."""
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return [value.elt.func] if isinstance(value.elt, cst.Call) else None
    if isinstance(value, (cst.List, cst.Tuple)):
        out = [el.value.func for el in value.elements if isinstance(el.value, cst.Call)]
        return out if out and len(out) == len(value.elements) else None
    if isinstance(value, cst.Call) and (dotted(value.func) or "") in _WRAPPERS and len(value.args) == 1:
        return _built_elements(value.args[0].value, fn_node, _depth)
    if isinstance(value, cst.Name) and _depth < 2:
        bound = [n for n in local_nodes(fn_node.body) if isinstance(n, (cst.Assign, cst.AnnAssign))
                 and any(isinstance(t, cst.Name) and t.value == value.value
                         for t in ([x.target for x in n.targets] if isinstance(n, cst.Assign) else [n.target]))]
        if len(bound) == 1 and bound[0].value is not None:
            return _built_elements(bound[0].value, fn_node, _depth + 1)
    return None


def element_class(project: Project, file: FileModel, cls: ClassInfo, field: str) -> tuple[ClassInfo, FileModel] | None:
    """The one project class the elements of ``self.<field>`` have (see the module docstring), else None."""
    memo = derived(project, "objeffects_elements")
    key = (id(cls), field)
    held = memo.get(key)
    if held is not None and held[0] is cls:
        return held[1]
    found = _element_class(project, file, cls, field)
    memo[key] = (cls, found)
    return found


def _element_class(project: Project, file: FileModel, cls: ClassInfo, field: str) -> tuple[ClassInfo, FileModel] | None:
    declared: list[tuple[ClassInfo, FileModel] | None] = []
    for stmt in cls.node.body.body:  # `_groups: tuple[ParamGroup, ...]` in the class body: the declaration decides
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == field:
                element = _annotated_element(small.annotation.annotation)
                declared.append(_class_of(project, file, element, None) if element is not None else None)
    if declared:
        return declared[0] if len(declared) == 1 else None
    candidates: list[tuple[ClassInfo, FileModel] | None] = []
    for method in cls.methods.values():
        for node in local_nodes(method.node.body):
            if isinstance(node, cst.AnnAssign):
                targets, value = [node.target], node.value
                annotation = node.annotation.annotation
            elif isinstance(node, cst.Assign):
                targets, value, annotation = [t.target for t in node.targets], node.value, None
            else:
                continue
            if not any(isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self"
                       and t.attr.value == field for t in targets):
                continue
            if annotation is not None:
                element = _annotated_element(annotation)
                if element is not None:
                    candidates.append(_class_of(project, file, element, method))
                    continue
            if value is None:
                continue
            ctors = _built_elements(value, method.node)
            if ctors is None:
                candidates.append(None)  # rebound to something else: the elements are of unknown class
                continue
            candidates.extend(_class_of(project, file, c, method) for c in ctors)
    if not candidates or any(c is None for c in candidates):
        return None
    if len({id(c[0]) for c in candidates}) != 1:
        return None
    return candidates[0]


def _self_field(e: cst.BaseExpression) -> str | None:
    """``self._groups`` (also ``self._groups.values()``) -> ``_groups``."""
    if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "values" and not e.args:
        e = e.func.value
    if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self":
        return e.attr.value
    return None


def _receiver_field(fn: FunctionInfo, recv: cst.BaseExpression) -> str | None:
    """The ``self`` container whose element ``recv`` is: a loop name over it, or a subscript of it."""
    if isinstance(recv, cst.Subscript):
        return _self_field(recv.value)
    if not isinstance(recv, cst.Name) or recv.value in ("self", "cls") or recv.value in fn.all_params \
            or recv.value in fn.name_assigns:
        return None
    found = element_origins(fn.node, recv)
    fields = {_self_field(o.container) if o.field is None else None for o in found}
    if len(fields) != 1 or None in fields:
        return None
    return fields.pop()


def _method_of(project: Project, cls: ClassInfo, mod: FileModel, name: str) -> tuple[FunctionInfo, FileModel] | None:
    for _ in range(4):
        method = cls.methods.get(name)
        if method is not None:
            return (method, mod) if method.params[:1] == ("self",) else None
        if len(cls.bases) != 1:
            return None
        sym = project.symbol(cls.bases[0], mod)
        if sym is None or not isinstance(sym[0], ClassInfo):
            return None
        cls, mod = sym
    return None


def _strip_optional(annotation: cst.BaseExpression) -> cst.BaseExpression:
    """``X | None`` / ``Optional[X]`` -> ``X``."""
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        if isinstance(annotation.right, cst.Name) and annotation.right.value == "None":
            return annotation.left
        if isinstance(annotation.left, cst.Name) and annotation.left.value == "None":
            return annotation.right
    if isinstance(annotation, cst.Subscript) and (dotted(annotation.value) or "").rsplit(".", 1)[-1] == "Optional" \
            and len(annotation.slice) == 1 and isinstance(annotation.slice[0].slice, cst.Index):
        return annotation.slice[0].slice.value
    return annotation


def field_class(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> tuple[ClassInfo, FileModel] | None:
    """The project class ``self.<attr>`` holds, declared: a property's return annotation (``def context(self)
    -> Context``), or the field's annotation in the class body (``_ctx: Context | None``)."""
    prop = cls.methods.get(attr)
    if prop is not None:
        if prop.node.returns is None or not any((dotted(d.decorator) or "").endswith("property")
                                                for d in prop.node.decorators):
            return None
        return _class_of(project, file, _strip_optional(prop.node.returns.annotation), None)
    for stmt in cls.node.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == attr:
                return _class_of(project, file, _strip_optional(small.annotation.annotation), None)
    return None


def typed_receiver(project: Project, file: FileModel, fn: FunctionInfo,
                   recv: cst.BaseExpression) -> tuple[ClassInfo, FileModel] | None:
    """The declared project class of ``self.<attr>`` (:func:`field_class`), also through a local bound once to
    it (``context = self.context``)."""
    if fn.class_name is None:
        return None
    if isinstance(recv, cst.Name) and recv.value not in fn.all_params:
        values = fn.name_assigns.get(recv.value, [])
        recv = values[0] if len(values) == 1 else recv
    if not (isinstance(recv, cst.Attribute) and isinstance(recv.value, cst.Name) and recv.value.value == "self"):
        return None
    own = file.classes.get(fn.class_name)
    return field_class(project, file, own, recv.attr.value) if own is not None else None


def object_method(project: Project, file: FileModel, fn: FunctionInfo, func: cst.BaseExpression) -> ObjectMethod | None:
    """The project method ``recv.name(...)`` runs, ``recv`` an element of a container ``self`` holds (exact
    class), or a loop name over one calling a method only one project class defines (by name); else None."""
    if not isinstance(func, cst.Attribute) or fn.class_name is None:
        return None
    field = _receiver_field(fn, func.value)
    if field is None:
        typed = typed_receiver(project, file, fn, func.value)
        found = _method_of(project, typed[0], typed[1], func.attr.value) if typed is not None else None
        return ObjectMethod(found[0], found[1], True) if found is not None else None
    own = file.classes.get(fn.class_name)
    if own is not None:
        element = element_class(project, file, own, field)
        if element is not None:
            found = _method_of(project, element[0], element[1], func.attr.value)
            return ObjectMethod(found[0], found[1], True) if found is not None else None
    name = func.attr.value
    if not isinstance(func.value, cst.Name) or not distinctive(name):
        return None
    only = only_definition(project, name)
    if only is None:
        return None
    method, cls, mod = only
    return ObjectMethod(method, mod, False) if behaves_as(fn, func.value.value, cls) else None


# ---- summaries

def _root(e: cst.BaseExpression) -> str | None:
    """The name an expression's memory is reached from: ``buf.chunk(i)[0].data`` -> ``buf`` (through
    attributes, subscripts, getters and views; not through a tensor method that computes a new tensor)."""
    while True:
        if isinstance(e, cst.Name):
            return e.value
        if isinstance(e, (cst.Attribute, cst.Subscript)):
            e = e.value
        elif isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute):
            name = e.func.attr.value
            if name not in VIEW_METHODS and name not in MULTI_VIEW_METHODS and tensor_method(name):
                return None  # `buf.clone()`, `buf.to(dev)`: a new tensor
            e = e.func.value
        else:
            return None


def _device_factory(project: Project, file: FileModel, fn: FunctionInfo, call: cst.Call) -> bool:
    site = file.call_site(call)
    target = site.target if site is not None else None
    if not target or not target.startswith("torch.") or target.count(".") != 1 \
            or target.rsplit(".", 1)[-1] not in _FACTORIES:
        return False
    device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
    return device is not None and not host_placed(call)


def _allocating_class(project: Project, file: FileModel, cls: ClassInfo) -> bool:
    """A project class whose ``__init__`` stores a device factory's result on ``self``."""
    init = cls.methods.get("__init__")
    if init is None:
        return False
    for a in init.assigns:
        if a.target.startswith("self.") and isinstance(a.value, cst.Call) and _device_factory(project, file, init, a.value):
            return True
    return False


def _fresh(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    returns = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.Return)]
    if not returns:
        return False
    for r in returns:
        v = r.value
        if not isinstance(v, cst.Call):
            return False
        if _device_factory(project, file, fn, v):
            continue
        cls = _class_of(project, file, v.func, fn) if isinstance(v.func, (cst.Name, cst.Attribute)) else None
        if cls is None or not _allocating_class(project, cls[1], cls[0]):
            return False
    return True


def _callee(project: Project, file: FileModel, fn: FunctionInfo, site) -> tuple[FunctionInfo, FileModel, tuple[str, ...]] | None:
    """A project callee of ``site`` with the parameter names its positional arguments bind (``self`` dropped for
    a method called on an object)."""
    found = project.call_target(file, site)
    if found is None and isinstance(site.node.func, cst.Attribute) and isinstance(site.node.func.value, cst.Name):
        recv = site.node.func.value.value  # `p.method(...)`, `p: ProjectClass` a parameter
        for p in (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params):
            if p.name.value == recv and p.annotation is not None:
                cls = _class_of(project, file, p.annotation.annotation, fn.parent)
                if cls is not None:
                    found = _method_of(project, cls[0], cls[1], site.node.func.attr.value)
    if found is None:
        return None
    callee, mod = found
    params = callee.params
    if callee.class_name is not None and params[:1] == ("self",) and isinstance(site.node.func, cst.Attribute):
        params = params[1:]
    return callee, mod, params


def method_effects(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> MethodEffects | None:
    """The summary of the module docstring; None when ``fn`` has stream work of its own."""
    memo = derived(project, "objeffects_summaries")
    key = (id(fn), _depth)
    held = memo.get(key)
    if held is not None and held[0] is fn:
        return held[1]
    memo[key] = (fn, None)  # (recursion guard)
    from streamlint.model.flow.calls import _relevant

    out = None if _relevant(project, file, fn) else MethodEffects(
        _writes(project, file, fn, _depth), _fresh(project, file, fn))
    memo[key] = (fn, out)
    return out


def _writes(project: Project, file: FileModel, fn: FunctionInfo, _depth: int) -> frozenset[str]:
    params = set(fn.params) | set(fn.kwonly)  # (`self` too: what `p.method()` writes through it)
    rebound = set(fn.name_assigns)
    written: set[str] = set()

    def mark(e: cst.BaseExpression | None) -> None:
        name = _root(e) if e is not None else None
        if name in params and name not in rebound:
            written.add(name)

    for site in fn.calls:
        node, method = site.node, site.method
        if method is not None and method.endswith("_") and not method.startswith("_") and method not in _FLAG_SETTERS:
            mark(node.func.value)
        for a in node.args:
            if a.keyword is not None and a.keyword.value == "out":
                mark(a.value)
        target = site.target or ""
        last = target.rsplit(".", 1)[-1]
        if target.startswith(("torch.distributed.", "torch_npu.distributed.")) and last in COLLECTIVES:
            positional = [a.value for a in node.args if a.keyword is None]
            for i in COLLECTIVES[last][0]:
                if i < len(positional):
                    mark(positional[i])
        if _depth >= _MAX_DEPTH:
            continue
        found = _callee(project, file, fn, site)
        if found is None or found[0] is fn:
            continue
        callee, mod, cparams = found
        inner = method_effects(project, mod, callee, _depth + 1)
        if inner is None or not inner.writes:
            continue
        from streamlint.model.uses import bind_arguments

        bound = bind_arguments(cparams + callee.kwonly, node, kwonly=callee.kwonly)
        for name in inner.writes:
            arg = bound.get(name)
            if isinstance(arg, cst.Name):
                mark(arg)
        if "self" in inner.writes and isinstance(node.func, cst.Attribute):
            mark(node.func.value)
    for node in local_nodes(fn.node.body):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
            [node.target] if isinstance(node, cst.AugAssign) else []
        for t in targets:
            if isinstance(t, cst.Subscript):
                mark(t.value)
    return frozenset(written)


def guessed_calls(project: Project, file: FileModel, fn: FunctionInfo) -> str | None:
    """The name of the first method ``fn`` calls whose summary applies with a receiver resolved by the method's
    name only (not exact): findings resting on it assume the name resolution (medium)."""
    for site in fn.calls:
        if project.call_target(file, site) is not None:
            continue
        found = object_method(project, file, fn, site.node.func)
        if found is None or found.exact:
            continue
        fx = method_effects(project, found.module, found.method)
        if fx is not None and (fx.writes - {"self"} or fx.fresh):
            return found.method.node.name.value
    return None


__all__ = ["MethodEffects", "ObjectMethod", "element_class", "field_class", "guessed_calls", "method_effects", "object_method", "typed_receiver"]
