"""Readers a class runs before its own join (issue 16 §3, [cross-method]; precision of the class protocol).

A class protocol (:mod:`~streamlint.model.flow.protocols`) seeds a method that reads a field another method left
pending on a side stream. When a method of the same class calls that reader and only *later*, on the same path,
joins the stream (``get()`` running ``self._evict_previous(k)`` and then ``self.copy_stream.synchronize()`` before it
touches the prefetched entry), the class itself says the reader's accesses are not of the pending write: its author
put the join after them on purpose (an offloaded cache evicting the entry it joined on an earlier call while the
next one is still in flight). The entries of a container field are one place across methods, so the analysis cannot
tell the elements apart; the class's own order is the evidence, and the reader is not treated as expected to join.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.syntax import dominates, normalized_code

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import ClassInfo, FunctionInfo

_JOINS = ("wait_stream", "wait_event", "wait", "synchronize")


def _join_key(file: FileModel, site) -> str | None:
    node = site.node
    if site.method in ("wait_stream", "wait_event"):
        return normalized_code(file.code(node.args[0].value)) if node.args else None
    if isinstance(node.func, cst.Attribute):
        return normalized_code(file.code(node.func.value))
    return None


def run_before_join(file: FileModel, cls: ClassInfo, fn: FunctionInfo, keys: set[str]) -> bool:
    """Does a method of ``cls`` other than ``fn`` call ``self.fn(...)`` and then, on every path from that call,
    join one of ``keys`` (the pending write's stream, the events recorded after it)?"""
    name = fn.node.name.value
    for m in cls.methods.values():
        if m is fn:
            continue
        calls = [s for s in m.calls if s.method == name and isinstance(s.receiver, cst.Name) and s.receiver.value == "self"]
        if not calls:
            continue
        joins = [s for s in m.calls if s.method in _JOINS and _join_key(file, s) in keys]
        if any(c.node is not j.node and dominates(m.node, c.node, j.node) for c in calls for j in joins):
            return True
    return False
