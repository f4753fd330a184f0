"""Project helpers whose result is host memory (issue 16 §3, "Only device data races"; [host-tensor-write]).

A weight streamer stages a weight's bytes with a helper of its own before it copies them to the device on an upload
stream: ``host = self._host_bytes(ref)`` where the helper reads the file into a ``bytearray`` and hands back
``torch.frombuffer(raw, dtype=torch.uint8)``, or hands back a slot of a pinned slab the class allocated
(``return self._slab[start:stop]``, ``self._slab = torch.empty(n, pin_memory=True)``). Such a helper orders and
switches nothing, so the interpreter does not run it inline, and a call handed a tensor made its result a new tensor
of the current stream (the generic call rule): the H2D copy of it on the upload stream was then reported as racing
with a producer that does not exist, at high confidence.

:func:`returns_host_memory` reads that from the helper's code: every ``return`` (``None`` aside, at least one other)
gives settled host memory, or a view / slice of it (``.view(dtype)``, ``[a:b]``, ``.narrow``, ``.reshape``):

- a host-giving call whose chain queues no asynchronous copy (``placement.settled_host_value``: ``x.cpu()``,
  ``torch.from_numpy(a)``, ``torch.frombuffer(raw)``, ``torch.empty(n, pin_memory=True)``), or a torch factory
  placing its tensor on the host (``torch.empty(n, dtype=torch.uint8)``, no ``device``; not ``torch.tensor`` /
  ``torch.as_tensor``, whose data may be a device tensor they keep on its device);
- a local every binding of which is one (and bound by nothing else: a ``for`` / ``with`` target, a tuple unpack or a
  walrus makes it unknown), a ``self.*`` field every assignment of which in the class is one (``None`` aside);
- a call of another such project helper (depth-limited; a recursive helper is not one), also a method of an object
  the class holds in a field whose project class the class body declares (``self._slab.take(n)``,
  ``_slab: PinnedSlab``).

Not a parameter (the caller's value, whatever it holds), nor anything of unknown type (``self._reader.stage(...)``:
code not seen may hand back device memory), nor an asynchronous copy to the host (``x.to("cpu", non_blocking=True)``:
its contents are still pending on the stream). The call's result is then a host tensor: no stream produces or owns it.

:func:`note_guessed_helper` covers what is left unknown: a helper call the generic call rule read as making a new
tensor on the current stream (it was handed a tensor) although the helper's code shows no tensor it computes
(:func:`~streamlint.model.flow.computed.computes_tensor`), copies to a device
(:func:`~streamlint.model.flow.devicecopies.device_copy_at`) or allocates on one
(:func:`~streamlint.model.flow.computed.device_factory`) (a record of device data it builds is
:mod:`~streamlint.model.flow.recordresults`' before this rule), and every ``return`` of it hands back what code not
seen gives (:func:`opaque_returns`): ``return self._reader.stage(ref.path, n)``, ``return ref.source``. A helper
computing on what it is handed (``return x * scale``, ``return x.float()``) queues that kernel itself: no guess. A race whose producer is that guess is at most medium (``Race.helper_guess``): an
unknown source is no evidence of a device producer on the current stream. One the helper assembles from several
hand-outs (a list it fills in a loop, a tuple: :func:`~streamlint.model.flow.unseenbuilds.built`) is low
(``Race.helper_built``), and the free of any helper guess is a guess (SL301 low, ``guessedresults.guess_of``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.filefacts import ClassInfo
from streamlint.model.flow.computed import called_function, computes_tensor, device_factory
from streamlint.model.flow.devicecopies import device_copy_at
from streamlint.model.flow.unseenbuilds import UNSEEN, built, unseen_build
from streamlint.model.flow.values import TVal
from streamlint.model.devobjects import names_tensor_type, param_annotation
from streamlint.model.uses import bind_arguments
from streamlint.model.hostannotations import host_annotation
from streamlint.model.hostresults import _host_value
from streamlint.model.tensors import return_kind, returns_host_values, tensor_method
from streamlint.model.placement import copy_destination, host_factory, host_source, settled_host_value
from streamlint.model.streams import derived
from streamlint.model.syntax import local_nodes, target_names

if TYPE_CHECKING:
    from streamlint.model.file import FileModel, FunctionInfo
    from streamlint.model.project import Project

_DATA_FACTORIES = frozenset({"tensor", "as_tensor", "asarray"})  # (may keep a device tensor's device)
_MAX_DEPTH = 3


def returns_host_memory(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> bool:
    """Does every ``return`` of the project helper ``fn`` hand back settled host memory (module docstring)?"""
    memo = derived(project, "host_memory_returns")
    key = id(fn)
    if key in memo:
        return memo[key]
    memo[key] = False  # (a recursive helper: not known)
    values = [r.value for r in fn.returns]
    given = [v for v in values if v is not None and not (isinstance(v, cst.Name) and v.value == "None")]
    cls = file.classes.get(fn.class_name or "") if fn.class_name else None
    memo[key] = bool(given) and not fn.yields and fn.node.asynchronous is None \
        and all(_host(project, file, fn, cls, v, _depth) for v in given)
    return memo[key]


def _host(project: Project, file: FileModel, fn: FunctionInfo, cls: ClassInfo | None, v: cst.BaseExpression,
          depth: int) -> bool:
    v = copy_destination(v)  # (a view or a slice of host memory is that memory)
    if isinstance(v, cst.IfExp):
        return _host(project, file, fn, cls, v.body, depth) and _host(project, file, fn, cls, v.orelse, depth)
    if _host_call(file, fn, v):
        return True
    if isinstance(v, cst.Name):
        if v.value in fn.all_params or _bound_otherwise(fn, v.value):
            return False
        values = fn.name_assigns.get(v.value, [])
        return bool(values) and depth < _MAX_DEPTH and all(
            v2 is not v and _host(project, file, fn, cls, v2, depth + 1) for v2 in values)
    if isinstance(v, cst.Attribute) and isinstance(v.value, cst.Name) and v.value.value == "self":
        return cls is not None and host_source(v, fn, cls, value=lambda e: _host_call(file, fn, e)
                                               or _host_scalar(project, file, e, depth))
    if isinstance(v, cst.Call) and depth < _MAX_DEPTH:
        found = called_function(project, file, v)
        found = found or _declared_field_method(project, file, cls, v.func)  # `self._slab.take(n)`
        return found is not None and found[0] is not fn and returns_host_memory(project, found[1], found[0],
                                                                                 depth + 1)
    return False


def note_guessed_helper(interp, st, e: cst.Call, found: tuple | None, result: object, first_id: int) -> object:
    """Remember ``result`` of the project helper call ``e`` (``found``: the helper and its module) as a guess when the
    generic call rule made it (a storage newer than ``first_id``) and the helper hands back only what code not seen
    gives (:func:`opaque_returns`); ``result`` unchanged."""
    if found is None or not isinstance(result, TVal) or result.sid <= first_id:
        return result
    S = st.stores.get(result.sid)
    fn, mod = found
    if S is None or S.kind not in ("local", "pool") or not opaque_returns(interp.project, mod, fn) \
            or computes_tensor(interp.project, mod, fn) or device_copy_at(interp.project, mod, fn, e) \
            or device_factory(mod, fn, e, interp.cfile, interp.cfn) is not None or _forwards_handed_tensor(fn, e, st):
        return result
    interp.__dict__.setdefault("helper_guesses", {})[result.sid] = fn.node.name.value
    if any(built(fn, r.value) for r in fn.returns if r.value is not None):
        interp.__dict__.setdefault("built_guesses", set()).add(result.sid)  # (assembled from several hand-outs)
    return result


def opaque_returns(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> bool:
    """Does every ``return`` of ``fn`` (``None`` and host values aside, at least one other) hand back what code not
    seen gives: a call of a method no tensor has on an object of unknown class (``self._reader.stage(path, n)``), of a
    function outside the project and outside torch, a field read (``ref.source``, ``self._cached``), another such
    helper's result, or what the helper builds only from those and host values (a local bound only to them, a tuple, a
    local list it fills with them in a loop over them: :func:`~streamlint.model.flow.unseenbuilds.unseen_build`)? Not
    a parameter, a tensor method, a torch op (a kernel on the current stream the helper queues itself)."""
    memo = derived(project, "opaque_returns")
    if id(fn) not in memo:
        memo[id(fn)] = False  # (a recursive helper: not known)
        given = [r.value for r in fn.returns if r.value is not None
                 and not (isinstance(r.value, cst.Name) and r.value.value == "None")]
        kinds = [unseen_build(fn, v, lambda e, handed=False: _opaque(project, file, fn, e, _depth, handed))
                 for v in given]
        memo[id(fn)] = bool(given) and not fn.yields and UNSEEN in kinds and None not in kinds
    return memo[id(fn)]


def _opaque(project: Project, file: FileModel, fn: FunctionInfo, v: cst.BaseExpression, depth: int,
            handed: bool = False) -> bool:
    """Is the call or field read ``v`` what code not seen gives (``handed``: also when handed the helper's tensor)?"""
    if isinstance(v, cst.Attribute):
        return dotted(v) is not None  # a field of an object (`ref.source`, `self._cached`)
    if not isinstance(v, cst.Call):
        return False
    found = called_function(project, file, v)
    if found is not None:
        return found[0] is not fn and depth < _MAX_DEPTH and opaque_returns(project, found[1], found[0], depth + 1)
    target = file.resolve(v.func, fn) if isinstance(v.func, (cst.Name, cst.Attribute)) else None
    if target is not None and target.split(".", 1)[0] in ("torch", "torch_npu", "triton", "numpy"):
        return False
    if isinstance(v.func, cst.Attribute):  # a method of an object of unknown class, not one only a tensor has (nor
        # `self.down(x)`, unresolved on `self`: a submodule or a callable field, whose call computes)
        return not tensor_method(v.func.attr.value) and dotted(v.func.value) not in (None, "self") \
            and (handed or not _hands_data(fn, v))
    return target is not None and target.split(".", 1)[0] != file.module_name.split(".", 1)[0] \
        and (handed or not _hands_data(fn, v))


def _hands_data(fn: FunctionInfo, call: cst.Call, handed: frozenset[str] = frozenset()) -> bool:
    """Is the unseen call handed a tensor parameter of the helper itself, as is (``self.quant_method.apply(self, x,
    topk)``, ``self.router.forward(x)``): one annotated with a tensor type, or one of ``handed`` (bound to a tensor at
    the call being judged)? Such a call computes on what it is handed, as the generic call rule assumes of the same
    call written inline (high there): no guess. A tensor's metadata (``like.shape``) or a ``name: str`` hands none."""
    for arg in call.args:
        value = arg.value
        if not isinstance(value, cst.Name) or value.value not in fn.all_params or value.value in ("self", "cls"):
            continue
        ann = param_annotation(fn, value.value)
        if value.value in handed or ann is not None and names_tensor_type(ann):
            return True
    return False


def _forwards_handed_tensor(fn: FunctionInfo, e: cst.Call, st) -> bool:
    """Does a ``return`` of ``fn`` call unseen code with a parameter the call ``e`` binds to a tensor it was handed
    (a local of the caller holding a tensor value), directly or through a local it returns?"""
    params = tuple(p.name.value for p in fn.node.params.params)
    params = params[1:] if fn.class_name and params and params[0] in ("self", "cls") else params
    kwonly = tuple(p.name.value for p in fn.node.params.kwonly_params)
    bound = bind_arguments(params + kwonly, e, kwonly)
    handed = frozenset(name for name, arg in bound.items() if isinstance(arg, cst.Name)
                       and isinstance(st.env.get(arg.value), TVal))
    if not handed:
        return False
    given = [r.value for r in fn.returns if r.value is not None]
    given += [v for g in given if isinstance(g, cst.Name) for v in fn.name_assigns.get(g.value, [])]  # (`return out`)
    return any(isinstance(v, cst.Call) and _hands_data(fn, v, handed) for v in given)


def _declared_field_method(project: Project, file: FileModel, cls: ClassInfo | None,
                           func: cst.BaseExpression) -> tuple[FunctionInfo, FileModel] | None:
    """The project method ``self.<attr>.<name>(...)`` runs when the class body declares the field's class
    (``_slab: PinnedSlab``, ``Optional[PinnedSlab]``, ``PinnedSlab | None``)."""
    if cls is None or not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Attribute) \
            or dotted(func.value.value) != "self":
        return None
    attr = func.value.attr.value
    for stmt in cls.node.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == attr:
                ann = small.annotation.annotation
                if isinstance(ann, cst.BinaryOperation) and dotted(ann.right) == "None":
                    ann = ann.left
                elif isinstance(ann, cst.Subscript) and dotted(ann.value) in ("Optional", "typing.Optional") \
                        and len(ann.slice) == 1 and isinstance(ann.slice[0].slice, cst.Index):
                    ann = ann.slice[0].slice.value
                name = dotted(ann) if isinstance(ann, (cst.Name, cst.Attribute)) else None
                sym = project.symbol(file.resolve_dotted(name, None) or f"{file.module_name}.{name}", file) \
                    if name else None
                method = sym[0].methods.get(func.attr.value) if sym is not None and isinstance(sym[0], ClassInfo) \
                    else None
                return (method, sym[1]) if method is not None else None
    return None


def _host_scalar(project: Project, file: FileModel, e: cst.BaseExpression, depth: int) -> bool:
    """A field's value that is a host scalar, no tensor at all: a number / string literal, or the result of a project
    helper declared to return one (``-> float``) or whose every ``return`` builds host values
    (:func:`~streamlint.model.hostresults.returns_host_values`)."""
    if isinstance(e, (cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if not isinstance(e, cst.Call) or depth >= _MAX_DEPTH:
        return False
    found = called_function(project, file, e)
    return found is not None and (return_kind(found[1], found[0]) == "other" or returns_host_values(found[0]))


def _host_call(file: FileModel, fn: FunctionInfo, e: cst.BaseExpression) -> bool:
    """A call giving settled host memory: :func:`~streamlint.model.placement.settled_host_value`, a torch factory
    with no device (or the host's) that builds no copy of a tensor handed to it, or ``torch.tensor`` of a list /
    tuple display or comprehension with no device: a new CPU tensor gathered from Python values (elements that
    are tensors are read out one by one, the result is placed on the host all the same)."""
    if not isinstance(e, cst.Call):
        return False
    if isinstance(e.func, (cst.Name, cst.Attribute)) and (file.resolve(e.func, fn) or "") == "torch.tensor" \
            and e.args and e.args[0].keyword is None and not e.args[0].star \
            and isinstance(e.args[0].value, (cst.List, cst.Tuple, cst.ListComp)):
        return host_factory("torch.tensor", e)
    node = e
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value in _DATA_FACTORIES:
            return False  # `torch.as_tensor(x)`: `x` itself when it is a tensor, wherever it lives
        node = node.func.value
    if settled_host_value(e):
        return True
    target = file.resolve(e.func, fn) if isinstance(e.func, (cst.Name, cst.Attribute)) else None
    return host_factory(target, e) and target.rsplit(".", 1)[-1] not in _DATA_FACTORIES  # type: ignore[union-attr]


def _bound_otherwise(fn: FunctionInfo, name: str) -> bool:
    """Is the local ``name`` bound by anything but a plain assignment (a loop / ``with`` target, an unpacking, a
    walrus, an augmented assignment)?"""
    memo = fn.__dict__.setdefault("_host_bound_otherwise", {})
    if name not in memo:
        memo[name] = any(_binds(node, name) for node in local_nodes(fn.node.body))
    return memo[name]


def _binds(node: cst.CSTNode, name: str) -> bool:
    if isinstance(node, (cst.For, cst.CompFor)):
        return _target_binds(node.target, name)
    if isinstance(node, cst.WithItem):
        return node.asname is not None and _target_binds(node.asname.name, name)
    if isinstance(node, cst.Assign):
        return any(not isinstance(t.target, cst.Name) and _target_binds(t.target, name) for t in node.targets)
    if isinstance(node, cst.NamedExpr):
        return _target_binds(node.target, name)
    if isinstance(node, cst.AugAssign):
        return _target_binds(node.target, name)
    return False


def _target_binds(target: cst.BaseExpression, name: str) -> bool:
    return name in target_names(target.value if isinstance(target, cst.StarredElement) else target)


def host_state_class(project: Project, file: FileModel, cls: ClassInfo) -> bool:
    """Does every field an instance of the project class ``cls`` holds come from host values only (a literal,
    ``None``, a host-annotated parameter, a host scalar a project helper declares or builds: ``self._floor =
    self._pick_floor(cutoff)``, ``-> float``)? Its construction (``ScoreCutoff(cutoff, table)``) then makes no
    container of the arguments' tensors: nothing a stream produced is in it. Only a class of no base but
    ``object`` / ``ABC`` (a base's fields are not looked at) and with at least one field."""
    memo = derived(project, "host_state_class")
    key = (file.path, cls.name)
    if key not in memo:
        memo[key] = False
        bases = [dotted(a.value) for a in cls.node.bases]
        values = [(m, a.value) for m in cls.methods.values() for a in m.assigns if a.target.startswith("self.")
                  and a.target.count(".") == 1]
        memo[key] = all(b in ("object", "ABC", "abc.ABC") for b in bases) and not cls.node.keywords \
            and "__init__" in cls.methods and bool(values) \
            and all(_host_field_value(project, file, m, v) for m, v in values)
    return memo[key]


def _host_field_value(project: Project, file: FileModel, fn: FunctionInfo, v: cst.BaseExpression,
                      depth: int = 0) -> bool:
    if isinstance(v, cst.Name) and v.value == "None":
        return True
    if isinstance(v, cst.IfExp) and depth < 3:
        return _host_field_value(project, file, fn, v.body, depth + 1) \
            and _host_field_value(project, file, fn, v.orelse, depth + 1)
    if isinstance(v, cst.Name) and v.value in fn.all_params:  # `per_label: Optional[Dict[str, float]]`
        ann = param_annotation(fn, v.value)
        return ann is not None and host_annotation(ann, bare_class=False, scalars_only=True)
    return _host_value(fn, v, file=file) or _host_scalar(project, file, v, 0)
