"""A tensor used on a side stream only by code the caller hands in (issue 16, precision of SL301: "a result
whose use depends on a caller").

Schedulers take their communication steps as callables (``def run(..., post_forward=None): ... with
stream(comm): post_forward(out, stage)``): the code that runs is whatever each caller passes, not read here.
Whether it reads the tensor asynchronously on that stream at all, and whether it keeps it alive until that work
ends (a P2P send whose process group holds its tensors, a hook that stores it on a node), is that code's. When
the only use of a freed tensor on the other stream is such a call, the lifetime finding (the free of that tensor
before its allocating stream waits on the use) rests on the caller's choice: SL301 reports it at low, naming
the callable.

:func:`handed_callable` answers it for one use: the use statement is a call of a parameter of the function (not
``self``, not a method of an object), handed the tensor by name among its arguments.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.filefacts import FunctionInfo


def handed_callable(fn: FunctionInfo, use: cst.CSTNode, name: str) -> str | None:
    """The parameter called at ``use`` (an expression statement or the value of an assignment) with ``name``
    among its arguments, else None."""
    value = use.value if isinstance(use, (cst.Expr, cst.Assign, cst.AnnAssign)) else None
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
        return None
    callee = value.func.value
    if callee not in fn.all_params or callee in ("self", "cls"):
        return None
    handed = any(isinstance(a.value, cst.Name) and a.value.value == name for a in value.args)
    return callee if handed else None
