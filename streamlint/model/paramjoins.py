"""Join loops over an events parameter that leave out its first or last element.

A transfer helper is handed the events that guard its inputs together with the inputs themselves
(``async_h2d(stream, ready_events, host_tensors)``): it waits each event, then reads every input. A join loop
over ``ready_events[1:]`` / ``ready_events[:-1]`` leaves one producer's work unjoined while the inputs it
guards are read whole. :func:`~streamlint.model.waits.partial_joins` finds such loops over a local or an
attribute collection, with a record of its elements in the closure or the project as evidence; a parameter's
records are in the callers, often handed through list attributes of other objects (another call's D2H records
them). :func:`partial_param_joins` answers for a parameter, with the function's own contract as evidence:

- the loop waits on each element and only joins (:func:`~streamlint.model.waits.only_joins`);
- the elements are device events: the wait is ``s.wait_event(e)``, or the parameter's annotation names a type
  resolving to a device ``Event`` (``torch.cuda.Event``; ``threading.Event`` is a host flag);
- no resolved caller names the current stream or passes a list built in place (the left-out element may be
  its own, recorded on the current stream); unseen callers keep the finding;
- the function never names the left-out element (``events[0]`` / ``events[-1]``);
- after the loop, another parameter is iterated whole (``for t in host_tensors:``): the inputs the events
  guard, paired by position in the signature only (hence medium confidence);
- nothing between the loop and that read joins otherwise (a ``synchronize()``, a ``wait_stream``).
"""

from __future__ import annotations

from streamlint._lazy import cst

from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.syntax import local_nodes
from streamlint.model.waits import PartialJoin, element_taken, loop_collection, only_joins, waits_on


def partial_param_joins(project, file: FileModel, fn: FunctionInfo) -> list[PartialJoin]:
    """The join loops of ``fn`` over an events parameter that leave out its first / last element while another
    parameter, the inputs they guard, is iterated whole after them (see the module docstring)."""
    if not fn.has_loop:
        return []
    params = {p.name.value: p for p in (*fn.node.params.posonly_params, *fn.node.params.params,
                                         *fn.node.params.kwonly_params)}
    params.pop("self", None)
    params.pop("cls", None)
    if len(params) < 2:
        return []
    loops = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.For)]
    found: list[PartialJoin] = []
    text = None
    for loop in loops:
        if not (isinstance(loop.iter, cst.Subscript) and isinstance(loop.iter.value, cst.Name)
                and loop.iter.value.value in params):
            continue
        parsed = loop_collection(fn.node, loop)
        if parsed is None:
            continue
        coll, dropped, names, field = parsed
        if field is not None or not isinstance(coll, cst.Name) or coll.value not in params:
            continue
        if not (waits_on(loop.body, names) and only_joins(loop.body)):
            continue
        if not (_annotated_event(file, fn, params[coll.value]) or _waits_event(loop.body, names)):
            continue
        if _callers_own_element(project, file, fn, coll.value):
            continue
        text = text if text is not None else file.code(fn.node)
        if element_taken(fn.node, coll.value, dropped, text):
            continue
        order = file.lexical_index(fn.node)
        end = order[id(loop)][1]
        paired = next((n for n in loops if isinstance(n.iter, cst.Name) and n.iter.value in params
                       and n.iter.value != coll.value and id(n) in order and order[id(n)][0] > end), None)
        if paired is None:
            continue
        start = order[id(paired)][0]
        if any(site.method in ("wait_stream", "synchronize") and id(site.node) in order
               and end < order[id(site.node)][0] < start for site in fn.calls):
            continue
        found.append(PartialJoin(loop, coll.value, dropped, (file, paired)))
    return found


_DEVICE_EVENT_MODULES = ("torch.cuda.", "torch.npu.", "torch_npu.npu.", "torch_npu.", "torch.xpu.", "torch.")


def _annotated_event(file: FileModel, fn: FunctionInfo, param: cst.Param) -> bool:
    """``events: Iterable[torch.cuda.Event]`` / ``List[Event]`` with ``Event`` imported from a device module: a
    name of the annotation resolves to a device ``Event`` type (``threading.Event`` is a host flag)."""
    if param.annotation is None:
        return False
    stack: list[cst.CSTNode] = [param.annotation.annotation]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Name, cst.Attribute)):
            try:
                qual = file.resolve(node, fn)
            except Exception:  # noqa: BLE001 -- an annotation the resolver refuses: no evidence
                qual = None
            if qual is not None and qual.endswith(".Event") and qual.startswith(_DEVICE_EVENT_MODULES) \
                    and qual.count(".") <= 3:
                return True
            if isinstance(node, cst.Attribute):
                continue
        stack.extend(node.children)
    return False


def _callers_own_element(project, file: FileModel, fn: FunctionInfo, param: str) -> bool:
    """May a caller hand an events list whose left-out element is its own (recorded on the current stream,
    where the wait is redundant)? Precision first: yes when a resolved caller names the current stream or
    builds the list it passes in place (``[mine] + others``); unknown callers keep the finding (medium)."""
    from streamlint.model.flow.callers import callers_of

    try:
        sites = callers_of(project, file, fn)
    except Exception:  # noqa: BLE001 -- callers not seen: keep the finding at medium confidence
        return False
    names = [p.name.value for p in (*fn.node.params.posonly_params, *fn.node.params.params)]
    index = names.index(param) - (1 if names[:1] in (["self"], ["cls"]) else 0) if param in names else None
    for model, site in sites or ():
        caller = site.function
        if caller is not None and "current_stream" in model.code(caller.node):
            return True
        arg = next((a for a in site.node.args if a.keyword is not None and a.keyword.value == param), None)
        if arg is None and index is not None:
            positional = [a for a in site.node.args if a.keyword is None and not a.star]
            arg = positional[index] if 0 <= index < len(positional) else None
        if arg is not None and isinstance(arg.value, (cst.List, cst.BinaryOperation, cst.Tuple)) \
                and not (isinstance(arg.value, (cst.List, cst.Tuple)) and not arg.value.elements):
            return True  # (an empty display holds no element of the caller's own)
    return False


def _waits_event(body: cst.CSTNode, names: list[str]) -> bool:
    """``s.wait_event(e)`` of a loop element (a device event by the API)."""
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "wait_event" \
                and node.args and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value in names:
            return True
        stack.extend(node.children)
    return False


__all__ = ["partial_param_joins"]
