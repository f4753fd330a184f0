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

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.flow.computed import called_function, computes_tensor
from streamlint.model.flow.values import KVal, TVal
from streamlint.model.syntax import local_nodes
from streamlint.model.tensors import tensor_method

if TYPE_CHECKING:
    from streamlint.model.flow.values import State


def guessed_result(interp, st: State, reads: list, result: TVal | None, call: cst.Call | None = None) -> TVal | None:
    """``result`` of a non-torch call over ``reads``: remember it as a guess when every tensor it was made from is a
    long-lived place no access of this path made a tensor yet (no read, write or use of its storage before), or the
    result of such a guess (``ids = to_ids(key.hashes(self.hasher))``: a value made from a guess is one as well).
    Never for a ``call`` of a project function whose every return is a tensor its body makes with torch (the output
    of its kernels, :func:`~streamlint.model.flow.computed.computes_tensor`, or a local bound only to torch calls and
    tensor methods of them: ``out = torch.empty(...)``, filled by ``out=`` kernels, then ``out.reshape(...)``):
    ``o = self._forward_prefill(q, kv_cache, meta)`` is device data whatever its arguments are."""
    if result is None:
        return None
    if call is not None and (found := called_function(interp.project, interp.cfile, call)) is not None \
            and _torch_made(interp.project, found[1], found[0]):
        return result
    guessed = interp.__dict__.get("guessed_sids", {})
    place = None
    for v in reads:
        tvs = interp.tensors(st, v)
        if not tvs:
            continue
        inherited = [guessed.get(tv.sid) for tv in tvs]
        if all(inherited):
            place = place or inherited[0]
            continue
        if not isinstance(v, KVal) or not _unused_place(interp, st, v):
            return result
        place = place or v.key
    if place is not None:
        interp.__dict__.setdefault("guessed_sids", {})[result.sid] = place
    return result


def inherit_guess(interp, sid: int, part: int) -> None:
    """``part`` is a storage made for one element of the storage ``sid`` (``chunks, size = self._lookup(...)``): a
    part of a guess, or of a helper's guessed result (:func:`~streamlint.model.flow.hosthelpers.note_guessed_helper`),
    is one as well."""
    for field in ("guessed_sids", "helper_guesses"):
        marks = interp.__dict__.get(field)
        if marks and sid in marks:
            marks[part] = marks[sid]
    if sid in interp.__dict__.get("built_guesses", ()):
        interp.__dict__["built_guesses"].add(part)


def _unused_place(interp, st: State, v: KVal) -> bool:
    """Is ``v`` a long-lived place, not evidently a tensor, that no access of this path made a tensor yet?"""
    if _evident_tensor(interp, v.key):
        return False  # (the class stores a tensor there, or the function uses it as one later)
    for tv in interp.tensors(st, v):
        S = st.stores.get(tv.sid)
        if S is None or S.kind != "long" or len(S.uses) > 1 or len(S.reads) > 1 or S.parts:
            return False  # (the call's own read is there already)
        if S.last_write is not None and S.last_write.node is not None:
            return False
    return True


def _evident_tensor(interp, key: str) -> bool:
    """Is the place evidently a tensor for reasons the path so far does not show: a method of its class assigns
    it a torch call's result or a copy to a device (``self.features = torch.randn(..., device=dev)``, ``.cuda()``),
    or the function uses it as a tensor somewhere (``self.features.mul_(0.5)`` after the call)?"""
    file, fn = interp.cfile, interp.cfn
    if not isinstance(key, str) or not key.startswith("self.") or fn is None:
        return False
    memo = interp.__dict__.setdefault("evident_tensors", {})
    if (id(fn), key) not in memo:
        memo[(id(fn), key)] = _evident(file, fn, key)
    return memo[(id(fn), key)]


def _evident(file, fn, key: str) -> bool:
    for other in file.functions.values() if fn.class_name is not None else ():
        if other.class_name != fn.class_name:
            continue
        for a in other.assigns:
            if a.target == key and isinstance(a.value, cst.Call) and _tensor_call(file, a.value):
                return True
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and dotted(n.func.value) == key
               and tensor_method(n.func.attr.value) for n in local_nodes(fn.node.body))


def _tensor_call(file, call: cst.Call) -> bool:
    site = file.call_site(call)
    target = site.target if site is not None else None
    if target and target.split(".", 1)[0] in ("torch", "torch_npu"):
        return True
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "cuda", "npu", "clone", "contiguous")


def guess_of(interp, sid: int) -> str | None:
    """The place a storage's tensor-ness rests on, when it is such a guess; ``name()`` for the result of a project
    helper that hands back only what code not seen gives (:func:`~streamlint.model.flow.hosthelpers.note_guessed_helper`:
    its own code makes no tensor, so its death frees no block the analysis knows of either)."""
    place = interp.__dict__.get("guessed_sids", {}).get(sid)
    helper = interp.__dict__.get("helper_guesses", {}).get(sid)
    return place if place is not None else f"{helper}()" if helper else None


def _torch_made(project, file, fn) -> bool:
    """Does every ``return`` of ``fn`` hand back a tensor its body makes with torch (see :func:`guessed_result`)?"""
    if computes_tensor(project, file, fn):
        return True
    values = [r.value for r in fn.returns]
    return bool(values) and not fn.yields and all(
        isinstance(v, cst.Name) and v.value not in fn.all_params and _torch_bound(file, fn, v.value, set())
        for v in values)


def _torch_bound(file, fn, name: str, seen: set[str]) -> bool:
    """Is every binding of the local ``name`` a torch call, or a tensor method of one / of such a local?"""
    if name in seen:
        return True  # (`out = out.reshape(...)`: the same tensor)
    seen.add(name)
    bound = fn.name_assigns.get(name) or []
    return bool(bound) and len(seen) <= 4 and all(_torch_expr(file, fn, b, seen) for b in bound)


def _torch_expr(file, fn, e: cst.BaseExpression, seen: set[str]) -> bool:
    while isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and tensor_method(e.func.attr.value):
        e = e.func.value  # (`x.reshape(n, -1).contiguous()`: a view or op of x)
    if isinstance(e, cst.Call):
        return _tensor_call(file, e)
    return isinstance(e, cst.Name) and e.value not in fn.all_params and _torch_bound(file, fn, e.value, seen)
