"""Tensors written by a call the analysis cannot read: a native communicator's collective run in a side-stream scope.

Communication libraries with their own extension (a Rust / C++ communicator object, a ctypes NCCL / HCCL binding)
are driven from Python as ``comm.allreduce_inplace(t.to_native().handle(), op)`` inside ``with
torch.cuda.stream(comm.stream):``, the tensor handed through conversions of the library's own (methods no torch
tensor has, which make a handle of the same memory, not a copy). Read as an unknown method, such a call only
*reads* what it is handed, so the function's hand-back check (``HandOuts.unjoined_escape``: an argument written on a
side stream nothing joins before the return) never sees the collective fill the caller's tensor, and a deleted
``comm.stream.synchronize()`` goes unseen.

:func:`native_written` answers, for a method of a value of unknown type (no tensor, no project method) called in a
side-stream scope (not a method of ``self`` / ``cls``, not one the project defines, not a private ``_name``):
which of the tensors it is handed (through such conversions, back to the tensor they start
from) does it write? (Not a function of an imported module, ``functools.reduce(operator.add, parts)``: the call's
target resolves through the imports.) Only when its name says it is a collective (``allreduce``, ``all_gather``, ``broadcast``,
``reduce``, ``reduce_scatter``, ``alltoall(_v)``, ``gather``, ``scatter``, ``recv``, any of them ``_inplace``) or an
in-place one (``*_inplace``): an ``_inplace`` call, or one handed a single tensor, writes every tensor it is handed;
one handed several writes all but the first (the native convention: the send buffer first, the receive buffer
after, ``ncclAllReduce(sendbuff, recvbuff, ...)``). A send (``send`` / ``isend``) writes nothing. The finding such a
write leads to rests on that reading of the name: it is medium at most (``Race.opaque``), as the
interpreter's :attr:`opaque_calls` records for the call.
"""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.flow.values import State
from streamlint.model.streams import MAIN
from streamlint.model.tensors import tensor_method

# Collective names, lower-cased with the underscores removed (``all_gather`` is ``allgather``)
_COLLECTIVES = frozenset({"allreduce", "allgather", "allgatherv", "broadcast", "reduce", "reducescatter",
                          "reducescatterv", "alltoall", "alltoallv", "gather", "scatter", "recv", "irecv"})
_INPLACE = re.compile(r"_inplace$")
_MAX_CHAIN = 4  # (``t.to_bagua_tensor().bagua_backend_tensor()``: a handle of a handle)


def collective_name(name: str) -> bool:
    """Is ``name`` a collective's (in place or not), by its words: ``allreduce_inplace``, ``all_gather``?"""
    base = _INPLACE.sub("", name).lower().replace("_", "")
    return base in _COLLECTIVES


def _handle_root(e: cst.BaseExpression) -> cst.BaseExpression:
    """``t.to_native().handle()`` -> ``t``: a chain of argument-less calls of methods no torch tensor has (the
    library's conversions to its own handle of the same memory), back to the value they start from."""
    for _ in range(_MAX_CHAIN):
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and not e.args \
                and not tensor_method(e.func.attr.value):
            e = e.func.value
        else:
            break
    return e


def _root_name(e: cst.BaseExpression) -> str | None:
    while isinstance(e, (cst.Attribute, cst.Subscript, cst.Call)):
        e = e.func if isinstance(e, cst.Call) else e.value
    return e.value if isinstance(e, cst.Name) else None


def native_written(interp, st: State, e: cst.Call, name: str) -> tuple[list, list] | None:
    """``(reads, writes)`` of an unknown method ``name`` called in a side-stream scope when its name says it is a
    native collective or in-place op handed tensors (see the module docstring), else None. Records the call in
    the interpreter's ``opaque_calls`` (medium: the write rests on the name)."""
    if st.cur in (MAIN, interp.default_key) or len(st.stack) < 2 or name in ("send", "isend") \
            or name.startswith("_") or not (collective_name(name) or _INPLACE.search(name)) \
            or not isinstance(e.func, cst.Attribute) or _root_name(e.func.value) in ("self", "cls"):
        return None  # (a method of the object itself, a private helper: project code, read where it is inlined)
    site = interp.cfile.call_site(e)
    if site is not None and (site.target is not None or interp.project.call_target(interp.cfile, site) is not None):
        return None  # (a project function: its own code says what it writes; a function of an imported module,
        # ``functools.reduce(operator.add, parts)``: no method of a communicator object)
    handed = []
    for arg in e.args:
        if arg.keyword is not None or arg.star:
            continue
        root = _handle_root(arg.value)
        if not isinstance(root, (cst.Name, cst.Attribute)):
            continue  # (evaluated again here: only a plain place, no call)
        tvs = interp.tensors(st, interp.ev(st, root))
        if tvs and not any(interp.is_host(st, tv) for tv in tvs):
            handed.append(tvs)
    if not handed:
        return None
    written = handed if _INPLACE.search(name) or len(handed) == 1 else handed[1:]
    read = [] if written is handed else handed[:1]
    interp.__dict__.setdefault("opaque_calls", {})[id(interp.anchor)] = "medium"  # (an access's node: the statement)
    return [tv for tvs in read for tv in tvs], [tv for tvs in written for tv in tvs]
