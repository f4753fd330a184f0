"""Settled caller arguments (:mod:`~streamlint.model.flow.entryctx`): a tensor a caller hands a callee that is
long-lived memory nothing in the step writes (a setup-time weight, a field element at a plain index) has no producer
on the caller's stream for a side-stream read in the callee to wait for. Only for memory the caller's class keeps to
itself: a weight held through another object, a parameter an optimizer may step, a field handed to a call that may
write it (a library call, an in-place helper, an optimizer's constructor), a field the caller rebinds or writes
itself (any path, nested functions) or through a method of its object one call down stays step data."""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.uses import bind_arguments


def settled(S) -> bool:
    """Is storage ``S`` long-lived memory nothing has written in the step so far: a field or module global no
    method of the class rewrites outside construction (:func:`~streamlint.model.stepstate.step_source` found none,
    so its first read carries no write) and no write in the caller's flow? A callee reading it on a side stream
    then has no producer on the caller's current stream to wait for."""
    return S.kind == "long" and S.last_write is None and bool(S.name) and not S.name.startswith("<")


def kept_to_itself(interp, name: str, fn) -> bool:
    """Is the settled storage ``name`` the caller's own (a field ``self.F`` of its class, a module global), not held
    through another object (``self.net.proj.weight``: the owner's methods, an optimizer holding its parameters,
    rewrite it unseen), not a parameter an optimizer may step (a field of an ``nn.Module``, one set to a
    ``Parameter(...)``), and handed by the class (the module, for a global) to no call but ``fn``'s and those of
    project functions that do not write that parameter in their body (``scale_(self.w, s)``, ``SGD([self.w])``
    may write it in place)? Memoised per project."""
    memo = interp.project.derived("kept_to_itself")
    key = (id(interp.file), interp.fn.class_name, name, id(fn))
    if key not in memo:
        memo[key] = _kept(interp, name, fn)
    return memo[key]


def _kept(interp, name: str, fn) -> bool:
    from streamlint.model.flow.recursion import written_params

    file, m = interp.file, re.fullmatch(r"self\.(\w+)", name)
    if m is not None:
        cls = file.classes.get(interp.fn.class_name) if interp.fn.class_name else None
        if cls is None or any(b == "Module" or b.endswith(".Module") for b in cls.bases):
            return False
        field, owner = m.group(1), "self"
        if any(a.target == name and "Parameter(" in file.code(a.value) for f in cls.methods.values()
               for a in f.assigns):
            return False
    elif re.fullmatch(r"\w+", name):
        field, owner = name, None
    else:
        return False
    if _writes(interp, interp.fn, field, owner, 1):
        return False
    for site in file.calls:
        if m is not None and (site.function is None or site.function.class_name != interp.fn.class_name):
            continue
        named = [a for a in site.node.args if _names_field(a.value, field, owner)]
        if not named:
            continue
        target = interp.project.call_target(file, site)
        if target is None and _reads_only(site) and not any(a.star for a in named):
            continue
        if target is None or any(a.star for a in named):
            return False  # (`opt = SGD([self.w])`, `dist.broadcast(self.w, 0)`, a call not resolved: it may write)
        if target[0] is fn:
            continue
        callee = target[0]
        method = callee.class_name is not None and callee.params[:1] == ("self",)
        bound = bind_arguments((callee.params[1:] if method else callee.params) + callee.kwonly, site.node,
                               kwonly=callee.kwonly)
        handed = {p for p, expr in bound.items() if _names_field(expr, field, owner)}
        if len(handed) < len(named) or handed & written_params(interp.project, callee):
            return False
    return True


def _rooted(expr, field: str, owner: str | None) -> bool:
    """Is ``expr`` ``owner.field`` or reached from it (``self.w[i]``, ``self.w.data``)?"""
    while True:
        if owner is None and isinstance(expr, cst.Name):
            return expr.value == field
        if owner is not None and isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) \
                and expr.value.value == owner and expr.attr.value == field:
            return True
        if not isinstance(expr, (cst.Attribute, cst.Subscript)):
            return False
        expr = expr.value


def _writes(interp, fn, field: str, owner: str | None, depth: int) -> bool:
    """Does ``fn`` (its nested functions too, on any path) rebind or write ``owner.field`` in place
    (``self.w = ...``, ``self.w.copy_(x)``, ``out=self.w``), or, ``depth`` methods down, call a method of its
    object that does (``self.load(src)``, a base class's method in another module; one not resolved may)?"""
    todo = [fn.node.body]
    while todo:
        node = todo.pop()
        todo.extend(c for c in node.children if isinstance(c, cst.CSTNode))
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(_rooted(t, field, owner) for t in targets):
                return True
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value.endswith("_") and not func.attr.value.endswith("__") \
                and _rooted(func.value, field, owner) or any(
                    a.keyword is not None and a.keyword.value == "out" and _rooted(a.value, field, owner)
                    for a in node.args):
            return True
        if owner is not None and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                and func.value.value == owner:
            site = interp.file.call_site(node)
            target = interp.project.call_target(interp.file, site) if site is not None else None
            if target is None:
                return True
            if depth and target[0] is not fn and _writes(interp, target[0], field, owner, depth - 1):
                return True
    return False


_READERS = frozenset(("len", "range", "enumerate", "zip", "isinstance", "print", "id", "type", "repr", "str",
                      "hasattr", "getattr"))


def _reads_only(site) -> bool:
    """Is an unresolved call one that only reads its arguments: a builtin like ``len``, a ``torch`` function
    (not ``torch.distributed`` / ``torch.optim``, not an in-place ``..._`` one, not a class that may keep a
    reference, no ``out=``)?"""
    func = site.node.func
    if isinstance(func, cst.Name) and func.value in _READERS and site.target in (None, func.value, f"builtins.{func.value}"):
        return True
    t = site.target or ""
    return t.startswith("torch.") and not t.startswith(("torch.distributed", "torch.optim")) \
        and not t.endswith("_") and not t.rpartition(".")[2][:1].isupper() \
        and not any(a.keyword is not None and a.keyword.value == "out" for a in site.node.args)


def _names_field(expr, field: str, owner: str | None) -> bool:
    """Does ``expr`` contain ``owner.field`` (``field`` alone when ``owner`` is None)? (A walk, no recursion.)"""
    todo = [expr]
    while todo:
        node = todo.pop()
        if owner is None:
            if isinstance(node, cst.Name) and node.value == field:
                return True
        elif isinstance(node, cst.Attribute) and node.attr.value == field and isinstance(node.value, cst.Name) \
                and node.value.value == owner:
            return True
        todo.extend(c for c in node.children if isinstance(c, cst.CSTNode))
    return False


__all__ = ["kept_to_itself", "settled"]
