"""Can a class-protocol producer's run in one mode leave any field pending? (issue 15: SL201's cost per file; a
sound bound that spares the runs whose answer is known, :func:`.protocols.class_pending`).

A producer run (:func:`~streamlint.model.flow.interp.run_producer`: no caller context, no protocol inputs, no
released buffers seeded) keeps a field (:func:`~.protocols._producer_pending`) only where the last write of its
storage was made on a stream that is a ``self.*`` stream of the object, or a class attribute
(:func:`~.unproven.shared_stream_key`: a plain field), or a ``self.*`` stream (a container field's entries:
``fieldfamilies.family_pending``). A write on the entry stream (``MAIN``), the host (``<host>``) or a TorchAir tag
stream (``tag:…`` / ``tag?:…``, :func:`~streamlint.model.streams.scope_stream_key`) is never one: the field is
then not pending, or joined.

Every access the interpreter records is made on the stream current on its path (``st.cur``, the top of
``st.stack``: :meth:`Storages.op`, :meth:`Storages.alloc`; a graph replay takes the current stream), or copies
another access's stream; a producer run's entry state holds ``[MAIN]``, and only two things push a stream:

* :meth:`Control.stream_scope`, from :meth:`Control.with_item`: a with-item holding a context value or naming a
  stream (a ``Name`` / ``Attribute`` item: any stream), or the first of its scope uses
  (:meth:`Project.scope_use`) with a stream-scope role that applies in the run's mode (``u.modes is None or mode in
  u.modes``): a native stream context pushes any stream, a TorchAir ``npu_stream_switch`` (directly or through a
  wrapper) always a tag stream;
* :meth:`SyncOps.native_launch`: a call handed a raw stream handle and ``x.data_ptr()`` pointers (any stream).

So when no code the run may execute holds a with-item that may push anything but a tag stream, nor names a
``data_ptr`` attribute, the run keeps nothing, and :func:`~.protocols.class_pending` need not make it (the MoE
layers of an Ascend model: ``forward`` switching to the shared experts' tag stream, whose ``route`` reads
``self.gate``; :func:`~.protocols.protocol_inputs` asks the class's producers for it in the eager mode).

The code a run may execute: the method's own node (nested functions and lambdas included) and, transitively, every
function :func:`~.inlinecallees.inline_callee` gives for a call in it (the resolvers :meth:`Calls.inline_target` inlines
through, asked in the frame the call is evaluated in: the function holding it, or the innermost function around
it), to the interpreter's inline depth. Past :data:`LIMIT` functions: "may" (when in doubt, anything).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.flow.inlinecallees import inline_callee
from streamlint.model.flow.values import MAX_INLINE_DEPTH
from streamlint.model.streams import derived
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

LIMIT = 64


def may_leave_pending(project: Project, file: FileModel, fn: FunctionInfo, mode: str) -> bool:
    """May a producer run of ``fn`` in ``mode`` leave a field pending? False only when no code the run may execute
    can make current a stream other than the entry stream or a TorchAir tag stream (see the module docstring)."""
    memo = derived(project, "may_leave_pending")
    key = (id(fn), mode)
    if key not in memo:
        memo[key] = _may_push(project, file, fn, mode)
    return memo[key]


def _may_push(project: Project, file: FileModel, fn: FunctionInfo, mode: str) -> bool:
    depth_of: dict[int, int] = {id(fn): 0}
    todo: list[tuple[FileModel, FunctionInfo, int]] = [(file, fn, 0)]
    while todo:
        mod, g, depth = todo.pop(0)  # (breadth first: each function at the least depth it is inlined at)
        calls, items, pointers = _nodes(g.node)
        if pointers or any(_item_may_push(project, mod, item, mode) for item in items):
            return True
        if depth >= MAX_INLINE_DEPTH:
            continue  # (a frame at the inline depth runs no helper inline)
        for call in calls:
            site = mod.call_site(call)
            if site is None:
                continue
            for frame in (g,) if site.function is None or site.function is g else (g, site.function):
                found = inline_callee(project, mod, frame, site)[0]
                if found is None or depth_of.get(id(found[0]), MAX_INLINE_DEPTH + 1) <= depth + 1:
                    continue
                depth_of[id(found[0])] = depth + 1
                if len(depth_of) > LIMIT:
                    return True
                todo.append((found[1], found[0], depth + 1))
    return False


def _nodes(node: cst.CSTNode) -> tuple[list[cst.Call], list[cst.WithItem], bool]:
    """Every call and with-item under ``node`` (nested functions, lambdas and comprehensions included), and
    whether an attribute ``data_ptr`` is named there."""
    calls: list[cst.Call] = []
    items: list[cst.WithItem] = []
    pointers = False
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call):
            calls.append(n)
        elif isinstance(n, cst.With):
            items.extend(n.items)
        elif isinstance(n, cst.Attribute) and n.attr.value == "data_ptr":
            pointers = True
        stack.extend(children(n))
    return calls, items, pointers


def _item_may_push(project: Project, file: FileModel, item: cst.WithItem, mode: str) -> bool:
    """May :meth:`Control.with_item` push a stream other than a tag stream for ``item``? A name or an attribute (a
    context value, a stream); a scope use of a stream-scope role applying in ``mode`` that is not a TorchAir switch."""
    if isinstance(item.item, (cst.Name, cst.Attribute)):
        return True
    site = file.scope_site(item)
    if site is None:
        return False
    return any(u.role in apis.STREAM_SCOPE_ROLES and (u.modes is None or mode in u.modes) and u.role is not Role.STREAM_SWITCH
               for u in project.scope_use(file, site).uses)


__all__ = ["may_leave_pending"]
