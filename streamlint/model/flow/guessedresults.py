"""Results taken for device tensors on the strength of a guess: a call handed a long-lived place of unknown type.

A ``self.*`` place the function never used as a tensor (``self.dataloader.graph``) stands for a long-lived tensor
when an expression reads it (:meth:`~streamlint.model.flow.storage.Storages.tensors`); a call given one, and no
tensor the function knows of, then makes a new tensor on the current stream (the generic call rule of
:mod:`~streamlint.model.flow.exprs`). For races that reading is the cautious one. For lifetimes it is not: such a
result is as likely a host object (a sampler's batch of graphs and ids, a config, a list) as a device tensor, and
its death frees no block the analysis knows of. :func:`guessed_result` marks the storage; an SL301 on its free
rests on that guess and is reported at low confidence (``Lifetime.guess``: the place it rests on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint.model.flow.values import KVal, TVal

if TYPE_CHECKING:
    from streamlint.model.flow.values import State


def guessed_result(interp, st: State, reads: list, result: TVal | None) -> TVal | None:
    """``result`` of a non-torch call over ``reads``: remember it as a guess when every tensor it was made from is a
    long-lived place no access of this path made a tensor yet (no read, write or use of its storage before)."""
    if result is None:
        return None
    places = [v for v in reads if isinstance(v, KVal) and interp.tensors(st, v)]
    if not places or any(interp.tensors(st, v) for v in reads if not isinstance(v, KVal)):
        return result
    for v in places:
        for tv in interp.tensors(st, v):
            S = st.stores.get(tv.sid)
            if S is None or S.kind != "long" or len(S.uses) > 1 or len(S.reads) > 1 or S.parts:
                return result  # (the call's own read is there already)
            if S.last_write is not None and S.last_write.node is not None:
                return result
    interp.__dict__.setdefault("guessed_sids", {})[result.sid] = places[0].key
    return result


def guess_of(interp, sid: int) -> str | None:
    """The place a storage's tensor-ness rests on, when it is such a guess."""
    return interp.__dict__.get("guessed_sids", {}).get(sid)
