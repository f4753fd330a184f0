"""A stream the function makes for itself and lets die with it (issue 16, [same-stream-consumer]).

A chunked backward (sequence-parallel attention, an offloading optimizer step) often makes its own stream for the
duration of one call, ``offload = torch.cuda.Stream()``, allocates accumulators on it, works on the current stream,
and returns a converted copy (``return grad_w.to(dtype)``): the accumulator dies at the return while the current
stream's copy may still read it. Its block goes back to the pool of ``offload``, and only an allocation on that
stream can take it again (issue 16). When ``offload`` is a local bound only to new stream objects and used only to
run and order work (a stream scope's argument, the receiver of ``wait_stream`` / ``synchronize`` / ``record_event``,
the argument of another stream's ``wait_stream`` or a tensor's ``record_stream``), nothing of the function's code
can allocate on it after the return: only torch's stream pool, handing the same stream to a later ``Stream()``
(after a round of the pool's streams), could take the block back, so the function-end free is a guess (SL301 low;
a hand-over of a block of any stream the function makes, :func:`fresh_local_stream`, is not reported at all:
``Consumers.check_handoffs``). A stream the function keeps anywhere else (on ``self``, in a container, returned,
handed to a call, captured by a closure, made current with ``set_stream``) may get more work later: the free stays
a finding, as does a free before the function's own later allocation on the stream (a ``del`` in a loop)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.syntax import descendants, node_memo

# methods of a stream that run or order work on it and hand nothing of the stream out
_RECEIVER_METHODS = frozenset({"wait_stream", "wait_event", "synchronize", "record_event", "query"})
# calls whose stream argument is only entered or ordered against: scopes, joins, records
_ARGUMENT_CALLS = frozenset({"stream", "StreamContext", "wait_stream", "record_stream", "record", "wait"})


def _last(func: cst.BaseExpression) -> str | None:
    """The name a call's callee ends in (``get_accelerator().Stream`` -> ``Stream``)."""
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None


def fresh_local_stream(fn, stream: str) -> bool:
    """Is ``stream`` a local of ``fn`` that every assignment binds to a new stream object (``torch.cuda.Stream()``,
    ``get_accelerator().Stream()``)?"""
    values = fn.name_assigns.get(stream, [])
    return bool(values) and all(isinstance(v, cst.Call) and _last(v.func) == "Stream" for v in values)


def _confined(fn_node: cst.FunctionDef) -> frozenset[str]:
    """The names of ``fn_node``'s body used only as a stream (assigned, entered, ordered, synchronised), none
    captured by a nested function."""
    counts: dict[str, int] = {}
    allowed: dict[str, int] = {}
    nested = [n for n in descendants(fn_node.body) if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef))]
    enclosed = {id(d) for n in nested for d in descendants(n)}
    labels = {id(n.attr) for n in descendants(fn_node.body) if isinstance(n, cst.Attribute)} \
        | {id(n.keyword) for n in descendants(fn_node.body) if isinstance(n, cst.Arg) and n.keyword is not None}
    for node in descendants(fn_node.body):
        if isinstance(node, cst.Name) and id(node) not in labels:
            counts[node.value] = counts.get(node.value, 0) + (2 if id(node) in enclosed else 1)  # a closure: escapes
        elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if isinstance(node, cst.Assign) and len(node.targets) > 1:
                continue  # (``s = self.s = Stream()``: the stream is kept elsewhere too)
            for t in targets:
                if isinstance(t, cst.Name):
                    allowed[t.value] = allowed.get(t.value, 0) + 1
        elif isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                    and func.attr.value in _RECEIVER_METHODS:
                allowed[func.value.value] = allowed.get(func.value.value, 0) + 1
            if _last(func) in _ARGUMENT_CALLS:
                for arg in node.args:
                    if isinstance(arg.value, cst.Name) and arg.star == "":
                        allowed[arg.value.value] = allowed.get(arg.value.value, 0) + 1
    return frozenset(name for name, n in counts.items() if n == allowed.get(name, 0))


def dies_with_function(fn, stream: str) -> bool:
    """Is ``stream`` a local of the function bound only to new stream objects (:func:`fresh_local_stream`) and used
    only to run and order work, so that no allocation of the function's code can follow its return on it?"""
    return fresh_local_stream(fn, stream) and stream in node_memo("confined-streams", fn.node, _confined)


def dies_at_return(file, fn, S) -> bool:
    """Is the storage ``S`` allocated, in a scope of ``fn`` (of ``file``), on a stream ``fn`` made for itself and
    lets die at its return (so a free of ``S`` at the function's end is taken back only through the stream pool)?"""
    if S.origin is None or S.alloc.startswith("<") or "." in S.alloc or "[" in S.alloc:
        return False
    origin_file, node = S.origin
    return origin_file is file and file.function_of.get(id(node)) is fn and dies_with_function(fn, S.alloc)


__all__ = ["dies_at_return", "dies_with_function", "fresh_local_stream"]
