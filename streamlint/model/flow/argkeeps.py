"""What a function does with a pending argument that keeps it alive or joins it for its callers (the callee's
side of :mod:`.argdrops`).

:func:`_kept`: the function stores what a name holds (on an object, in a container), records it on a stream,
returns or yields it, or captures it in a nested function (its metadata does not count: :func:`_mentions`);
:func:`_collective_in`: a statement runs a torch.distributed collective (c10d keeps its tensors alive);
:func:`_hands_out_event`: the function returns an event it records after the use. With the statement and
node walks they share (:func:`_statements`, :func:`~streamlint.model.walk.descendants`).
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.apis import COLLECTIVES
from streamlint.model.syntax import node_memo
from streamlint.model.walk import descendants


def _kept(model: FileModel, fn: FunctionInfo, name: str, call: cst.Call | None) -> bool:
    """Does ``fn`` keep what ``name`` (a local, a parameter or an attribute like ``p.grad``) holds past the call
    (or, with no call, past its own return): stored on an object or in a container, recorded on a stream,
    returned or yielded, captured by a nested function? (Its size or dtype stored is not it.) Asked once per
    pending parameter on every path: memoised with the function's tree (the call is a node of it)."""
    answers: dict = node_memo("argdrops.kept", fn.node, lambda _: {})
    key = (name, id(call) if call is not None else None)
    if key not in answers:
        answers[key] = _keeps(fn, name, call)
    return answers[key]


def _keeps(fn: FunctionInfo, name: str, call: cst.Call | None) -> bool:
    untensored = _non_tensor_arms(fn, name)
    for node in _statements(fn.node.body):
        if id(node) in untensored:
            continue  # (`else: out.append(x)` after `if isinstance(x, torch.Tensor):` keeps no tensor)
        if isinstance(node, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if any(_stores(t) for t in targets) and node.value is not None and _mentions(node.value, name):
                return True  # `self.x = g`, `d[k] = (g, ev)`
            if isinstance(node.value, cst.Name) and node.value.value == name:
                return True  # `kept = grads`: an alias holds it (wherever that one goes)
        elif isinstance(node, cst.Return) and node.value is not None and _mentions(node.value, name):
            return True
        elif isinstance(node, (cst.FunctionDef, cst.Lambda)) and _mentions(node, name):
            return True
    for site in fn.calls:
        if site.node is call or id(site.node) in untensored:
            continue
        if site.method in ("record_stream", "append", "extend", "insert", "put", "put_nowait", "add", "update",
                           "setdefault", "appendleft") and any(_mentions(a.value, name) for a in site.node.args):
            return True
        if site.method == "record_stream" and site.receiver is not None and _mentions(site.receiver, name):
            return True
    return any(isinstance(n, (cst.Yield, cst.Lambda)) and _mentions(n, name) for n in descendants(fn.node.body))


def _non_tensor_arms(fn: FunctionInfo, name: str) -> frozenset[int]:
    """The nodes of the ``else`` arms of ``if isinstance(name, torch.Tensor):`` tests in ``fn``: there ``name`` is
    no tensor, so what they keep of it is no tensor's storage."""
    from streamlint.model.flow.paramcontents import tensor_test

    out: set[int] = set()
    for node in descendants(fn.node.body):
        if isinstance(node, cst.If) and isinstance(node.orelse, cst.Else) and tensor_test(node.test, name):
            out.update(id(n) for n in descendants(node.orelse))
    return frozenset(out)


def _stores(target: cst.BaseExpression) -> bool:
    """Is an assignment target a place that outlives the statement (``self.x``, ``d[k]``), not a local?"""
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_stores(e.value) for e in target.elements)
    if isinstance(target, cst.StarredElement):
        return _stores(target.value)
    return isinstance(target, (cst.Attribute, cst.Subscript))


# attributes of a tensor that describe it without holding its memory
_META = frozenset({"nbytes", "numel", "shape", "dtype", "device", "size", "dim", "ndim", "stride", "is_cuda",
                   "data_ptr", "element_size", "requires_grad", "is_contiguous"})


def _mentions(node: cst.CSTNode, name: str) -> bool:
    """Does ``node`` refer to ``name`` (a name, or an attribute chain like ``p.grad``) other than through its
    metadata (``g.nbytes``, ``g.shape``)?"""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Attribute) and n.attr.value in _META and dotted(n.value) == name:
            continue
        if isinstance(n, (cst.Name, cst.Attribute)) and dotted(n) == name:
            return True
        stack.extend([n.value] if isinstance(n, cst.Attribute) else n.children)
    return False


def _collective_in(file: FileModel, fn: FunctionInfo, node: cst.CSTNode) -> bool:
    """Does the statement ``node`` run a torch.distributed collective (c10d keeps its tensors alive until its
    work is done: its caching-allocator record or stash covers the inputs)? Memoised with ``fn``'s tree (each
    answer holds its node: the node may be an inlined callee's)."""
    answers: dict = node_memo("argdrops.collective", fn.node, lambda _: {})
    held = answers.get(id(node))
    if held is None or held[0] is not node:
        held = answers[id(node)] = (node, _runs_collective(file, fn, node))
    return held[1]


def _runs_collective(file: FileModel, fn: FunctionInfo, node: cst.CSTNode) -> bool:
    for n in descendants(node):
        if isinstance(n, cst.Call):
            qual = file.resolve(n.func, fn) or dotted(n.func) or ""
            last = qual.rsplit(".", 1)[-1]
            if last in COLLECTIVES and (qual.startswith("torch.distributed.") or qual.startswith("dist.")) \
                    or last.endswith("all_reduce"):
                return True
    return False


def _hands_out_event(fn: FunctionInfo) -> bool:
    """Does ``fn`` return an event it records (``ev.record()``, ``s.record_event()``): the waiter the caller
    hands it to joins after the use (the rule's ``strict`` semantics for an escaping event)?"""
    recorded = {dotted(s.receiver) for s in fn.calls if s.method == "record" and s.receiver is not None}
    recorded |= {t for t, values in fn.name_assigns.items() for v in values
                 if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "record_event"}
    returns = [n for n in _statements(fn.node.body) if isinstance(n, cst.Return) and n.value is not None]
    return any(r.value is not None and any(_mentions(r.value, e) for e in recorded if e) for r in returns) or any(
        isinstance(r.value, cst.Call) and isinstance(r.value.func, cst.Attribute)
        and r.value.func.attr.value == "record_event" for r in returns)



def _statements(body: cst.CSTNode):
    """The small statements and compound statements of a function body, in source order, not entering
    nested functions or classes (their bodies run elsewhere)."""
    stack = [body]
    out = []
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.ClassDef,)) or (isinstance(n, cst.FunctionDef) and n is not body):
            out.append(n)
            continue
        if isinstance(n, cst.BaseSmallStatement) or isinstance(n, cst.BaseCompoundStatement):
            out.append(n)
        if isinstance(n, (cst.BaseExpression,)):
            continue
        stack.extend(reversed(n.children))
    return out
