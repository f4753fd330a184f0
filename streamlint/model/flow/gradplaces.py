"""Gradients reached through objects of unknown type: ``handle.flat_param.grad``, ``p.grad.data``.

A place reached from a parameter or a getter whose type the analysis does not know stays opaque (never tracked as
a tensor) until a tensor op writes it (:meth:`~streamlint.model.flow.storage.Storages.place`). A gradient is the
exception: ``.grad`` is the attribute autograd fills on a tensor (a parameter, a flat parameter of a sharded
wrapper), so the place is device data whatever object it was reached through -- the tensor backward produced on
the stream the caller ran it on. Its views (``.grad.data``, ``.grad.T``) are the same storage. Any other
attribute of an unknown object (``batch.data``, ``cfg.grad_clip``) says nothing; neither does a ``grad``
reached through a call or an element (``model.grad()``, ``grads[0]``: the chain must be attributes only)."""

from __future__ import annotations

import re

from streamlint.model.tensorvocab import VIEW_ATTRS

_CHAIN = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def gradient_place(key: str) -> str | None:
    """The gradient an attribute chain (as rendered) names, without its view attributes (``h.flat_param.grad``
    for ``h.flat_param.grad.data``), or None when it names no gradient."""
    if not _CHAIN.fullmatch(key):
        return None
    parts = key.split(".")
    while len(parts) > 1 and (parts[-1] in VIEW_ATTRS or parts[-1] == "data"):
        parts.pop()
    return ".".join(parts) if len(parts) > 1 and parts[-1] == "grad" else None


__all__ = ["gradient_place"]
