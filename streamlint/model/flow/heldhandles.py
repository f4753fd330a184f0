"""Completion handles known by where they go: a local handed to a project holder that waits it (issue 16 §1, FP
class host-object-not-tensor, work handles).

``out, work = gather(..., async_op=overlap)`` then ``pending = PendingGather(work, shards)``, the class keeping
``self.work = work`` and calling ``self.work.wait()`` later: what the producer gives (a library call, a project
helper returning a tuple, a coalescing manager) says nothing, but the holder does: a tensor has no ``wait()``.
A local is a handle (:func:`held_handle`) when

- every binding of it is a call result (a plain target or an element of an unpacked tuple) or ``None``,
- it is handed, at least once, as an argument to a *handle parameter* of a project callable, and otherwise only
  tested (``is None``, truth), called a handle method on (``wait``, ``is_completed``, ...), or returned /
  yielded (as it is or in a tuple),

A handle parameter of a project function is one the function uses only as a handle (handle methods, ``None``
tests), with at least one completion method (``wait()``, ``get_future()``, ...), or stores in fields of its
object (``self.f = param``; a class's ``__init__`` for a constructor call) that the class's methods use only
so (handle methods, ``None`` tests, cleared to ``None`` or set from the parameter), with at least one completion
call on them. Anything else (the holder reads the field as data, hands it to another call, returns it) keeps
the flow's reading (precision first: a tensor stays a tensor)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.handles import COMPLETION_METHODS, HANDLE_METHODS, _children, _queued_names, _scoped
from streamlint.model.streams import derived


def held_handle(project, file, fn: FunctionInfo, name: str, value: cst.BaseExpression | None = None) -> bool:
    """Is the local ``name`` of ``fn``, bound here to the call ``value``, a completion handle, on the strength of
    a project holder it is handed to?"""
    if not isinstance(value, cst.Call):
        return False
    memo = derived(project, "held_handles")
    path = str(getattr(file, "path", ""))
    key = (path, fn.qualname, fn.node.name.value, name)
    if key not in memo:  # (a handle whose future gets a done-callback queuing stream work is never a plain one:
        # its waiter reads what the callback writes, as handles.handle_binding reads it)
        memo[key] = name not in fn.all_params and name not in _queued_names(project, fn, path) \
            and _judge(project, file, fn, name)
    return memo[key]


def _judge(project, file, fn: FunctionInfo, name: str) -> bool:
    pairs = _scoped(fn)
    parent = {id(c): p for c, p in pairs}
    handed = False
    for occ, up in pairs:
        if not isinstance(occ, cst.Name) or occ.value != name:
            continue
        if isinstance(up, cst.Attribute) and up.attr is occ:
            continue  # `x.work`: another object's field of that name
        if isinstance(up, (cst.Param, cst.FunctionDef, cst.ImportAlias, cst.Global, cst.Nonlocal)):
            continue
        binding = _binding_value(up, occ, parent)
        if binding is not None:
            value = binding[0]
            if not isinstance(value, cst.Call) and dotted(value) != "None":
                return False
            continue
        if isinstance(up, cst.Arg) and up.value is occ and not up.star:
            call = parent.get(id(up))
            if not isinstance(call, cst.Call) or up not in call.args:
                return False
            if not _to_handle_param(project, file, fn, call, up):
                return False
            handed = True
            continue
        if _handle_use(occ, up, parent):
            continue
        if isinstance(up, (cst.Return, cst.Yield)) and up.value is occ:
            continue
        if isinstance(up, cst.Element) and isinstance(parent.get(id(up)), cst.Tuple) \
                and isinstance(parent.get(id(parent.get(id(up)))), (cst.Return, cst.Yield)):
            continue  # `return out, work`
        return False
    return handed


def _binding_value(up, occ: cst.Name, parent: dict) -> tuple[cst.BaseExpression] | None:
    """The value bound to ``occ`` when it is an assignment target (plain, or an element of an unpacked tuple)."""
    if isinstance(up, cst.AssignTarget) and up.target is occ:
        assign = parent.get(id(up))
        return (assign.value,) if isinstance(assign, cst.Assign) else (cst.Name("_"),)
    if isinstance(up, cst.Element) and up.value is occ:
        seq = parent.get(id(up))
        target = parent.get(id(seq)) if isinstance(seq, (cst.Tuple, cst.List)) else None
        if isinstance(target, cst.AssignTarget) and target.target is seq:
            assign = parent.get(id(target))
            return (assign.value,) if isinstance(assign, cst.Assign) else (cst.Name("_"),)
    return None


def _handle_use(occ: cst.BaseExpression, up, parent: dict, completions: list | None = None) -> bool:
    """``occ`` is used as a handle only: a handle method called on it, or tested (``is None``, truth, ``not``)."""
    if isinstance(up, cst.Attribute) and up.value is occ:
        call = parent.get(id(up))
        if isinstance(call, cst.Call) and call.func is up and up.attr.value in HANDLE_METHODS:
            if completions is not None and up.attr.value in COMPLETION_METHODS:
                completions.append(call)
            return True
        return False
    if isinstance(up, cst.Comparison) and len(up.comparisons) == 1 and up.left is occ \
            and isinstance(up.comparisons[0].operator, (cst.Is, cst.IsNot)) \
            and dotted(up.comparisons[0].comparator) == "None":
        return True
    return isinstance(up, (cst.If, cst.While)) and up.test is occ \
        or isinstance(up, cst.UnaryOperation) and isinstance(up.operator, cst.Not)


def _to_handle_param(project, file, fn: FunctionInfo, call: cst.Call, arg: cst.Arg) -> bool:
    site = file.call_site(call)
    if site is None or site.target is None:
        return False
    found = project.symbol(site.target, file)
    if found is None:
        return False
    info, mod = found
    cls = None
    if isinstance(info, ClassInfo):
        cls, info = info, info.methods.get("__init__")
    if not isinstance(info, FunctionInfo):
        return False
    if cls is None and info.class_name is not None:
        return False  # a method of some object: its fields are not followed
    params = info.params[1:] if cls is not None else info.params
    if arg.keyword is not None:
        param = arg.keyword.value if arg.keyword.value in info.all_params else None
    else:
        index = list(call.args).index(arg)
        if any(a.keyword is not None or a.star for a in call.args[:index]):
            return False
        param = params[index] if index < len(params) else None
    if param is None:
        return False
    memo = derived(project, "handle_params")
    key = (str(getattr(mod, "path", "")), info.qualname, param)
    if key not in memo:
        memo[key] = _handle_param(mod, cls, info, param)
    return memo[key]


def _handle_param(mod, cls: ClassInfo | None, fn: FunctionInfo, param: str) -> bool:
    """``param`` of ``fn`` is used only as a handle, here or in the fields of its object it is stored in."""
    completions: list = []
    fields: set[str] = set()
    pairs = _children(fn.node.body)
    parents = {id(c): p for c, p in pairs}
    for occ, up in pairs:
        if not isinstance(occ, cst.Name) or occ.value != param:
            continue
        if isinstance(up, cst.Attribute) and up.attr is occ:
            continue
        if isinstance(up, cst.Assign) and up.value is occ and cls is not None and len(up.targets) == 1:
            field = _self_field(up.targets[0].target)
            if field is None:
                return False
            fields.add(field)
            continue
        if _handle_use(occ, up, parents, completions):
            continue
        return False
    if fields and not _handle_fields(cls, fields, param, completions):
        return False
    return bool(completions)


def _handle_fields(cls: ClassInfo, fields: set[str], param: str, completions: list) -> bool:
    """Every use of ``self.<field>`` in the class's methods is a handle's."""
    for method in cls.methods.values():
        pairs = _children(method.node.body)
        parent = {id(c): p for c, p in pairs}
        for node, up in pairs:
            if not isinstance(node, cst.Attribute) or _self_field(node) not in fields:
                continue
            if isinstance(up, cst.AssignTarget) and up.target is node:
                assign = parent.get(id(up))
                value = assign.value if isinstance(assign, cst.Assign) else None
                if value is None or not (dotted(value) == "None" or dotted(value) == param):
                    return False
                continue
            if _handle_use(node, up, parent, completions):
                continue
            return False
    return True


def _self_field(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


__all__ = ["held_handle"]
