"""A helper that hands back the object's own tensor: ``return self.tables[dev]`` (a per-device cache),
``return self.buffer``.

The flow takes the result of a project helper it does not interpret for a fresh tensor the call made on the
current stream: a local of the caller, freed when the caller's name for it dies, and written at the call.
When every value the helper returns is held by ``self`` or by a parameter (an attribute, or an element of
one), neither is true in general: the object keeps the storage (the caller's name dying frees nothing), and
the data was written either before the call (a cache hit: nothing is produced now) or by the helper itself.
:func:`held_result` says which:

- ``"kept"``: on every return the held value is, if written in the helper at all, last written by a
  transfer the host waits for (``copy_`` of host memory without ``non_blocking=True``): the data is complete
  when the helper returns, as the object state a function reads without writing is;
- ``"written"``: held, but the helper may have queued other device work on it (the caller still sees it
  produced on the current stream at the call; only the free is not the caller's);
- None: not a held result."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.placement import host_source
from streamlint.model.syntax import node_code
from streamlint.model.tensors import non_blocking

def _held_expr(e: cst.BaseExpression, fn: FunctionInfo) -> bool:
    root = e
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        root = root.value
    return root is not e and isinstance(root, cst.Name) and (root.value == "self" or root.value in fn.all_params) \
        and root.value not in fn.name_assigns and isinstance(e, (cst.Attribute, cst.Subscript)) \
        and (isinstance(e, cst.Attribute) or isinstance(e.value, (cst.Attribute, cst.Subscript)))


def _in_order(node: cst.CSTNode):
    """The nodes of a function body in source order (nested definitions skipped)."""
    for child in node.children:
        if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        yield child
        yield from _in_order(child)


def held_result(fn: FunctionInfo, cls: ClassInfo | None = None) -> str | None:
    code = node_code

    def key(e: cst.BaseExpression) -> str:  # a write to ``self.buf[:n]`` or ``self.tables[d]`` writes the held value
        while isinstance(e, cst.Subscript):
            e = e.value
        return code(e)

    returns = [r.value for r in fn.returns if r.value is not None
               and not (isinstance(r.value, cst.Name) and r.value.value == "None")]
    if not returns or not all(_held_expr(v, fn) for v in returns):
        return None
    held = {key(v) for v in returns}
    last: dict[str, str] = {}  # held expression -> how it was last written so far ("blocking" / "device")
    verdict = "kept"
    for node in _in_order(fn.node.body):
        if isinstance(node, cst.Return) and node.value is not None and key(node.value) in held:
            if last.get(key(node.value), "blocking") != "blocking":
                verdict = "written"
        elif isinstance(node, cst.Call):
            out = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "out"), None)
            if out is not None and key(out) in held:
                last[key(out)] = "device"
            if not isinstance(node.func, cst.Attribute):
                continue
            if isinstance(node.func.value, cst.Name) and node.func.value.value == "self":
                last.update(dict.fromkeys(held, "device"))  # another method of the object may write what it holds
            elif node.func.attr.value.endswith("_") and key(node.func.value) in held:
                blocking = node.func.attr.value == "copy_" and not non_blocking(node) and bool(node.args) \
                    and host_source(node.args[0].value, fn, cls)
                last[key(node.func.value)] = "blocking" if blocking else "device"
        elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for t in targets:
                if key(t) in held:
                    last[key(t)] = "device"  # a new tensor (or a value computed into it) on the current stream
    return verdict


__all__ = ["held_result"]
