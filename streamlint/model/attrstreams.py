"""Where a stream held in ``self.<attr>`` comes from, seen from the class that reads it.

A flow keys a stream scope by the text of its stream (``self.main_stream``) and takes any key other than the
entry stream for a side stream. That is only sound when the project can see what the attribute holds.
:func:`attr_origin` says what the project knows of it, walking the class and its project base classes:

- ``"own"``: a method of the chain assigns it (``self.s = ...`` / ``Cls.s = ...``), a class-level field gives it
  a value, or a method/property of that name computes it: the flow's own resolution applies;
- ``"handed"``: the attribute is only filled from outside the class -- a dataclass / NamedTuple field with no
  default, or ``self.s = s`` from an ``__init__`` parameter: the stream is the constructor caller's choice, like
  a stream parameter is the function caller's;
- ``"unseen"``: nothing in the project chain defines it and some base class lies outside the project (a
  framework class the package derives from): the attribute is defined there, and what it holds -- quite
  possibly the current stream (``GPUModelRunner.main_stream``) -- is unknown;
- None: none of these (no information either way; the flow keeps its defaults).

Findings that need such a stream to be distinct from the current one have only its name as evidence for
"unseen" ones, so the flow does not report them (precision first)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo
from streamlint.model.syntax import class_field

if TYPE_CHECKING:
    from streamlint.model.project import Project

# Bases from libraries known to define no stream attribute for their subclasses: an attribute a subclass
# of these reads but never sets is set by the project from outside, not inherited.
_PLAIN_BASES = ("torch.", "torch_npu.", "builtins.", "abc.", "typing.", "enum.", "dataclasses.", "collections.",
                "contextlib.", "threading.", "object", "ABC", "Generic", "Protocol", "NamedTuple", "Enum")


def _plain_base(name: str) -> bool:
    return name.startswith(_PLAIN_BASES) or "." not in name and name in _PLAIN_BASES


def _field_default(cls: cst.ClassDef, attr: str) -> bool | None:
    """True when a class-level ``attr: T = value`` / ``attr = value`` gives a value, False for a bare
    annotated field, None when the class body does not name it."""
    field = class_field(cls, attr)
    return None if field is None else not (isinstance(field, cst.AnnAssign) and field.value is None)


def _record_like(file: FileModel, cls: ClassInfo) -> bool:
    """A dataclass / attrs class / NamedTuple: its bare annotated fields are constructor arguments."""
    decorated = any("dataclass" in file.code(d.decorator) or file.code(d.decorator).startswith(("attr.", "attrs."))
                    for d in cls.node.decorators)
    return decorated or any(b.rsplit(".", 1)[-1] == "NamedTuple" for b in cls.bases)


def attr_origin(project: Project, file: FileModel, cls: ClassInfo | None, attr: str) -> str | None:
    """``"own"``, ``"handed"``, ``"unseen"`` or None for ``self.<attr>`` read in a method of ``cls`` (see the
    module docstring). Memoised per project and class."""
    if cls is None:
        return None
    memo = project.path_index.derived.setdefault("attr_origin", {})
    key = (id(cls), attr)
    if key not in memo:
        memo[key] = None
        memo[key] = _origin(project, file, cls, attr)
    return memo[key]


def _origin(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> str | None:
    handed = False
    outside = False
    chain: list[tuple[ClassInfo, FileModel]] = [(cls, file)]
    seen: set[int] = set()
    while chain:
        c, f = chain.pop()
        if id(c) in seen or len(seen) > 8:
            continue
        seen.add(id(c))
        if attr in c.methods:
            return "own"
        default = _field_default(c.node, attr)
        if default:
            return "own"
        if default is False and _record_like(f, c):
            handed = True
        targets = {f"self.{attr}", f"{c.name}.{attr}", f"cls.{attr}"}
        for method in c.methods.values():
            for assign in method.assigns:
                if assign.target not in targets:
                    continue
                value = assign.value
                if method.node.name.value == "__init__" and isinstance(value, cst.Name) \
                        and value.value in method.all_params and value.value not in method.name_assigns:
                    handed = True
                    continue
                return "own"
        for base in c.bases:
            if not base:
                continue  # (``Generic[T]``, ``Protocol[T]``: a subscripted base names no stream attribute)
            sym = project.symbol(base, f)
            if sym is not None and isinstance(sym[0], ClassInfo):
                chain.append((sym[0], sym[1]))
            elif not _plain_base(base):
                outside = True
    if handed:
        return "handed"
    return "unseen" if outside else None


def self_stream_origin(project: Project, frames, key: str) -> str | None:
    """:func:`attr_origin` of a stream key ``self.<attr>`` in the innermost method frame of ``frames``
    ((file, function) pairs, outermost first); None for any other key."""
    if not key.startswith("self.") or key.count(".") != 1 or "[" in key:
        return None
    found = next(((f, fn) for f, fn in reversed(frames) if fn.class_name), None)
    if found is None:
        return None
    frame_file, frame_fn = found
    return attr_origin(project, frame_file, frame_file.classes.get(frame_fn.class_name or ""), key[5:])


def unseen_pair(interp, a: str, b: str) -> bool:
    """Two stream keys (in the interpreter ``interp``'s innermost method frame) of which one is an "unseen"
    ``self.*`` stream and the other the entry stream or another unseen one: nothing but a name says they
    differ."""
    from streamlint.model.streams import MAIN

    unseen = [self_stream_origin(interp.project, interp.frames, k) == "unseen" for k in (a, b)]
    return unseen[0] and (unseen[1] or b == MAIN) or unseen[1] and a == MAIN


def foreign_stream(interp, key: str) -> bool:
    """A ``self.*`` stream the object was handed by its constructor's caller, or one the project cannot see."""
    return self_stream_origin(interp.project, interp.frames, key) in ("handed", "unseen")


__all__ = ["attr_origin", "foreign_stream", "self_stream_origin", "unseen_pair"]
