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
between that parameter itself and such a wrap of it."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import FileModel, FunctionInfo

_WRAPS = frozenset({"torch.cuda.ExternalStream", "torch.npu.ExternalStream", "torch.xpu.ExternalStream",
                    "torch_npu.npu.ExternalStream"})


def _param(fn: FunctionInfo, expr) -> str | None:
    name = expr.value if isinstance(expr, cst.Name) else None
    return name if name is not None and name in fn.all_params and name != "self" \
        and name not in fn.name_assigns else None


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


__all__ = ["handle_param"]
