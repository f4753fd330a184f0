"""Streams held in a field of a parameter (issue 16, "stream identity of a held object's field").

A reducer handed its bucket store (``def reduce(store: BucketStore)``) enters ``store.comm_stream``. The object
comes from the caller, so the stream is the caller's object's, but what that field holds is written in the class
the parameter is annotated with: ``self.comm_stream = torch.cuda.Stream()`` there makes it a side stream for sure
(the interpreter's default for any other stream key), ``self.comm_stream = torch.cuda.current_stream()`` makes it
the stream current at the call (:func:`field_is_current`: no switch, no race). As for a stream parameter, the fork
before the side stream's first use is the function's job unless every seen caller orders that very stream after
its current one before the call (``store.comm_stream.wait_stream(current_stream())`` then ``reduce(store)``):
:func:`forked_param_fields` names those keys, which start ordered at entry."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.flow.forks import caller_forks
from streamlint.model.flow.helperrecords import _param_class
from streamlint.model.flow.typedholders import declared_method
from streamlint.model.attrstreams import attr_origin
from streamlint.model.streams import MAIN_STREAM, STREAM, attr_kind, is_current_stream

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project


def _split(fn: FunctionInfo, key: str) -> tuple[str, str] | None:
    """``store.comm_stream`` -> (``store``, ``comm_stream``) when ``store`` is a parameter of ``fn`` (not self)."""
    head, dot, attr = key.partition(".")
    if not dot or not attr.isidentifier() or head in ("self", "cls") or head not in fn.all_params:
        return None
    return head, attr


def field_is_current(project: Project, file: FileModel, fn: FunctionInfo, key: str) -> bool:
    """Is stream key ``param.attr`` the current stream, as the parameter's annotated project class binds it?"""
    split = _split(fn, key)
    found = _param_class(project, file, fn, split[0]) if split is not None else None
    if found is None or attr_kind(project, found[1], found[0], split[1]) != MAIN_STREAM:
        return False
    cls, mod = found  # (every binding a `current_stream()`: a default stream may be another one than the caller's)
    bindings = [(m, a.value) for m in cls.methods.values() for a in m.assigns if a.target == f"self.{split[1]}"]
    return bool(bindings) and all(is_current_stream(project, mod, m, v) for m, v in bindings)


def field_is_side(project: Project, file: FileModel, fn: FunctionInfo, key: str) -> bool:
    """Is stream key ``param.attr`` a side stream for sure: the parameter's annotated project class builds a stream
    of its own there (``self.comm_stream = torch.cuda.Stream()``), not one handed to its constructor? Then the
    stream is no choice of the caller's (only the fork before its use may be: :func:`forked_param_fields`)."""
    split = _split(fn, key)
    found = _param_class(project, file, fn, split[0]) if split is not None else None
    return found is not None and attr_kind(project, found[1], found[0], split[1]) == STREAM \
        and attr_origin(project, found[1], found[0], split[1]) == "own"


def param_field_streams(file: FileModel, fn: FunctionInfo) -> set[str]:
    """The ``param.attr`` streams the function enters (``with torch.cuda.stream(store.comm_stream):``, also
    through an accelerator's ``stream(...)``) or a local bound to one (``s = store.comm_stream``)."""
    found = set()
    for site in fn.scopes:
        for call in site.calls:
            for arg in call.args[:1]:
                value = arg.value
                if isinstance(value, cst.Name) and value.value not in fn.all_params:
                    bound = fn.name_assigns.get(value.value, [])
                    for b in bound:
                        for leaf in (b.body, b.orelse) if isinstance(b, cst.IfExp) else (b,):
                            code = dotted(leaf)
                            if code is not None and _split(fn, code) is not None:
                                found.add(code)
                    continue
                code = dotted(value)
                if code is not None and _split(fn, code) is not None:
                    found.add(code)
    return found


def forked_param_fields(project: Project, file: FileModel, fn: FunctionInfo) -> dict[str, frozenset[str]]:
    """The ``param.attr`` streams every seen caller forks before the call (mapped like
    :func:`~streamlint.model.flow.forks.forked_stream_params`: to the parameters produced after that fork)."""
    result = {}
    for code in sorted(param_field_streams(file, fn)):
        late = caller_forks(project, file, fn, code)
        if late is not None:
            result[code] = late
    return result


__all__ = ["declared_method", "field_is_current", "field_is_side", "forked_param_fields", "param_field_streams"]
