"""Helpers that free storage: the free is an effect of the callee, seen at the call site.

``t.untyped_storage().resize_(0)`` frees a tensor's block whoever holds the object. Code often puts it in a
helper (``_free_storage(t)``, ``self._release(bucket)``) or in a closure kept for later (``def release():
bucket.untyped_storage().resize_(0)``, run once a reduction is done). The dataflow does not inline helpers
without stream work, so the free would go unseen; :func:`freed_names` says which of a function's parameters
(for a helper) or captured names (for a closure defined in the caller) its body frees -- directly, or by
handing them to a helper that frees that parameter, two calls deep -- and the caller applies the free to
the arguments it passes / the locals the closure captures (flow/storage.py ``callee_frees``).

Precision first: only ``resize_(0)`` of a name counts (an explicit free). Dropping an attribute or a
container slot in a helper is no evidence that the tensor loses its last owner.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes
from streamlint.model.uses import bind_arguments

_DEPTH = 2


def resized_to_zero(call: cst.Call) -> cst.BaseExpression | None:
    """``x.untyped_storage().resize_(0)`` / ``x.storage().resize_(0)``: ``x``; else None."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "resize_" and isinstance(func.value, cst.Call) \
            and isinstance(func.value.func, cst.Attribute) \
            and func.value.func.attr.value in ("untyped_storage", "storage") and len(call.args) == 1 \
            and isinstance(call.args[0].value, cst.Integer) and int(call.args[0].value.value, 0) == 0:
        return func.value.func.value
    return None


def freed_names(project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> frozenset[str]:
    """The names ``fn``'s body frees with ``resize_(0)``, itself or through a project helper it hands them to
    (that helper freeing the parameter it binds them to). The caller keeps the parameters (a helper) or the
    names ``fn`` neither binds nor takes (a closure's captures)."""
    memo = derived(project, "freed_names")
    held = memo.get(id(fn))
    if held is not None and held[0] is fn and held[1] <= _depth:  # (an answer from deeper saw fewer helpers)
        return held[2]
    memo[id(fn)] = (fn, -1, frozenset())  # (in progress: a cycle frees nothing more)
    out: set[str] = set()
    for n in local_nodes(fn.node.body):
        if not isinstance(n, cst.Call):
            continue
        owner = resized_to_zero(n)
        if owner is not None:
            if isinstance(owner, cst.Name):
                out.add(owner.value)
            continue
        if _depth >= _DEPTH or not any(isinstance(a.value, cst.Name) for a in n.args):
            continue
        found = helper_of(project, file, fn, n)
        if found is None:
            continue
        callee, mod = found
        freed = freed_names(project, mod, callee, _depth + 1) & set(callee.all_params)
        if freed:
            out |= {expr.value for name, expr in bound_arguments(callee, n).items()
                    if name in freed and isinstance(expr, cst.Name)}
    for n in local_nodes(fn.node.body):  # `for t in tensors: free(t)`: the collection's elements, so `tensors`
        if isinstance(n, cst.For) and isinstance(n.target, cst.Name) and n.target.value in out \
                and isinstance(n.iter, cst.Name):
            out.add(n.iter.value)
    memo[id(fn)] = (fn, _depth, frozenset(out))
    return memo[id(fn)][2]


def helper_of(project, file: FileModel, fn: FunctionInfo, call: cst.Call) -> tuple[FunctionInfo, FileModel] | None:
    """The project function ``call`` runs: a function defined inside ``fn`` (a closure, by its name), or what the
    project resolves (a module function, a method of the object, of a local instance)."""
    if isinstance(call.func, cst.Name):
        nested = _nested_functions(project, file, fn).get(call.func.value)
        if nested is not None:
            return nested, file
    site = file.call_site(call)
    if site is None:
        return None
    return project.call_target(file, site) or project.instance_method(file, site)


def _nested_functions(project, file: FileModel, fn: FunctionInfo) -> dict[str, FunctionInfo]:
    """The functions defined directly inside ``fn``, by name."""
    memo = derived(project, "nested_functions")
    held = memo.get(id(fn))
    if held is None or held[0] is not fn:
        memo[id(fn)] = held = (fn, {f.node.name.value: f for f in file.iter_functions() if f.parent is fn})
    return held[1]


def bound_arguments(callee: FunctionInfo, call: cst.Call) -> dict[str, cst.BaseExpression]:
    """The argument expressions of ``call`` by the parameter of ``callee`` they bind (``self`` skipped for a
    method called on an object)."""
    params = callee.params[1:] if callee.class_name and callee.params[:1] in (("self",), ("cls",)) \
        and isinstance(call.func, cst.Attribute) else callee.params
    return {k: v for k, v in bind_arguments(params + callee.kwonly, call, kwonly=callee.kwonly).items()
            if v is not None}


def closure_captures_freed(project, file: FileModel, closure: FunctionInfo) -> frozenset[str]:
    """The names of its enclosing function a closure frees (neither its parameters nor its own locals)."""
    return frozenset(n for n in freed_names(project, file, closure)
                     if n not in closure.all_params and n not in closure.locals)


__all__ = ["bound_arguments", "closure_captures_freed", "freed_names", "helper_of", "resized_to_zero"]
