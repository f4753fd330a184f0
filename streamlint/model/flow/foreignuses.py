"""Uses of a tensor only through methods no tensor has (issue 16 §3, [native-op-stream]).

A library that patches ``torch.Tensor`` with methods of its own hands a tensor to its native runtime through them:
``comm.allreduce_inplace(data.ensure_bagua_tensor().bagua_backend_tensor(), op)`` registers ``data`` with the
library and passes the library's handle of its memory to a communicator that enqueues on a stream of its own. The
generic call rule reads ``data`` on the current stream at that statement; when every mention of the tensor there is
the receiver of such a method (:func:`~streamlint.model.hostobjects.foreign_method`), what work reads it, and on which
stream, rests on code not seen. A lifetime hazard resting on that use (SL301: the block freed before the current
stream's use is ordered) is reported low (``Lifetime.foreign_use``), naming the method. A race is not affected: a
scope's stream orders the library's work as well as any other (the fork-wait defects of such code stay reported).
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.hostobjects import foreign_method
from streamlint.model.syntax import local_nodes


def foreign_only_use(stmt: cst.CSTNode | None, name: str | None) -> str | None:
    """The method no tensor has through which ``stmt`` (a use's statement) alone mentions the local ``name``
    (``name.ensure_bagua_tensor()``), else None (a plain mention, an operand, a tensor method, no mention)."""
    if stmt is None or not name or "." in name or "[" in name:
        return None
    nodes = list(local_nodes(stmt))
    calls = {id(n.func) for n in nodes if isinstance(n, cst.Call)}
    through: set[int] = set()
    method = None
    for n in nodes:
        if isinstance(n, cst.Attribute) and id(n) in calls and isinstance(n.value, cst.Name) \
                and n.value.value == name and foreign_method(n.attr.value):
            through.add(id(n.value))
            method = method or n.attr.value
    mentions = [n for n in nodes if isinstance(n, cst.Name) and n.value == name]
    return method if mentions and all(id(n) in through for n in mentions) else None


__all__ = ["foreign_only_use"]
