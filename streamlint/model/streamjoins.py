"""Which containers of an object hold side streams it made, for the join loops over them.

A checker, an in-backward optimizer or a gradient reducer keeps the side streams its other methods issue work
on in a container field (``self.reduce_streams.append(torch.cuda.Stream())``, ``self._streams[dev] = s`` with
``s = torch.cuda.Stream(dev)``) or in a field of per-device records it holds (``self.lanes[dev] =
_Lane(dev)`` whose ``__init__`` sets ``self.update = torch.cuda.Stream(dev)``), and one finishing method makes
the current stream wait for each of them (``for s in self.reduce_streams: cur.wait_stream(s)``) before the
caller reads what they wrote. :func:`~streamlint.model.waits.partial_joins` reports a join loop that reaches
every element but the first or last; for events its evidence is a record stored into the container, for
streams it is the answer here:

- :func:`stream_container_store` -- a store of a *new* stream into a container named ``name``: an
  ``append`` / subscript store / a display or comprehension of constructions bound to the field, the stored
  value a stream construction or a local every binding of which is one; and no store of anything else into it
  (``self.streams = [current_stream()]`` then ``append(Stream())``: the first element is the caller's own).
  A stream captured from the current stream (``current_stream(dev)``) is no side stream: a loop leaving one out
  may leave out the caller's own stream, where the wait is redundant.
- :func:`stream_field_store` -- a field ``attr`` of the elements set to a new stream in a method of a project
  class (``self.update = torch.cuda.Stream(dev)``): each element carries its own side stream.

A stream construction is a call whose last name is ``Stream`` (``torch.cuda.Stream(dev)``, ``torch.npu.Stream()``,
``self.dm.Stream(dev)`` on an accelerator module) that does not resolve to a class of another package that is no
stream API (``from rtsp import Stream``: a camera feed).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model import apis
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.syntax import local_nodes

if TYPE_CHECKING:
    from streamlint.model.project import Project


def new_stream(project: "Project", file: FileModel, fn: FunctionInfo, value: cst.BaseExpression,
                _depth: int = 0) -> bool:
    """Is ``value`` a stream construction, or a local of ``fn`` every binding of which is one (also through
    ``a if c else b`` with both arms constructions)?"""
    if isinstance(value, cst.IfExp):
        return new_stream(project, file, fn, value.body, _depth) and new_stream(project, file, fn, value.orelse,
                                                                                  _depth)
    if isinstance(value, cst.Call):
        func = value.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) \
            else None
        return last == "Stream" and _stream_class(project, file, fn, func)
    if isinstance(value, cst.Name) and _depth < 2:
        bound = fn.name_assigns.get(value.value)
        return bool(bound) and all(new_stream(project, file, fn, v, _depth + 1) for v in bound)
    return False


def _stream_class(project: "Project", file: FileModel, fn: FunctionInfo, func: cst.BaseExpression) -> bool:
    """Can ``func`` (named ``...Stream``) be a device stream class? A known stream API is; a name imported from
    a module outside the project that is no stream API (``from rtsp import Stream``: a camera feed) is not; an
    accelerator object's method (``self.dm.Stream``), a project class or a name left unresolved may be."""
    resolved = file.resolve(func, fn)
    if resolved is None or resolved.startswith(f"{file.module_name}."):
        return True
    spec = apis.lookup(resolved)
    if spec is not None:
        return spec.role is apis.Role.STREAM_NEW
    return "." in resolved and project.module_path(resolved.rsplit(".", 1)[0], file) is not None


def _holder(e: cst.BaseExpression) -> str | None:
    """``self.streams[k]`` -> ``streams``; ``ctx.streams`` -> ``streams``."""
    while isinstance(e, cst.Subscript):
        e = e.value
    return e.attr.value if isinstance(e, cst.Attribute) else None


def _element(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The element of a display or comprehension of one kind (``[Stream() for _ in ...]``, ``{d: Stream(d)
    for d in ...}``, ``[Stream(), Stream()]``: the first element stands for all of them)."""
    if isinstance(value, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
        return value.elt
    if isinstance(value, cst.DictComp):
        return value.value
    if isinstance(value, (cst.List, cst.Tuple)) and value.elements:
        first = value.elements[0]
        return None if isinstance(first, cst.StarredElement) else first.value
    return None


def _stores(project: "Project", file: FileModel, fn: FunctionInfo, name: str) -> Iterator[tuple[cst.CSTNode, bool]]:
    """Stores into an attribute container ``name`` in the body of ``fn``: (the store, whether it stores new
    streams). A rebinding to an empty display or ``None`` stores nothing; ``extend`` / ``+=`` / a rebinding to
    anything but a display or comprehension of one kind stores something else."""
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and _holder(node.func.value) == name:
            method = node.func.attr.value
            if method in ("append", "insert", "setdefault") and node.args:
                yield node, new_stream(project, file, fn, node.args[-1].value)
            elif method in ("extend", "update", "__setitem__"):
                yield node, False
        elif isinstance(node, cst.AugAssign) and _holder(node.target) == name:
            yield node, False
        elif isinstance(node, cst.Assign):
            for t in node.targets:
                target = t.target
                if isinstance(target, cst.Subscript) and _holder(target) == name:
                    yield node, new_stream(project, file, fn, node.value)
                elif isinstance(target, cst.Attribute) and target.attr.value == name:
                    value = node.value
                    if isinstance(value, cst.Name) and value.value == "None" or isinstance(
                            value, (cst.List, cst.Tuple, cst.Dict)) and not value.elements:
                        continue
                    element = _element(value)
                    yield node, element is not None and new_stream(project, file, fn, element)


def stream_container_store(project: "Project", file: FileModel, fn: FunctionInfo, name: str,
                           owner: str | None) -> tuple[FileModel, cst.CSTNode] | None:
    """A store of a new side stream into an attribute container named ``name`` (see the module docstring),
    in a function of the project but ``fn``; with ``owner``, only the methods of that class in ``file``."""
    models = (file,) if owner is not None else itertools.chain(
        (file,), (m for m in project.files_containing((name.encode(),)) if m is not file))
    found: tuple[FileModel, cst.CSTNode] | None = None
    for model in models:
        for other in model.iter_functions():
            if owner is not None and other.class_name != owner:
                continue
            for store, new in _stores(project, model, other, name):
                if not new:
                    return None  # the container also holds other values (the current stream, a stream handed in)
                if found is None and other.node is not fn.node:
                    found = (model, store)
    return found


def role_of_left_out(file: FileModel, fn: FunctionInfo, name: str, dropped: str) -> bool:
    """Does a method of ``fn``'s class name the element a join loop over ``self.<name>`` leaves out by its index
    (``self.streams[0]``: made the current stream, recorded into an event joined elsewhere, the leader the others
    wait on)? Then that element has a role of its own and its join may be elsewhere: no left-out side stream."""
    cls = file.classes.get(fn.class_name) if fn.class_name is not None else None
    if cls is None:
        return False
    index = "0" if dropped == "first" else "-1"
    return f"self.{name}[{index}]" in file.code(cls.node).replace(" ", "")


def issues_stream_work(fn: FunctionInfo) -> bool:
    """Does ``fn`` enter a stream scope itself (``with torch.cuda.stream(s):``)? Then the work its join loop
    orders is its own, and the dataflow follows it (a race at the read, not a left-out element)."""
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.With):
            for item in node.items:
                call = item.item
                func = call.func if isinstance(call, cst.Call) else None
                last = func.attr.value if isinstance(func, cst.Attribute) else func.value \
                    if isinstance(func, cst.Name) else ""
                if "stream" in last.lower():
                    return True
    return False


def stream_field_store(project: "Project", file: FileModel, attr: str) -> tuple[FileModel, cst.CSTNode] | None:
    """A method of a project class setting ``self.<attr>`` to a new stream (the field each element of a
    container of such objects carries), in this file or another one naming the field."""
    target = f"self.{attr}"
    for model in itertools.chain((file,), (m for m in project.files_containing((attr.encode(),)) if m is not file)):
        for fn in model.iter_functions():
            if fn.class_name is None:
                continue
            for assign in fn.assigns:
                if assign.target == target and new_stream(project, model, fn, assign.value):
                    return model, assign.node
    return None


__all__ = ["issues_stream_work", "role_of_left_out", "stream_container_store", "stream_field_store"]
