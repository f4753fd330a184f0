"""Host (CPU) placement of tensors: which factory calls and copies give host memory.

Device data races and allocator reuse concern device memory only (issue 16 §3, "Only device data races"):
the interpreter gives a host tensor no stream; a non-blocking copy into one is pending until the host
synchronises (:mod:`streamlint.model.flow.hostreads`).
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import dotted, string_value
from streamlint.model.filefacts import ClassInfo, FunctionInfo


# Host (CPU) tensors: device data races and allocator reuse concern device memory only (issue 16 §3,
# "Only device data races"). A torch factory without a ``device=`` builds its tensor on the host
# (``torch.tensor(list)``, ``torch.randint(...)``, ``torch.arange(n)``); ``torch.from_numpy`` always does.
HOST_FACTORIES = frozenset({"tensor", "as_tensor", "asarray", "from_numpy", "frombuffer", "arange", "zeros", "ones",
                            "full", "empty", "rand", "randn", "randint", "randperm", "linspace", "logspace", "eye",
                            "empty_strided"})
HOST_COPY_METHODS = frozenset({"cpu", "pin_memory"})  # a host tensor results whatever the receiver is
# Array libraries whose results live in host memory: ``np.nonzero(mask)``, ``numpy.diff(runs)`` give a numpy array
# whatever they were handed (a tensor handed to one is read on the host), never a tensor of a stream.
HOST_LIBRARIES = frozenset({"numpy"})
# Methods whose result is host data whatever the receiver is: a numpy array (``x.numpy()``), Python values.
HOST_RESULT_METHODS = frozenset({"numpy", "tolist", "item"})


# Tensor methods that read metadata only (no kernel, no wait): ``x.size(0)``, ``x.data_ptr()``, ``x.is_pinned()``
META_METHODS = frozenset({"size", "dim", "numel", "element_size", "is_contiguous", "stride", "storage_offset",
                          "data_ptr", "get_device", "nelement", "type", "is_floating_point", "is_complex",
                          "untyped_storage", "storage", "__len__",
                          "is_pinned", "is_shared"})  # (host bookkeeping of the storage: no kernel, no wait)


def host_library(target: str | None) -> bool:
    """Is ``target`` (a qualified name) a function of a host array library (:data:`HOST_LIBRARIES`)?"""
    return bool(target) and target.split(".", 1)[0] in HOST_LIBRARIES  # type: ignore[union-attr]


# Methods that hand a tensor's data to the host: the host blocks until the stream has produced it
# (issue 16 §3, "Blocking transfers synchronise").
BLOCKING_HOST_READS = frozenset({"item", "tolist", "cpu", "numpy"})


def names_host(expr: cst.BaseExpression) -> bool:
    """``"cpu"``, ``"cpu:0"``, ``torch.device("cpu")``: an expression naming the host device."""
    sv = string_value(expr)
    if sv is not None:
        return sv == "cpu" or sv.startswith("cpu:")
    if isinstance(expr, cst.Call) and dotted(expr.func) in ("torch.device", "device") and expr.args:
        return names_host(expr.args[0].value)
    return False


def host_factory(target: str | None, call: cst.Call) -> bool:
    """Does this torch factory call build a host tensor (no ``device=``, or ``device="cpu"``)? The data
    argument of ``torch.tensor`` / ``torch.as_tensor`` may itself be a tensor: the caller checks that."""
    if not target or not target.startswith("torch.") or target.count(".") != 1:
        return False
    last = target.rsplit(".", 1)[-1]
    if last not in HOST_FACTORIES:
        return False
    if last in ("from_numpy", "frombuffer"):
        return True
    device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
    return device is None or names_host(device)


def host_placed(call: cst.Call) -> bool:
    """A factory call that places its tensor in host memory by keyword: ``device="cpu"`` or
    ``pin_memory=True`` (``torch.empty_like(x, device="cpu")``, ``x.new_zeros(n, pin_memory=True)``)."""
    for a in call.args:
        if a.keyword is None:
            continue
        if a.keyword.value == "device" and names_host(a.value):
            return True
    return _pin_keyword(call)


def _pin_keyword(call: cst.Call) -> bool:
    """``pin_memory=True`` among the call's arguments."""
    return any(a.keyword is not None and a.keyword.value == "pin_memory" and isinstance(a.value, cst.Name)
               and a.value.value == "True" for a in call.args)


def host_target(call: cst.Call, method: str) -> bool:
    """``x.cpu()``, ``x.pin_memory()``, ``x.to("cpu")``: a host tensor results."""
    if method in HOST_COPY_METHODS:
        return True
    if method == "to":
        first = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "device"), None)
        return first is not None and names_host(first)
    return False


_HOST_MAKERS = frozenset({"from_numpy", "frombuffer", "as_tensor"})
# methods that may move a tensor off the host (a ``.to(...)`` naming the host is ``host_target``'s)
DEVICE_MOVES = frozenset({"to", "cuda", "npu", "xpu", "mlu", "type", "_to"})


def host_value(e: cst.BaseExpression) -> bool:
    """A call evidently giving host memory: ``torch.from_numpy(a)``, ``torch.empty(n, device="cpu")``,
    ``x.cpu()``, ``x.pin_memory()``; a method of one (``torch.from_numpy(a).long()``) too, unless that method
    may move it off the host (``torch.zeros(n, device="cpu").to(dev)``, ``.cuda()``: device memory) or the maker
    names another device (``torch.as_tensor(a, device=dev)``)."""
    if not isinstance(e, cst.Call):
        return False
    method = e.func.attr.value if isinstance(e.func, cst.Attribute) else None
    if host_placed(e) or method is not None and (host_target(e, method) or method in _HOST_MAKERS and not any(
            a.keyword is not None and a.keyword.value == "device" and not names_host(a.value) for a in e.args)):
        return True
    if method in DEVICE_MOVES:
        return False
    return isinstance(e.func, cst.Attribute) and host_value(e.func.value)


def settled_host_value(e: cst.BaseExpression) -> bool:
    """A host-giving call (:func:`host_value`) whose chain queues no asynchronous copy: ``x.to("cpu")``,
    ``x.detach().cpu().pin_memory()``, ``torch.empty(n, device="cpu")``. When it returns, the host holds the
    finished contents (a blocking D2H copy waits for the stream; a host copy or factory is host work): storing
    it is no work on any stream."""
    if not host_value(e):
        return False
    node = e
    while isinstance(node, cst.Call):
        if non_blocking(node):
            return False
        node = node.func.value if isinstance(node.func, cst.Attribute) else None
        while isinstance(node, cst.Attribute):
            node = node.value
    return True


def pinned_arm(e: cst.IfExp) -> cst.BaseExpression | None:
    """The arm of ``x if x.is_pinned() else x.pin_memory()`` (``... if not x.is_pinned() else x``) taken when the
    test finds ``x`` page-locked: ``x`` itself, then certainly host memory (only a host tensor is pinned). None when
    the expression has no such shape."""
    test, positive = e.test, True
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, positive = test.expression, False
    if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and test.func.attr.value == "is_pinned"
            and not test.args):
        return None
    arm = e.body if positive else e.orelse
    name = dotted(test.func.value)
    return arm if name is not None and dotted(arm) == name else None


def device_like(expr: cst.BaseExpression) -> bool:
    """A ``.to(...)`` target that names a device (``"cuda"``, ``"npu:0"``, ``self.device``, ``device``)."""
    sv = string_value(expr)
    if sv is not None:
        return sv.startswith(("cuda", "npu"))
    name = dotted(expr) or ""
    return name.rsplit(".", 1)[-1] in ("device", "dev", "_device") or name.endswith("_device")


def pinned_value(e: cst.BaseExpression) -> bool:
    """A call evidently giving page-locked host memory: ``torch.empty(n, pin_memory=True)``, ``x.pin_memory()``,
    ``x.to("cpu", non_blocking=True)`` / ``x.cpu(non_blocking=True)`` (PyTorch pins the result of an
    asynchronous copy to the host), or a view of one (``torch.empty(n, pin_memory=True).view(-1)``). Not a copy of
    one to the device (``torch.tensor(ids, pin_memory=True).to("cuda", non_blocking=True)``: device memory)."""
    while isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute):
        method = e.func.attr.value
        if method in ("cuda", "npu") or method == "to" and any(
                (a.keyword is None or a.keyword.value == "device") and device_like(a.value) for a in e.args):
            return False  # (the outermost copy decides where the result lives)
        if method == "pin_memory" or _pin_keyword(e):
            return True
        if non_blocking(e) and host_target(e, method):
            return True
        e = e.func.value
    return isinstance(e, cst.Call) and _pin_keyword(e)


def host_source(e: cst.BaseExpression, fn: FunctionInfo, cls: ClassInfo | None, _depth: int = 0,
                value=host_value) -> bool:
    """``e`` (a copy's source or destination) holds host memory: a host-giving call, or a local /
    ``self.<attr>`` every assignment of which, but ``None`` (declared empty until the buffer is made), is one
    (another such local or field too: ``pinned = self.staging`` where every ``self.staging = ...`` pins)."""
    if value(e):
        return True
    if isinstance(e, cst.Name):
        values = [(v, fn) for v in fn.name_assigns.get(e.value, [])]
    elif isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self" \
            and cls is not None:
        values = [(a.value, m) for m in cls.methods.values() for a in m.assigns if a.target == f"self.{e.attr.value}"]
    else:
        return False
    values = [(copy_destination(v), m) for v, m in values if not (isinstance(v, cst.Name) and v.value == "None")]
    return bool(values) and all(value(v) or _depth < 2 and v is not e and isinstance(v, (cst.Name, cst.Attribute))
                                and host_source(v, m, cls, _depth + 1, value) for v, m in values)


def pinned_source(e: cst.BaseExpression, fn: FunctionInfo, cls: ClassInfo | None) -> bool:
    """``e`` (a copy's destination) is page-locked host memory: a pinning call, or a local / ``self.<attr>``
    every assignment of which (but ``None``) pins (:func:`host_source` with :func:`pinned_value`)."""
    return host_source(e, fn, cls, value=pinned_value)


def copy_destination(e: cst.BaseExpression) -> cst.BaseExpression:
    """The buffer a copy into ``e`` writes: ``pinned[k:k + 1]`` and ``pinned.view(-1)`` write ``pinned``."""
    while True:
        if isinstance(e, cst.Subscript):
            e = e.value
        elif isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in _DEST_VIEWS:
            e = e.func.value
        else:
            return e


_DEST_VIEWS = frozenset({"view", "reshape", "narrow", "flatten", "select", "squeeze", "unsqueeze", "view_as",
                         "__getitem__"})


def non_blocking(call: cst.Call) -> bool:  # anything but an absent or literal False may be asynchronous
    arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "non_blocking"), None)
    return arg is not None and not (isinstance(arg, cst.Name) and arg.value == "False")


_FILL_METHODS = frozenset({"append", "extend", "insert", "setdefault", "update", "add"})


def host_container_field(file, cls: ClassInfo | None, attr: str) -> bool:
    """Is ``self.<attr>`` a dict / list of host tensors: set only to an empty container (or ``None``), its elements
    stored only as settled host memory (``self.host[name] = torch.empty_like(x, device="cpu", pin_memory=True)``, also in a
    helper nested in a method), and never filled otherwise (``.append(...)``, ``.update(...)``)? Its elements are
    page-locked or pageable host buffers: no stream produces them; a copy into one from a host source is host work
    (issue 16 §3, "Only device data races")."""
    if cls is None or not attr.isidentifier():
        return False
    memo = file.__dict__.setdefault("_host_containers", {})
    key = (cls.name, attr)
    if key not in memo:
        memo[key] = _host_container_field(file, cls, attr)
    return memo[key]


def _of_class(file, fn: FunctionInfo | None, cls: ClassInfo) -> bool:
    while fn is not None:
        if fn.class_name == cls.name and fn.parent is None and cls.methods.get(fn.node.name.value) is fn:
            return True
        fn = fn.parent
    return False


def _host_container_field(file, cls: ClassInfo, attr: str) -> bool:
    whole, elements = f"self.{attr}", f"self.{attr}["
    made = stored = False
    for a in file.assigns:
        if not (a.target == whole or a.target.startswith(elements)) or not _of_class(file, a.function, cls):
            continue
        if a.target == whole:
            v = a.value
            if isinstance(v, cst.Name) and v.value == "None" or isinstance(v, (cst.Dict, cst.List)) and not v.elements \
                    or isinstance(v, cst.Call) and dotted(v.func) in ("dict", "list") and not v.args:
                made = True
                continue
            return False
        if "." in a.target[len(elements):] or not settled_host_value(a.value):
            return False
        stored = True
    if not (made and stored):
        return False
    for site in file.calls:
        func = site.node.func
        if not isinstance(func, cst.Attribute) or not _of_class(file, site.function, cls):
            continue
        if func.attr.value in _FILL_METHODS and dotted(func.value) == whole:
            return False
        if func.attr.value == "copy_" and non_blocking(site.node) and file.code(func.value).startswith(elements):
            return False  # `self.host[k].copy_(x, non_blocking=True)`: an asynchronous copy may still fill it
    return True


HOST_META = frozenset({"dtype", "shape", "ndim", "itemsize", "nbytes", "layout"})  # host metadata of a tensor


def device_copy_call(node: cst.CSTNode | None) -> bool:
    """``x.to(<device>)`` / ``x.cuda()`` / ``x.npu()``: a device tensor, whatever ``x`` is (a module's ``.to``
    returns the module, which no tensor slot takes)."""
    func = node.func if isinstance(node, cst.Call) else None
    return isinstance(func, cst.Attribute) and (func.attr.value in ("cuda", "npu") or func.attr.value == "to" and bool(
        node.args) and node.args[0].keyword is None and device_like(node.args[0].value))


def device_value(e: cst.BaseExpression) -> bool:
    """A call evidently giving device memory: ``x.cuda()`` / ``x.npu()`` / ``x.to("cuda")`` / ``x.to(device)`` as
    the outermost move, or a torch factory with a device keyword naming a device (``torch.zeros(n,
    device=device)``), or a view of one."""
    while isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute):
        method = e.func.attr.value
        if method in ("cuda", "npu") or method == "to" and any(
                (a.keyword is None or a.keyword.value == "device") and device_like(a.value) for a in e.args):
            return True
        if method in HOST_COPY_METHODS or _pin_keyword(e) or method in DEVICE_MOVES - {"to"} \
                or method == "to" and host_target(e, method):
            return False  # (a ``.to(dtype)`` keeps the placement)
        if isinstance(e.func.value, cst.Name) and e.func.value.value == "torch":
            break
        e = e.func.value
    return isinstance(e, cst.Call) and any(a.keyword is not None and a.keyword.value == "device"
                                           and device_like(a.value) for a in e.args)


_DEVICE_TESTS = frozenset({"is_cuda", "is_npu"})


def device_evident(src: cst.BaseExpression, fn: FunctionInfo, cls: ClassInfo | None, guards: tuple = ()) -> bool:
    """Is ``src`` (a copy's source, maybe a view of a name) evidently device memory: a local / ``self.<attr>`` every
    assignment of which gives device memory (:func:`device_value`), or a name the copy is guarded by testing
    (``if t.is_cuda:``, ``if t.is_npu and ...``)?"""
    root = copy_destination(src)
    if not isinstance(root, (cst.Name, cst.Attribute)):
        return False
    if not (isinstance(root, cst.Name) and root.value in fn.all_params) and host_source(root, fn, cls, value=device_value):
        return True  # (a parameter's own value is the caller's: its rebindings say nothing of it)
    text = dotted(root)
    return text is not None and any(
        not negated and isinstance(test, cst.Attribute) and test.attr.value in _DEVICE_TESTS
        and dotted(test.value) == text for guard in guards for test, negated in guard.conditions())
