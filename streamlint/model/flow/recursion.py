"""A helper calling itself while it runs inline: structural recursion over nested containers.

``copy_into(dst, src)`` walking a batch (``for k in src: copy_into(dst[k], src[k])``, a tensor leaf
``dst.copy_(src, non_blocking=True)``) is the common way to fill static buffers or stage a nested batch.
The interpreter inlines the outer call but not the recursive one (the inliner refuses a function already
on its stack), and an opaque call only reads its arguments: the writes of the recursion were lost, and with
them the side-stream write of the buffers the caller hands on. The recursive call does to its arguments
what the helper does to its parameters: a parameter the helper writes in place (a ``*_`` method on it or
on an element of it, ``out=`` it) is written, the other tensor arguments are read, on the current stream.
A recursive call writing no tensor the caller names runs as any opaque call.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes
from streamlint.model.uses import bind_arguments


def recursive_call(interp, st, e: cst.Call, site) -> bool:
    """Run ``e``, a call of a helper already being inlined (see the module doc); False when it is not one."""
    if not interp.depth or site is None or not site.target:
        return False
    found = interp.project.call_target(interp.cfile, site)
    if found is None or id(found[0]) not in interp.inline_stack:
        return False
    fn = found[0]
    params = fn.params[1:] if fn.class_name and fn.params[:1] in (("self",), ("cls",)) \
        and isinstance(e.func, cst.Attribute) else fn.params
    written = written_params(interp.project, fn)
    bound = {name: expr for name, expr in bind_arguments(params + fn.kwonly, e, kwonly=fn.kwonly).items()
             if expr is not None}
    places = [expr for name, expr in bound.items() if name in written]
    if not places or not all(isinstance(x, (cst.Name, cst.Attribute, cst.Subscript)) for x in places):
        return False  # (nothing it writes is handed by name: the call runs as any opaque call)
    writes = [interp.ev(st, x) for x in places]
    if not any(interp.tensors(st, v) for v in writes):
        return False
    reads = [interp.ev(st, expr) for name, expr in bound.items() if name not in written]
    interp.op(st, e, reads, writes, result=False)
    return True


def written_params(project, fn) -> frozenset[str]:
    """The parameters (keyword-only ones too) a function writes in place in its own body (memoised):
    ``p.copy_(x)``, ``p[i].zero_()``, ``p.data.add_(y)``, ``torch.mul(a, b, out=p)``."""
    memo = fn.__dict__.setdefault("_written_params", {})  # (its own body only: kept with the function)
    if None not in memo:
        params, found = (set(fn.params) | set(fn.kwonly)) - {"self", "cls"}, set()
        for node in local_nodes(fn.node.body) if params else ():
            if not isinstance(node, cst.Call):
                continue
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value.endswith("_") \
                    and not func.attr.value.endswith("__"):
                found.add(_root(func.value))
            found.update(_root(a.value) for a in node.args if a.keyword is not None and a.keyword.value == "out")
        memo[None] = frozenset(found & params)
    return memo[None]


def _root(expr: cst.BaseExpression) -> str | None:
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None
