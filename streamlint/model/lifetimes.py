"""Tensors that live as long as the module: parameters, registered buffers, module globals and
``self.*`` tensors allocated once at construction."""

from __future__ import annotations

from streamlint._lazy import cst

from streamlint.model.file import FileModel, dotted, string_value
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.walk import children

# Methods that build a module's state once (assignments there are not per-call).
_INIT_METHODS = ("__init__", "__post_init__", "setup", "build", "reset_parameters", "_init_weights")


def persistent_kind(file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression, _depth: int = 0) -> str | None:
    """Why the tensor ``expr`` denotes lives as long as the module (so stream work never outlives it):
    "a parameter", "a registered buffer", "a submodule parameter", "a module global", "a `self.*` tensor
    allocated once in `__init__`", "an alias of …"; None when it may be a fresh per-call tensor."""
    name = dotted(expr)
    if name is None or _depth > 3:
        return None
    parts = name.split(".")
    if parts[0] == "self" and len(parts) >= 2 and fn.class_name in file.classes:
        cls = file.classes[fn.class_name]
        attr = parts[1]
        if len(parts) > 2:
            return "a submodule parameter" if len(parts) == 3 and parts[-1] in ("weight", "bias") else None
        return _self_attr_kind(file, cls, attr)
    if len(parts) == 1:
        local = parts[0]
        if local in fn.all_params:
            return None
        assigned = fn.name_assigns.get(local)
        if assigned:
            kinds = {persistent_kind(file, fn, v, _depth + 1) for v in assigned}
            if len(kinds) == 1 and None not in kinds:
                return f"an alias of {kinds.pop()}"
            return None
        loop = _loop_over_parameters(file, fn, local)
        if loop is not None:
            return loop
        if local not in fn.locals and _module_global(file, local):
            return "a module global"
    return None


def _self_attr_kind(file: FileModel, cls: ClassInfo, attr: str) -> str | None:
    init_only = True
    kind = None
    for method_name, method in cls.methods.items():
        for assign in method.assigns:
            if assign.target == f"self.{attr}.data" and method_name not in _INIT_METHODS:
                init_only = False  # `self.buf.data = fresh`: the field's storage is replaced during the step
            if assign.target != f"self.{attr}":
                continue
            if method_name not in _INIT_METHODS:
                init_only = False
            value = assign.value
            if isinstance(value, cst.Call) and (dotted(value.func) or "").endswith("Parameter"):
                kind = "a parameter"
        for site in method.calls:
            if site.method == "register_buffer" and site.node.args and string_value(site.node.args[0].value) == attr:
                kind = "a registered buffer"
            if site.method == "register_parameter" and site.node.args \
                    and string_value(site.node.args[0].value) == attr:
                kind = "a parameter"
    if not init_only:
        return None
    if kind is not None:
        return kind
    init_values = [(cls.methods[m], a.value) for m in _INIT_METHODS if m in cls.methods
                   for a in cls.methods[m].assigns if a.target == f"self.{attr}"]
    if not init_values or all(_handed_in(method, value) for method, value in init_values):
        # A field set from the constructor's arguments holds what the caller handed in (a batch
        # container's per-batch tensors), not storage allocated once by the object.
        return None
    return "a `self.*` tensor allocated once in `__init__`"


def _handed_in(method: FunctionInfo, value: cst.BaseExpression | None) -> bool:
    """Whether ``value`` is (a choice between ``None`` and) the method's own arguments, at least one."""
    leaves, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, cst.IfExp):
            stack += [v.body, v.orelse]
        elif isinstance(v, cst.BooleanOperation):
            stack += [v.left, v.right]
        else:
            leaves.append(v)
    names = [v.value for v in leaves if isinstance(v, cst.Name)]
    return len(names) == len(leaves) and all(n in method.all_params or n == "None" for n in names) \
        and any(n in method.all_params for n in names)  # a field only set to None here is set by other code


def _loop_over_parameters(file: FileModel, fn: FunctionInfo, name: str) -> str | None:
    stack: list[cst.CSTNode] = [fn.node.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.For):
            it = node.iter
            method = it.func.attr.value if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) else None
            target = node.target
            names = [target.value] if isinstance(target, cst.Name) else (
                [el.value.value for el in target.elements[1:] if isinstance(el.value, cst.Name)]
                if isinstance(target, cst.Tuple) else [])
            if name in names and method in ("parameters", "buffers", "named_parameters", "named_buffers"):
                return "a parameter" if "param" in method else "a registered buffer"
        stack.extend(children(node))
    return None


def _module_assignments(file: FileModel) -> dict[str, cst.BaseExpression | None]:
    """Each name a top-level simple statement of the module assigns, with the value of its first assignment."""
    found = file.__dict__.get("_module_assignments")
    if found is None:
        found = file.__dict__["_module_assignments"] = {}
        for stmt in file.module.body:
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, (cst.Assign, cst.AnnAssign)):
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    for t in targets:
                        if isinstance(t, cst.Name):
                            found.setdefault(t.value, small.value)
    return found


def module_assignment(file: FileModel, name: str) -> cst.BaseExpression | None:
    """The value of the first top-level assignment of ``name`` in the module (``KVCache = Any``), else None."""
    return _module_assignments(file).get(name)


def _module_global(file: FileModel, name: str) -> bool:
    return isinstance(_module_assignments(file).get(name), cst.Call)


def module_variable(file: FileModel, name: str) -> bool:
    """Is ``name`` a variable of the module: assigned by a statement at its top level (``_streams = {}``),
    so that a function reading it without a local binding reads the module's object?"""
    return name in _module_assignments(file)


def module_constant(file: FileModel, name: str) -> bool:
    """Is the module global ``name`` a host constant (``HEAD_DIM = 128``, ``ROWS = 2 * HEAD_DIM``)? Every
    module-level assignment to it is a literal or arithmetic of such constants."""
    memo = file.__dict__.setdefault("_module_constants", {})
    if name not in memo:
        memo[name] = False  # a cycle is no evidence
        values = [small.value for stmt in file.module.body if isinstance(stmt, cst.SimpleStatementLine)
                  for small in stmt.body if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None
                  and any(isinstance(t, cst.Name) and t.value == name for t in (
                      [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]))]
        memo[name] = bool(values) and all(_constant(file, v) for v in values)
    return memo[name]


_CONTAINER_CALLS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "collections.defaultdict",
                              "collections.OrderedDict", "deque", "collections.deque", "WeakValueDictionary",
                              "weakref.WeakValueDictionary"})


def module_container(file: FileModel, name: str) -> bool:
    """Is the module global ``name`` a Python container (``_WORKSPACES: dict = {}``, ``_POOL = defaultdict(list)``)?
    Every module-level assignment to it builds one. Storing a tensor in one of its slots keeps the tensor
    alive (a place, not a device write); its elements are what was stored."""
    memo = file.__dict__.setdefault("_module_containers", {})
    if name not in memo:
        values = [small.value for stmt in file.module.body if isinstance(stmt, cst.SimpleStatementLine)
                  for small in stmt.body if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None
                  and any(isinstance(t, cst.Name) and t.value == name for t in (
                      [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]))]
        memo[name] = bool(values) and all(
            isinstance(v, (cst.Dict, cst.List, cst.Set, cst.DictComp, cst.ListComp, cst.SetComp))
            or (isinstance(v, cst.Call) and file.code(v.func) in _CONTAINER_CALLS) for v in values)
    return memo[name]


def _constant(file: FileModel, v: cst.BaseExpression, depth: int = 0) -> bool:
    if isinstance(v, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(v, cst.Name):
        return v.value in ("True", "False") or module_constant(file, v.value)
    if depth < 4 and isinstance(v, cst.BinaryOperation):
        return _constant(file, v.left, depth + 1) and _constant(file, v.right, depth + 1)
    return depth < 4 and isinstance(v, cst.UnaryOperation) and _constant(file, v.expression, depth + 1)


__all__ = ["module_constant", "module_container", "persistent_kind"]
