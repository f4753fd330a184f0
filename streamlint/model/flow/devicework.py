"""Does a call queue device work? An effect summary of project helpers (issue 16 §3 "effect summaries").

An event recorded on a stream stands for the work that stream queued before the record (:mod:`orderings`:
``uncovered_records``; :mod:`promises`). The interpreter sees the work it can type: kernels on tensors it
tracks. A helper the caller runs on the stream without handing it a tracked tensor is invisible to it: a
closure capturing its tensors (``def _run_lora(): torch.mm(x, a, out=delta)`` called as ``_run_lora()``), a
helper walking a payload of unknown type (``def _to_host(v): ... host.copy_(v, non_blocking=True)``), a
method filling the object's own buffers (``self._load_slot(slot)``). Such a call still queues work on the
current stream, work an event recorded before it does not cover.

A project function queues device work when its own body (or a project callee's, two levels down) has

* an in-place tensor method (``x.add_(y)``, ``buf.copy_(src)``, ``t.zero_()``; not the flag setters
  ``requires_grad_`` / ``share_memory_``);
* an asynchronous transfer in either direction (``.to(dev, non_blocking=True)``, ``.cuda(non_blocking=True)``,
  ``.cpu(non_blocking=True)``);
* a ``torch`` / ``torch_npu`` computation (:func:`~streamlint.model.tensors.torch_returns_tensor`), a
  ``torch.distributed`` collective, a ``torch.ops.*`` custom op;
* a Triton launch (``kernel[grid](...)``).

The converse, :func:`host_bookkeeping`: a helper that queues no device work in any call and stores in place only
into locals or host fields of its class (a ``[0] * n`` counter bumped under a lock) is host bookkeeping; handed
no tracked tensor, its call (``self._mark_done(slot) -> None`` after a slot's release record) is no work on the
stream.

Memoised per project (``derived``), asked only at calls the interpreter neither inlined nor saw work for: per
function (:func:`queues_device_work`), per method name (:func:`every_method_queues_work`) and per call site
(:func:`helper_site_work`: the interpreter meets one site on every path and every inlining of its function).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.apis import COLLECTIVES
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.flow.hostreads import async_host_copy_call
from streamlint.model.placement import host_factory, host_placed, non_blocking
from streamlint.model.streams import derived
from streamlint.model.tensors import torch_returns_tensor
from streamlint.model.wrappers import local_def

if TYPE_CHECKING:
    from streamlint.model.project import Project

_FLAG_SETTERS = frozenset({"requires_grad_", "share_memory_", "retain_grad_", "record_stream"})
_MAX_DEPTH = 2
_TRANSFERS = frozenset({"to", "cuda", "npu", "cpu"})


def device_site(site) -> bool:
    node = site.node
    method = site.method
    if method is not None and method.endswith("_") and not method.startswith("_") and method not in _FLAG_SETTERS \
            and isinstance(node.func, cst.Attribute):
        return True
    if async_host_copy_call(node, method):
        return True
    if method in _TRANSFERS and isinstance(node.func, cst.Attribute) and non_blocking(node):
        return True  # `t.to(dev, non_blocking=True)`: a copy queued on the current stream, whatever its direction
    if isinstance(node.func, cst.Subscript):  # `kernel[grid](...)`: a Triton launch
        return True
    target = site.target or ""
    if target.startswith("torch.ops.") or (target.startswith(("torch.distributed.", "torch_npu.distributed."))
                                           and target.rsplit(".", 1)[-1] in COLLECTIVES):
        return True
    return torch_returns_tensor(target) and target.split(".")[-1] not in ("empty", "empty_like", "empty_strided") \
        and not host_factory(target, node) and not host_placed(node)  # (a host tensor built: no device work)


def callee_of(project: Project, file: FileModel, fn: FunctionInfo, site) -> tuple[FunctionInfo, FileModel] | None:
    found = project.call_target(file, site)
    if found is not None:
        return found
    return local_def(file, fn, site.node.func)


def queues_device_work(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> bool:
    """Does calling ``fn`` queue device work on the caller's current stream (see the module docstring)?"""
    memo = derived(project, "queues_device_work")
    key = (id(fn), _depth)  # (the answer depends on the depth left for callees)
    if key in memo:
        return memo[key]
    memo[key] = False  # (recursion guard)
    result = False
    for site in fn.calls:
        if device_site(site):
            result = True
            break
    if not result and _depth < _MAX_DEPTH:
        for site in fn.calls:
            found = callee_of(project, file, fn, site)
            if found is not None and found[0] is not fn and queues_device_work(project, found[1], found[0], _depth + 1):
                result = True
                break
    memo[key] = result
    return result


def helper_site_work(project: Project, file: FileModel, fn: FunctionInfo, site) -> str | None:
    """Does the call ``site`` of ``fn`` queue device work the interpreter did not see (an untyped receiver's
    in-place method or async transfer, a project helper that :func:`queues_device_work`, a method every
    definition of which does: :func:`every_method_queues_work`)? ``""`` when it does for certain, the method name
    when only by that name, None when it does not. Memoised per call site."""
    memo = derived(project, "helper_site_work")
    key = id(site.node)
    if key not in memo:
        if device_site(site):
            memo[key] = ""
        elif (found := callee_of(project, file, fn, site)) is not None:
            memo[key] = "" if queues_device_work(project, found[1], found[0]) else None
        else:
            memo[key] = site.node.func.attr.value if every_method_queues_work(project, site.node.func) else None
    return memo[key]


def every_method_queues_work(project: Project, func: cst.BaseExpression) -> bool:
    """``recv.copy_to_gpu(n)`` on a receiver the call graph cannot type, where the method name is distinctive
    (:func:`~streamlint.model.flow.duckmethods.distinctive`) and every ``def`` of it in the project (a few
    files at most, each a method of a class: a pinned staging buffer and its struct variant) queues device
    work: whichever of them runs, the call queues work on the current stream."""
    from streamlint.model.flow.duckmethods import distinctive, method_definitions

    if not isinstance(func, cst.Attribute):
        return False
    name = func.attr.value
    memo = derived(project, "every_method_queues_work")
    if name not in memo:  # (per name: the distinctive-name test too)
        memo[name] = False
        defs = method_definitions(project, name) if distinctive(name) else None
        memo[name] = bool(defs) and all(queues_device_work(project, model, f) for f, _, model in defs)
    return memo[name]


def host_bookkeeping(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Is ``fn`` host bookkeeping, no device work at all: it :func:`queues_device_work` in no call (itself or its
    project callees), and every in-place store of its body (``x += 1``, ``x[i] = v``) goes to a local name or to a
    field of its class that certainly holds host memory (``self._done[slot] += 1`` on a ``[0] * n`` list under a
    lock: :func:`~streamlint.model.flow.hostwrites.host_fields`). A helper declared to return a host value and
    handed no tracked tensor (``self._mark_done(slot) -> None``) then queues nothing on the caller's stream."""
    from streamlint.model.flow.hostwrites import host_fields
    from streamlint.model.syntax import local_nodes

    memo = derived(project, "host_bookkeeping")
    if id(fn) not in memo:
        cls = file.classes.get(fn.class_name or "")
        fields = host_fields(project, file, cls) if cls is not None else frozenset()
        nodes = local_nodes(fn.node)
        known = fields | _sync_fields(file, fn.class_name)
        memo[id(fn)] = not queues_device_work(project, file, fn) and all(
            _host_store(t, fields) for n in nodes
            for t in ([n.target] if isinstance(n, cst.AugAssign) else
                      [x.target for x in n.targets if isinstance(x.target, cst.Subscript)] if isinstance(n, cst.Assign)
                      else [n.target] if isinstance(n, cst.AnnAssign) and isinstance(n.target, cst.Subscript)
                      else [])) and all(_host_only(n, known) for n in nodes if n is not fn.node)
    return memo[id(fn)]


HOST_CALLS = frozenset({"len", "int", "float", "bool", "str", "min", "max", "sum", "range", "enumerate", "isinstance",
                        "any", "all", "print"})
HOST_ROOTS = frozenset({"logger", "logging", "log", "time", "warnings"})
_SYNC_MODULES = ("threading.", "queue.", "multiprocessing.", "asyncio.")


def _sync_fields(file: FileModel, class_name: str | None) -> frozenset[str]:
    """Fields of ``self`` every assignment of which in the file builds a host synchronisation object
    (``threading.Condition()``, ``queue.Queue()``) or is None."""
    if class_name is None:
        return frozenset()
    values: dict[str, list] = {}
    for a in file.assigns:
        if a.target.startswith("self.") and a.target.count(".") == 1:
            values.setdefault(a.target[5:], []).append(a.value)
    return frozenset(f for f, vs in values.items() if all(
        isinstance(v, cst.Name) and v.value == "None" or isinstance(v, cst.Call)
        and (dotted(v.func) or "").startswith(_SYNC_MODULES) for v in vs) and any(isinstance(v, cst.Call) for v in vs))


def _host_only(node: cst.CSTNode, known: frozenset[str]) -> bool:
    """No node of a host-bookkeeping helper reaches device state the effect summary cannot see: it mentions only
    host fields and synchronisation objects of ``self`` (not ``self.comm`` / ``self.model`` / ``self.buf``, whose
    calls or operators may queue work: ``self.comm.all_reduce(self.buf)``, ``self.a @ self.b``), calls only
    builtins, a logger, or methods of those fields (``self.cv.notify_all()``), and defines no nested function."""
    if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
        return False
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value in known
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Name):
            return func.value in HOST_CALLS
        root = func
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        if not isinstance(root, cst.Name):
            return False
        if root.value in HOST_ROOTS:
            return True
        return root.value == "self" and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute) \
            and func.value.attr.value in known  # (`self.cv.notify_all()`; not `self._helper()`)
    return True


def _host_store(target: cst.BaseExpression, fields: frozenset[str]) -> bool:
    """An in-place store's target is a local name (rebinding it) or an element of a host field of ``self``."""
    if isinstance(target, cst.Name):
        return True
    while isinstance(target, cst.Subscript):
        target = target.value
    return isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self" \
        and target.attr.value in fields


__all__ = ["callee_of", "device_site", "every_method_queues_work", "helper_site_work", "host_bookkeeping",
           "queues_device_work"]
