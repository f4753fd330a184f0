"""Tensor typing: is this value a tensor? The one module that answers it, for both consumers.

Two questions, one vocabulary:

* :class:`TensorTyper` — flow-insensitive "is this *expression* a tensor" for one function (graph
  breaks: a data-dependent ``if`` on a tensor, ``.item()`` on a tensor). Evidence: ``torch.Tensor``
  annotations, tensor-returning torch calls and project functions, tensor methods, arithmetic and
  comparisons of tensors, ``self.*`` tensors (``nn.Parameter``, ``register_buffer``, annotated fields),
  nn.Module calls. Metadata (``.shape``, ``dim()``…), ``is``/``in`` tests and ``is_*`` are never tensors.
* :func:`param_kinds` — what each *parameter* of a function evidently is (tensor, stream, event,
  container, other) from annotations and use, and the method / factory / collective vocabularies the
  dataflow's value lattice uses to decide which call results are tensors, views or copies.

Both ask the same primitives: :func:`torch_returns_tensor` (does a torch / torch_npu call give a
tensor?) and :data:`~.tensorvocab.META_ATTRS` (tensor metadata attributes). The name tables of that
vocabulary (methods, views, copies, factories, non-tensor builtins) are :mod:`.tensorvocab`'s. When unsure,
a value is *not* a tensor (precision first).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.placement import META_METHODS  # noqa: F401  (re-exported: metadata calls)
from streamlint.model.placement import (  # noqa: F401  (re-exported: the host-placement helpers)
    BLOCKING_HOST_READS, HOST_COPY_METHODS, HOST_FACTORIES, device_like, host_factory, host_placed, host_target,
    non_blocking,
)
from streamlint.model.hostobjects import record_annotation
from streamlint.model.hostresults import _host_value, returns_host_values  # noqa: F401  (re-exported)
from streamlint.model.file import FileModel, dotted, string_value
from streamlint.model.hostannotations import host_annotation
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.streams import EVENT, STREAM, annotation_kind, derived
from streamlint.model.calleekinds import callee_tensor_params
from streamlint.model.opaqueparams import opaque_annotation, opaque_param
from streamlint.model.tensorvocab import (COPY_METHODS, HOST_VALUE_METHODS, LIKE_FACTORIES, META_ATTRS,
                                          MULTI_VIEW_METHODS, VIEW_ATTRS, VIEW_METHODS, _CONTAINER_ANNOTATIONS,
                                          _EVENT_USE_METHODS, _NON_OP_TORCH_MODULES, _NON_TENSOR_METHODS,
                                          _NON_TENSOR_RECEIVER_METHODS, _NON_TENSOR_TORCH, _NON_TENSOR_TORCH_PREFIXES,
                                          _NOT_BUILTIN_TENSORS, _STREAM_OBJECT_METHODS, _TENSOR_ATTRS, _TENSOR_CLASSES,
                                          _TENSOR_METHODS, _TENSOR_POSITIONALS, _UNDERSCORE)
from streamlint.model.syntax import class_field_annotation, field_reads, node_code, target_names
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project


def tensor_method(name: str) -> bool:
    return (name in _TENSOR_METHODS or name in VIEW_METHODS or name in MULTI_VIEW_METHODS or name in COPY_METHODS
            or name in META_METHODS or name in HOST_VALUE_METHODS or name in LIKE_FACTORIES
            or (name.endswith("_") and not name.startswith("_")))


def _names_type(annotation: str, kind: str) -> bool:
    """Does an annotation name a class ``kind`` (``torch.cuda.Stream``, ``Optional[Event]``), not a type merely
    containing the word (``StreamStateT``, a scheduler's state type variable, is no stream)? A class name ending
    in the word counts (``ExternalStream``, ``CUDAStream``, ``NPUEvent``)."""
    return re.search(rf"\b\w*{kind}\b", annotation) is not None


def torch_returns_tensor(target: str | None) -> bool:
    """Does calling this torch / torch_npu function give a tensor (``torch.cat``,
    ``torch.nn.functional.silu``, ``torch_npu.npu_rms_norm``, ``torch.Tensor``)? Not a runtime, IO,
    distributed or compiler helper, not a known stream API, not a class other than a tensor class
    (``torch.nn.Linear`` builds a module)."""
    if not target:
        return False
    parts = target.split(".")
    if parts[0] == "torch_npu":
        if len(parts) != 2 or not parts[1].startswith("npu_"):
            return False
    elif parts[0] != "torch" or len(parts) < 2 or parts[1] in _NON_OP_TORCH_MODULES:
        return False
    if target in _NON_TENSOR_TORCH or target.startswith(_NON_TENSOR_TORCH_PREFIXES) or apis.lookup(target):
        return False
    last = parts[-1]
    if last[:1].isupper():
        return last in _TENSOR_CLASSES
    return True


def return_kind(file: FileModel, fn: FunctionInfo) -> str | None:
    """What a project function's return annotation says its result is: STREAM / EVENT (``->
    torch.cuda.Stream``), "other" for a host scalar or a container of host values (``-> int``), else None."""
    returns = fn.node.returns
    if returns is None:
        return None
    kind = annotation_kind(file, fn.parent, returns.annotation)
    if kind is not None:
        return kind
    # `-> int`, `-> tuple[int, Group]`, not `-> tuple[Tensor, Tensor]` nor a bare class (it may hold tensors)
    return "other" if host_annotation(returns.annotation, bare_class=False) else None


def _host_sync_class(qualname: str) -> bool:
    """A class of a host threading / multiprocessing module (``threading.Event``, ``mp.Queue``)."""
    return apis.in_modules(qualname, apis.HOST_SYNC_MODULES)


def may_have_event_params(fn: FunctionInfo) -> bool:
    """May :func:`param_kinds` call a parameter of ``fn`` an EVENT? A syntactic superset of its three sources
    (an annotation naming ``*Event``, the argument of ``.wait_event(p)``, the receiver of ``p.record()`` /
    ``p.wait()`` / ``p.query()`` / ``p.elapsed_time()``), without the project questions param_kinds asks of
    every call: a caller that only wants event parameters skips them for the functions that have none."""
    params = (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params)
    names = {p.name.value for p in params}
    if any(p.annotation is not None and "Event" in node_code(p.annotation.annotation)
           for p in params):
        return True
    for site in fn.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method == "wait_event" or method in _EVENT_USE_METHODS and isinstance(func.value, cst.Name) \
                    and func.value.value in names:
                return True
    return False


def param_kinds(project: Project, file: FileModel, fn: FunctionInfo) -> dict[str, str]:
    """What each parameter evidently is: STREAM, EVENT, "container", "tensor", or absent (unknown).

    From annotations, then from use: passed to ``torch.npu.stream(p)`` / ``wait_stream(p)`` / ``.record(p)``
    (a stream); receiver of ``.record()`` / ``.wait()`` or argument of ``wait_event(p)`` (an event); receiver of
    a tensor method, ``.shape``-style metadata, or a positional argument of a torch call or a submodule
    (a tensor); else handed as is to a project function whose own code takes that parameter for a tensor
    (``model/calleekinds.py``). Parameters with none of these (ints, configs, contexts) are not treated as tensors."""
    memo = derived(project, "param_kinds")
    if id(fn) in memo:
        return memo[id(fn)]
    kinds = dict(own_param_kinds(project, file, fn))
    kinds.update(callee_tensor_params(project, file, fn, kinds, own_param_kinds, META_ATTRS | VIEW_ATTRS,
                                      _TENSOR_METHODS | VIEW_METHODS | MULTI_VIEW_METHODS))
    memo[id(fn)] = kinds
    return kinds


def own_param_kinds(project: Project, file: FileModel, fn: FunctionInfo) -> dict[str, str]:
    """:func:`param_kinds` from the function's own annotations and code only."""
    memo = derived(project, "own_param_kinds")
    if id(fn) in memo:
        return memo[id(fn)]
    kinds: dict[str, str] = {}
    opaque: set[str] = set()  # parameters of an opaque annotation (`Any`) not typed by a tensor's use
    params = set(fn.all_params) - {"self"}
    for p in (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params):
        ann = p.annotation
        if ann is None:
            default = p.default.expression if isinstance(p.default, cst.UnaryOperation) else p.default
            if isinstance(default, (cst.Integer, cst.Float, cst.SimpleString)) or (
                    isinstance(default, cst.Name) and default.value in ("True", "False")):
                kinds[p.name.value] = "other"  # `eps=1e-6`, `flip=False`: a host scalar by its default
            continue
        code = node_code(ann.annotation)
        resolved = file.resolve(ann.annotation, fn) if isinstance(ann.annotation, (cst.Name, cst.Attribute)) else None
        if resolved is not None and _host_sync_class(resolved):
            kinds[p.name.value] = "other"  # `flag: threading.Event`: a host thread's flag, no device event
        elif code.replace(" ", "").split("[", 1)[0].rsplit(".", 1)[-1] == "Callable":
            kinds[p.name.value] = "other"  # `fn: Callable[[Tensor], None]`: a function, whatever it takes
        elif any(c in code for c in _CONTAINER_ANNOTATIONS):
            kinds[p.name.value] = "container"
        elif _names_type(code, "Stream"):
            kinds[p.name.value] = STREAM
        elif _names_type(code, "Event"):
            kinds[p.name.value] = EVENT
        elif ("Tensor" in code or "tensor" in code) and not record_annotation(project, file, fn, ann.annotation):
            kinds[p.name.value] = "tensor"
        else:  # (`kv: Any` used as only a tensor is, a project alias of Tensor: opaqueparams.py)
            kinds[p.name.value] = opaque_param(project, file, fn, p, (torch_returns_tensor, VIEW_METHODS)) or "other"
            if kinds[p.name.value] == "other" and opaque_annotation(project, file, fn, ann.annotation):
                opaque.add(p.name.value)  # (`stream: Any` entered as a stream scope: a stream, below)

    def note(name: str, kind: str, stream_use: bool = False) -> None:
        if name in params and (name not in kinds or stream_use and name in opaque and kinds[name] != STREAM):
            kinds[name] = kind  # (an opaque annotation says nothing: a stream scope's argument is a stream; not
            # `cond.wait(timeout)`'s argument, which a host condition takes too)

    # `flag.set()`, `flag.is_set()`, `flag.wait(); flag.clear()`: a host event (``threading.Event``), no device one
    bare = {(f.value.value, f.attr.value) for f in (s.node.func for s in fn.calls)
            if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name)}
    for name, method in bare:
        if method in apis.HOST_EVENT_METHODS or method == "clear" and (name, "wait") in bare:
            note(name, "other")
    own = f"{file.module_name}.{fn.class_name}." if fn.class_name else None
    project_methods = {name for cls in file.classes.values() for name in cls.methods}
    fielded = field_reads(fn.node.body, params, META_ATTRS | VIEW_ATTRS | {"grad", "data"})
    for site in fn.calls:
        call = site.node
        func = call.func
        positional = [a.value for a in call.args if a.keyword is None]
        roles = {u.role for u in project.api_uses(file, site)}
        if roles & {Role.NATIVE_STREAM_CONTEXT, Role.SET_STREAM}:
            for arg in positional[:1]:
                if isinstance(arg, cst.Name):
                    note(arg.value, STREAM, True)
            continue
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        receiver = func.value if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) else None
        if method in ("wait_stream", "record", "wait", "record_stream") and positional \
                and isinstance(positional[0], cst.Name) and method != "record_stream" or method == "record_stream":
            for arg in positional[:1]:
                if isinstance(arg, cst.Name):
                    note(arg.value, STREAM, method != "wait")
        if method == "wait_event" and positional and isinstance(positional[0], cst.Name):
            note(positional[0].value, EVENT)
        if receiver is not None:
            if method in _STREAM_OBJECT_METHODS:
                note(receiver.value, STREAM, True)
            elif method in ("record", "wait", "query", "elapsed_time"):
                note(receiver.value, EVENT)
            elif method in project_methods and not tensor_method(method):
                note(receiver.value, "other")  # `plan.wait_current_stream()`: an object of a project class
            elif method not in _NON_TENSOR_RECEIVER_METHODS and not (
                    receiver.value in fielded and not tensor_method(method)):  # `config.use_eagle()`: an object
                note(receiver.value, "tensor")  # (only foreign methods: a guess, hostobjects.foreign_receivers)
        if roles & {Role.TAGGED_EVENT_RECORD, Role.TAGGED_EVENT_WAIT, Role.CURRENT_STREAM, Role.STREAM_NEW,
                    Role.EVENT_NEW, Role.DEVICE_SYNCHRONIZE}:
            continue
        target = site.target or ""
        torch_call = target.split(".")[0] in ("torch", "torch_npu") and not roles
        submodule = own is not None and target.startswith(own) and isinstance(func, cst.Attribute) \
            and isinstance(func.value, cst.Name) and func.value.value == "self" \
            and func.attr.value not in file.classes.get(fn.class_name or "", None).methods \
            if own is not None and fn.class_name in file.classes else False
        if torch_call or submodule:
            for arg in positional[:_TENSOR_POSITIONALS.get(target, len(positional))] if torch_call else positional:
                if isinstance(arg, cst.Name):
                    note(arg.value, "tensor")
        for a in call.args:
            if a.keyword is not None and a.keyword.value == "out" and isinstance(a.value, cst.Name):
                note(a.value.value, "tensor")
    stack: list[cst.CSTNode] = [fn.node.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) \
                and node.attr.value in META_ATTRS | VIEW_ATTRS:
            note(node.value.value, "tensor")
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            continue
        stack.extend(children(node))
    for p in (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params):
        d = p.default
        if p.name.value not in kinds and d is not None and (
                isinstance(d, (cst.Integer, cst.Float, cst.SimpleString))
                or (isinstance(d, cst.Name) and d.value in ("True", "False"))):
            kinds[p.name.value] = "other"
    memo[id(fn)] = kinds
    return kinds


def library_record(target: str | None) -> bool:
    """Is ``target`` a class of another package, outside the project and outside torch (``StoreMetadata(...)``,
    ``LoadMetadata(...)`` of a serving connector)? Building one keeps the tensors handed in (a record object
    holding their storage), it queues no kernel of its own: its result is not a fresh tensor of the current
    stream. (A project class is judged from its body, ``plain_container``; torch classes by the API table.)"""
    if not target or "." not in target:
        return False  # an undefined bare name: nothing known
    parts = target.split(".")
    last = parts[-1]
    if parts[0] in ("torch", "torch_npu", "torchair", "triton", "numpy", "np") or apis.lookup(target):
        return False
    return last[:1].isupper() and any(c.islower() for c in last) and last not in _TENSOR_CLASSES \
        and not last.endswith(("Tensor", "Parameter"))


class TensorTyper:
    """Flow-insensitive 'is this expression a tensor' for one function."""

    def __init__(self, project: "Project", file: FileModel, fn: FunctionInfo) -> None:
        self.project = project
        self.file = file
        self.fn = fn
        self.cls: ClassInfo | None = file.classes.get(fn.class_name) if fn.class_name else None
        self.tensors: set[str] = set()
        self.modules: set[str] = set()  # names bound to nn.Module instances (calling them gives tensors)
        self.non_tensors: set[str] = set()
        self.param_classes: dict[str, tuple[ClassInfo, FileModel]] = {}
        self._self_attrs: dict[str, str] | None = None
        self._collect()

    # ---- names
    def _collect(self) -> None:
        p = self.fn.node.params
        for param in (*p.posonly_params, *p.params, *p.kwonly_params):
            ann = param.annotation.annotation if param.annotation is not None else None
            if ann is None:
                continue
            kind = self._annotation_kind(ann)
            name = param.name.value
            if kind == "tensor":
                self.tensors.add(name)
            elif kind == "module":
                self.modules.add(name)
            elif kind == "other":
                self.non_tensors.add(name)
            cls = self._annotation_class(ann)
            if cls is not None:
                self.param_classes[name] = cls
        for site in self.fn.calls:
            # the operands of `npu_wait_tensor(x, dep)` (directly or through a wrapper) are tensors by the API
            for use in self.project.api_uses(self.file, site):
                if use.role is Role.WAIT_TENSOR:
                    for key in ("self", "dependency"):
                        arg = use.bind.get(key)
                        if isinstance(arg, cst.Name) and arg.value not in self.non_tensors:
                            self.tensors.add(arg.value)
        assigns: list[tuple[cst.BaseExpression, cst.BaseExpression | None, cst.BaseExpression | None]] = []
        _collect_assigns(self.file.local_nodes_of(self.fn.node.body), assigns)
        for _ in range(3):  # names assigned from names assigned later in the text
            changed = False
            for target, value, annotation in assigns:
                is_t = False
                if annotation is not None and self._annotation_kind(annotation) == "tensor":
                    is_t = True
                elif value is not None and self.is_tensor(value):
                    is_t = True
                if not is_t:
                    continue
                for name in target_names(target, skip=_UNDERSCORE):
                    if name not in self.tensors:
                        self.tensors.add(name)
                        changed = True
            if not changed:
                break

    def _annotation_kind(self, ann: cst.BaseExpression) -> str | None:
        if isinstance(ann, cst.SimpleString):
            value = string_value(ann)
            if value is None:
                return None
            try:
                ann = cst.parse_expression(value)
            except Exception:  # noqa: BLE001 - malformed string annotation
                return None
        if isinstance(ann, cst.Subscript):  # Optional[torch.Tensor], Union[...]
            base = self.file.resolve(ann.value, None) or ""
            if base.endswith(("Optional", "Union")):
                kinds = {self._annotation_kind(el.slice.value) for el in ann.slice
                         if isinstance(el.slice, cst.Index)}
                return "tensor" if "tensor" in kinds else None
            return "other"
        if isinstance(ann, cst.BinaryOperation) and isinstance(ann.operator, cst.BitOr):
            kinds = {self._annotation_kind(ann.left), self._annotation_kind(ann.right)}
            return "tensor" if "tensor" in kinds else None
        name = self.file.resolve(ann, None) or dotted(ann)
        if name is None:
            return None
        if name in ("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "Tensor"):
            return "tensor"
        if name in ("None",):
            return None
        if self._is_module_class(name, self.file):
            return "module"
        return "other"

    def _annotation_class(self, ann: cst.BaseExpression) -> tuple[ClassInfo, FileModel] | None:
        if isinstance(ann, cst.Subscript):
            for el in ann.slice:
                if isinstance(el.slice, cst.Index):
                    found = self._annotation_class(el.slice.value)
                    if found is not None:
                        return found
            return None
        name = self.file.resolve(ann, None)
        if name is None:
            return None
        sym = self.project.symbol(name, self.file)
        if sym is not None and isinstance(sym[0], ClassInfo):
            return sym
        return None

    def _is_module_class(self, qualname: str, context: FileModel, depth: int = 0) -> bool:
        if qualname.startswith("torch.nn.") and qualname.rsplit(".", 1)[-1][:1].isupper():
            return qualname.rsplit(".", 1)[-1] not in _TENSOR_CLASSES
        if depth > 6:
            return False
        sym = self.project.symbol(qualname, context)
        if sym is None or not isinstance(sym[0], ClassInfo):
            return False
        cls, mod = sym
        if "forward" in cls.methods:
            return True
        return any(self._is_module_class(base, mod, depth + 1) for base in cls.bases if base)

    # ---- self attributes
    def self_attrs(self) -> dict[str, str]:
        """``self.x`` → "tensor" / "module" for the enclosing class (and its project bases)."""
        if self._self_attrs is None:
            attrs: dict[str, str] = {}
            if self.cls is not None:
                self._class_attrs(self.cls, self.file, attrs, 0)
            self._self_attrs = attrs
        return self._self_attrs

    def _class_attrs(self, cls: ClassInfo, mod: FileModel, attrs: dict[str, str], depth: int) -> None:
        for attr, ctor in cls.attr_types.items():
            if attr in attrs:
                continue
            last = ctor.rsplit(".", 1)[-1]
            if ctor.startswith(("torch.", "torch_npu.")) and (last in _TENSOR_CLASSES or (
                    not last[:1].isupper() and torch_returns_tensor(ctor))):
                attrs[attr] = "tensor"
            elif self._is_module_class(ctor, mod):
                attrs[attr] = "module"
        for method in cls.methods.values():
            for site in method.calls:
                if site.method == "register_buffer" and isinstance(site.receiver, cst.Name) \
                        and site.receiver.value == "self" and site.node.args:
                    name = string_value(site.node.args[0].value)
                    if name:
                        attrs.setdefault(name, "tensor")
        if depth < 4:
            for base in cls.bases:
                sym = self.project.symbol(base, mod) if base else None
                if sym is not None and isinstance(sym[0], ClassInfo):
                    self._class_attrs(sym[0], sym[1], attrs, depth + 1)

    # ---- expressions
    def known_non_tensor(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString, cst.Integer,
                             cst.Float, cst.List, cst.Dict, cst.Tuple, cst.Set, cst.ListComp, cst.DictComp)):
            return True
        if isinstance(expr, cst.Name):
            return expr.value in self.non_tensors
        if isinstance(expr, cst.Attribute):
            return expr.attr.value in META_ATTRS
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            return expr.func.attr.value in _NON_TENSOR_METHODS or expr.func.attr.value.startswith("is_")
        return False

    def truth_is_tensor(self, test: cst.BaseExpression, consumed: set[int]) -> bool:
        """Whether evaluating ``test`` as a condition calls ``bool()`` on a tensor."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self.truth_is_tensor(test.expression, consumed)
        if isinstance(test, cst.BooleanOperation):
            consumed.add(id(test))
            left = self.truth_is_tensor(test.left, consumed)
            right = self.truth_is_tensor(test.right, consumed)
            return left or right
        return self.is_tensor(test)

    def is_tensor(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        if depth > 30:
            return False
        rec = lambda e: self.is_tensor(e, depth + 1)  # noqa: E731
        if isinstance(expr, cst.Name):
            return expr.value in self.tensors
        if isinstance(expr, cst.Attribute):
            attr = expr.attr.value
            if attr in META_ATTRS or attr.startswith("is_"):
                return False
            if attr in _TENSOR_ATTRS:
                return rec(expr.value)
            base = expr.value
            if isinstance(base, cst.Name) and base.value == "self" and self.fn.class_name:
                return self.self_attrs().get(attr) == "tensor"
            if isinstance(base, cst.Name) and base.value in self.param_classes:
                cls, mod = self.param_classes[base.value]
                return self._field_is_tensor(cls, mod, attr)
            return False
        if isinstance(expr, cst.Subscript):
            return rec(expr.value)
        if isinstance(expr, cst.BinaryOperation):
            return rec(expr.left) or rec(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            if isinstance(expr.operator, cst.Not):
                return False
            return rec(expr.expression)
        if isinstance(expr, cst.Comparison):
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
                return False
            return rec(expr.left) or any(rec(c.comparator) for c in expr.comparisons)
        if isinstance(expr, cst.BooleanOperation):
            return rec(expr.left) or rec(expr.right)
        if isinstance(expr, cst.IfExp):
            return rec(expr.body) or rec(expr.orelse)
        if isinstance(expr, cst.Call):
            return self._call_is_tensor(expr, depth)
        return False

    def _call_is_tensor(self, call: cst.Call, depth: int) -> bool:
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if self.is_tensor(receiver, depth + 1):
                return method not in _NON_TENSOR_METHODS and not method.startswith("is_")
            if isinstance(receiver, cst.Name) and receiver.value == "self" and self.fn.class_name:
                kind = self.self_attrs().get(method)
                if kind == "module":
                    return True
                if self.cls is not None and method in self.cls.methods:
                    return self._returns_tensor(self.cls.methods[method], self.file)
        if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Attribute):
            owner = func.value
            if isinstance(owner.value, cst.Name) and owner.value.value == "self":
                return self.self_attrs().get(owner.attr.value) == "module"
        if isinstance(func, cst.Name):
            if func.value in self.modules:
                return True
            if func.value in _NOT_BUILTIN_TENSORS:
                return False
        target = self.file.resolve(func, self.fn)
        if target is None:
            return False
        target = apis.canonical(target)
        if target.startswith(("torch.", "torch_npu.")):
            return torch_returns_tensor(target)
        found = self.project.function(target, self.file)
        if found is not None:
            sym = self.project.symbol(target, self.file)
            if sym is not None and isinstance(sym[0], ClassInfo):
                return False  # constructing an object
            return self._returns_tensor(*found)
        return False

    def _returns_tensor(self, fn: FunctionInfo, mod: FileModel) -> bool:
        ann = fn.node.returns.annotation if fn.node.returns is not None else None
        if ann is None:
            return False
        name = mod.resolve(ann, None) or dotted(ann)
        return name in ("torch.Tensor", "Tensor")

    def _field_is_tensor(self, cls: ClassInfo, mod: FileModel, attr: str) -> bool:
        ann = class_field_annotation(cls.node, attr)
        if ann is None:
            return False
        return (mod.resolve(ann, None) or "") in ("torch.Tensor", "torch.nn.Parameter")


def _collect_assigns(
    nodes: list[cst.CSTNode],
    out: list[tuple[cst.BaseExpression, cst.BaseExpression | None, cst.BaseExpression | None]],
) -> None:
    """(target, value, annotation) of every assignment among the local nodes of a function body."""
    for n in nodes:
        if isinstance(n, cst.Assign):
            for t in n.targets:
                out.append((t.target, n.value, None))
        elif isinstance(n, cst.AnnAssign):
            out.append((n.target, n.value, n.annotation.annotation))
        elif isinstance(n, cst.AugAssign):
            out.append((n.target, n.value, None))
        elif isinstance(n, cst.NamedExpr):
            out.append((n.target, n.value, None))
