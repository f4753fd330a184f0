"""Streams a function builds from a handle its caller passes: the caller's stream under another name.

An API that takes "the caller's CUDA stream" as a raw handle (``cuda_stream: int``, what
``torch.cuda.current_stream().cuda_stream`` gives) wraps it before it enters it::

    stream = handle if isinstance(handle, torch.cuda.Stream) else torch.cuda.ExternalStream(handle)
    with torch.cuda.stream(stream):
        ...

That stream is whatever the caller chose, as a stream parameter is: a race between it and the entry stream
assumes the caller passes a stream other than its current one, and is judged as one with a stream parameter
(:meth:`~streamlint.model.flow.storage.Storages.caller_stream`: medium, the hint saying what it assumes), not as
one with a stream the function made itself. :func:`handle_param` recognises the binding: an ``ExternalStream``
of a parameter the function never rebinds (its first argument or ``stream_ptr=``), or a conditional choosing
between that parameter itself and such a wrap of it. "Never rebinds" counts every way a name is bound (an
assignment, a ``for`` / ``with ... as`` / ``except ... as`` target, ``:=``, ``+=``, ``import``, ``del``, a nested
function's ``nonlocal``), and the parameter has no default other than None (``h=torch.cuda.Stream().cuda_stream``:
a caller that leaves it out gets the function's own stream). :func:`handle_stream` is the interpreter's hook: a
local is the caller's stream only when every binding of it wraps the same such parameter, so a name bound to
``torch.cuda.Stream()`` on another path stays a stream the function made."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.flow.values import SVal
from streamlint.model.syntax import descendants, is_none, local_nodes, node_memo, param_named, target_names

_WRAPS = frozenset({"torch.cuda.ExternalStream", "torch.npu.ExternalStream", "torch.xpu.ExternalStream",
                    "torch_npu.npu.ExternalStream"})


def _binds(n, fn_node) -> list[str]:
    """The names one node of the function binds: assignments of any shape, ``for`` / ``with`` / ``except`` /
    ``import`` targets, ``:=``, augmented assignments, ``del``, and the names a nested function declares
    ``nonlocal`` (it may rebind them). Comprehension targets bind in their own scope: not counted."""
    if isinstance(n, cst.Assign):
        targets = [t.target for t in n.targets]
    elif isinstance(n, (cst.AugAssign, cst.For, cst.NamedExpr)) or isinstance(n, cst.AnnAssign) and n.value:
        targets = [n.target]
    elif isinstance(n, cst.AsName):
        targets = [n.name]
    elif isinstance(n, cst.ImportAlias) and n.asname is None and isinstance(n.name, cst.Name):
        targets = [n.name]
    elif isinstance(n, cst.Del):
        targets = [n.target]
    elif isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) and n is not fn_node:
        return [d.name.value for x in descendants(n) if isinstance(x, cst.Nonlocal) for d in x.names]
    else:
        return []
    return [name for t in targets for name in target_names(t)]  # (attribute / subscript targets bind no name)


def _bound(fn_node) -> tuple[frozenset[str], frozenset[str]]:
    """(every name the function binds, those bound by anything but a plain ``name = value``)."""
    every: set[str] = set()
    other: set[str] = set()
    for n in local_nodes(fn_node):
        if n is fn_node:
            continue
        names = _binds(n, fn_node)
        every.update(names)
        plain = isinstance(n, cst.Assign) and all(isinstance(t.target, cst.Name) for t in n.targets) \
            or isinstance(n, cst.AnnAssign) and isinstance(n.target, cst.Name)
        if not plain:
            other.update(names)
    return frozenset(every), frozenset(other)


def _rebound(fn: FunctionInfo, *, plain: bool = True) -> frozenset[str]:
    """The names ``fn`` binds (with ``plain=False``: only those bound otherwise than by ``name = value``)."""
    return node_memo("handlestreams.bound", fn.node, _bound)[0 if plain else 1]


def _default(fn: FunctionInfo, name: str):
    param = param_named(fn.node, name)
    return None if param is None else param.default


def _param(fn: FunctionInfo, expr) -> str | None:
    """The parameter ``expr`` names, when it still holds what the caller passed (never rebound, no default
    other than None)."""
    name = expr.value if isinstance(expr, cst.Name) else None
    if name is None or name not in fn.all_params or name == "self" or name in _rebound(fn):
        return None
    default = _default(fn, name)
    return name if default is None or is_none(default) else None


def _wrapped(model: FileModel, fn: FunctionInfo, value) -> str | None:
    """The parameter ``value`` wraps as an ``ExternalStream``, else None."""
    if not isinstance(value, cst.Call) or model.resolve(value.func, fn) not in _WRAPS:
        return None
    arg = next((a.value for a in value.args if a.keyword is not None and a.keyword.value == "stream_ptr"), None)
    if arg is None and value.args and value.args[0].keyword is None and value.args[0].star == "":
        arg = value.args[0].value
    return _param(fn, arg) if arg is not None else None


def handle_param(model: FileModel, fn: FunctionInfo, value) -> str | None:
    """The parameter a stream binding ``value`` is made from (see the module docstring), else None."""
    if isinstance(value, cst.IfExp):
        arms = {_wrapped(model, fn, arm) or _param(fn, arm) for arm in (value.body, value.orelse)}
        wraps = [_wrapped(model, fn, arm) for arm in (value.body, value.orelse)]
        return next(iter(arms)) if len(arms) == 1 and None not in arms and any(wraps) else None
    return _wrapped(model, fn, value)


def _viewed(interp, fn: FunctionInfo, value) -> str | None:
    """The parameter ``value`` converts through a project stream view (``as_torch_stream(stream, dev)``:
    :mod:`~streamlint.model.streamviews`), when it still holds what the caller passed, else None."""
    from streamlint.model.streamviews import viewed_argument

    if not isinstance(value, cst.Call):
        return None
    arg = viewed_argument(interp.project, interp.cfile, fn, value)
    return _param(fn, arg) if arg is not None else None


def viewed_stream(interp, st, expr) -> str | None:
    """The key of a stream expression that is a project stream view of a stream the function was handed: the
    stream parameter's own key when the argument evaluates to a stream, else (in the function analysed itself) the
    parameter, noted in ``interp.param_streams`` and judged as a stream parameter; None for anything else."""
    from streamlint.model.streamviews import viewed_argument

    if not isinstance(expr, cst.Call):
        return None
    arg = viewed_argument(interp.project, interp.cfile, interp.cfn, expr)
    if arg is None:
        return None
    v = interp.ev(st, arg)
    if isinstance(v, SVal):
        return v.key
    name = _param(interp.cfn, arg) if interp.cfn is interp.fn else None
    if name is None:
        return None
    interp.param_streams.add(name)
    return name


def handle_stream(interp, st, name: str, value) -> SVal | None:
    """The interpreter's hook for ``name = value``: the stream value of a local that is the caller's stream
    wrapped from its handle (noted in ``interp.param_streams``, judged as a stream parameter), else None. Only
    for the function analysed itself (not a callee inlined into it), at the name's first binding on the path,
    and only when every binding of the name in the function wraps the same parameter: ``s = Stream()`` on
    another path is the function's own stream under the same name."""
    fn = interp.cfn
    if fn is not interp.fn or value is None or name in st.env or name in _rebound(fn, plain=False):
        return None
    params = {handle_param(interp.cfile, fn, v) or _viewed(interp, fn, v) for v in fn.name_assigns.get(name, ())}
    if len(params) != 1 or None in params or (handle_param(interp.cfile, fn, value) or _viewed(interp, fn, value)) is None:
        return None
    interp.param_streams.add(name)
    return SVal(name)


def rebound(fn: FunctionInfo, *, plain: bool = True) -> frozenset[str]:
    """Every name ``fn`` binds anywhere in its body (see :func:`_binds`): a parameter among them may no longer hold
    what the caller passed (``plain=False``: only the names bound otherwise than by ``name = value``)."""
    return _rebound(fn, plain=plain)


__all__ = ["handle_param", "handle_stream", "rebound", "viewed_stream"]
