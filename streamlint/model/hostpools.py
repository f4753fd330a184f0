"""Pools of host buffers kept on an object (issue 16 §3, "Only device data races").

An offloader recycles its page-locked staging buffers through a free list of its own::

    self.free: DefaultDict[torch.Size, Deque[torch.Tensor]] = defaultdict(deque)
    ...
    buf = self.free[t.shape].popleft() if self.free[t.shape] else torch.empty_like(t, device="cpu", pin_memory=True)
    ...
    def _restore(h):
        if h.device.type == "cpu":           # only a host tensor reaches the pool
            self.free[h.shape].append(h)

An element taken out of such a pool (``pop()`` / ``popleft()`` / ``get()``) is host memory: no stream produced it,
it is no device tensor a side stream races on. :func:`host_pool_field` says whether ``self.<attr>`` is one: every
binding of the whole field (in any method of the class, nested helpers included) is an empty container (``deque()``,
``[]``, ``{}``, ``defaultdict(deque)``, ``None``), at least one element is stored, and every element stored into it
or into one of its slots (``.append`` / ``.appendleft`` / ``.add`` / ``.put`` / ``.insert``, ``self.<attr>[k] = v``)
is evidently host memory: a host-giving call (:func:`~streamlint.model.placement.host_value`), a local every binding
of which is one (:func:`~streamlint.model.placement.host_source`), or a parameter stored inside a branch whose test
holds only for a host tensor (:func:`~streamlint.model.hostguards.host_branch`). Any other fill (``.extend``,
``.update``, ``setdefault`` with a value), a name bound to the field or a slot of it (``q = self.free[k]``: what is
stored through ``q`` is not seen), or the field handed to a call as an argument, makes it no pool. Syntax only,
memoised per file and class.

(:func:`~streamlint.model.placement.host_container_field` answers a narrower question for the fields read in place:
elements stored settled, never filled by ``append``.)"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.hostguards import host_branch
from streamlint.model.placement import host_source, host_value
from streamlint.model.syntax import descendants, local_nodes

_STORES = frozenset({"append", "appendleft", "add", "put", "put_nowait", "insert"})  # one element, the last argument
_OTHER_FILLS = frozenset({"extend", "extendleft", "update", "setdefault", "__setitem__"})
_EMPTY_MAKERS = frozenset({"deque", "collections.deque", "list", "dict", "set", "OrderedDict",
                           "collections.OrderedDict", "queue.Queue", "Queue", "queue.SimpleQueue", "SimpleQueue"})
_DEFAULT_MAKERS = frozenset({"defaultdict", "collections.defaultdict"})
_SLOT_FACTORIES = frozenset({"deque", "collections.deque", "list", "set"})
TAKES = frozenset({"pop", "popleft", "get", "get_nowait"})  # an element out of the pool


def host_pool_field(file: FileModel, cls: ClassInfo | None, attr: str) -> bool:
    """Is ``self.<attr>`` a pool of host buffers (see the module docstring)?"""
    if cls is None or not attr.isidentifier():
        return False
    memo = file.__dict__.setdefault("_host_pools", {})
    key = (cls.name, attr)
    if key not in memo:
        memo[key] = False  # (a recursive question answers no)
        memo[key] = _host_pool(file, cls, attr)
    return memo[key]


def pool_key(key: str) -> str | None:
    """The field a rendered receiver key is (a slot of): ``self.free[t.shape]`` / ``self.free`` -> ``free``."""
    if not key.startswith("self."):
        return None
    head = key[5:].split("[", 1)[0]
    return head if head.isidentifier() else None


def _of_class(fn: FunctionInfo | None, cls: ClassInfo) -> bool:
    while fn is not None:
        if fn.class_name == cls.name and fn.parent is None and cls.methods.get(fn.node.name.value) is fn:
            return True
        fn = fn.parent
    return False


def _empty(v: cst.BaseExpression) -> bool:
    if isinstance(v, cst.Name) and v.value == "None" or isinstance(v, (cst.Dict, cst.List, cst.Set)) and not v.elements:
        return True
    if not isinstance(v, cst.Call):
        return False
    name = dotted(v.func)
    if name in _EMPTY_MAKERS:
        return all(a.keyword is not None and a.keyword.value == "maxlen" for a in v.args)
    return name in _DEFAULT_MAKERS and len(v.args) == 1 and v.args[0].keyword is None \
        and dotted(v.args[0].value) in _SLOT_FACTORIES


def _field_place(e: cst.BaseExpression, whole: str) -> bool:
    """``e`` is the field or a slot of it: ``self.free``, ``self.free[k]``."""
    while isinstance(e, cst.Subscript):
        e = e.value
    return dotted(e) == whole


def _host_element(v: cst.BaseExpression, fn: FunctionInfo | None, cls: ClassInfo, at: cst.CSTNode) -> bool:
    if host_value(v):
        return True
    if fn is None:
        return False
    if isinstance(v, cst.Name) and v.value in fn.all_params:
        return host_branch(fn, v.value, at)
    return isinstance(v, cst.Name) and host_source(v, fn, cls)


def _host_pool(file: FileModel, cls: ClassInfo, attr: str) -> bool:
    whole = f"self.{attr}"
    stored = False
    functions = [fn for fn in file.functions.values() if _of_class(fn, cls)]
    for fn in functions:
        for node in local_nodes(fn.node):
            if isinstance(node, cst.AugAssign) and _field_place(node.target, whole):
                return False
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
                [node.target] if isinstance(node, cst.AnnAssign) and node.value is not None else []
            for target in targets:
                if dotted(target) == whole:
                    if not _empty(node.value):
                        return False
                elif _field_place(target, whole):
                    if not _host_element(node.value, fn, cls, node):
                        return False
                    stored = True
                elif not isinstance(target, (cst.Name, cst.Attribute, cst.Subscript)) and any(
                        _field_place(e, whole) for e in descendants(target)):
                    return False  # (unpacked into a slot: not judged)
        if any(isinstance(node, cst.For) and any(_field_place(e, whole) for e in descendants(node.iter))
               for node in local_nodes(fn.node)):
            return False  # a loop over its slots may fill them unseen
        for values in fn.name_assigns.values():
            if any(_field_place(v, whole) for v in values):
                return False  # a name bound to the field or a slot of it fills it unseen
    for site in file.calls:
        if not _of_class(site.function, cls):
            continue
        func = site.node.func
        if any(_field_place(arg.value, whole) for arg in site.node.args):
            return False  # handed to a call: what the callee stores is not seen
        if not isinstance(func, cst.Attribute) or not _field_place(func.value, whole):
            continue
        if func.attr.value in _OTHER_FILLS:
            return False
        if func.attr.value in _STORES:
            args = [arg for arg in site.node.args if arg.keyword is None]
            if not args or not _host_element(args[-1].value, site.function, cls, site.node):
                return False
            stored = True
    return stored
