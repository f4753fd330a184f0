"""Project calls that hand back records of device data they make (issue 16, [unknown-type]).

A weight streamer, a page loader or an activation offloader moves its data with a method of a project object of
another module: ``blk = host_block.upload(device)`` whose code builds ``DeviceBlock(self.codes.to(device,
non_blocking=True), self.scale.to(device, non_blocking=True), self.rows)``, or a helper returning a list of such
records (``return [self._upload(b) for b in group]``). Called under ``with torch.cuda.stream(side):`` the copies
are work of the side stream, and the consumer is a method or a field of the record on the current stream
(``blk.expand(dtype)``, ``blk.scale``): the call's result was an opaque value (a class that holds tensors, or a
``-> list[DeviceBlock]`` taken for host data), and neither the production nor the read was seen.

:func:`device_record` summarises a project function once (memoised per project): every ``return`` hands back the
construction of a project record class (a dataclass, a NamedTuple, an ``__init__`` that only stores its
arguments) with at least one field given device data the function makes itself (a non-blocking ``.to(<device>)``
/ ``.cuda()`` copy, a torch factory with a device that is not the host, a local bound once to one), a list / tuple
/ comprehension of such records, or the result of another project function (or a method of a parameter annotated
with a project class) with such a summary, at most three calls deep. A function that orders streams itself
(``synchronize``, ``wait_stream``, an event's ``record`` / ``wait``, a stream switch) has no summary: what it hands
back is complete, or ordered by its own protocol, when it returns.

At a call (:func:`record_result`), such a summary makes the result one new device storage produced on the current
stream at the call; a field read of it (``blk.scale``) is a view of that storage (:func:`record_field`), a method
called on it reads it (the generic rule of a tensor's unknown method). A call resolved only by its method name
(:mod:`duckmethods`' evidence, an unannotated receiver) marks the storage as of assumed type: its races are
medium (``Race.unknown``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.devobjects import annotation_classes, param_annotation
from streamlint.model.file import FileModel, dotted, string_value
from streamlint.model.filefacts import ClassInfo
from streamlint.model.flow.values import FieldsVal
from streamlint.model.handedevents import construction_fields
from streamlint.model.placement import host_placed
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes

if TYPE_CHECKING:
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

_MAX_DEPTH = 3
# calls that order streams or switch them: a function making them hands back data its own protocol orders
_ORDERING = frozenset({"synchronize", "wait_stream", "wait_event", "wait", "record", "record_event", "stream",
                       "use_stream", "StreamContext", "record_stream", "query"})
_COPIES = frozenset({"to", "cuda", "npu", "xpu"})
_FACTORIES = frozenset({"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
                        "empty_strided", "rand", "randn"})
_HOSTISH = ("cpu", "meta", "dtype", "float", "half", "bfloat", "int8", "int16", "int32", "int64", "uint8", "bool",
            "memory_format", "pin")


@dataclass(frozen=True)
class RecordSummary:
    cls: str  # the record class's name
    fields: frozenset[str]  # its fields given device data the function makes
    cls_info: ClassInfo | None = field(default=None, compare=False)
    module: FileModel | None = field(default=None, compare=False)


def device_record(project: Project, file: FileModel, fn: FunctionInfo) -> RecordSummary | None:
    """The record of device data every ``return`` of ``fn`` hands back (also as the elements of a list), or None."""
    memo = derived(project, "device_records")
    if id(fn) in memo:
        return memo[id(fn)][0]
    memo[id(fn)] = (None, fn)  # (a guard: a cycle is no evidence; the function is kept with its answer)
    values = [r.value for r in fn.returns]
    if not values or fn.yields or _orders(fn) or _other_effects(file, fn) or _cached(fn):
        return None
    found = [_value(project, file, fn, v, 0) for v in values]
    if None in found:
        return None
    summary = RecordSummary(found[0].cls, frozenset().union(*(s.fields for s in found)), found[0].cls_info,
                            found[0].module)
    memo[id(fn)] = (summary, fn)
    return summary


def _orders(fn: FunctionInfo) -> bool:
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.Call):
            func = node.func
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) \
                else None
            if name in _ORDERING or name == "Event":
                return True
    return False


def _cached(fn: FunctionInfo) -> bool:
    """A memoising decorator (``functools.lru_cache``, ``cache``, ``cached_property``): the record is shared."""
    return any("cache" in (dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "").lower()
               for d in fn.node.decorators)


def _other_effects(file: FileModel, fn: FunctionInfo) -> bool:
    """Work the summary would drop (the call is no longer inlined): a call whose result is discarded
    (``buf.copy_(src, non_blocking=True)`` into the caller's ``buf``, ``self._fill(buf)``), an ``out=`` argument,
    an item or attribute assignment (``buf[i] = x``; ``self.last = rec``: the object keeps the record, so the
    caller's drop frees nothing). Logging, warnings and a method of a device buffer the function allocates itself
    (``out = torch.empty(..., device=d); out.copy_(src, non_blocking=True)``) are no such work."""
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
            func = node.value.func
            root = (dotted(func) or "").split(".", 1)[0].lower()
            own = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                and _fresh(file, fn, func.value, 0)
            if not (own or root in ("print", "warnings", "logging") or "log" in root):
                return True
        elif isinstance(node, cst.Call) and any(a.keyword is not None and a.keyword.value == "out" for a in node.args):
            return True
        elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(isinstance(t, (cst.Subscript, cst.Attribute)) for t in targets):
                return True
    return False


def _value(project: Project, file: FileModel, fn: FunctionInfo, v: cst.BaseExpression | None,
           depth: int) -> RecordSummary | None:
    if v is None or depth > _MAX_DEPTH:
        return None
    if isinstance(v, cst.Name):
        bound = fn.name_assigns.get(v.value) or []
        return _value(project, file, fn, bound[0], depth + 1) if len(bound) == 1 and v.value not in fn.all_params \
            else None
    if isinstance(v, (cst.ListComp, cst.GeneratorExp)):
        return _value(project, file, fn, v.elt, depth + 1)
    if isinstance(v, (cst.List, cst.Tuple)) and v.elements:
        items = [_value(project, file, fn, el.value, depth + 1) if not isinstance(el, cst.StarredElement) else None
                 for el in v.elements]
        return None if None in items else RecordSummary(items[0].cls, frozenset().union(*(s.fields for s in items)),
                                                        items[0].cls_info, items[0].module)
    if not isinstance(v, cst.Call):
        return None
    if dotted(v.func) in ("list", "tuple") and len(v.args) == 1 and not v.args[0].star:
        return _value(project, file, fn, v.args[0].value, depth + 1)
    site = file.call_site(v)
    sym = project.symbol(site.target, file) if site is not None and site.target else None
    if sym is not None and isinstance(sym[0], ClassInfo):
        return _construction(project, file, fn, sym, v)
    callee = callee_of(project, file, fn, v)
    if callee is None or callee[0] is fn:
        return None
    return device_record(project, callee[1], callee[0])


def callee_of(project: Project, file: FileModel, fn: FunctionInfo,
              call: cst.Call) -> tuple[FunctionInfo, FileModel] | None:
    """The project function ``call`` runs: :meth:`Project.call_target`, or a method of a parameter annotated with
    one project class that defines it, or of a ``self`` field every binding of which is such a parameter of the
    binding method (``self.stash = stash`` in ``__init__(self, stash: Stash)``)."""
    site = file.call_site(call)
    found = project.call_target(file, site) if site is not None else None
    if found is not None:
        return found
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    classes = None
    if isinstance(func.value, cst.Name) and func.value.value in fn.all_params and func.value.value not in fn.name_assigns:
        classes = _param_classes(project, file, fn, func.value.value)
    elif isinstance(func.value, cst.Attribute) and dotted(func.value.value) == "self" and fn.class_name is not None:
        classes = _stored_classes(project, file, fn.class_name, func.value.attr.value)
    if classes is not None and len(classes) == 1 and func.attr.value in classes[0][0].methods:
        return classes[0][0].methods[func.attr.value], classes[0][1]
    return None


def _param_classes(project: Project, file: FileModel, fn: FunctionInfo, name: str) -> list | None:
    annotation = param_annotation(fn, name)
    return annotation_classes(project, file, fn, annotation) if annotation is not None else None


def _stored_classes(project: Project, file: FileModel, class_name: str, attr: str) -> list | None:
    """The project classes of ``self.<attr>`` when every method of the class binding it stores there a parameter
    of its own annotated with them (None: any other binding, or none). Memoised per project."""
    memo = derived(project, "record_stored_classes")
    key = (file.path, class_name, attr)
    if key not in memo:
        memo[key] = _stored(project, file, class_name, attr)
    return memo[key]


def _stored(project: Project, file: FileModel, class_name: str, attr: str) -> list | None:
    found: list = []
    for method in file.functions.values():
        if method.class_name != class_name:
            continue
        for a in method.assigns:
            if a.target != f"self.{attr}":
                continue
            if not (isinstance(a.value, cst.Name) and a.value.value in method.all_params
                    and a.value.value not in method.name_assigns):
                return None
            classes = _param_classes(project, file, method, a.value.value)
            if classes is None:
                return None
            found += [c for c in classes if all(c[0] is not k[0] for k in found)]
    return found or None


def _construction(project: Project, file: FileModel, fn: FunctionInfo, sym: tuple,
                  call: cst.Call) -> RecordSummary | None:
    """``Record(a, b, n)`` of a plain record class: the fields given device data ``fn`` makes (None: none)."""
    from streamlint.model.flow.calls import plain_container  # (calls imports the interpreter's helpers)

    cls, module = sym
    if not plain_container(cls) or any(a.star for a in call.args):
        return None
    fields = {name for name, value in construction_fields(project, module, cls, call).items()
              if _fresh(file, fn, value, 0)}
    return RecordSummary(cls.name, frozenset(fields), cls, module) if fields else None


def _field_order(cls: ClassInfo) -> list[str]:
    """The order the fields of a handed-back record are listed in (messages; which argument gives which field is
    ``handedevents.construction_fields``): its ``__init__`` parameters (each named after the attribute
    it is stored in, ``self.k = keys``), else its annotated fields."""
    init = cls.methods.get("__init__")
    if init is not None:
        stored = {a.value.value: a.target[len("self."):] for a in init.assigns
                  if isinstance(a.value, cst.Name) and a.target.startswith("self.") and a.target.count(".") == 1}
        return [stored.get(p, p) for p in init.params[1:]]
    body = cls.node.body.body if isinstance(cls.node.body, cst.IndentedBlock) else ()
    return [small.target.value for stmt in body if isinstance(stmt, cst.SimpleStatementLine) for small in stmt.body
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name)
            and "ClassVar" not in (dotted(small.annotation.annotation) or "")]


def _fresh(file: FileModel, fn: FunctionInfo, e: cst.BaseExpression, depth: int) -> bool:
    """Device data ``fn`` makes: a non-blocking copy to a device, a torch factory on a device (not the host)."""
    if isinstance(e, cst.Name) and depth < 2 and e.value not in fn.all_params:
        bound = fn.name_assigns.get(e.value) or []
        return len(bound) == 1 and _fresh(file, fn, bound[0], depth + 1)
    if not isinstance(e, cst.Call):
        return False
    func = e.func
    if isinstance(func, cst.Attribute) and func.attr.value in _COPIES:
        flag = next((a.value for a in e.args if a.keyword is not None and a.keyword.value == "non_blocking"), None)
        if flag is None or isinstance(flag, cst.Name) and flag.value in ("False", "None"):
            return False  # a blocking copy: from host memory the host waits for it
        if func.attr.value != "to":
            return True
        target = next((a.value for a in e.args if a.keyword is None or a.keyword.value == "device"), None)
        if target is None:
            return False
        text = string_value(target) or file.code(target)
        return not any(word in text.lower() for word in _HOSTISH)
    qualname = file.resolve(func, fn) if isinstance(func, (cst.Name, cst.Attribute)) else None
    if qualname and qualname.split(".", 1)[0] in ("torch", "torch_npu") and qualname.rsplit(".", 1)[-1] in _FACTORIES:
        device = next((a.value for a in e.args if a.keyword is not None and a.keyword.value == "device"), None)
        return device is not None and not host_placed(e) and not any(
            word in (string_value(device) or file.code(device)).lower() for word in ("cpu", "meta"))
    return False


def record_result(interp, st, e: cst.Call, found) -> object | None:
    """The result of ``e`` when the project function it runs hands back a record of device data: one new storage
    per field it fills, produced on the current stream at the call (its arguments read there); a method called on
    such a record (:func:`_record_method`); None otherwise. ``found``: the callee the dispatcher resolved (else a
    method of an annotated parameter, an element or loop name of a container the object holds, or a method only
    one project class defines: then the result's type is assumed, ``Race.unknown``)."""
    from streamlint.model.flow.objeffects import object_method

    func = e.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
            and isinstance(held := st.env.get(func.value.value), FieldsVal):
        return _record_method(interp, st, e, held)
    project, file, fn = interp.project, interp.cfile, interp.cfn
    certain = found is not None
    if found is None and fn is not None:
        found = callee_of(project, file, fn, e)
        certain = found is not None
    if found is None and fn is not None:
        typed = object_method(project, file, fn, func)
        if typed is not None:
            found, certain = (typed.method, typed.module), typed.exact
    summary = device_record(project, found[1], found[0]) if found is not None else None
    if summary is None:
        return None
    if isinstance(func, cst.Attribute):
        interp.ev(st, func.value)
    _, reads, _ = interp.call_args(st, e)
    order = _field_order(summary.cls_info) if summary.cls_info is not None else []
    names = tuple(sorted(summary.fields, key=lambda f: (order.index(f) if f in order else len(order), f)))
    items = tuple(interp.op(st, e, reads if i == 0 else []) for i in range(len(names)))
    if not certain:
        interp.unknown_results.update(tv.sid for tv in items)  # (resolved by its method name only: medium)
        interp.__dict__.setdefault("assumed_records", set()).update(tv.sid for tv in items)
    return FieldsVal(items, names, owner=(summary.cls_info, summary.module))


def _record_method(interp, st, e: cst.Call, rec: FieldsVal) -> object:
    """``rec.method(...)``: a method of the record class recording its fields (``self.keys.record_stream(s)``, ``s``
    a parameter) records them on the stream handed in; any other method reads every field on the current stream
    (a new tensor results)."""
    from streamlint.model.uses import bind_arguments

    owner = rec.owner[0] if rec.owner is not None else None
    method = owner.methods.get(e.func.attr.value) if owner is not None else None
    recorded = _recorded_fields(method) if method is not None else {}
    _, reads, _ = interp.call_args(st, e)
    if not recorded:
        return interp.op(st, e, [rec] + reads)
    bound = bind_arguments(method.params[1:] + method.kwonly, e, kwonly=method.kwonly)
    for name, param in recorded.items():
        arg = bound.get(param)
        if arg is not None and name in rec.names:
            stream = interp.stream_key(st, interp.ev(st, arg), arg)
            interp.note_record(st, [rec.items[rec.names.index(name)]], stream, f"{e.func.value.value}.{name}")
    return None


def _recorded_fields(method: FunctionInfo) -> dict[str, str]:
    """``{field: parameter}`` for each ``self.<field>.record_stream(<parameter>)`` of the method."""
    out = {}
    for node in local_nodes(method.node.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value == "record_stream" \
                and isinstance(node.func.value, cst.Attribute) and dotted(node.func.value.value) == "self" \
                and len(node.args) == 1 and isinstance(node.args[0].value, cst.Name) \
                and node.args[0].value.value in method.all_params:
            out[node.func.value.attr.value] = node.args[0].value.value
    return out


def record_field(rec: FieldsVal, attr: str) -> object:
    """The storage of the field ``attr`` of a record; None for a field holding no device data the call made; the
    whole record for a property or another member the class computes (it may hand back any field)."""
    if attr in rec.names:
        return rec.items[rec.names.index(attr)]
    cls = rec.owner[0] if rec.owner is not None else None
    return rec if cls is not None and attr in cls.methods else None


__all__ = ["RecordSummary", "callee_of", "device_record", "record_field", "record_result"]
