"""What a join is handed: :func:`argument_kind` tells a stream from an event where the code makes it certain,
so that ``cur.wait_event(side_stream)`` / ``side.wait_stream(done_event)`` (the other kind than the method
takes: it raises when it runs) is reported once at the join (SL202) and the dataflow judges the later uses
by the join that was meant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model.apis import Role
from streamlint.model.file import FileModel, FunctionInfo, dotted
from streamlint.model.streams import EVENT, MAIN_STREAM, STREAM, attr_kind, kind_of_call, local_kind

if TYPE_CHECKING:
    from streamlint.model.project import Project

# Methods only a stream has, only an event has (torch.cuda / torch.npu / torch.xpu / torch.accelerator).
_STREAM_ONLY_METHODS = frozenset({"wait_stream", "record_event"})
_EVENT_ONLY_METHODS = frozenset({"record", "wait", "elapsed_time"})


def argument_kind(project: Project, file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression,
                  at: cst.Call | None = None) -> str | None:
    """STREAM or EVENT when ``expr`` (a name or an attribute chain) certainly holds that kind in ``fn``: its
    constructor says so (a local, a ``self.`` field), or the function itself uses the same expression as
    only that kind can be used (the receiver of ``wait_stream`` / ``record_event``, the stream of a native
    stream context or the argument of ``wait_stream`` for a stream; the receiver of ``record`` / ``wait`` /
    ``elapsed_time`` or the argument of ``record_event`` for an event), not counting the call ``at`` being
    judged. None when unknown or contradictory."""
    kinds: set[str] = set()
    if isinstance(expr, cst.Name):
        kinds.add(local_kind(project, file, fn, expr.value) or "")
    elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        kinds.add(attr_kind(project, file, file.classes.get(fn.class_name or ""), expr.attr.value) or "")
    elif isinstance(expr, cst.Call):
        kinds.add(kind_of_call(project, file, expr) or "")
    if dotted(expr) is not None:
        text = file.code(expr)
        for site in fn.calls:
            call = site.node
            if call is at:
                continue
            if isinstance(call.func, cst.Attribute) and file.code(call.func.value) == text:
                if site.method in _STREAM_ONLY_METHODS:
                    kinds.add(STREAM)
                elif site.method in _EVENT_ONLY_METHODS:
                    kinds.add(EVENT)
            first = next((a.value for a in call.args if a.keyword is None), None)
            if first is not None and file.code(first) == text:
                if site.method == "wait_stream":
                    kinds.add(STREAM)
                elif site.method == "record_event":
                    kinds.add(EVENT)
            for use in project.api_uses(file, site):
                stream = use.arg("stream") if use.role is Role.NATIVE_STREAM_CONTEXT else None
                if stream is not None and file.code(stream) == text:
                    kinds.add(STREAM)
    kinds = {STREAM if k == MAIN_STREAM else k for k in kinds} - {""}
    return kinds.pop() if len(kinds) == 1 and kinds <= {STREAM, EVENT} else None
