"""What the with-bodies of a stream-switching context manager read (issue 16 §1, FP class
scope-body-reads-host-inputs).

A project ``@contextmanager`` that yields inside ``with torch.cuda.stream(self.stream):`` runs its callers'
with-bodies on that stream; without a wait before the ``yield`` a body reading a tensor its caller produced
on the current stream just before the ``with`` races with that producer (storage.Storages.with_body). A read
on the side stream is a race only if the value has such a device producer. :func:`bodies_read_caller_device`
looks at every project ``with`` site of the context manager: what each body reads that it did not bind itself
is the caller's parameters and locals, ``self`` and module names. Object state (weights loaded at
construction, buffers of the object) and module names are no producer of the caller's current stream here;
a parameter is one when it is a tensor (annotated or used as one) or a container of tensors, and so is the
caller's ``*inputs`` (interp.bind_star_args); a local when one of its bindings before the ``with`` is device
work (a torch op, a tensor method, a project function computing a tensor) or is built from such a parameter or
local (``values = tuple(inputs)``). Precision first: when no site is known (a
context manager called in ways the project cannot see) the bodies are assumed to read such a tensor.
"""

from __future__ import annotations

import re

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.computed import computes_tensor
from streamlint.model.streams import derived
from streamlint.model.syntax import contains, local_nodes
from streamlint.model.uses import bind_arguments
from streamlint.model.tensors import (META_METHODS, host_factory, host_target, param_kinds, tensor_method,
                                      torch_returns_tensor)
from streamlint.model.tensorvocab import COPY_METHODS, HOST_VALUE_METHODS

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.project import Project


def bodies_read_caller_device(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """May a with-body of context manager ``fn`` read a tensor its caller produced before the ``with``?"""
    memo = derived(project, "bodies_read_caller_device")
    key = (file.path, fn.qualname)
    if key not in memo:
        memo[key] = True
        sites = callers_of(project, file, fn)
        for base, model in _overridden(project, file, fn):
            # `with self.batch_context():` in a base class method runs the override too
            sites = (sites or []) + (callers_of(project, model, base) or [])
        if sites:
            memo[key] = any(_site_reads_device(project, model, site) for model, site in sites)
    return memo[key]


def bodies_unseen(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Is no ``with`` of context manager ``fn`` visible in the project (nor of a base method it overrides)? Then a
    with-body's reads rest on callers nobody can see (a finding on them is at most low)."""
    return not callers_of(project, file, fn) and not any(callers_of(project, model, base)
                                                          for base, model in _overridden(project, file, fn))


def _forwards_body(caller: FunctionInfo, body: cst.CSTNode) -> bool:
    """Does the body yield, in a ``@contextmanager`` caller that orders no stream itself? Then it runs the
    caller's own callers' with-bodies (``with inner(ctx): yield ctx``: context managers composed), and what those
    read is read here. A wrapper that waits or records anything may have forked the stream before entering: not
    followed (precision first)."""
    return any(d.rsplit(".", 1)[-1] == "contextmanager" for d in caller.decorators) \
        and any(contains(body, y) for y in caller.yields) and not any(s.method in _ORDERING for s in caller.calls)


def callers_cannot_fork(project: Project, file: FileModel, fn: FunctionInfo, param: str) -> bool:
    """``fn`` (a context manager) switches to a stream made from its parameter ``param``: can no caller have
    forked that stream before entering? Yes when every call site is known and each caller orders no stream at
    all (no wait, no synchronize, no event record: ``ctx = Context(torch.cuda.Stream())`` then ``with
    group.capture(ctx): yield ctx``), and passes a value it made itself or nothing (a stream of its own parameter
    is its callers' to fork). Precision first: otherwise the caller is assumed to fork it."""
    sites = callers_of(project, file, fn)
    if not sites:
        return False
    params = tuple(p for p in fn.params if p not in ("self", "cls"))
    for _model, site in sites:
        caller = site.function
        if caller is None or any(s.method in _ORDERING for s in caller.calls):
            return False
        arg = bind_arguments(params, site.node, fn.kwonly).get(param)
        if arg is None:
            if any(a.star for a in site.node.args):
                return False
            continue  # the default: the context manager makes the stream itself
        names = _free_names(arg)
        if names & set(caller.all_params) - {"self", "cls"} or any(
                isinstance(n, cst.Attribute) for n in local_nodes(arg)):
            return False  # the caller's own parameter or object state: someone else may fork it
        if _handed_to_orderer(project, _model, caller, site, fn, names):
            return False  # `join_current(stream)`, `Lane(stream)` whose constructor waits: forked elsewhere
    return True


def _handed_to_orderer(project: Project, model: FileModel, caller: FunctionInfo, site, fn: FunctionInfo,
                       names: set[str]) -> bool:
    """Does the caller hand what it passes (``names``) to another call that may order a stream: a project
    function or constructor whose body waits, records or synchronises, or a callee it cannot see (not a torch
    API, not a project class without a constructor of its own)?"""
    for other in caller.calls:
        if other.node is site.node or not any(isinstance(n, cst.Name) and n.value in names
                                              for a in other.node.args for n in local_nodes(a.value)):
            continue
        found = project.call_target(model, other)
        if found is None:
            head = dotted(other.node.func) or ""
            sym = project.symbol(head, model) if head and not head.startswith("torch.") else None
            if head.startswith("torch.") or sym is not None and not isinstance(sym[0], FunctionInfo) \
                    and "__init__" not in getattr(sym[0], "methods", {"__init__": None}):
                continue
            return True
        if found[0] is not fn and any(c.method in _ORDERING for c in found[0].calls):
            return True
    return False


_ORDERING = frozenset({"wait_stream", "wait_event", "wait", "synchronize", "record", "record_event"})


def _overridden(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FunctionInfo, FileModel]]:
    """The project base-class methods ``fn`` overrides (same name, up the first bases)."""
    cls = file.classes.get(fn.class_name or "") if fn.parent is None else None
    if cls is None:
        return []
    name = fn.node.name.value
    return [(c.methods[name], m) for c, m in list(_chain(project, file, cls))[1:] if name in c.methods]


def _site_reads_device(project: Project, model: FileModel, site) -> bool:
    caller = site.function
    if caller is None:
        return True
    body = next((n.body for n in local_nodes(caller.node.body) if isinstance(n, cst.With)
                 and any(item.item is site.node for item in n.items)), None)
    if body is None:
        return False  # not entered as a `with` here (a plain call, a nested helper): no body of this caller
    if _forwards_body(caller, body) and bodies_read_caller_device(project, model, caller):
        return True  # a wrapping context manager yielding in the body: its callers' with-bodies run there
    bound = _bound_in(body)
    kinds = param_kinds(project, model, caller)
    for name in _free_names(body) - bound:
        if name == _star_tensors(caller):
            return True
        if name in caller.all_params and name not in ("self", "cls"):
            if _tensor_param(caller, name, kinds):
                return True
        elif name in caller.name_assigns and _device_local(project, model, caller, name, body, kinds, 0):
            return True
    cls = model.classes.get(caller.class_name or "") if caller.parent is None else None
    if cls is None:
        return False
    # object state some step of the object rewrites by device work (not construction-time weights), read by
    # the body or by the object's methods it calls (`self._dummy_run(n)` reading `self.input_ids`)
    written = set().union(*(_step_written(project, m, c) for c, m in _chain(project, model, cls)))
    return bool(_fields_read(project, model, cls, body, 0) & written)


def _fields_read(project: Project, model: FileModel, cls, node: cst.CSTNode, depth: int) -> set[str]:
    fields = {n.attr.value for n in local_nodes(node) if isinstance(n, cst.Attribute)
              and isinstance(n.value, cst.Name) and n.value.value == "self"}
    if depth < 2:
        for name in list(fields):
            method = _method(project, model, cls, name)
            if method is not None:
                fields |= _fields_read(project, method[1], cls, method[0].node.body, depth + 1)
    return fields


def _method(project: Project, model: FileModel, cls, name: str):
    """``cls``'s method ``name``, its own or inherited from its first project bases."""
    return next(((c.methods[name], m) for c, m in _chain(project, model, cls) if name in c.methods), None)


def _chain(project: Project, model: FileModel, cls):
    """``cls`` and its first project bases (``Base[T]`` generic bases too), nearest first."""
    for _ in range(5):
        yield cls, model
        if not cls.node.bases:
            return
        base = cls.node.bases[0].value
        base = base.value if isinstance(base, cst.Subscript) else base  # `Service[Item, Tensor]`: a generic base
        qualname = model.resolve(base, None)
        sym = project.symbol(qualname, model) if qualname else None
        if sym is None or not hasattr(sym[0], "methods"):
            return
        cls, model = sym


_CONSTRUCTION = ("__init__", "__post_init__", "load", "_load", "init", "_init", "setup", "_setup", "build", "_build")


def _step_written(project: Project, model: FileModel, cls) -> frozenset[str]:
    """The ``self.<field>`` names a method other than construction (``__init__``, ``load_weights``, ``setup``...)
    writes by device work: assigned a device value, or the receiver of an in-place tensor method
    (``self.pos[:n].copy_(...)``)."""
    memo = derived(project, "step_written_fields")
    key = (model.path, cls.name)
    if key not in memo:
        found: set[str] = set()
        for fn in cls.methods.values():
            if fn.node.name.value.startswith(_CONSTRUCTION):
                continue
            kinds = param_kinds(project, model, fn)
            for a in fn.assigns:
                m = _FIELD.match(a.target)
                if m and _device_expr(project, model, fn, a.value, kinds, 1):
                    found.add(m.group(1))
            for site in fn.calls:
                func = site.node.func
                if isinstance(func, cst.Attribute) and func.attr.value.endswith("_") \
                        and not func.attr.value.startswith("_"):
                    m = _FIELD.match(model.code(func.value))
                    if m:
                        found.add(m.group(1))
        memo[key] = frozenset(found)
    return memo[key]


_FIELD = re.compile(r"self\.(\w+)")


def _free_names(body: cst.CSTNode) -> set[str]:
    """Names the body reads (not attribute names, not keyword names)."""
    skip: set[int] = set()
    names: set[str] = set()
    for n in local_nodes(body):
        if isinstance(n, cst.Attribute):
            skip.add(id(n.attr))
        elif isinstance(n, cst.Arg) and n.keyword is not None:
            skip.add(id(n.keyword))
        elif isinstance(n, cst.Name) and id(n) not in skip:
            names.add(n.value)
    return names


def _bound_in(body: cst.CSTNode) -> set[str]:
    """Names the body binds itself (assignment, loop and ``as`` targets, comprehension variables)."""
    targets: list[cst.CSTNode] = []
    for n in local_nodes(body):
        if isinstance(n, cst.Assign):
            targets += [t.target for t in n.targets]
        elif isinstance(n, (cst.AnnAssign, cst.AugAssign)):
            targets.append(n.target)
        elif isinstance(n, (cst.For, cst.CompFor)):
            targets.append(n.target)
        elif isinstance(n, cst.AsName):
            targets.append(n.name)
    return {n.value for t in targets for n in local_nodes(t) if isinstance(n, cst.Name)}


def _tensor_param(caller: FunctionInfo, name: str, kinds: dict[str, str]) -> bool:
    if kinds.get(name) == "tensor":
        return True
    for p in (*caller.node.params.posonly_params, *caller.node.params.params, *caller.node.params.kwonly_params):
        if p.name.value == name:
            if p.annotation is None:
                return kinds.get(name) is None  # unknown: maybe a tensor
            return _holds_tensor(p.annotation.annotation, 0)
    return False


def _star_tensors(caller: FunctionInfo) -> str | None:
    """The name of ``caller``'s ``*inputs`` when it carries the caller's tensors (interp.bind_star_args): annotated
    with a tensor type, or not annotated and not forwarded to a callable parameter (a generic dispatcher)."""
    star = caller.node.params.star_arg
    if not isinstance(star, cst.Param):
        return None
    name = star.name.value
    if star.annotation is not None:
        return name if _holds_tensor(star.annotation.annotation, 0) else None
    if any(isinstance(site.node.func, cst.Name) and site.node.func.value in caller.all_params
           and any(a.star == "*" and isinstance(a.value, cst.Name) and a.value.value == name for a in site.node.args)
           for site in caller.calls):
        return None
    return name


def _holds_tensor(ann: cst.BaseExpression, depth: int) -> bool:
    """``Tensor``, ``Optional[Tensor]``, ``list[torch.Tensor]``, ``dict[str, Tensor]``: a tensor or a container
    of tensors; not a class merely parameterised by one (``list[Entry[Item, Tensor]]``)."""
    if isinstance(ann, cst.SimpleString):
        return "Tensor" in ann.value
    if isinstance(ann, (cst.Name, cst.Attribute)):
        return (dotted(ann) or "").rsplit(".", 1)[-1] in _TENSOR_TYPES
    if isinstance(ann, cst.BinaryOperation):  # `Tensor | None`
        return _holds_tensor(ann.left, depth) or _holds_tensor(ann.right, depth)
    if isinstance(ann, cst.Subscript) and depth < 2:
        head = (dotted(ann.value) or "").rsplit(".", 1)[-1]
        if head.lower() not in _CONTAINERS:
            return False
        return any(isinstance(el.slice, cst.Index) and _holds_tensor(el.slice.value, depth + 1) for el in ann.slice)
    return False


_TENSOR_TYPES = frozenset({"Tensor", "Parameter"})
_CONTAINERS = frozenset({"list", "tuple", "dict", "set", "sequence", "iterable", "mapping", "optional", "union",
                         "mutablesequence", "mutablemapping", "deque"})


def _device_local(project: Project, model: FileModel, caller: FunctionInfo, name: str, body: cst.CSTNode,
                  kinds: dict[str, str], depth: int) -> bool:
    if depth > 4:
        return False  # (a name bound from itself in a loop: what its other bindings say)
    values = [v for v in caller.name_assigns.get(name, ()) if not contains(body, v)]
    return any(_device_expr(project, model, caller, v, kinds, depth + 1) for v in values)


def _device_expr(project: Project, model: FileModel, caller: FunctionInfo, e: cst.BaseExpression,
                 kinds: dict[str, str], depth: int) -> bool:
    """Is ``e`` (bound in ``caller``) evidently device work, or built from a tensor parameter / device local?"""
    for n in local_nodes(e):
        if isinstance(n, cst.Call) and _device_call(project, model, caller, n):
            return True
    for name in _free_names(e):
        if name == _star_tensors(caller):
            return True  # `values = tuple(inputs)` from `*inputs: Tensor`
        if name in caller.all_params and name not in ("self", "cls"):
            if _tensor_param(caller, name, kinds):
                return True
        elif name in caller.name_assigns and name in caller.locals \
                and _device_local(project, model, caller, name, cst.Pass(), kinds, depth):
            return True
    return False


def _device_call(project: Project, model: FileModel, caller: FunctionInfo, call: cst.Call) -> bool:
    target = model.resolve(call.func, caller)
    if target is not None and target.startswith(("torch.", "torch_npu.")):
        return torch_returns_tensor(apis.canonical(target)) and not host_factory(target, call)
    if isinstance(call.func, cst.Attribute):
        name = call.func.attr.value
        if host_target(call, name):
            return False  # `x.cpu()`, `x.pin_memory()`: host memory
        if name in COPY_METHODS or name in ("cuda", "npu") or (tensor_method(name) and name not in META_METHODS
                                                               and name not in HOST_VALUE_METHODS):
            return True
    site = model.call_site(call)
    found = project.call_target(model, site) if site is not None else None
    return found is not None and computes_tensor(project, found[1], found[0])


__all__ = ["bodies_read_caller_device", "callers_cannot_fork"]
