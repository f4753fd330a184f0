"""Quiet step writes: writes of a class's step code that leave nothing on the caller's current stream.

Step state (:mod:`~streamlint.model.stepstate`) takes a write of a ``self.*`` field outside construction as the
caller's step, queued on its current stream before the method under analysis runs: a side stream there needs a
fork. Two kinds of write leave nothing pending for that fork to order.

**A rebinding to a quietly built object.** A rebinding of a field counts as a write of everything below it
(``self.buf = x.clone()`` gives ``self.buf[i]`` new contents). A rebinding to a new *object* of a project class
(``self.engine = DenoiseEngine(prompt_len)`` when the prompt length changes) writes the tensors below it only
through what its construction runs: a constructor that allocates native memory (``cudaMalloc`` through
ctypes), keeps handles, pointers and flags, queues nothing on the caller's current stream. It is quiet when,
all of it required:

- the call builds an instance of a project class that is no tensor type
  (:func:`~streamlint.model.hostobjects.constructed_host_object`);
- the class (or a project base, three levels) defines ``__init__`` and it queues no device work, itself or
  through its project callees (:func:`~streamlint.model.flow.devicework.queues_device_work`, and any tensor
  method on a receiver not evidently host memory: ``spec.table.to(dtype)`` casts a device tensor it was handed;
  not a function of a host array library nor a method of what one returns: ``np.cos(phase)``,
  ``np.stack(rows).reshape(n, d)`` compute a rotary table on the host);
- no argument of the call is evidently a tensor (:class:`~streamlint.model.tensors.TensorTyper`: a tensor
  local or parameter, a tensor field, a ``torch`` result), and no call in one reaches ``torch`` or a project
  function that queues device work (``weights=self._weight_pointers()``, ``**self._precision_flags()`` are
  host values).

Anything else (an external class, a constructor filling a tensor with ``torch.zeros``, a tensor handed in)
stays a write of the caller's step.

**A write the method itself waits for.** A step method that, after its write, blocks the host on the current
stream (``out.cpu()``, ``.item()``, ``.tolist()`` of a device tensor, outside every stream scope: a blocking
transfer waits for the stream's earlier work) returns with that write complete: nothing is left pending on the
caller's stream. The blocking read must be a statement at the top level of the method's body (not in a loop,
which may run no round, unless a counted ``for b in range(N)`` whose count is a positive constant, a literal or
a module constant such as an imported ``BATCH = 2``, with no ``break`` / ``continue``: its first round runs
the body's statement lines; and only a call the line certainly runs, :func:`~streamlint.model.syntax.certain_calls`:
``rows.append(out.cpu() if debug else None)`` may skip it), after the write's own top-level statement with no ``return`` / ``raise`` in between,
and its receiver known to be device memory: a local or a field every binding of which is made on a device
(``device="cuda"``, ``.cuda()``, ``.to(self.device)``), not ``torch.tensor(host_list)``. (The device-wide
``synchronize()`` is the same fact, seen by stepstate itself: ``_settled_before_sync``.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.devicework import callee_of, queues_device_work
from streamlint.model.hostattrs import host_attr
from streamlint.model.hostobjects import constructed_host_object
from streamlint.model.placement import BLOCKING_HOST_READS, device_like, host_library, host_source, non_blocking
from streamlint.model.stepstate import write_place
from streamlint.model.scopes import module_int
from streamlint.model.streams import derived
from streamlint.model.syntax import certain_calls, contains, local_nodes
from streamlint.model.tensors import META_METHODS, tensor_method
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project

def quiet_write(project: Project, node: cst.CSTNode) -> bool:
    """Is the step-state write ``node`` (found by :func:`~streamlint.model.stepstate.step_writers`) a rebinding
    of a field to a project object whose construction queues no device work, or a write its method waits for
    with a blocking host read (see the module docstring)?"""
    memo = derived(project, "quiet_writes")
    held = memo.get(id(node))
    if held is not None and held[0] is node:  # (the node is kept with its answer: an id is never reused under it)
        return held[1]
    memo[id(node)] = (node, False)  # (recursion guard)
    answer = _quiet(project, node)
    memo[id(node)] = (node, answer)
    return answer


def _quiet(project: Project, node: cst.CSTNode) -> bool:
    place = write_place(project, node)
    if place is None:
        return False
    file, cls = place
    method = next((m for m in cls.methods.values() if contains(m.node, node)), None)
    if method is None:
        return False
    return _quiet_construction(project, file, method, node) or _waited_for(project, file, cls, method, node)


def _waited_for(project: Project, file: FileModel, cls: ClassInfo, method: FunctionInfo, node: cst.CSTNode) -> bool:
    """A blocking host read of a device tensor on the current stream follows the write's top-level statement, at
    the top level of the body, with no ``return`` / ``raise`` on the way (see the module docstring)."""
    block = list(getattr(method.node.body, "body", ()))
    at = next((i for i, stmt in enumerate(block) if contains(stmt, node)), None)
    if at is None:
        return False
    for stmt in block[at + 1:]:
        if any(isinstance(n, (cst.Return, cst.Raise)) for n in local_nodes(stmt)):
            return False  # (a path leaves before the read)
        for line in _certain_lines(project, file, stmt):
            for call in certain_calls(line):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in BLOCKING_HOST_READS \
                        and func.attr.value != "numpy" and not non_blocking(call) \
                        and _device_source(project, file, cls, method, func.value):
                    return True
    return False


def _certain_lines(project: Project, file: FileModel, stmt: cst.CSTNode) -> list[cst.SimpleStatementLine]:
    """The statement lines of a top-level statement that certainly run when it does: the statement itself, or
    the straight-line body of a counted loop ``for b in range(N)`` whose count is a positive constant (a literal,
    a module constant such as an imported ``BATCH_SIZE = 2``) and whose body has no ``break`` / ``continue``:
    its first round runs them all. (A loop over anything else may run no round.)"""
    if isinstance(stmt, cst.SimpleStatementLine):
        return [stmt]
    if not (isinstance(stmt, cst.For) and stmt.orelse is None and isinstance(stmt.iter, cst.Call)
            and dotted(stmt.iter.func) == "range" and len(stmt.iter.args) == 1
            and stmt.iter.args[0].keyword is None and isinstance(stmt.body, cst.IndentedBlock)):
        return []
    count = module_int(project, file, stmt.iter.args[0].value)
    if count is None or count <= 0 or any(isinstance(n, (cst.Break, cst.Continue)) for n in local_nodes(stmt.body)):
        return []
    return [line for line in stmt.body.body if isinstance(line, cst.SimpleStatementLine)]



def _device_source(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo,
                   recv: cst.BaseExpression) -> bool:
    """Is ``recv`` (a blocking read's receiver) known to be device memory: its root (below views, elements and
    method calls) a local or a ``self`` field every binding of which (but ``None``) is made on a device
    (``torch.empty(n, device="cuda")``, ``x.cuda()``, ``x.to(self.device)``)? Not a host tensor
    (``torch.tensor(lengths)``) nor anything unseen."""
    root = recv
    while isinstance(root, (cst.Attribute, cst.Subscript, cst.Call)):
        if isinstance(root, cst.Attribute) and isinstance(root.value, cst.Name) and root.value.value == "self":
            break
        root = root.func if isinstance(root, cst.Call) else root.value
    if isinstance(root, cst.Name) and root.value not in fn.all_params:
        values = list(fn.name_assigns.get(root.value, ()))
    elif isinstance(root, cst.Attribute) and isinstance(root.value, cst.Name) and root.value.value == "self" \
            and not host_attr(project, file, cls, root.attr.value):
        values = [a.value for m in cls.methods.values() for a in m.assigns if a.target == f"self.{root.attr.value}"]
    else:
        return False
    values = [v for v in values if not (isinstance(v, cst.Name) and v.value == "None")]
    return bool(values) and all(_device_made(v) for v in values)


def _device_made(v: cst.BaseExpression | None) -> bool:
    while isinstance(v, cst.Call):
        func = v.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if method in ("cuda", "npu") or any(a.keyword is not None and a.keyword.value == "device"
                                            and device_like(a.value) for a in v.args) \
                or method == "to" and any(a.keyword is None and device_like(a.value) for a in v.args[:1]):
            return True
        v = func.value if isinstance(func, cst.Attribute) else None
    return False


def _quiet_construction(project: Project, file: FileModel, method: FunctionInfo, node: cst.CSTNode) -> bool:
    if not isinstance(node, (cst.Assign, cst.AnnAssign)) or not isinstance(node.value, cst.Call):
        return False
    call = node.value
    if not constructed_host_object(project, file, method, call):
        return False
    name = dotted(call.func)
    sym = project.symbol(file.resolve_dotted(name, method) or name, file) if name else None
    if sym is None or not isinstance(sym[0], ClassInfo):
        return False  # (an external class: what its constructor does is unseen)
    init = _constructor(project, sym[0], sym[1])
    if init is None or _construction_work(project, init[1], init[0]):
        return False
    from streamlint.model.tensors import TensorTyper

    typer = TensorTyper(project, file, method)
    return all(_host_argument(project, file, method, arg.value, typer) for arg in call.args)


def _construction_work(project: Project, file: FileModel, fn: FunctionInfo, depth: int = 0) -> bool:
    """May running ``fn`` (a constructor, or a project callee of it, two levels down) queue device work? What
    :func:`~streamlint.model.flow.devicework.queues_device_work` sees, and also any tensor method (a cast
    ``spec.table.to(dtype)``, ``w.float()``, ``x.clone()``; not a metadata query: ``x.size()``) on a receiver not
    evidently host memory: a constructor may be handed device tensors inside a plain object."""
    memo = derived(project, "construction_work")
    key = (id(fn), depth)
    held = memo.get(key)
    if held is not None and held[0] is fn:  # (the function is kept with its answer: an id is never reused under it)
        return held[1]
    memo[key] = (fn, True)  # (recursion guard: unknown counts as work)
    answer = queues_device_work(project, file, fn) or any(
        site.method is not None and isinstance(site.node.func, cst.Attribute) and tensor_method(site.method)
        and site.method not in META_METHODS and not host_source(site.node.func.value, fn, None)
        and not _host_library_chain(file, fn, site.node.func.value) for site in fn.calls)
    if not answer and depth < 2:
        for site in fn.calls:
            found = callee_of(project, file, fn, site)
            if found is not None and found[0] is not fn and _construction_work(project, found[1], found[0], depth + 1):
                answer = True
                break
    memo[key] = (fn, answer)
    return answer


def _host_library_chain(file: FileModel, fn: FunctionInfo, recv: cst.BaseExpression) -> bool:
    """Is ``recv`` (the receiver of a method call) a host array library (``np`` in ``np.cos(phase)``: a module
    function, no tensor method) or what a call of one returns (``np.stack(rows).reshape(n, d)``: a numpy
    array, host memory), below views, elements and method calls?"""
    node = recv
    while True:
        if isinstance(node, cst.Call):
            if host_library(file.resolve(node.func, fn)):
                return True
            node = node.func
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            if isinstance(node, cst.Attribute) and host_library(file.resolve(node, fn)):
                return True
            node = node.value
        else:
            return isinstance(node, cst.Name) and host_library(file.resolve(node, fn))


def _constructor(project: Project, cls: ClassInfo, file: FileModel, depth: int = 0
                 ) -> tuple[FunctionInfo, FileModel] | None:
    init = cls.methods.get("__init__")
    if init is not None:
        return init, file
    if depth >= 3:
        return None
    for base in cls.bases:
        sym = project.symbol(base, file)
        if sym is not None and isinstance(sym[0], ClassInfo):
            found = _constructor(project, sym[0], sym[1], depth + 1)
            if found is not None:
                return found
    return None


def _host_argument(project: Project, file: FileModel, fn: FunctionInfo, e: cst.BaseExpression, typer) -> bool:
    """Does evaluating ``e`` (an argument of the construction, in ``fn``) hand over no device data and queue no
    device work? Not when it is evidently a tensor (:class:`~streamlint.model.tensors.TensorTyper`: a tensor
    local, a ``torch`` result, a tensor parameter or field), nor when a call in it reaches a project function
    that queues device work or a ``torch`` function."""
    if typer.is_tensor(e):
        return False
    stack: list[cst.CSTNode] = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.Lambda, cst.FunctionDef)):
            continue
        if isinstance(n, cst.Call):
            site = file.call_site(n)
            target = (site.target if site is not None else None) or dotted(n.func) or ""
            if target.split(".", 1)[0] in ("torch", "torch_npu") or typer.is_tensor(n):
                return False
            found = callee_of(project, file, fn, site) if site is not None else None
            if found is not None and queues_device_work(project, found[1], found[0]):
                return False
        stack.extend(children(n))
    return True


__all__ = ["quiet_write"]
