"""A stream scope opened by a context-manager method of an object the caller holds.

Serving code leases a resource around a block and keeps the block on the resource's stream::

    class EncoderSession:
        @contextlib.contextmanager
        def lease(self, features, mask):
            with torch.cuda.stream(self._stream):
                yield self._encoder(features), mask.sum(-1)

    class Runtime:
        def transcribe(self, features, mask):
            with self._session.lease(features, mask) as (encoded, valid):
                return self._decoder.decode(encoded, valid)

The ``with`` block runs on the session's ``self._stream``: in the caller's terms ``self._session._stream``.
Taken for an unrelated context manager (a timer, a lock), the block would seem to run on the caller's current
stream, and a method called in it would be judged by the scopes of the caller's own callers.

:func:`held_target` says which project method such a ``with`` item runs: a generator method decorated
``@contextmanager``, called on ``self.<f>`` of the calling method's class, where ``<f>`` is constructed as a
project class in the caller's class (the same resolution as any held submodule's method). Only its stream-scope
variants count (the project's wrapper inference, :mod:`~streamlint.model.wrappers`, finds them: a scope around its
``yield``); whether the block may run inline instead (a ``yield`` outside the scope) is the wrapper's own question
(:func:`~streamlint.model.flow.ambient.may_run_inline`).

:func:`scope_stream` gives the stream of such a scope in the
caller's terms: ``self.<f>.<attr>`` for ``self.<attr>`` inside the held object's method; None for any other
shape (an attribute path deeper than one field, several wrappers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import CallSite, FunctionInfo

if TYPE_CHECKING:
    from streamlint.model.uses import ApiUse


def _held_receiver(site: CallSite) -> cst.Attribute | None:
    """``self.<f>`` when the call is ``self.<f>.m(...)`` in a method, else None."""
    func = site.node.func
    if site.function is None or site.function.class_name is None or not isinstance(func, cst.Attribute):
        return None
    value = func.value
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "self":
        return value
    return None


def held_target(project, file: FileModel, site: CallSite) -> tuple[FunctionInfo, FileModel] | None:
    """The ``@contextmanager`` method of a held object a call ``self.<f>.m(...)`` runs, when the project
    resolves ``self.<f>`` to a project class (module docstring); else None."""
    if _held_receiver(site) is None:
        return None
    found = project.call_target(file, site)
    if found is None:
        return None
    fn = found[0]
    if fn.class_name is None or fn.params[:1] != ("self",) or not fn.yields or fn.parent is not None \
            or not any(d.rsplit(".", 1)[-1] == "contextmanager" for d in fn.decorators):
        return None
    return found


def held_scope(variant_role) -> bool:
    """Is a variant of a held object's method kept at the caller: a stream scope only."""
    return variant_role in apis.STREAM_SCOPE_ROLES


def scope_stream(use: ApiUse) -> cst.BaseExpression | None:
    """The stream a scope through one wrapper method of a held object opens, in the caller's terms, when the method
    enters a field of its own object: ``self.<f>.<attr>`` called on ``self.<f>``; else None (a method of ``self``
    itself is :mod:`~streamlint.model.flow.retainedstreams`' question)."""
    inner = use.receiver_attrs.get("stream")
    if use.arg("stream") is not None or inner is None or len(use.wrappers) != 1:
        return None
    if not (isinstance(inner, cst.Attribute) and isinstance(inner.value, cst.Name) and inner.value.value == "self"):
        return None
    func = use.node.func
    if not isinstance(func, cst.Attribute):
        return None
    text = dotted(func.value)
    if text is None or text.count(".") != 1 or not text.startswith("self."):
        return None
    return cst.Attribute(value=func.value, attr=cst.Name(inner.attr.value))


__all__ = ["held_scope", "held_target", "scope_stream"]
