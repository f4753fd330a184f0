"""Device objects: a value that stands for the device module although no getter hands it out (issue 16 §3,
"Streams the way frameworks hold them").

Frameworks keep a *platform object* at module level and call the device API on it: ``current_platform.
Stream()``, ``current_platform.current_stream(dev)``, ``with current_platform.stream(s):``. Its class is the
project's own (``class Platform`` whose ``__getattr__`` returns ``getattr(torch, self.device_type)``'s member,
a lazy proxy forwarding every attribute to such an object), or lives in another package (vLLM's
``current_platform`` seen from a plugin). :func:`object_classes` says which project classes a receiver may
hold: a module-level variable (its annotation, ``if TYPE_CHECKING: current_platform: Platform`` included, and
the classes its value constructs), or a parameter annotated with a class. :func:`forwards_device` says
whether a class stands for the device module: its ``__getattr__`` (its own or a project base's) returns an
attribute of a device module -- ``getattr(torch, <run-time name>)`` is the device chosen at run time -- or
of another such object. :func:`foreign_receiver` says whether a receiver is an object imported from another
package (its class unseen): only the method names that are unambiguous device-stream API (``Stream()``,
``current_stream()``, ``default_stream()``) make it one, and the same receiver's other methods count only
once one of those was called on it in the file (never the evidence of a name alone)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.syntax import param_named
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project

# Device-module methods whose name alone says "stream API" on an object from another package.
UNAMBIGUOUS = frozenset({"Stream", "current_stream", "default_stream"})
GENERIC = "torch.accelerator"  # the device chosen at run time
# Packages with their own stream objects (not torch's): an object imported from them is not a torch device.
_OTHER_RUNTIMES = frozenset({"cupy", "numba", "pycuda", "cuda", "paddle", "jax", "tensorflow", "mindspore",
                             "triton", "warp", "mlx", "threading", "asyncio", "multiprocessing", "concurrent"})


def module_statements(mod: FileModel, name: str) -> list[cst.CSTNode]:
    """The module-level ``name = ...`` / ``name: T = ...`` / ``name: T`` statements of ``mod`` (also inside
    module-level ``if`` / ``try`` blocks: ``if TYPE_CHECKING: current_platform: Platform``)."""
    out: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = list(mod.module.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.If, cst.Try, cst.Else, cst.IndentedBlock, cst.ExceptHandler, cst.Finally)):
            stack.extend(children(node))
        elif isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                        and small.target.value == name:
                    out.append(small)
                elif isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                           for t in small.targets):
                    out.append(small)
    return out


def annotation_alternatives(annotation: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The alternatives an annotation names other than ``None`` (``A | B``, ``Optional[A]``, ``Union[A, B]``, and
    the string forms of any of them, ``"A"``, ``Optional["A"]``); None when a string is not an expression."""
    parts: list[cst.BaseExpression] = []
    stack: list[cst.BaseExpression] = [annotation]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
            stack += [node.left, node.right]
        elif isinstance(node, cst.Subscript) and (dotted(node.value) or "").rsplit(".", 1)[-1] in ("Optional", "Union"):
            stack += [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
        elif isinstance(node, cst.SimpleString):
            try:
                stack.append(cst.parse_expression(node.evaluated_value))
            except Exception:  # noqa: BLE001 - not an expression: not a class
                return None
        elif not (isinstance(node, cst.Name) and node.value == "None"):
            parts.append(node)
    return parts


def annotation_classes(project: Project, file: FileModel, fn: FunctionInfo | None,
                       annotation: cst.BaseExpression) -> list[tuple[ClassInfo, FileModel]] | None:
    """The project classes an annotation names (``Platform | _LazyPlatform``, ``Optional[Platform]``,
    ``"Platform"``); None when some alternative (other than ``None``) is not a project class."""
    parts = annotation_alternatives(annotation)
    if parts is None:
        return None
    out: list[tuple[ClassInfo, FileModel]] = []
    for part in parts:
        qualname = file.resolve(part, fn) if isinstance(part, (cst.Name, cst.Attribute)) else None
        found = project.symbol(qualname, file) if qualname else None
        if found is None or not isinstance(found[0], ClassInfo):
            return None
        out.append(found)
    return out or None


def object_classes(project: Project, file: FileModel, fn: FunctionInfo | None,
                   recv: cst.BaseExpression) -> list[tuple[ClassInfo, FileModel]] | None:
    """The project classes the object ``recv`` may be: a parameter annotated with classes, or a module-level
    variable of a project module (read here or imported) -- its annotations and the classes its values
    construct. None when the project does not say (some value is not a construction of a project class)."""
    owner = binder(fn, recv.value) if isinstance(recv, cst.Name) else None
    if owner is not None:  # a parameter of the function or of an enclosing one (a closure cell)
        if recv.value not in owner.all_params or recv.value in owner.name_assigns:
            return None
        ann = param_annotation(owner, recv.value)
        return annotation_classes(project, file, owner.parent, ann) if ann is not None else None
    if not isinstance(recv, (cst.Name, cst.Attribute)):
        return None
    qualname = file.resolve(recv, fn)
    if qualname is None and isinstance(recv, cst.Name) and not _bound_locally(fn, recv.value):
        qualname = f"{file.module_name}.{recv.value}"
    if qualname is None or "." not in qualname:
        return None
    modname, _, name = qualname.rpartition(".")
    mod = file if modname == file.module_name else project.find_module(modname, file)
    if mod is None:
        return None
    memo = project.derived("device_object_classes")
    key = (mod.path, name)
    if key not in memo:
        memo[key] = None
        memo[key] = _variable_classes(project, mod, name)
    return memo[key]


def binder(fn: FunctionInfo | None, name: str) -> FunctionInfo | None:
    """The function (``fn`` or an enclosing one: a closure cell) that binds ``name``, else None."""
    while fn is not None:
        if name in fn.locals or name in fn.all_params or name in fn.name_assigns:
            return fn
        fn = fn.parent
    return None


def _bound_locally(fn: FunctionInfo | None, name: str) -> bool:
    return binder(fn, name) is not None


def param_annotation(fn: FunctionInfo, name: str) -> cst.BaseExpression | None:
    """The annotation of ``fn``'s parameter ``name``."""
    param = param_named(fn.node, name)
    return param.annotation.annotation if param is not None and param.annotation is not None else None


def names_tensor_type(annotation: cst.BaseExpression) -> bool:
    """Does an annotation's text name a tensor type (``Tensor``, ``torch.Tensor``, ``Optional[Tensor]``, also a
    ``TensorDict``)? Deliberately looser than :func:`~streamlint.model.tensoruse.tensor_annotation`: used where a
    parameter so annotated counts as device data handed in (flow/unseenbuilds.py, flow/hosthelpers.py)."""
    return "Tensor" in cst.Module([]).code_for_node(annotation)


def _variable_classes(project: Project, mod: FileModel, name: str) -> list[tuple[ClassInfo, FileModel]] | None:
    stmts = module_statements(mod, name)
    if not stmts:
        return None
    out: list[tuple[ClassInfo, FileModel]] = []
    for stmt in stmts:
        if isinstance(stmt, cst.AnnAssign):
            found = annotation_classes(project, mod, None, stmt.annotation.annotation)
            if found is None:
                return None
            out += found
            continue
        value = stmt.value
        qualname = mod.resolve(value.func, None) if isinstance(value, cst.Call) else None
        found = project.symbol(qualname, mod) if qualname else None
        if found is None or not isinstance(found[0], ClassInfo):
            return None  # not a construction of a project class: the annotation alone does not say
        out.append(found)
    return out or None


def class_chain(project: Project, file: FileModel, cls: ClassInfo) -> list[tuple[ClassInfo, FileModel]]:
    """``cls`` and its project base classes (nearest first)."""
    out: list[tuple[ClassInfo, FileModel]] = []
    stack, seen = [(cls, file)], set()
    while stack and len(out) < 8:
        c, f = stack.pop(0)
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append((c, f))
        for base in c.bases:
            found = project.symbol(base, f) if base else None
            if found is not None and isinstance(found[0], ClassInfo):
                stack.append(found)
    return out


def forwards_device(project: Project, file: FileModel, cls: ClassInfo, _depth: int = 0) -> str | None:
    """The device module a class forwards unknown attributes to through ``__getattr__`` (its own or a
    project base's): ``torch.cuda`` / ``torch.npu``, or :data:`GENERIC` when the module is chosen at run time
    (``getattr(torch, self.device_type)``); None when it does not."""
    memo, busy = project.derived("device_forwarding"), project.derived("device_forwarding_busy")
    key = (file.path, cls.name)
    if key in memo:
        return memo[key]
    if key in busy or _depth > 3:
        return None  # (a cycle, or cut by depth: not memoised, the answer from the top may differ)
    busy[key] = True
    result = None
    try:
        for c, f in class_chain(project, file, cls):
            method = c.methods.get("__getattr__")
            if method is not None:
                result = _getattr_target(project, f, method, _depth)
                break
    finally:
        del busy[key]
    if not _depth:
        memo[key] = result
    return result


def _getattr_target(project: Project, file: FileModel, method: FunctionInfo, depth: int) -> str | None:
    params = method.params[1:] if method.params[:1] == ("self",) else method.params
    if not params:
        return None
    key = params[0]
    found: set[str] = set()
    for ret in method.returns:
        value = ret.value
        if value is None or isinstance(value, cst.Name) and value.value == "None":
            continue
        if isinstance(value, cst.Name) and value.value in method.name_assigns:
            values = method.name_assigns[value.value]
            value = values[0] if len(values) == 1 else None
        if not (isinstance(value, cst.Call) and dotted(value.func) == "getattr" and len(value.args) >= 2
                and isinstance(value.args[1].value, cst.Name) and value.args[1].value.value == key):
            return None
        holder = _holder_module(project, file, method, value.args[0].value, depth)
        if holder is None:
            return None
        found.add(holder)
    if not found:
        return None
    return found.pop() if len(found) == 1 else GENERIC


def _holder_module(project: Project, file: FileModel, method: FunctionInfo, expr: cst.BaseExpression,
                   depth: int) -> str | None:
    """The device module ``expr`` (the object a ``__getattr__`` reads from) is."""
    if isinstance(expr, cst.Name) and expr.value in method.name_assigns:
        values = method.name_assigns[expr.value]
        if len(values) != 1:
            return None
        expr = values[0]
    if isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Name, cst.Attribute)) \
            and file.resolve(expr.func, method) in apis.DEVICE_MODULE_GETTERS:
        return GENERIC  # the device module chosen at run time
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self" \
            and method.class_name in file.classes and depth < 3:
        # `getattr(self.module, name)` with `self.module = torch.get_device_module(t)` in `__init__`
        key = f"self.{expr.attr.value}"
        bound = [(m, f, a.value) for c, f in class_chain(project, file, file.classes[method.class_name])
                 for m in c.methods.values() for a in m.assigns if a.target == key and a.value is not None]
        found = {_holder_module(project, f, m, v, depth + 1) for m, f, v in bound}
        return found.pop() if len(found) == 1 and None not in found else (GENERIC if found and None not in found else None)
    if isinstance(expr, cst.Call) and dotted(expr.func) == "getattr" and len(expr.args) >= 2:
        root = file.resolve(expr.args[0].value, method) if isinstance(expr.args[0].value, (cst.Name, cst.Attribute)) else None
        if root == "torch" and not isinstance(expr.args[1].value, cst.SimpleString):
            return GENERIC  # `getattr(torch, self.device_type, None)`: the device chosen at run time
        return None
    if isinstance(expr, (cst.Name, cst.Attribute)):
        qualname = file.resolve(expr, method)
        if qualname == "torch_npu.npu":
            return "torch.npu"
        if qualname in apis.STREAM_DEVICE_MODULES:
            return qualname
        return None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and dotted(expr.func.value) == "self":
        # `platform = self._ensure_initialized()`: an object of the class the method's annotation names
        cls_name = method.class_name
        owner = file.classes.get(cls_name or "")
        target = owner.methods.get(expr.func.attr.value) if owner is not None else None
        if target is None or target.node.returns is None:
            return None
        classes = annotation_classes(project, file, target.parent, target.node.returns.annotation)
        found = {forwards_device(project, f, c, depth + 1) for c, f in classes or ()}
        return found.pop() if len(found) == 1 and None not in found else None
    return None


def foreign_receiver(project: Project, file: FileModel, fn: FunctionInfo | None, recv: cst.BaseExpression,
                     method: str) -> bool:
    """Is ``recv`` an object from another package that calls the device API ``method``: a name imported with
    ``from pkg import obj`` (or its attribute chain), or a call of an imported getter, whose package is not
    in the project; ``method`` is unambiguous, or the same receiver has an unambiguous method called on it
    in this file."""
    text = _receiver_text(file, fn, recv)
    if text is None or not _foreign_object(project, file, fn, recv):
        return False
    if method in UNAMBIGUOUS:
        return True
    memo = project.derived("foreign_device_receivers")
    if id(file) not in memo:
        memo[id(file)] = {_receiver_text(file, s.function, s.node.func.value) for s in file.calls
                          if isinstance(s.node.func, cst.Attribute) and s.node.func.attr.value in UNAMBIGUOUS
                          and _foreign_object(project, file, s.function, s.node.func.value)}
    return text in memo[id(file)]


def _foreign_object(project: Project, file: FileModel, fn: FunctionInfo | None, recv: cst.BaseExpression) -> bool:
    """Is the object ``recv`` defined outside the project: a name imported from a module the project does
    not hold, or a call of such a getter? (A project object whose class the project sees only in part --
    ``class OmniPlatform(vllm.platforms.Platform)`` -- stays unknown, like :mod:`attrstreams`' unseen
    attributes.)"""
    if isinstance(recv, cst.Call):
        recv = recv.func
    qualname = file.resolve(recv, fn) if isinstance(recv, (cst.Name, cst.Attribute)) else None
    return qualname is not None and project.symbol(qualname, file) is None and not _project_module(project, file, qualname)


def _project_module(project: Project, file: FileModel, qualname: str) -> bool:
    parts = qualname.split(".")
    return any(project.find_module(".".join(parts[:cut]), file) is not None for cut in range(len(parts) - 1, 0, -1))


def _receiver_text(file: FileModel, fn: FunctionInfo | None, recv: cst.BaseExpression) -> str | None:
    """The qualified text of a receiver rooted at an object imported from another package, else None."""
    call = ""
    if isinstance(recv, cst.Call) and not recv.args:
        recv, call = recv.func, "()"
    if not isinstance(recv, (cst.Name, cst.Attribute)):
        return None
    head = recv
    while isinstance(head, cst.Attribute):
        head = head.value
    if not isinstance(head, cst.Name) or _bound_locally(fn, head.value) or head.value not in file.names:
        return None
    qualname = file.resolve(recv, fn)
    if qualname is None or qualname.split(".")[0] in _OTHER_RUNTIMES | {"torch", "torch_npu"} \
            or file.names[head.value] in _imported_modules(file):
        return None
    return qualname + call


def _imported_modules(file: FileModel) -> frozenset[str]:
    """The qualnames bound by ``import a.b`` / ``import a.b as c`` (modules, not objects)."""
    cached = file.__dict__.get("_imported_modules")
    if cached is None:
        found: set[str] = set()
        stack: list[cst.CSTNode] = [file.module]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Import):
                for alias in node.names:
                    found.add(dotted(alias.name) or "")
                    if alias.asname is None:
                        found.add((dotted(alias.name) or "").split(".")[0])
            elif not isinstance(node, cst.BaseExpression):
                stack.extend(children(node))
        cached = file.__dict__["_imported_modules"] = frozenset(found)
    return cached


__all__ = ["GENERIC", "UNAMBIGUOUS", "annotation_alternatives", "annotation_classes", "binder", "param_annotation", "class_chain", "forwards_device", "foreign_receiver",
           "module_statements", "object_classes"]
