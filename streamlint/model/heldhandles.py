"""Device modules the project only holds (issue 16 §3, "streams the way training frameworks hold them").

A training framework often reaches the device's stream API through a handle it never builds where the
code runs: the sharded-training state a post-backward hook is handed (``state.device_handle`` is
``torch.cuda`` / ``torch.npu``, set by the framework), the accelerator module passed to an offload helper
(``accel.stream(copy_stream)``), a member of ``self`` a base class of another package sets. The project
binds no value to it, so :mod:`~streamlint.model.accelerators` cannot resolve it from where it comes from.

It is recognised by what the code calls on it: a receiver whose value the project does not see -- a
parameter (or an attribute chain rooted at one) not annotated with a project class, or ``self.<attr>``
that no method, property or construction of the class binds -- on which the same scope (the function; the
class for a member of ``self``) calls a method only a device module has (``current_stream()``,
``Stream()``, ``default_stream()``: :data:`~streamlint.model.devobjects.UNAMBIGUOUS`). Its other methods
(``stream(s)``, ``Event()``, ``synchronize()``) are then the device-generic API of the same role. A media
reader's ``reader.stream(i)`` or a pool's ``synchronize()`` with nothing unambiguous on the same receiver
stays unknown.

A framework's hooks are module functions that share one state object: ``_lazy_init(state)`` makes the
streams with ``state._device_handle.Stream()``, ``_reduce_grad(state, handle)`` only enters
``state._device_handle.stream(state._all_reduce_stream)``. A chain rooted at a parameter is also a handle
when another function of the same file calls a device-only method on the same chain rooted at a parameter
of the same name and the same annotation (``state: _FSDPState`` in both): the same object reached the same
way (:func:`_file_handles`). A different parameter name or annotation is another object.

A handle is also known by the stream it enters: ``with state._device_handle.stream(state._post_backward_stream)``
where the function records a tensor on that argument (``grad.record_stream(s)``, torch's
``_no_dispatch_record_stream(grad, s)``: only a device stream keeps a block of the caching allocator) enters a
device stream (:func:`_used_as_stream`). A media reader's ``with reader.stream(track)`` enters no such value,
nor does a decoder lane that only ``wait_stream``s (another library's ordering method of the same name)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis, devfields, devobjects
from streamlint.model.file import FileModel
from streamlint.model.file import dotted as dotted_name
from streamlint.model.filefacts import FunctionInfo

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project



def held_handle(project: Project, file: FileModel, fn: FunctionInfo | None, recv: cst.BaseExpression,
                entered: cst.BaseExpression | None = None) -> bool:
    """Is ``recv`` a device module the project holds without binding it (see the module docstring)? ``entered``:
    the argument of ``with recv.stream(entered):``, when the call is that ``with`` item."""
    if fn is None or not isinstance(recv, (cst.Name, cst.Attribute)):
        return False
    chain: list[str] = []
    head: cst.BaseExpression = recv
    while isinstance(head, cst.Attribute):
        chain.append(head.attr.value)
        head = head.value
    if not isinstance(head, cst.Name):
        return False
    if head.value == "self":
        cls = file.classes.get(fn.class_name or "")
        if cls is None or not chain or devfields.member_values(project, file, cls, chain[-1]) is not None:
            return False
        scope = list(cls.methods.values())
    else:
        owner = devobjects.binder(fn, head.value)
        if owner is None or head.value not in owner.all_params or head.value in owner.name_assigns:
            return False
        annotation = devobjects.param_annotation(owner, head.value)
        if annotation is not None and len(chain) == 1 and _torch_field(file, owner, annotation, chain[0]):
            return True  # `state: _FSDPState` reaching `state._device_handle`: torch's own device handle
        if annotation is not None and devobjects.annotation_classes(project, file, owner.parent, annotation):
            return False  # a project class: what it binds decides (accelerators' own resolution)
        scope = [fn]
        shape = (head.value, file.code(annotation) if annotation is not None else "", tuple(chain))
        if shape in _file_handles(project, file):
            return True  # a sibling function of the file calls a device-only method on the same chain
    if entered is not None and _used_as_stream(file, fn, file.code(entered)):
        return True
    text = file.code(recv)
    return any(isinstance(site.node.func, cst.Attribute) and site.node.func.attr.value in devobjects.UNAMBIGUOUS
               and file.code(site.node.func.value) == text for method in scope for site in method.calls)


def _torch_field(file: FileModel, fn: FunctionInfo, annotation: cst.BaseExpression, attr: str) -> bool:
    """Is ``attr`` of an object of the annotated class a field torch's own class holds its device module in
    (:data:`~streamlint.model.apis.DEVICE_HANDLE_FIELDS`)? ``Optional[...]`` and a string form included."""
    from streamlint.model.syntax import string_annotation

    ann = string_annotation(annotation)
    if isinstance(ann, cst.Subscript) and (dotted_name(ann.value) or "").rsplit(".", 1)[-1] == "Optional" \
            and len(ann.slice) == 1 and isinstance(ann.slice[0].slice, cst.Index):
        ann = string_annotation(ann.slice[0].slice.value)
    qualname = file.resolve(ann, fn.parent) if isinstance(ann, (cst.Name, cst.Attribute)) else None
    return qualname is not None and (qualname, attr) in apis.DEVICE_HANDLE_FIELDS


def _used_as_stream(file: FileModel, fn: FunctionInfo, text: str) -> bool:
    """Does ``fn`` record a tensor on the value spelled ``text`` (``t.record_stream(text)``, torch's own
    ``_no_dispatch_record_stream(t, text)``): the caching allocator's stream, a device stream? (``wait_stream``
    alone does not say it: a decoder's lanes order their own work with one.)"""
    for site in fn.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "record_stream" and site.node.args \
                and file.code(site.node.args[0].value) == text:
            return True
        where = apis.RECORD_FUNCTIONS.get(site.target or "")
        if where is not None and len(site.node.args) > where[1] and file.code(site.node.args[where[1]].value) == text:
            return True
    return False


def _file_handles(project: Project, file: FileModel) -> frozenset[tuple[str, str, tuple[str, ...]]]:
    """The parameter-rooted chains of ``file`` on which some function calls a device-only method, each as
    (parameter name, its annotation's text, the attribute chain, innermost first)."""
    memo = project.derived("held_handle_chains")
    if id(file) in memo:
        return memo[id(file)]
    found: set[tuple[str, str, tuple[str, ...]]] = set()
    for site in file.calls:
        func = site.node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in devobjects.UNAMBIGUOUS:
            continue
        chain: list[str] = []
        head: cst.BaseExpression = func.value
        while isinstance(head, cst.Attribute):
            chain.append(head.attr.value)
            head = head.value
        if not isinstance(head, cst.Name) or head.value == "self":
            continue
        owner = devobjects.binder(site.function, head.value)
        if owner is None or head.value not in owner.all_params or head.value in owner.name_assigns:
            continue
        annotation = devobjects.param_annotation(owner, head.value)
        found.add((head.value, file.code(annotation) if annotation is not None else "", tuple(chain)))
    memo[id(file)] = frozenset(found)
    return memo[id(file)]


__all__ = ["held_handle"]
