"""Functions that record tensors on a stream their caller chooses (the ``record_stream`` protocol).

An object that holds device tensors implements ``record_stream(self, stream)`` so that a pipeline can
hand all of it to another stream in one call (``batch.record_stream(side)``); a helper does the same for
a set of tensors (``record_ctx(ctx, stream)``). The contract is to record every tensor it holds on *that*
stream. Breaking it leaves the caller's stream unprotected however correct the caller is:

- a record on the current stream (the caller's, usually the allocating one) instead of the stream it
  was given: a no-op for the allocator;
- a loop over the held tensors whose body records none of them;
- a ``record_stream`` method that never uses its stream, or an override with an empty body that drops
  the base class's records;
- a function named for recording on a stream (``record_stream(tensor, stream)``, the kernel of a
  record op ``record_tagged_stream_impl(input, tag)``) that is handed a tensor and a stream and records
  nothing: no ``record_stream``, no call to another recorder, no call given both the tensor and the stream.

Only pure forwarders are judged: a function that also switches streams, waits or synchronises orders its
own work, and its records are judged by the dataflow (SL301's lifetime analysis) instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from streamlint._lazy import cst

from streamlint.model.apis import Role
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.metaonly import metadata_only
from streamlint.model.project import Project
from streamlint.model.streams import STREAM, is_current_stream, local_kind
from streamlint.model.uses import bind_arguments
from streamlint.model.syntax import descendants, local_nodes, mentions_name, names_stream_class, node_code, stub_body
from streamlint.model.walk import children

PROTOCOL = "record_stream"
# Calls that order work between streams: a function making one is not a pure forwarder.
_ORDERING_METHODS = frozenset({"wait_stream", "wait_event", "wait", "record", "record_event", "synchronize",
                               "query"})
_ORDERING_ROLES = frozenset({Role.NATIVE_STREAM_CONTEXT, Role.STREAM_SWITCH, Role.WAIT_TENSOR, Role.OPS_RECORD,
                             Role.OPS_WAIT, Role.TAGGED_EVENT_RECORD, Role.TAGGED_EVENT_WAIT, Role.SET_STREAM,
                             Role.DEVICE_SYNCHRONIZE})
_STREAM_NAME = re.compile(r"(^|_)stream$")
_SCALARS = frozenset({"bool", "int", "float", "str"})


@dataclass(frozen=True)
class BrokenRecord:
    """A record_stream forwarder that does not record what it holds on the stream it was given."""

    node: cst.CSTNode
    kind: str  # "wrong-stream" | "unrecorded-loop" | "unrecorded-branch" | "ignores-stream" | "drops-base" |
    # "records-nothing" | "unrecorded-field" | "unrecorded-holder-field"
    stream: str  # the stream the function was given
    detail: str  # the recorded tensor (wrong-stream), the loop target, or the base class
    function: FunctionInfo | None = None  # the forwarder


def broken_records(project: Project, file: FileModel) -> list[BrokenRecord]:
    out: list[BrokenRecord] = []
    for fn in file.functions.values():
        found = []
        if _records_anything(fn) or fn.node.name.value == PROTOCOL or _recorder_name(fn):
            found += _check(project, file, fn)
        if fn.node.name.value == "__torch_dispatch__":
            found += _dispatch_branches(project, file, fn)
        out += [replace(b, function=fn) for b in found]
    return out


def _records_anything(fn: FunctionInfo) -> bool:
    return any(site.method == PROTOCOL for site in fn.calls)


def _check(project: Project, file: FileModel, fn: FunctionInfo) -> list[BrokenRecord]:
    stream = _given_stream(project, file, fn)
    if stream is None or not _pure_forwarder(project, file, fn):
        return []
    protocol = fn.node.name.value == PROTOCOL and fn.class_name is not None
    out: list[BrokenRecord] = []
    if protocol and stub_body(fn.node):
        base = _base_recorder(project, file, fn)
        if base is not None:
            out.append(BrokenRecord(fn.node.name, "drops-base", stream, base))
        return out
    if protocol and not mentions_name(fn.node.body, stream) and not stub_body(fn.node, abstract=True) and not (
            _records_current(project, file, fn) and _callers_give_current(project, file, fn, stream)):
        return [BrokenRecord(fn.node.name, "ignores-stream", stream, "")]  # (not: on the current one, the same)
    if _recorder_name(fn) and not stub_body(fn.node, abstract=True) and not _records_anything(fn):
        held = _held_tensors(fn, stream, protocol)
        if held and not _delegates(fn, stream, held):
            return [BrokenRecord(fn.node.name, "records-nothing", stream, held[0])]
    for site in fn.calls:
        if site.method != PROTOCOL or site.receiver is None or len(site.node.args) != 1:
            continue
        arg = site.node.args[0].value
        if isinstance(arg, cst.Name) and arg.value == stream and stream in fn.all_params \
                and _defaulted_only(fn, stream):
            continue  # the given stream (the current one only when the caller gives none)
        if is_current_stream(project, file, fn, arg) and not _callers_give_current(project, file, fn, stream) \
                and not _used_here_after(project, file, fn, site):
            out.append(BrokenRecord(site.node, "wrong-stream", stream, file.code(site.receiver)))
    out += _unrecorded_holder_fields(project, file, fn, stream)
    if protocol:
        out += _unrecorded_fields(project, file, fn, stream)
        holders = _holders(fn)
        silent_loops = [loop for loop in _loops(fn.node.body) if _silent(loop, stream) and mentions_name(loop.iter, *holders)]
        out += [BrokenRecord(loop, "unrecorded-loop", stream, file.code(loop.target)) for loop in silent_loops]
        out += _silent_tensor_branches(file, fn, stream, holders, silent_loops)
    return out


def _used_here_after(project: Project, file: FileModel, fn: FunctionInfo, site) -> bool:
    """Does ``fn`` itself hand the tensor it records on the current stream (a plain name) to a call after the
    record (``indices.record_stream(current); out = self.prepare(indices, ...)``)? It records the tensor on the
    stream where it then uses it (the caller may have made it on another one): that record protects this
    function's own use, it is no forward of the tensor to the stream the function was given."""
    receiver = site.receiver
    if not isinstance(receiver, cst.Name):
        return False
    name = receiver.value
    line = file.span(site.node).start_line
    for other in fn.calls:
        if other.method == PROTOCOL or file.span(other.node).start_line <= line:
            continue
        at = next((i for i, a in enumerate(other.node.args) if isinstance(a.value, cst.Name) and a.value.value == name), None)
        if at is None:
            continue
        target = project.call_target(file, other)
        if target is not None and other.node.args[at].keyword is None \
                and metadata_only(target[0], at + 1, target[1]):
            continue  # a helper reading only the shapes (a host check) uses no device memory of it
        return True
    return False


def _unrecorded_holder_fields(project: Project, file: FileModel, fn: FunctionInfo, stream: str) -> list[BrokenRecord]:
    """A recorder that records two or more device fields of a holder object on the stream it is given
    (``ts.device_p.record_stream(s)``, ``for t in ts.device_states.values(): t.record_stream(s)``) and leaves
    out another field of the holder's class that every construction of the class in this file fills with
    device memory (``Holder(device_w=w.to(dev, non_blocking=True))``, a method returning such a copy, a
    local dict filled with them): its blocks go back to the allocating stream's pool while the given stream
    still uses them. Fields filled with anything else (host copies, values of unknown placement) are not
    judged."""
    from streamlint.model.handoffs import _holds_recordable

    recorded: dict[str, set[str]] = {}
    first: dict[str, cst.CSTNode] = {}
    for site in fn.calls:
        if site.method != PROTOCOL or len(site.node.args) != 1:
            continue  # (a field recorded on another stream is reported at that record)
        receiver = site.receiver
        holder = _holder_field(receiver)
        if holder is None and isinstance(receiver, cst.Name):  # `for t in ts.states.values(): t.record_stream(s)`
            holder = next((_holder_field(_iterated(loop.iter)) for loop in _loops(fn.node.body)
                           if isinstance(loop.target, cst.Name) and loop.target.value == receiver.value), None)
        if holder is not None:
            recorded.setdefault(holder[0], set()).add(holder[1])
            if mentions_name(site.node.args[0].value, stream):
                first.setdefault(holder[0], site.node)
    out: list[BrokenRecord] = []
    for name, fields in recorded.items():
        cls = _holder_class(file, fn, name) if len(fields) >= 2 and name in first else None
        if cls is None:
            continue
        for stmt in cls.node.body.body:
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is None \
                        and small.target.value not in fields \
                        and _holds_recordable(project, file, small.annotation.annotation) \
                        and _device_filled(file, cls.name, small.target.value):
                    out.append(BrokenRecord(first[name], "unrecorded-holder-field", stream,
                                            f"{name}.{small.target.value}"))
    return out[:1]


def _holder_field(expr: cst.BaseExpression | None) -> tuple[str, str] | None:
    """``ts.device_p`` -> ("ts", "device_p")."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value not in ("self", "cls"):
        return expr.value.value, expr.attr.value
    return None


def _iterated(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``d.values()`` / ``d.items()`` / ``d`` -> ``d``."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("values", "items") \
            and not expr.args:
        return expr.func.value
    return expr


def _holder_class(file: FileModel, fn: FunctionInfo, name: str) -> ClassInfo | None:
    """The class of ``name`` in ``fn``: a parameter annotated with it, or the loop target over a parameter
    annotated as a collection of it (``layer: dict[int, State]`` ... ``for ts in layer.values()``)."""
    annotations = {p.name.value: p.annotation.annotation for p in (*fn.node.params.params, *fn.node.params.kwonly_params)
                   if p.annotation is not None}
    if name in annotations:
        return _named_class(file, annotations[name])
    for loop in _loops(fn.node.body):
        source = _iterated(loop.iter)
        if isinstance(loop.target, cst.Name) and loop.target.value == name and isinstance(source, cst.Name) \
                and source.value in annotations:
            ann = annotations[source.value]
            if isinstance(ann, cst.Subscript) and ann.slice and isinstance(ann.slice[-1].slice, cst.Index):
                return _named_class(file, ann.slice[-1].slice.value)
    return None


def _named_class(file: FileModel, ann: cst.BaseExpression) -> ClassInfo | None:
    return file.classes.get(ann.value) if isinstance(ann, cst.Name) else None


_DEVICE_METHODS = frozenset({"cuda", "npu"})
_FACTORIES = frozenset({"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
                        "rand", "randn", "arange"})


def _device_filled(file: FileModel, class_name: str, field: str) -> bool:
    """Does every construction ``ClassName(..., field=value)`` in the file (one at least) give ``field``
    device memory: a copy to a device, a method of the class returning one, a local assigned one or a local
    dict whose items are?"""
    sites = [(fn, site.node) for fn in file.functions.values() for site in fn.calls
             if isinstance(site.node.func, cst.Name) and site.node.func.value == class_name]
    if not sites:
        return False
    for fn, call in sites:
        value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == field), None)
        if value is None or not _device_value(file, fn, value):
            return False
    return True


def _device_value(file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression, depth: int = 0) -> bool:
    if depth > 3:
        return False
    if isinstance(expr, cst.IfExp):
        return _device_value(file, fn, expr.body, depth + 1) or _device_value(file, fn, expr.orelse, depth + 1)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        method = expr.func.attr.value
        if method in _DEVICE_METHODS:
            return True
        if method == "to" and expr.args and not any(
                isinstance(a.value, cst.SimpleString) and "cpu" in a.value.value for a in expr.args):
            return any(a.keyword is not None and a.keyword.value == "device" for a in expr.args) or any(
                w in file.code(expr.args[0].value).lower() for w in ("device", "cuda", "npu"))
        device = next((a.value for a in expr.args if a.keyword is not None and a.keyword.value == "device"), None)
        if device is not None and method in _FACTORIES:  # `torch.empty(n, device=self.device)`
            return not (isinstance(device, cst.SimpleString) and "cpu" in device.value)
        if isinstance(expr.func.value, cst.Name) and expr.func.value.value == "self" and fn.class_name:
            cls = file.classes.get(fn.class_name)
            helper = cls.methods.get(method) if cls is not None else None
            if helper is not None:
                return any(isinstance(n, cst.Return) and n.value is not None
                           and _device_value(file, helper, n.value, depth + 1) for n in local_nodes(helper.node.body))
        return False
    if isinstance(expr, cst.Name):
        values = fn.name_assigns.get(expr.value, [])
        if values and all(isinstance(v, cst.Dict) and not v.elements for v in values):
            stores = [n.value for n in local_nodes(fn.node.body) if isinstance(n, cst.Assign)
                      and any(isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name)
                              and t.target.value.value == expr.value for t in n.targets)]
            return bool(stores) and all(_device_value(file, fn, v, depth + 1) for v in stores)
        return bool(values) and all(v is not None and _device_value(file, fn, v, depth + 1) for v in values)
    return False


_ALL_FIELDS = re.compile(r"\b(?:fields|vars|asdict|astuple|super)\s*\(|__dict__")


def _unrecorded_fields(project: Project, file: FileModel, fn: FunctionInfo, stream: str) -> list[BrokenRecord]:
    """An object's own ``record_stream`` that records its device fields one by one (two or more of them)
    and leaves out a required field the class declares as holding device memory (``label: torch.Tensor``, a
    field of a class implementing ``record_stream``; no default): that field's blocks go back to the allocator's pool of the
    stream that made them while the caller's stream still reads them. Not when the method walks every field
    (``fields(self)``, ``vars(self)``, ``__dict__``) or defers to the base class (``super()``)."""
    from streamlint.model.handoffs import _holds_recordable

    cls = file.classes.get(fn.class_name or "")
    if cls is None or cls.methods.get(PROTOCOL) is not fn:
        return []
    text = file.code(fn.node.body)
    if _ALL_FIELDS.search(text):
        return []
    declared: list[tuple[str, cst.AnnAssign]] = []
    for stmt in cls.node.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                    and "ClassVar" not in file.code(small.annotation.annotation) \
                    and _holds_recordable(project, file, small.annotation.annotation):
                declared.append((small.target.value, small))
    mentioned = [name for name, _ in declared if re.search(rf"\bself\.{re.escape(name)}\b", text)]
    if len(mentioned) < 2:
        return []
    # a field with a default (``field(default_factory=list)``, ``= None``) is optional bookkeeping the object
    # may never hand to the consumer (inputs released early, caches): only the required ones are its data
    return [BrokenRecord(fn.node.name, "unrecorded-field", stream, name)
            for name, node in declared if name not in mentioned and node.value is None][:1]


def _silent_tensor_branches(file: FileModel, fn: FunctionInfo, stream: str, holders: tuple[str, ...],
                            reported: list[cst.For]) -> list[BrokenRecord]:
    """Branches of an object's own ``record_stream`` that establish that a held value is a device tensor
    (``if isinstance(value, torch.Tensor):``, ``elif value.is_cuda:``, a conjunction with one of them) and
    then record nothing on the stream: the fields that take that branch are dropped from the record while
    the others (a nested object's ``record_stream`` in a sibling branch) still are. The outermost such
    branch is reported; branches inside a loop already reported as recording nothing are not."""
    loop_targets = {name.value for loop in _loops(fn.node.body) if mentions_name(loop.iter, *holders)
                    for name in _nodes(loop.target, cst.Name)}
    held = set(holders) | loop_targets
    skip = {id(n) for loop in reported for n in _nodes(loop.body, cst.If)}
    for branch in local_nodes(fn.node.body):  # `if v.is_cuda: ... elif isinstance(v, Tensor):` only sees host tensors
        if isinstance(branch, cst.If) and _tensor_test(branch.test, held) is not None:
            orelse = branch.orelse
            while isinstance(orelse, cst.If):
                skip.add(id(orelse))
                orelse = orelse.orelse
    out: list[BrokenRecord] = []
    for branch in sorted((n for n in local_nodes(fn.node.body) if isinstance(n, cst.If)),
                         key=lambda n: file.span(n).start_line):
        if id(branch) in skip:
            continue
        value = _tensor_test(branch.test, held)
        if value is None or not _silent(branch.body, stream):
            continue
        out.append(BrokenRecord(branch, "unrecorded-branch", stream, file.code(value)))
        skip |= {id(n) for n in _nodes(branch.body, cst.If)}
    return out


def _tensor_test(test: cst.BaseExpression, held: set[str]) -> cst.BaseExpression | None:
    """The held value a branch test asserts to be a (device) tensor: ``isinstance(v, <...Tensor>)``,
    ``v.is_cuda`` / ``v.is_npu``, or a conjunction with one of them (not a negation)."""
    if isinstance(test, cst.BooleanOperation):
        if not isinstance(test.operator, cst.And) or any(
                isinstance(side, cst.UnaryOperation) and isinstance(side.operator, cst.Not)
                for side in (test.left, test.right)):
            return None  # `isinstance(v, Tensor) and not v.is_cuda`: the host tensors
        return _tensor_test(test.left, held) or _tensor_test(test.right, held)
    subject = None
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance" \
            and len(test.args) == 2 and any((n.value if isinstance(n, cst.Name) else n.attr.value) == "Tensor"
                                            for n in _nodes(test.args[1].value, (cst.Name, cst.Attribute))):
        subject = test.args[0].value
    elif isinstance(test, cst.Attribute) and test.attr.value in ("is_cuda", "is_npu"):
        subject = test.value
    root = subject
    while isinstance(root, cst.Attribute):
        root = root.value
    if isinstance(root, cst.Name) and root.value in held:
        return subject
    return None


def _records_current(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    return any(site.method == PROTOCOL and len(site.node.args) == 1
               and is_current_stream(project, file, fn, site.node.args[0].value) for site in fn.calls)


def _callers_give_current(project: Project, file: FileModel, fn: FunctionInfo, stream: str,
                          _open: set | None = None) -> bool:
    """Does every call site hand the stream parameter the stream current at the call: ``current_stream()``
    outside any scope, the stream of the scopes around the call (``with torch.cuda.stream(s):
    helper(t, s)``), or a stream parameter of a caller whose own callers all do (a chain of forwarders:
    ``batch.record_stream(stream)`` in ``record_inputs(batch, stream)``, called as ``record_inputs(b, s)``
    inside ``with torch.cuda.stream(s)``)? Recording on the current stream is then recording on the given
    one. A call on a receiver declared a tensor is torch's ``record_stream``, not this function's; a cycle
    of forwarders handing on their own stream adds no caller."""
    if stream not in fn.all_params:
        return False
    key = (id(fn), stream)
    opened = set() if _open is None else _open
    if key in opened:
        return True
    opened.add(key)
    sites = callers_of(project, file, fn)
    if not sites:
        return False
    method = fn.class_name is not None and fn.params[:1] == ("self",)
    params = (fn.params[1:] if method else fn.params) + fn.kwonly
    seen = 0
    for model, site in sites:
        caller = site.function
        if fn.node.name.value == PROTOCOL and _tensor_receiver(site):
            continue
        seen += 1
        bound = bind_arguments(params, site.node, kwonly=fn.kwonly).get(stream)
        if bound is None:
            return False
        if is_current_stream(project, model, caller, bound):
            continue
        scoped = [use for scope in project.enclosing_scopes(model, site.scope) for use in scope.uses
                  if use.role in (Role.NATIVE_STREAM_CONTEXT, Role.STREAM_SWITCH)]
        if scoped:
            inner = scoped[0].arg("stream") if scoped[0].role is Role.NATIVE_STREAM_CONTEXT else None
            if inner is None or model.code(inner) != model.code(bound):
                return False  # (the innermost stream scope decides which stream is current)
            continue
        if not (isinstance(bound, cst.Name) and caller is not None and bound.value in caller.all_params
                and _callers_give_current(project, model, caller, bound.value, opened)):
            return False
    return seen > 0


def _tensor_receiver(site) -> bool:
    """``hidden: torch.Tensor`` ... ``hidden.record_stream(s)``: the receiver is a parameter declared a tensor."""
    receiver, fn = site.receiver, site.function
    if not isinstance(receiver, cst.Name) or fn is None:
        return False
    params = fn.node.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == receiver.value and param.annotation is not None:
            return any(isinstance(n, (cst.Name, cst.Attribute)) and (
                n.value if isinstance(n, cst.Name) else n.attr.value) in ("Tensor", "Parameter")
                for n in _nodes(param.annotation.annotation, (cst.Name, cst.Attribute)))
    return False


def _recorder_name(fn: FunctionInfo) -> bool:
    """A name that says the function records on a stream: it begins with the word ``record`` and names a
    stream (``record_stream``, ``record_tagged_stream_impl``, ``_record_on_stream``; not ``recording_*``,
    not ``test_..._record_the_stream``)."""
    words = fn.node.name.value.lower().lstrip("_").split("_")
    return words[0] == "record" and ("stream" in words or "streams" in words)


def _held_tensors(fn: FunctionInfo, stream: str, protocol: bool) -> list[str]:
    """The parameters that may hold what the function is to record: not the stream, nothing declared as
    anything but a tensor (a tag, an id, a flag, a set of pointers), not ``self`` unless the method is the
    object's own ``record_stream``."""
    params = fn.node.params
    out: list[str] = []
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        name = param.name.value
        if name == stream or name == "cls" or (name == "self" and not protocol) or _STREAM_NAME.search(name):
            continue
        annotation = param.annotation.annotation if param.annotation is not None else None
        if annotation is not None and not any(isinstance(n, (cst.Name, cst.Attribute)) and (
                n.value if isinstance(n, cst.Name) else n.attr.value) in ("Tensor", "Parameter")
                for n in _nodes(annotation, (cst.Name, cst.Attribute))):
            continue
        if isinstance(param.default, (cst.Integer, cst.Float, cst.SimpleString)) \
                or isinstance(param.default, cst.Name) and param.default.value in ("True", "False"):
            continue
        out.append(name)
    return out


def _delegates(fn: FunctionInfo, stream: str, held: list[str]) -> bool:
    """Does the function hand the recording on: a call to another recorder (a name with ``record``), or a
    call given the stream whose receiver or arguments hold a held tensor (``_apply(stream, t)``, a test
    double's ``self.seen.append(stream)``), or a call handed a closure of the function that records its
    argument on the stream, with a held tensor as receiver or argument (``self._apply(record)``, ``def
    record(t): t.record_stream(stream)``: the container applies it to each of its tensors)?"""
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else ()
    recording = {stmt.name.value for stmt in body if isinstance(stmt, cst.FunctionDef) and _records_on(stmt, stream)}
    for site in fn.calls:
        func = site.node.func
        callee = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if "record" in callee.lower():
            return True
        args = [a.value for a in site.node.args]
        receiver = [func.value] if isinstance(func, cst.Attribute) else []
        if any(mentions_name(a, stream) for a in args) and any(mentions_name(a, *held) for a in args + receiver):
            return True
        if any(isinstance(a, cst.Name) and a.value in recording for a in args) \
                and any(mentions_name(a, *held) for a in args + receiver):
            return True
    return False


def _records_on(closure: cst.FunctionDef, stream: str) -> bool:
    """Does a nested function record its first parameter on ``stream`` (``t.record_stream(stream)``)?"""
    params = closure.params.params
    if not params:
        return False
    first = params[0].name.value
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == PROTOCOL
               and isinstance(n.func.value, cst.Name) and n.func.value.value == first
               and any(mentions_name(a.value, stream) for a in n.args)
               for n in descendants(closure.body))


def _dispatch_branches(project: Project, file: FileModel, fn: FunctionInfo) -> list[BrokenRecord]:
    """``if func == torch.ops.aten.record_stream.default:`` (a tensor subclass's ``__torch_dispatch__``):
    the branch implements the protocol for the subclass's inner tensors, with the stream unpacked from
    the op's arguments (``qt, stream = args``)."""
    out: list[BrokenRecord] = []
    for branch in _nodes(fn.node.body, cst.If):
        if not _tests_record_op(branch.test):
            continue
        unpacked = _unpacked(branch.body)
        streams = [n for n in unpacked if _STREAM_NAME.search(n)]
        if len(streams) != 1:
            continue
        stream, held = streams[0], tuple(n for n in unpacked if n != streams[0])
        inside = {id(n) for n in _nodes(branch.body, cst.Call)}
        for site in fn.calls:
            if id(site.node) in inside and site.method == PROTOCOL and site.receiver is not None \
                    and len(site.node.args) == 1 and is_current_stream(project, file, fn, site.node.args[0].value):
                out.append(BrokenRecord(site.node, "wrong-stream", stream, file.code(site.receiver)))
        for loop in _loops(branch.body):
            if _silent(loop, stream) and mentions_name(loop.iter, *held):
                out.append(BrokenRecord(loop, "unrecorded-loop", stream, file.code(loop.target)))
    return out


def _silent(block: cst.For | cst.BaseSuite, stream: str) -> bool:
    """A loop (or a block) that neither uses the stream nor records anything (a record on another stream
    is reported at that record)."""
    body = block.body if isinstance(block, cst.For) else block
    return not mentions_name(body, stream) and not any(
        isinstance(call.func, cst.Attribute) and call.func.attr.value == PROTOCOL
        for call in _nodes(body, cst.Call))


def _tests_record_op(test: cst.BaseExpression) -> bool:
    """``func == <...>.record_stream<...>`` / ``func is ...``."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 \
            or not isinstance(test.comparisons[0].operator, (cst.Equal, cst.Is)):
        return False
    return any(isinstance(n, cst.Attribute) and n.attr.value == PROTOCOL
               for side in (test.left, test.comparisons[0].comparator) for n in _nodes(side, cst.Attribute))


def _unpacked(body: cst.BaseSuite) -> list[str]:
    """Names bound by ``a, b = ...`` statements directly in a block."""
    names: list[str] = []
    for stmt in getattr(body, "body", ()):
        for small in getattr(stmt, "body", ()) if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    if isinstance(target.target, (cst.Tuple, cst.List)):
                        names += [el.value.value for el in target.target.elements if isinstance(el.value, cst.Name)]
    return names


def _nodes(root: cst.CSTNode, kind: type) -> list:
    out = []
    stack = [root]
    while stack:
        n = stack.pop()
        if isinstance(n, kind):
            out.append(n)
        stack.extend(children(n))
    return out


def _given_stream(project: Project, file: FileModel, fn: FunctionInfo) -> str | None:
    """The one stream the function is told to record on: a stream parameter, or a local stream it builds
    from its parameters (not the current stream). None when there is none or several."""
    names = [p for p in fn.all_params if p not in ("self", "cls")
             and (local_kind(project, file, fn, p) == STREAM or (_STREAM_NAME.search(p) and _may_hold_stream(fn, p)))]
    for local, values in fn.name_assigns.items():
        looked_up = _STREAM_NAME.search(local) and all(isinstance(v, cst.Call) for v in values)
        if local not in fn.all_params and (looked_up or local_kind(project, file, fn, local) == STREAM) \
                and not any(is_current_stream(project, file, fn, v) for v in values):
            names.append(local)
    if not names:
        names = _stream_loop_targets(fn)
    return names[0] if len(names) == 1 else None


_STREAMS_NAME = re.compile(r"(^|_)streams$")


def _stream_loop_targets(fn: FunctionInfo) -> list[str]:
    """``def record_all(t, *streams): for s in streams: t.record_stream(s)``: the function records on each
    of a collection of streams it is given (a ``*streams`` parameter, a parameter named for streams or
    annotated as a sequence of streams); the loop variable is the stream it is given, once per stream."""
    params = fn.node.params
    star = params.star_arg if isinstance(params.star_arg, cst.Param) else None
    given = [p for p in (*params.params, *params.kwonly_params, *([star] if star is not None else []))
             if p.name.value not in ("self", "cls") and (_STREAMS_NAME.search(p.name.value) or (
                 p.annotation is not None and names_stream_class(node_code(p.annotation.annotation))
                 and (p is star or any(w in node_code(p.annotation.annotation)
                                       for w in ("Sequence", "List", "list", "Tuple", "tuple", "Iterable")))))]
    names = {p.name.value for p in given}
    return list(dict.fromkeys(loop.target.value for loop in _loops(fn.node.body)
                              if isinstance(loop.target, cst.Name) and isinstance(loop.iter, cst.Name)
                              and loop.iter.value in names))


def _defaulted_only(fn: FunctionInfo, name: str) -> bool:
    """Every rebinding of the parameter ``name`` fills in a default: it sits under ``if name is None:`` (or
    ``if not name:``), so the function keeps the stream it is given whenever it is given one."""
    def none_test(test: cst.BaseExpression) -> bool:
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return isinstance(test.expression, cst.Name) and test.expression.value == name
        return isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == name \
            and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Is) \
            and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None"

    guarded = {id(n) for branch in local_nodes(fn.node.body) if isinstance(branch, cst.If) and none_test(branch.test)
               for n in local_nodes(branch.body)}
    rebinds = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.Assign)
               and any(isinstance(t.target, cst.Name) and t.target.value == name for t in n.targets)]
    return all(id(n) in guarded for n in rebinds)


def _may_hold_stream(fn: FunctionInfo, name: str) -> bool:
    """A parameter named like a stream that is not declared or defaulted as a flag, number or string
    (``record_stream: bool = False`` says whether to record, not where)."""
    params = fn.node.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value != name:
            continue
        annotation = param.annotation.annotation if param.annotation is not None else None
        if isinstance(annotation, cst.Name) and annotation.value in _SCALARS:
            return False
        default = param.default
        if isinstance(default, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)) or (
                isinstance(default, cst.Name) and default.value in ("True", "False")):
            return False
    return True


def _pure_forwarder(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    for site in fn.calls:
        if site.method in _ORDERING_METHODS:
            return False
        if any(use.role in _ORDERING_ROLES for use in project.api_uses(file, site)):
            return False
    return not fn.scopes or all(
        not any(use.role in _ORDERING_ROLES for call in scope.calls
                for site in [file.call_site(call)] if site is not None
                for use in project.api_uses(file, site))
        for scope in fn.scopes)


def _holders(fn: FunctionInfo) -> tuple[str, ...]:
    """Names whose contents the function records: ``self``, its parameters, and locals assigned only
    from them (``tensors = [self.data] if ... else self.data``)."""
    names = {p for p in fn.all_params if p != "cls"}
    changed = True
    while changed:
        changed = False
        for local, values in fn.name_assigns.items():
            if local not in names and values and all(mentions_name(v, *names) for v in values):
                names.add(local)
                changed = True
    return tuple(sorted(names))


def _loops(body: cst.CSTNode) -> list[cst.For]:
    return [n for n in local_nodes(body) if isinstance(n, cst.For)]


def _base_recorder(project: Project, file: FileModel, fn: FunctionInfo) -> str | None:
    """The base class whose non-empty ``record_stream`` this method overrides, if any."""
    cls = file.classes.get(fn.class_name or "")
    seen: set[int] = set()
    todo: list[tuple[ClassInfo, FileModel]] = [(cls, file)] if cls is not None else []
    while todo and len(seen) < 16:
        current, mod = todo.pop()
        for base in current.bases:
            sym = project.symbol(base, mod) if base else None
            if sym is None or not isinstance(sym[0], ClassInfo) or id(sym[0]) in seen:
                continue
            seen.add(id(sym[0]))
            method = sym[0].methods.get(PROTOCOL)
            if method is not None and not stub_body(method.node) and _records_anything(method):
                return sym[0].name
            todo.append(sym)
    return None


__all__ = ["BrokenRecord", "broken_records"]
