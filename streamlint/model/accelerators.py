"""Streams held through an accelerator layer (issue 16 §3, "Streams the way training frameworks hold them").

Training frameworks reach the device's stream API through an object that stands for the device module,
chosen at run time: ``get_accelerator().stream(s)``, ``get_accelerator().Stream()``,
``torch.get_device_module().current_stream()``, ``acc = get_accelerator(); acc.synchronize()``,
``self.accelerator.current_stream()``. A method call on such an object is the device API its classes
wrap. The object is recognised by what it is, never by the getter's name:

- ``torch.get_device_module(...)``: the device module itself (any device: the generic API);
- a project function returning an instance of a *device class*: a project class whose methods forward
  to the device's stream API (:func:`~streamlint.model.wrappers.infer_wrapper`: ``def stream(self, s):
  return torch.cuda.stream(s)``; a property ``Stream`` returning ``torch.cuda.Stream``). The candidate
  classes are the ones the getter's module names (its imports, also inside the getter) and the class
  its return annotation names; the getter returns a value, never a literal.

When every candidate class wraps the same API (one device), the call is that API; when they wrap
different devices (``CUDA_Accelerator`` and ``NPU_Accelerator``), it is the device-generic API of the
same role (``torch.accelerator.*``: no API family, so no mixing is claimed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model import apis, devfields, devobjects, heldhandles
from streamlint.model.apis import ApiSpec, Role
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import CallSite, ClassInfo, FunctionInfo
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.syntax import class_field_annotation, is_none, names_stream_class
from streamlint.model.uses import ApiUse, bind_arguments

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project

# The device module's stream API, by method name, and the device-generic spec of each role.
METHODS: dict[str, Role] = {
    "Stream": Role.STREAM_NEW, "Event": Role.EVENT_NEW, "stream": Role.NATIVE_STREAM_CONTEXT,
    "current_stream": Role.CURRENT_STREAM, "default_stream": Role.DEFAULT_STREAM, "set_stream": Role.SET_STREAM,
    "synchronize": Role.DEVICE_SYNCHRONIZE,
}
NATIVE_PATHS = frozenset({"eager", "cuda"})
_MIN_WRAPPED = 2  # a device class forwards at least two of these (not any class with a `stream` method)


def accelerator_uses(project: Project, file: FileModel, site: CallSite) -> tuple[ApiUse, ...]:
    """The API a method call on an accelerator object invokes (empty: not one)."""
    func = site.node.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in METHODS:
        return ()
    method = func.attr.value
    via: set[str] = set()
    specs = _receiver_specs(project, file, site.function, func.value, method, 0, via)
    if not specs and devobjects.foreign_receiver(project, file, site.function, func.value, method):
        specs, via = {apis.SPECS[_generic(METHODS[method])]}, {"object"}  # an object of another package
    entered = site.node.args[0].value if method == "stream" and site.node.args and site.function is not None \
        and any(scope.item.item is site.node for scope in site.function.scopes) else None  # `with handle.stream(s):`
    if not specs and heldhandles.held_handle(project, file, site.function, func.value, entered):
        specs = {apis.SPECS[_generic(METHODS[method])]}  # a handle the project holds, seen by its device methods
    if not specs:
        return ()
    if via and method == "stream" and not _stream_argument(project, file, site):
        return ()  # `platform.stream(x)` switches streams only when `x` is one (a name alone does not say)
    spec = next(iter(specs)) if len(specs) == 1 else apis.SPECS[_generic(METHODS[func.attr.value])]
    # a device module's own API: native streams, never an API of a captured graph path
    return (ApiUse(spec, site, file, bind_arguments(spec.params, site.node), modes=NATIVE_PATHS),)


def device_generic(use: ApiUse) -> bool:
    """Does ``use`` reach the device API through the device-generic layer: ``torch.accelerator.*``, or an
    accelerator object's method (whatever device its classes wrap, the device is chosen at run time)?"""
    return use.family is None or (use.modes == NATIVE_PATHS and not use.wrappers)


def _generic(role: Role) -> str:
    return next(s.qualname for s in apis.SPECS.values() if s.role is role and s.qualname.startswith("torch.accelerator."))


def _receiver_specs(project: Project, file: FileModel, fn: FunctionInfo | None, recv: cst.BaseExpression,
                    method: str, depth: int, via: set[str] | None = None) -> set[ApiSpec]:
    """The specs ``recv.<method>(...)`` may invoke, when ``recv`` denotes an accelerator object (``via``
    collects "object" when a device object decided it: :mod:`~streamlint.model.devobjects`)."""
    if depth > 4:
        return set()
    if isinstance(recv, cst.IfExp):  # `torch.get_device_module(t) if new_torch else torch.cuda`
        arms = [a for a in (recv.body, recv.orelse) if not is_none(a)]
        found = [_receiver_specs(project, file, fn, a, method, depth + 1, via) for a in arms]
        return set().union(*found) if found and all(found) else set()
    if isinstance(recv, cst.Call) and dotted(recv.func) == "getattr" and len(recv.args) >= 2 \
            and isinstance(recv.args[0].value, (cst.Name, cst.Attribute)) \
            and file.resolve(recv.args[0].value, fn) == "torch":
        name = recv.args[1].value
        if isinstance(name, cst.SimpleString):  # `getattr(torch, "npu")`
            module = _device_module(f"torch.{name.evaluated_value}")
            return _module_spec(module, method) if module is not None else set()
        return {apis.SPECS[_generic(METHODS[method])]}  # `getattr(torch, device_type)`: chosen at run time
    if isinstance(recv, (cst.Name, cst.Attribute)):
        module = _device_module(file.resolve(recv, fn))
        if module is not None:  # `dev = torch.cuda` / `return torch.npu`: the device module itself
            return _module_spec(module, method)
        classes = devobjects.object_classes(project, file, fn, recv)
        if classes:  # `current_platform` (a module-level object), `platform: Platform` (an annotated parameter)
            found = [_class_specs(project, m, c, method) for c, m in classes]
            if all(found):
                if via is not None:
                    via.add("object")
                return set().union(*found)
            return set()
    if isinstance(recv, cst.Call):
        qualname = file.resolve(recv.func, fn)
        if qualname in apis.DEVICE_MODULE_GETTERS:
            return {apis.SPECS[_generic(METHODS[method])]}
        target = project.function(qualname, file) if qualname else None
        if target is None:
            built = devfields.constructed_class(project, file, fn, recv)
            if built is not None:  # `Backend(dev)`: an object of a project device class
                return _class_specs(project, built[1], built[0], method)
        if target is not None and target[0].class_name is not None and not recv.args \
                and _own_method(project, target[1], fn, recv.func, target[0]):  # `self._device()`: its own getter
            return _returned_specs(project, target[1], target[0], method, depth, via)
        if target is None or target[0].class_name is not None:
            return set()
        return _getter_specs(project, target[1], target[0], method) \
            or _returned_specs(project, target[1], target[0], method, depth, via)
    if isinstance(recv, cst.Attribute) and isinstance(recv.value, cst.Name) and recv.value.value != "self":
        # `context.device_handle`: a member of a project object the name holds (an annotated parameter, a
        # local built by a constructor), bound in the class wherever the project sees it
        holders = devfields.holder_classes(project, file, fn, recv.value)
        if holders:
            found = [_bound_specs(project, m, c, recv.attr.value, method, depth, via) for c, m in holders]
            return set().union(*found) if all(found) else set()
    if isinstance(recv, cst.Attribute) and not (isinstance(recv.value, cst.Name) and recv.value.value == "self"):
        # `get_platform().device_module`: a member of the project object a getter returns (its class, or the
        # subclasses a base class stands for), which is the device module
        return _member_of(project, file, fn, recv, method, depth)
    owner = devobjects.binder(fn, recv.value) if isinstance(recv, cst.Name) else None
    if owner is not None:  # a local of the function or of an enclosing one (a closure cell)
        values = owner.name_assigns.get(recv.value)
        if not values or recv.value in owner.all_params:
            return set()
        found = [_receiver_specs(project, file, owner, v, method, depth + 1, via) for v in values]
        return set().union(*found) if all(found) else set()
    if isinstance(recv, cst.Attribute) and isinstance(recv.value, cst.Name) and recv.value.value == "self" \
            and fn is not None and fn.class_name in file.classes:
        return _bound_specs(project, file, file.classes[fn.class_name], recv.attr.value, method, depth, via)
    return set()


def _own_method(project: Project, file: FileModel, fn: FunctionInfo | None, func: cst.BaseExpression,
                method: FunctionInfo) -> bool:
    """Is ``func`` (``self._device``) a method of the class of ``fn`` taking nothing but ``self``, returning a value
    at every return, that no project subclass overrides, direct or through up to three levels (``self`` may be one,
    whose override may return another object)?"""
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
            and fn is not None and fn.class_name == method.class_name and method.params == ("self",)
            and not method.node.params.kwonly_params and not isinstance(method.node.params.star_arg, cst.Param)):
        return False
    cls = file.classes.get(method.class_name or "")
    if cls is None or not method.returns or any(r.value is None for r in method.returns):
        return False
    level, seen = [(cls, file)], {(file.path, cls.name)}
    for _ in range(4):  # (bounded: a deep or cyclic hierarchy stops here)
        level = [(sub, mod) for c, m in level for sub, mod in direct_subclasses(project, m, c)
                 if (mod.path, sub.name) not in seen and not seen.add((mod.path, sub.name))]
        if any(func.attr.value in sub.methods for sub, _ in level):
            return False
    return True


def _bound_specs(project: Project, file: FileModel, cls: ClassInfo, attr: str, method: str, depth: int,
                 via: set[str] | None) -> set[ApiSpec]:
    """``<obj of cls>.<attr>.<method>(...)``: every value the class (its bases, properties, keyword
    constructions) binds to ``attr`` is a device module (or a device object)."""
    bound = devfields.member_values(project, file, cls, attr)
    found = [_receiver_specs(project, m, f, v, method, depth + 1, via) for f, m, v in bound or ()]
    return set().union(*found) if found and all(found) else set()


def _device_module(qualname: str | None) -> str | None:
    """``torch.cuda`` / ``torch.npu`` / ``torch.xpu`` / ``torch.accelerator`` for a name of that module, else None."""
    canon = apis.canonical(qualname) if qualname is not None else None
    return canon if canon in apis.STREAM_DEVICE_MODULES else None


def _module_spec(module: str, method: str) -> set[ApiSpec]:
    spec = apis.SPECS.get(f"{module}.{method}")
    return {spec if spec is not None and spec.role is METHODS[method] else apis.SPECS[_generic(METHODS[method])]}


def _returned_specs(project: Project, file: FileModel, getter: FunctionInfo, method: str, depth: int,
                    via: set[str] | None = None) -> set[ApiSpec]:
    """A getter every return of which is a device module (``return get_platform().device_module``)."""
    values = [r.value for r in getter.returns if r.value is not None]
    found = [_receiver_specs(project, file, getter, v, method, depth + 1, via) for v in values]
    return set().union(*found) if found and all(found) else set()


def _member_of(project: Project, file: FileModel, fn: FunctionInfo | None, recv: cst.Attribute, method: str,
               depth: int) -> set[ApiSpec]:
    """``<obj>.<attr>`` where ``obj`` is a call of a project getter annotated with a project class: that
    class's (or its project subclasses') ``attr`` — a property or a field — when every definition of it
    returns a device module."""
    if not isinstance(recv.value, cst.Call):
        return set()
    qualname = file.resolve(recv.value.func, fn)
    target = project.function(qualname, file) if qualname else None
    if target is None or target[0].node.returns is None:
        return set()
    getter, mod = target
    sym = project.symbol(mod.resolve(getter.node.returns.annotation, getter) or "", mod)
    if sym is None or not isinstance(sym[0], ClassInfo):
        return set()
    found: list[set[ApiSpec]] = []
    for cls, cmod in [sym, *direct_subclasses(project, sym[1], sym[0])]:
        member = cls.methods.get(recv.attr.value)
        if member is not None and member.returns:
            found += [_receiver_specs(project, cmod, member, r.value, method, depth + 1)
                      for r in member.returns if r.value is not None]
        for m in cls.methods.values():
            found += [_receiver_specs(project, cmod, m, a.value, method, depth + 1)
                      for a in m.assigns if a.target == f"self.{recv.attr.value}" and a.value is not None]
    return set().union(*found) if found and all(found) else set()


def _class_specs(project: Project, file: FileModel, cls: ClassInfo, method: str) -> set[ApiSpec]:
    """What ``<an object of cls>.<method>(...)`` invokes: the API the method (of the class or a project base)
    forwards to, else the device module the class's ``__getattr__`` forwards unknown attributes to."""
    for c, m in devobjects.class_chain(project, file, cls):
        if method in c.methods:
            return _method_specs(project, m, c, method)
    module = devobjects.forwards_device(project, file, cls)
    return _module_spec(module, method) if module is not None else set()


def _stream_argument(project: Project, file: FileModel, site: CallSite) -> bool:
    """Is the first argument of ``<obj>.stream(x)`` a stream (a value the model types as one)?"""
    return bool(site.node.args) and _is_stream(project, file, site.function, site.node.args[0].value, 0)


_STREAM_VALUE_ROLES = frozenset({Role.STREAM_NEW, Role.CURRENT_STREAM, Role.DEFAULT_STREAM})


def _is_stream(project: Project, file: FileModel, fn: FunctionInfo | None, expr: cst.BaseExpression,
               depth: int) -> bool:
    """Does ``expr`` evidently hold a stream (or a list of streams): made by a stream API call, through
    locals and ``self.*`` fields assigned from one, or a parameter / field annotated with a Stream class?"""
    if depth > 4:
        return False
    if isinstance(expr, cst.Subscript):
        expr = expr.value
    if isinstance(expr, cst.IfExp):  # `pool.pop() if pool else platform.Stream()`, `side if on else None`
        return any(_is_stream(project, file, fn, arm, depth + 1) for arm in (expr.body, expr.orelse)
                   if not (isinstance(arm, cst.Name) and arm.value == "None"))
    if isinstance(expr, (cst.List, cst.Tuple)) and expr.elements:
        expr = expr.elements[0].value
    elif isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        expr = expr.elt
    if isinstance(expr, cst.Call):
        site = file.call_site(expr)
        return site is not None and any(u.role in _STREAM_VALUE_ROLES for u in project.api_uses(file, site))
    owner = devobjects.binder(fn, expr.value) if isinstance(expr, cst.Name) else None
    if owner is not None:  # a local or parameter of the function, or of an enclosing one (a closure cell)
        if _waits_as_stream(fn, expr.value):
            return True
        values = owner.name_assigns.get(expr.value)
        if values:  # `h2d = self._h2d_stream`
            return all(_is_stream(project, file, owner, v, depth + 1) for v in values)
        annotation = devobjects.param_annotation(owner, expr.value)
        return annotation is not None and names_stream_class(file.code(annotation))
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self" \
            and fn is not None and fn.class_name in file.classes:
        cls = file.classes[fn.class_name]
        key = f"self.{expr.attr.value}"
        if _waits_as_stream(fn, key):
            return True
        pairs = [(m, a.value) for m in cls.methods.values() for a in m.assigns if a.target == key and a.value is not None
                 and not (isinstance(a.value, cst.Name) and a.value.value == "None")]
        if pairs:
            return all(_is_stream(project, file, m, v, depth + 1) for m, v in pairs)
        annotation = class_field_annotation(cls.node, expr.attr.value)
        return annotation is not None and names_stream_class(file.code(annotation))
    return False


def _waits_as_stream(fn: FunctionInfo | None, text: str) -> bool:
    """Does ``fn`` call a stream-only method on ``text`` (``s.wait_stream(...)``, ``s.wait_event(...)``,
    ``s.record_event(...)``): the value is used as a stream there."""
    return fn is not None and any(
        site.method in ("wait_stream", "wait_event", "record_event") and isinstance(site.node.func, cst.Attribute)
        and dotted(site.node.func.value) == text for site in fn.calls)


def direct_subclasses(project: Project, file: FileModel, base: ClassInfo) -> list[tuple[ClassInfo, FileModel]]:
    """The project classes deriving directly from ``base`` (searched in the files that name it)."""
    memo = project.derived("accelerator_subclasses")
    key = (file.path, base.name)
    if key in memo:
        return memo[key]
    memo[key] = []
    paths = project.paths_containing((base.name.encode(),))
    out: list[tuple[ClassInfo, FileModel]] = []
    if len(paths) <= MAX_CALLER_FILES:
        for path in paths:
            model = project.file(path)
            for cls in (model.classes.values() if model is not None else ()):
                for b in cls.bases:
                    found = project.symbol(b, model) if b else None
                    if found is not None and found[0] is base:
                        out.append((cls, model))
                        break
    memo[key] = out
    return out


def _getter_specs(project: Project, file: FileModel, getter: FunctionInfo, method: str) -> set[ApiSpec]:
    """What ``getter().<method>(...)`` invokes: the API each device class the getter may return wraps there."""
    memo = project.derived("accelerator_getters")
    key = (file.path, getter.qualname)
    if key not in memo:
        memo[key] = {}
        memo[key] = _device_classes(project, file, getter)
    out: set[ApiSpec] = set()
    for cls, mod in memo[key]:
        out |= _method_specs(project, mod, cls, method)
    return out


def _device_classes(project: Project, file: FileModel, getter: FunctionInfo) -> list[tuple[ClassInfo, FileModel]]:
    values = [r.value for r in getter.returns if r.value is not None]
    if not values or any(not isinstance(v, (cst.Name, cst.Call, cst.Attribute)) for v in values):
        return []
    names: dict[str, str] = dict(file.names)
    names.update(getter.local_aliases)
    annotation = getter.node.returns.annotation if getter.node.returns is not None else None
    candidates = list(names.values())
    if annotation is not None:
        resolved = file.resolve(annotation, getter)
        candidates += [resolved] if resolved else []
    candidates += [f"{file.module_name}.{c}" for c in file.classes]
    out, seen = [], set()
    for qualname in candidates:
        found = project.symbol(qualname, file)
        if found is None or not isinstance(found[0], ClassInfo) or id(found[0]) in seen:
            continue
        seen.add(id(found[0]))
        cls, mod = found
        if sum(bool(_method_specs(project, mod, cls, m)) for m in METHODS) >= _MIN_WRAPPED:
            out.append((cls, mod))
    return out


def _method_specs(project: Project, file: FileModel, cls: ClassInfo, method: str) -> set[ApiSpec]:
    """The stream API ``cls.<method>`` forwards to (a wrapper method, or a property returning the class)."""
    memo = project.derived("accelerator_methods")
    key = (file.path, cls.name, method)
    if key in memo:
        return memo[key]
    memo[key] = set()
    fn = cls.methods.get(method)
    role = METHODS[method]
    out: set[ApiSpec] = set()
    if fn is not None:
        if any(d.rsplit(".", 1)[-1] == "property" for d in fn.decorators):
            for ret in fn.returns:
                spec = apis.lookup(file.resolve(ret.value, fn)) if ret.value is not None else None
                if spec is not None and spec.role is role:
                    out.add(spec)
        else:
            wrapper = project.wrapper(fn, file)
            out |= {v.spec for v in (wrapper.variants if wrapper is not None else ()) if v.spec.role is role}
    memo[key] = out
    return out


__all__ = ["METHODS", "accelerator_uses", "device_generic", "direct_subclasses"]
