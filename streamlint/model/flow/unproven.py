"""Class protocols the class does not prove: a hand-off through an attribute with no join anywhere (issue 16,
[cross-method]).

:mod:`~streamlint.model.flow.protocols` reports a method reading a ``self.*`` field another method of the class left
written on a side stream only when the class says a join is expected there: an event recorded after the write, or
another reader joining the stream first. A hand-off whose one reader has lost its join (``dispatch()`` runs the
shared expert on a side stream into ``self._shared_out``; ``combine()`` adds it on the current stream with no
``wait_stream``) leaves no such evidence: the only join the protocol had is the one that is missing. This module
keeps that case, at LOW confidence (the order of the two calls, and any join between them, is the caller's):

* the field's last write in the producer is queued on a stream no code of the producer joins on that path (the
  producer synchronising, joining, or handing the tensor or an event after it back keeps it out, as before);
* no method of the class other than the reader joins that stream or synchronises the device (a join step the
  caller runs between the calls: :func:`~streamlint.model.flow.protocols._expected` returns before this), and no
  code outside the object reaches the stream (for ``self.*`` streams);
* the reader mentions the field outside a store, and is not the producer, ``__init__`` or a method run inside
  the producer's scope.

A stream the producer reaches through a local bound once to a class attribute of a project class (``stream =
SharedMLP.side``, the same object for every instance) is keyed by that attribute (:func:`shared_stream_key`),
so a reader's ``wait_stream(SharedMLP.side)`` is its join; such a stream is shared with other code, which may
join it, so a finding on it without the class's evidence is LOW too.

When the class itself proves the order (a method of it calls the producer and then the reader, the producer's
call on every path to the reader's, and joins nothing: :func:`order_seen`), the finding is MEDIUM, naming that
method. So it is when the reader itself runs the producer and leaves its write pending at its own exit (a double-
buffered prefetch: ``update(i)`` reads ``self._dev[i & 1]`` and then runs ``self._prefetch(i + 1)``, which copies
into the other slot on ``self._stream``): every call after the first reads what the call before it left queued, with
no join in between unless the caller makes one, and the caller cannot reach the stream (:func:`next_call_order`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.syntax import dominates, normalized_code

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.project import Project


def shared_stream_key(project: Project, file: FileModel, fn: FunctionInfo, key: str) -> str | None:
    """The class attribute (``SharedMLP.side``) a producer's stream key denotes: the key itself when it is
    spelt so, or a local of ``fn`` bound once, to such an attribute (``stream = SharedMLP.side``). None when
    it is anything else (a parameter, a local bound twice, a call's result, a module global)."""
    expr: cst.BaseExpression | None = None
    if key.isidentifier():
        if key in fn.params or key in fn.kwonly:
            return None
        values = fn.name_assigns.get(key, ())
        if len(values) != 1:
            return None
        expr = values[0]
    if expr is None:
        text = key
    elif isinstance(expr, cst.Attribute):
        text = normalized_code(file.code(expr))
    else:
        return None
    parts = text.split(".")
    if len(parts) != 2 or not all(p.isidentifier() for p in parts) or parts[0] in ("self", "cls"):
        return None
    sym = project.symbol(file.resolve_dotted(parts[0], fn) or parts[0], file)
    return text if sym is not None and isinstance(sym[0], ClassInfo) else None


def unproven_ok(file: FileModel, cls: ClassInfo, fn: FunctionInfo, producer: FunctionInfo, stream: str) -> bool:
    """May ``fn`` be reported as the reader of a hand-off the class gives no evidence for (LOW)? Not a
    property or a dunder (``__del__``, ``__repr__``: bookkeeping), nor a method the producer calls itself
    (its read is part of the producer's run), nor when the class hands its ``self.*`` stream to other code
    (``args=(..., self.avg_stream)`` for a worker thread, ``helper(self.copy)``: who joins it is not seen)."""
    name = fn.node.name.value
    if name.startswith("__") or stream.startswith("self.") and _stream_handed(file, cls, stream[5:]):
        return False
    for d in fn.node.decorators:
        dec = d.decorator
        text = dec.attr.value if isinstance(dec, cst.Attribute) else dec.value if isinstance(dec, cst.Name) else ""
        if text in ("property", "setter", "cached_property"):
            return False
    return not any(s.method == name and isinstance(s.receiver, cst.Name) and s.receiver.value == "self"
                   for s in producer.calls)


def _self_calls(fn: FunctionInfo, name: str) -> list:
    return [s for s in fn.calls if s.method == name and isinstance(s.receiver, cst.Name) and s.receiver.value == "self"]


def order_seen(cls: ClassInfo, producer: FunctionInfo, reader: FunctionInfo) -> str:
    """The name of a method of ``cls`` (not the producer or the reader) calling ``self.<producer>(...)`` and, in a
    later statement it reaches only through that call, ``self.<reader>(...)`` (``forward()`` running ``dispatch()``
    then ``combine()``); "" when none does. (Called only when no method of the class joins the stream.)"""
    for m in cls.methods.values():
        if m is producer or m is reader:
            continue
        for a in _self_calls(m, producer.node.name.value):
            for b in _self_calls(m, reader.node.name.value):
                if a.node is not b.node and not any(n is a.node for n in _args(b.node)) \
                        and dominates(m.node, a.node, b.node):
                    return m.node.name.value
    return ""


def next_call_order(producer: FunctionInfo, reader: FunctionInfo, leaves: bool) -> str:
    """The reader's own name when it calls ``self.<producer>(...)`` and ``leaves`` (the class's summary of what the
    reader leaves pending at its exits holds the producer's write of the same field on the same stream): the
    reader's next call runs after that producer run with no join in between; "" otherwise."""
    if not leaves or producer is reader or not _self_calls(reader, producer.node.name.value):
        return ""
    return reader.node.name.value


def _args(call: cst.Call) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [a.value for a in call.args]
    while stack:
        n = stack.pop()
        out.append(n)
        if isinstance(n, cst.Call):
            stack += [a.value for a in n.args]
    return out


def _stream_handed(file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """Does the class mention ``self.<attr>`` anywhere but as a stream scope's argument, the receiver or argument
    of an ordering call (``wait_stream``, ``wait_event``, ``synchronize``, ``record`` / ``record_event`` /
    ``record_stream``, ``query``), a store or a None test?"""
    text = file.code(cls.node)
    ref = rf"self\.{re.escape(attr)}\b"
    allowed = re.compile(
        rf"\.(?:stream|StreamContext|use_stream)\(\s*{ref}\s*\)"  # `torch.cuda.stream(self.s)`
        rf"|{ref}\s*\.\s*(?:wait_stream|wait_event|synchronize|record_event|query)\("  # `self.s.wait_stream(...)`
        rf"|\.(?:wait_stream|record|record_stream|wait_event)\(\s*{ref}\s*\)"  # `cur.wait_stream(self.s)`
        rf"|{ref}\s*(?::[^=\n]*)?=(?!=)"  # a store
        rf"|{ref}\s+is\b|\bif\s+(?:not\s+)?{ref}\s*:")  # a None test
    covered: set[int] = set()
    for m in allowed.finditer(text):
        covered.update(m.start() + i.start() for i in re.finditer(ref, m.group(0)))
    return any(m.start() not in covered for m in re.finditer(ref, text))
