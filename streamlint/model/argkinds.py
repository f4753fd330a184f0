"""What a join is handed: :func:`argument_kind` tells a stream from an event where the code makes it certain,
so that ``cur.wait_event(side_stream)`` / ``side.wait_stream(done_event)`` (the other kind than the method
takes: it raises when it runs) is reported once at the join (SL202) and the dataflow judges the later uses
by the join that was meant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model.apis import Role
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.streams import EVENT, MAIN_STREAM, STREAM, attr_kind, derived, kind_of_call, local_kind
from streamlint.model.syntax import local_nodes

if TYPE_CHECKING:
    from streamlint.model.project import Project

# Methods only a stream has, only an event has (torch.cuda / torch.npu / torch.xpu / torch.accelerator).
_STREAM_ONLY_METHODS = frozenset({"wait_stream", "record_event"})
_EVENT_ONLY_METHODS = frozenset({"record", "wait", "elapsed_time"})


def argument_kind(project: Project, file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression,
                  at: cst.Call | None = None) -> str | None:
    """STREAM or EVENT when ``expr`` (a name or an attribute chain) certainly holds that kind in ``fn``: its
    constructor says so (a local, a ``self.`` field, through one plain alias ``side = self.side``), or the
    function uses the same expression as only that kind can be used (the receiver of ``wait_stream`` /
    ``record_event``, the stream of a native stream context or the argument of ``wait_stream`` for a stream;
    the receiver of ``record`` / ``wait`` / ``elapsed_time`` or the argument of ``record_event`` for an
    event) wherever the call ``at`` being judged runs (under no test it is not under itself). Uses say nothing
    of a name that holds different values in turn (a loop or comprehension variable, a name bound more than
    once) or that the function tests with ``isinstance`` (a dispatch on the kind). None when unknown or
    contradictory."""
    index = _index(project, file, fn)
    name = dotted(expr)
    if isinstance(expr, cst.Name) and name in index.aliases:  # `side = self.side`: judged as `self.side`
        expr = index.aliases[name]
        name = dotted(expr)
    kinds: set[str] = set()
    if isinstance(expr, cst.Name):
        kinds.add(local_kind(project, file, fn, expr.value) or "")
    elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        kinds.add(attr_kind(project, file, file.classes.get(fn.class_name or ""), expr.attr.value) or "")
    elif isinstance(expr, cst.Call):
        kinds.add(kind_of_call(project, file, expr) or "")
    if name is not None and name.split(".")[0] not in index.varying and name not in index.tested:
        where = set(index.guards.get(id(at), ())) if at is not None else set()
        kinds.update(kind for kind, call in index.uses.get(name, ())
                     if call is not at and set(index.guards.get(id(call), ())) <= where)
    kinds = {STREAM if k == MAIN_STREAM else k for k in kinds} - {""}
    return kinds.pop() if len(kinds) == 1 and kinds <= {STREAM, EVENT} else None


class _Index:
    """What one function's own code says of its names: ``uses`` (dotted text -> (kind, call) evidence),
    ``varying`` (names holding different values in turn), ``tested`` (texts under ``isinstance``),
    ``aliases`` (a name bound once to an attribute chain), ``guards`` (the tests each call runs under)."""

    def __init__(self) -> None:
        self.uses: dict[str, list[tuple[str, cst.Call]]] = {}
        self.varying: set[str] = set()
        self.tested: set[str] = set()
        self.aliases: dict[str, cst.BaseExpression] = {}
        self.guards: dict[int, tuple] = {}


def _index(project: Project, file: FileModel, fn: FunctionInfo) -> _Index:
    memo = derived(project, "argkinds")
    held = memo.get(id(fn.node))
    if held is not None and held[0] is fn.node:
        return held[1]
    index = _Index()
    for site in fn.calls:
        call = site.node
        index.guards[id(call)] = site.guards
        recv = dotted(call.func.value) if isinstance(call.func, cst.Attribute) else None
        if recv is not None and site.method in _STREAM_ONLY_METHODS | _EVENT_ONLY_METHODS:
            index.uses.setdefault(recv, []).append((STREAM if site.method in _STREAM_ONLY_METHODS else EVENT, call))
        first = next((dotted(a.value) for a in call.args if a.keyword is None), None)
        if first is not None and site.method in ("wait_stream", "record_event"):
            index.uses.setdefault(first, []).append((STREAM if site.method == "wait_stream" else EVENT, call))
        if first is not None and dotted(call.func) == "isinstance":
            index.tested.add(first)
        for use in project.api_uses(file, site):
            stream = use.arg("stream") if use.role is Role.NATIVE_STREAM_CONTEXT else None
            if stream is not None and dotted(stream) is not None:
                index.uses.setdefault(dotted(stream), []).append((STREAM, call))
    for node in local_nodes(fn.node):
        target = node.target if isinstance(node, (cst.For, cst.CompFor, cst.AugAssign, cst.NamedExpr)) else \
            node.asname.name if isinstance(node, cst.WithItem) and node.asname is not None else None
        if target is not None:
            index.varying.update(n.value for n in local_nodes(target) if isinstance(n, cst.Name))
    for name, values in fn.name_assigns.items():
        if len(values) > 1:
            index.varying.add(name)
        elif dotted(values[0]) is not None and isinstance(values[0], cst.Attribute) and name not in index.varying:
            index.aliases[name] = values[0]
    memo[id(fn.node)] = (fn.node, index)
    return index
