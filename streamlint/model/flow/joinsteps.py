"""Join steps that join nothing: the caller's side of a fork-join protocol.

Code that overlaps a copy or a collective with compute splits the protocol across functions: one function
(or method) queues the work on a side stream, and a separate *join step* — a function named for it,
``wait_for_data(t, stream)``, ``finish_grad_sync()``, ``sync_stream(chunk, stream)``, ``_wait_for_events(
batch, context)`` — orders the caller's current stream after that work before the caller reads what it
produced. The reader lives in the caller, so the dataflow of no single function shows the race; the root
cause, when the join step has lost its join, is in the join step, which is where this module reports it.

A function is a join step when the first word of its name says so (``wait``, ``await``, ``sync``,
``synchronize``, ``finish``, ``join``: the naming convention join helpers follow, like ``record*stream*`` for
recorders in :mod:`~streamlint.model.recorders`; not a dunder: ``__await__`` makes an awaitable), or when its
callers show it (:mod:`~streamlint.model.flow.handedjoins`: every seen caller hands one parameter the only handle
it keeps on work it queued, an event it made and recorded; such a step is judged on that parameter alone, as
``stream-param``, and never on a stub). It is judged on evidence of what it was handed to join:

Reported where the join belongs: at the function's last statement (before it returns), or at the loop /
test taking the event.

* ``stream-param``: a stream or event parameter (annotated so, or named ``*stream`` / ``*event``) that the
  function neither orders (``wait_stream``, ``wait_event``, ``record``, ``synchronize`` …) nor hands on (an
  argument or receiver of any call, stored, returned, captured): it only tests it (``if stream is None``);
* ``event``: an event it takes out of a container (``for e in self.recv_events[chunk]``, ``ev =
  self.events_map.get(k)``) and then only tests or drops (no wait, not handed on);
* ``class-stream``: a method of a class where another method queues work on a stream the object holds
  (``with torch.cuda.stream(self.comm_stream)``, left in flight when that method returns) and no code of
  the project orders anything after that stream (no ``X.wait_stream(comm_stream)``, no event recorded on
  it, no ``comm_stream.synchronize()``): the class's join step is the only place the join can belong;
* ``class-event``: a method of a class where another method records an event the object holds
  (``self._done.record(stream)``) that no code of the project waits on, reaches from outside the object or
  hands on: the event protocol's wait is lost, and the class's join step for that recorder (``wait_done``
  for ``record_done``) is where it belongs -- unless other code joins the stream it is recorded on after its
  work (:mod:`~streamlint.model.flow.deadevents`: the event is a leftover guarding nothing). This one is
  judged on stubs too (``def wait_done(self, stream): pass``): the orphan event shows the class is not an
  interface whose subclasses do the waiting.

Silent when the function synchronises the device, when every caller orders right after the call, and for
stubs (an interface's ``pass`` / ``raise NotImplementedError`` body) but on the ``class-event`` evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.streams import EVENT, MAIN, STREAM, derived
from streamlint.model.devobjects import param_annotation
from streamlint.model.flow.handedjoins import handed_join_param
from streamlint.model.flow.inflight import asked, finished, started
from streamlint.model.syntax import descendants, local_nodes, mentions_name, node_code
from streamlint.model.waits import consumes_event

if TYPE_CHECKING:
    from streamlint.model.project import Project

JOIN_WORDS = frozenset({"wait", "await", "sync", "synchronize", "finish", "join"})
_HANDLE_NAME = re.compile(r"(^|_)(stream|streams|event|events)$")
_EVENT_NAME = re.compile(r"(^|_)(event|events|ev|evt)(_|$)", re.IGNORECASE)
# the stream / event primitives themselves (a class defining one implements or fakes it)
_PRIMITIVES = frozenset({"wait_stream", "wait_event", "synchronize", "wait", "join"})
# builtins returning a Python number or string
_SCALAR_BUILTINS = frozenset({"len", "int", "float", "str", "bool", "round", "abs", "hash", "id", "repr", "format",
                              "ord", "chr"})
# calls that only look at a value (a test), never order or hand it on
_PREDICATES = frozenset({"isinstance", "hasattr", "callable", "len", "bool", "id", "type", "print", "repr", "str"})


@dataclass(frozen=True)
class SilentJoin:
    """A join step that leaves what it was handed to join unordered."""

    function: FunctionInfo
    node: cst.CSTNode  # where it is reported (the def's name, the loop, the test)
    kind: str  # "stream-param" | "event" | "class-stream" | "class-event"
    handle: str  # the stream / event (its spelling)
    producer: FunctionInfo | None = None  # class-stream: the method queueing the work (class-event: recording)
    work: cst.CSTNode | None = None  # class-stream: that work (class-event: the record)
    fenced: str | None = None  # class-event recorded on the current stream: the side stream the recorder fences


def is_join_step(fn: FunctionInfo) -> bool:
    """Named for joining, and not a stream / event primitive itself: a method called ``wait_stream``,
    ``wait_event``, ``synchronize`` … on a class implements (or fakes, in a test) the primitive."""
    if fn.class_name and fn.node.name.value in _PRIMITIVES or fn.node.name.value.startswith("__"):
        return False  # (a dunder: ``__await__`` makes an awaitable, no join helper)
    words = fn.node.name.value.lower().lstrip("_").split("_")
    return bool(words) and words[0] in JOIN_WORDS


def _callee(call: cst.Call) -> str:
    return (dotted(call.func) or "").rsplit(".", 1)[-1]


def handled(body: cst.CSTNode, name: str) -> bool:
    """Is ``name`` used in ``body`` for more than a test: an argument or receiver of a call (a join, a
    record, a helper), stored, returned / yielded, a ``with`` item, captured by a nested function?"""
    for node in local_nodes(body):
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) and node is not body:
            if mentions_name(node, name):
                return True
        elif isinstance(node, cst.Call):
            if _callee(node) not in _PREDICATES and mentions_name(node, name):
                return True
        elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            if node.value is not None and mentions_name(node.value, name):
                return True
        elif isinstance(node, (cst.Return, cst.Yield)):
            if node.value is not None and mentions_name(node.value, name):
                return True
        elif isinstance(node, cst.WithItem):
            if mentions_name(node.item, name):
                return True
        elif isinstance(node, cst.For) and mentions_name(node.iter, name):
            if any(handled(node.body, n) for n in _bound_names(node.target)):
                return True  # `for ev in events: stream.wait_event(ev)`
    return False


def _stub(fn: FunctionInfo) -> bool:
    """An interface's body: docstring, ``pass``, ``...``, ``raise``, a bare ``return`` / ``return None``."""
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else []
    for stmt in body:
        small = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else None
        if small is None:
            return False
        for s in small:
            if isinstance(s, (cst.Pass, cst.Raise)):
                continue
            if isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString, cst.ConcatenatedString,
                                                                 cst.Ellipsis)):
                continue
            if isinstance(s, cst.Return) and (s.value is None or isinstance(s.value, cst.Name)
                                              and s.value.value == "None"):
                continue
            return False
    return True


def silent_joins(project: Project, file: FileModel) -> list[SilentJoin]:
    """Every join step of the file that joins nothing of what it was handed (see the module docstring)."""
    from streamlint.model.flow.protocols import synchronizes_device

    memo = derived(project, "silent_joins")
    if id(file) in memo:
        return memo[id(file)]
    memo[id(file)] = []
    out: list[SilentJoin] = []
    for fn in file.iter_functions():
        named = is_join_step(fn)
        handed = None if named or _stub(fn) or fn.node.name.value.startswith("__") \
            else handed_join_param(project, file, fn)
        if not named and handed is None or synchronizes_device(project, file, fn):
            continue
        if handed is not None:  # a join step by its callers' evidence (handedjoins.py): judged on that parameter
            found = [] if handled(fn.node.body, handed) else [SilentJoin(fn, _end(fn), "stream-param", handed)]
        elif _stub(fn):  # an interface's join step: judged only on the class's own evidence (an orphan event)
            found = _class_events(project, file, fn)
        else:
            found = _event_handles(file, fn) or _param_handles(project, file, fn) \
                or _class_streams(project, file, fn) or _class_events(project, file, fn)
        if found and _callers_join(project, file, fn):
            continue
        out += found[:1]  # one finding per join step
    memo[id(file)] = out
    return out


def _end(fn: FunctionInfo) -> cst.CSTNode:
    """Where the missing join belongs: before the function returns, at its last statement."""
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else []
    return body[-1] if body else fn.node.name


def _callers_join(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    from streamlint.model.flow.leaves import callers_view  # (leaves imports the interpreter's helpers)

    return callers_view(project, file, fn) == "joined"


def _param_handles(project: Project, file: FileModel, fn: FunctionInfo) -> list[SilentJoin]:
    from streamlint.model.tensors import param_kinds

    kinds = param_kinds(project, file, fn)
    out: list[SilentJoin] = []
    for name in fn.all_params:
        if name in ("self", "cls"):
            continue
        kind = kinds.get(name)
        named = kind is None and _HANDLE_NAME.search(name) and param_annotation(fn, name) is None  # (`stream: Any`: no evidence)
        if kind not in (STREAM, EVENT) and not named or _host_annotated(file, fn, name):
            continue
        if not handled(fn.node.body, name):
            out.append(SilentJoin(fn, _end(fn), "stream-param", name))
            break  # one finding per function
    return out


def _event_container(expr: cst.BaseExpression | None) -> bool:
    """``self.recv_events[chunk]``, ``context.events``, ``cls.update_events_map.get(p)``: an expression
    taking something out of a container whose name says it holds events."""
    while isinstance(expr, (cst.Subscript, cst.Call)):
        expr = expr.value if isinstance(expr, cst.Subscript) else expr.func
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("get", "pop", "values"):
            expr = expr.value
    if isinstance(expr, cst.Attribute):
        return bool(_EVENT_NAME.search(expr.attr.value))
    return isinstance(expr, cst.Name) and bool(_EVENT_NAME.search(expr.value))


def _bound_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _bound_names(el.value)]
    return []


def _event_handles(file: FileModel, fn: FunctionInfo) -> list[SilentJoin]:
    """Events (and streams) the join step takes or binds and then never orders anything with: a loop over an
    events container, a local taken out of one (``ev = self.events_map.get(k)``), a local whose name says it
    is a handle (``ev, release, k = self.queue.pop(0)``, ``stream = current_stream()``). Reported at the loop,
    at the test of the handle, else at its binding."""
    from streamlint.model.flow.hostnames import string_compared_names

    out: list[SilentJoin] = []
    bound: dict[str, cst.CSTNode] = {}
    strings = string_compared_names(fn)  # (`event_type == "ERROR"`: a string, whatever its name says)
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name) and _event_container(node.iter):
            if not handled(node.body, node.target.value):
                out.append(SilentJoin(fn, node, "event", node.target.value))
        elif isinstance(node, cst.Assign):
            names = [n for t in node.targets for n in _bound_names(t.target)]
            # `_, next_ev = self.pending_events[i + 1]`: the part named for an event is the record's event, the
            # other parts its other fields (a layer name, a step), no handle of their own
            named = [n for n in names if _HANDLE_NAME.search(n) or _EVENT_NAME.search(n)]
            for name in names:
                if name not in fn.all_params and name not in strings and not _host_handle(file, fn, node.value) and (
                        name in named or _event_container(node.value) and not named):
                    bound.setdefault(name, node)
    for name, binding in bound.items():
        if handled(fn.node.body, name):
            continue
        test = next((n for n in local_nodes(fn.node.body) if isinstance(n, (cst.If, cst.While))
                     and mentions_name(n.test, name)), None)
        out.append(SilentJoin(fn, test or binding, "event", name))
    return out[:1]


def _host_annotated(file: FileModel, fn: FunctionInfo, name: str) -> bool:
    """A parameter annotated with a class of a host-handle module (``cancel_event: Optional[threading.Event]``):
    whatever its name says, no device event or stream."""
    from streamlint.model.devobjects import param_annotation

    annotation = param_annotation(fn, name)
    return annotation is not None and any(isinstance(n, (cst.Name, cst.Attribute)) and apis.in_modules(
        file.resolve(n, fn) or "", apis.HOST_HANDLE_MODULES) for n in local_nodes(annotation))


def _host_module_call(file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression) -> bool:
    """A call of a host-handle module's function or class (``select.poll()``, ``os.eventfd(0)``)."""
    if not isinstance(expr, cst.Call):
        return False
    return apis.in_modules(file.resolve(expr.func, fn) or "", apis.HOST_HANDLE_MODULES)


def _host_handle(file: FileModel, fn: FunctionInfo, value: cst.BaseExpression) -> bool:
    """A value a host-handle object hands back: a call of such a module, or a method of a local bound to one
    (``poller = select.poll(); events = poller.poll(ms)``), a Python number or string: whatever its name says,
    no device event or stream."""
    if _host_module_call(file, fn, value) or isinstance(value, (cst.Integer, cst.Float, cst.SimpleString,
                                                                  cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in _SCALAR_BUILTINS:
        return True  # `last_event_count = len(client.events)`: a Python number or string, no handle
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "getattr" \
            and len(value.args) == 3 and (isinstance(value.args[2].value, (cst.Integer, cst.Float, cst.SimpleString))
                                          or isinstance(value.args[2].value, cst.Name)
                                          and value.args[2].value.value in ("True", "False")):
        return True  # `is_stream = getattr(req, "stream", False)`: a request's flag (no stream defaults to False)
    if isinstance(value, (cst.Comparison, cst.UnaryOperation)) and not isinstance(
            getattr(value, "operator", None), (cst.Minus, cst.Plus, cst.BitInvert)):
        return True  # `is_stream = not obj.stream`, `done = ev is None`: a Python bool
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and isinstance(value.func.value, cst.Name)):
        return False
    receiver = value.func.value.value
    return any(isinstance(n, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == receiver
                                                 for t in n.targets) and _host_module_call(file, fn, n.value)
               for n in local_nodes(fn.node.body))


def _class_streams(project: Project, file: FileModel, fn: FunctionInfo) -> list[SilentJoin]:
    """The class's streams another method leaves work on, that nothing in the project joins."""
    cls = file.classes.get(fn.class_name or "")
    if cls is None or cls.methods.get(fn.node.name.value) is not fn or fn.params[:1] != ("self",):
        return []
    from streamlint.model.flow.leaves import field_owner, stream_joined_elsewhere, stream_name
    from streamlint.model.flow.protocols import reached_outside

    for producer, stream, work in _left_in_flight(project, file, cls):
        if producer is fn or fn is not _join_step_for(cls, producer):
            continue
        name = stream_name(stream)
        if name is None or stream_joined_elsewhere(project, name, forks=False, field_of=field_owner(file, fn, stream),
                                                    scoped=True) \
                or reached_outside(project, file, cls, name):
            continue
        return [SilentJoin(fn, _end(fn), "class-stream", stream, producer, work)]
    return []


def _class_events(project: Project, file: FileModel, fn: FunctionInfo) -> list[SilentJoin]:
    """An event of the object that another method of the class records (``self.done.record(stream)``,
    ``self.done = s.record_event()``) and that nothing in the project waits on (no ``wait_event(X.done)``,
    ``X.done.wait()`` / ``synchronize()`` / ``query()`` / ``elapsed_time``), nor reaches from outside the
    object or hands on: the recorded work is joined by nobody, and the class's join step for that recorder
    (``wait_done`` for ``record_done``) is where the wait belongs, stub or not."""
    cls = file.classes.get(fn.class_name or "")
    if cls is None or cls.methods.get(fn.node.name.value) is not fn or fn.params[:1] != ("self",):
        return []
    from streamlint.model.flow.deadevents import recorded_on_joined_stream
    from streamlint.model.flow.protocols import reached_outside

    for recorder, field, node in _recorded_fields(file, cls):
        if recorder is fn or fn is not _join_step_for(cls, recorder, sole=True):
            continue
        if event_waited_elsewhere(project, field) or reached_outside(project, file, cls, field):
            continue
        if recorded_on_joined_stream(project, file, cls, recorder, node):
            continue  # a leftover event: other code joins the stream it marks (deadevents.py)
        fenced = _fenced_stream(file, recorder, node)
        if fenced is not None:  # a fork handle: its wait belongs right after the record, in the recorder
            return [SilentJoin(recorder, node, "class-event", f"self.{field}", recorder, node, fenced)]
        return [SilentJoin(fn, _end(fn), "class-event", f"self.{field}", recorder, node)]
    return []


_REMOVALS = ("pop", "clear", "setdefault")  # container calls that take an entry out or store one
_SIDE_STREAM = re.compile(r"\bself\.(\w*stream\w*)\b(?!\s*\()")


def _fenced_stream(file: FileModel, recorder: FunctionInfo, record: cst.CSTNode) -> str | None:
    """``self.begin_event.record(torch.cuda.current_stream())`` (or ``.record()``, the current stream too) in a
    method that also names a stream the object holds (``self.copy_stream``, the one it then queues work on):
    the event fences that side stream after the current stream's work, a fork whose wait belongs right after
    the record, in the recorder, rather than in a later join step."""
    if not (isinstance(record, cst.Call) and isinstance(record.func, cst.Attribute)
            and record.func.attr.value == "record"):
        return None
    if record.args and "current_stream(" not in file.code(record.args[0].value):
        return None
    site = next((c for c in recorder.calls if c.node is record), None)
    if site is None or site.scope is not None:  # inside a `with` (a stream scope: not the current stream)
        return None
    names = {m.group(1) for m in _SIDE_STREAM.finditer(file.code(recorder.node.body))}
    names.discard("current_stream")
    return f"self.{sorted(names)[0]}" if len(names) == 1 else None


def _recorded_fields(file: FileModel, cls: ClassInfo) -> list[tuple[FunctionInfo, str, cst.CSTNode]]:
    """(method, field, the record) for each ``self.<field>`` event a method of the class (not a join step, not
    the constructor) records on a stream (:func:`~streamlint.model.flow.pendingflags.recorded_fields`)."""
    from streamlint.model.flow.pendingflags import recorded_fields

    return recorded_fields(cls, is_join_step)


def event_waited_elsewhere(project: Project, name: str) -> bool:
    """Does any code of the project wait on (or otherwise consume) an event called ``name``: an argument of
    ``wait_event`` / ``elapsed_time`` or of any call other than a record, or the receiver of ``wait()`` /
    ``synchronize()`` / ``query()`` / ``elapsed_time()``? Past the caller-file bound the answer is yes."""
    from streamlint.model.flow.leaves import names_stream
    from streamlint.model.options import MAX_CALLER_FILES

    memo = derived(project, "event_waited_elsewhere")
    if name in memo:
        return memo[name]
    memo[name] = False
    paths = project.paths_containing((name.encode(),))
    if len(paths) > MAX_CALLER_FILES:
        memo[name] = True
        return True
    for model in filter(None, map(project.file, paths)):
        for other in model.iter_functions():
            if any(consumes_event(site, lambda e: names_stream(e, name)) for site in other.calls):
                memo[name] = True
                return True
    return memo[name]


def _join_step_for(cls: ClassInfo, producer: FunctionInfo, sole: bool = False) -> FunctionInfo | None:
    """The class's join step for ``producer``'s work: the one join step that calls it, else the one whose name
    shares the most words with it (``finish_grad_sync`` for ``start_grad_sync``), else (``sole``: for an event the
    producer records, which names the protocol) the class's only join step; None when that is not one."""
    steps = [m for m in cls.methods.values() if m is not producer and is_join_step(m) and m.params[:1] == ("self",)]
    calling = [m for m in steps if any(
        site.method == producer.node.name.value and isinstance(site.node.func, cst.Attribute)
        and isinstance(site.node.func.value, cst.Name) and site.node.func.value.value == "self" for site in m.calls)]
    if len(calling) == 1:
        return calling[0]
    if calling:
        steps = calling
    words = set(producer.node.name.value.lower().strip("_").split("_")) - JOIN_WORDS

    def shared(m: FunctionInfo) -> int:
        return len(words & set(m.node.name.value.lower().strip("_").split("_")))

    best = max((shared(m) for m in steps), default=0)
    top = [m for m in steps if shared(m) == best]
    if len(top) == 1 and best > 0:
        return top[0]
    # no word in common: for a recorded event, the class's only join step, when it joins nothing at all, is the one
    # its callers have for the work (``sync_before_backward`` for ``prefetch_activations``'s event); several, or
    # bare stream work: none
    # one that joins something else (other streams) is not the event's either
    if sole and len(steps) == 1 and not calling and not any(
            site.method in _PRIMITIVES or "wait" in (site.method or "") for site in steps[0].calls):
        return steps[0]
    return None


def _left_in_flight(project: Project, file: FileModel, cls: ClassInfo) -> list[tuple[FunctionInfo, str, cst.CSTNode]]:
    """(method, ``self.*`` stream, the work) for each method of the class that returns with work queued on a
    stream of the object that the current stream has not joined (on some exit path)."""
    memo = derived(project, "join_steps_in_flight")
    if id(cls) in memo:
        asked(project, "join_steps_in_flight", id(cls))
        return memo[id(cls)]
    memo[id(cls)] = []
    started(project, "join_steps_in_flight", id(cls))
    try:
        return _in_flight(project, file, cls, memo)
    finally:
        finished(project, "join_steps_in_flight", id(cls))


def _in_flight(project: Project, file: FileModel, cls: ClassInfo, memo: dict
               ) -> list[tuple[FunctionInfo, str, cst.CSTNode]]:
    from streamlint.model.flow.interp import run_producer
    from streamlint.model.paths import native_mode

    out: list[tuple[FunctionInfo, str, cst.CSTNode]] = []
    for m in cls.methods.values():
        if m.params[:1] != ("self",) or is_join_step(m) or not any(
                project.scope_use(file, site).roles() & apis.STREAM_SCOPE_ROLES for site in m.scopes):
            continue
        seen: set[str] = set()
        modes = project.execution_path(file, m).modes or {native_mode(file, m)}
        for mode in sorted(modes & {"cuda", "eager"}):
            interp = run_producer(project, file, m, mode)
            if interp is None:
                continue
            for st in interp.exits:
                know = st.know(MAIN)
                for stream, t in st.last_op.items():
                    if stream in seen or stream == MAIN or not stream.startswith("self.") or know.get(stream, -1) >= t:
                        continue
                    if any(snap.get(stream, -1) >= t for snap in st.events.values()):
                        continue  # an event recorded after the work is its join handle (whoever waits on it)
                    work = next((S.last_write.node for S in st.stores.values() if S.last_write is not None
                                 and S.last_write.stream == stream and S.last_write.node is not None), None)
                    if work is not None:
                        seen.add(stream)
                        out.append((m, stream, work))
            if seen:
                break
    memo[id(cls)] = out
    return out


def taken_events(project: Project, file: FileModel) -> list[SilentJoin]:
    """Functions of any kind (not join steps: :func:`silent_joins` judges those) that take an event out of an
    events container (``ev = registry.prefetch_event_map.get(rid)``) and then only test it (``if ev:
    ...``, no wait, not handed on, before the name is bound again), while other code of the project stores
    events it records into that container (``ev.record(h2d_stream); registry.prefetch_event_map[rid] = ev``)
    and no other code waits on one taken out of it: the protocol's one wait is lost, and the recorded work
    (a prefetch another op queued) is joined by nobody before this step goes on (SL201, medium)."""
    memo = derived(project, "taken_events")
    if id(file) not in memo:
        memo[id(file)] = [found for fn in file.iter_functions() if not is_join_step(fn)
                          for found in _taken_event(project, file, fn)[:1]]
    return memo[id(file)]


def _taken_event(project: Project, file: FileModel, fn: FunctionInfo) -> list[SilentJoin]:
    """The first event ``fn`` takes and only tests (see :func:`taken_events`). An event *popped* out of the container
    (``ev = self.ready.pop(k)``) is gone from it: the waits of other code that also only pops from it reached other
    entries, not this one, so they cover nothing here; and a popped event the function never names again (no test
    either) is dropped at the pop."""
    from streamlint.model.flow.escapes import field_stream_waiters

    for block, index, name, field in _event_takes(fn.node.body):
        rest = _until_rebound(block[index + 1:], name)
        popped = _pops(block[index]) and _only_removes(fn, field) and not _joins_itself(project, file, fn)
        # (a walk waiting every entry first, or a helper draining the stream: it joined this one)
        covered = [other for other in (*field_stream_waiters(project, field, ("wait_event", "wait", "synchronize")),
                                       *_takers(project, field))
                   if other.node is not fn.node and not (popped and _only_removes(other, field))]
        if any(handled(stmt, name) for stmt in rest) or covered or not _recorded_into(project, field):
            continue
        test = next((n for stmt in rest for n in local_nodes(stmt) if isinstance(n, (cst.If, cst.While))
                     and mentions_name(n.test, name)), None)
        if test is not None:
            return [SilentJoin(fn, test, "taken-event", name)]
        if popped and sum(isinstance(n, cst.Name) and n.value == name for n in local_nodes(fn.node.body)) == 1 \
                and not _evicts(fn, block[index]):
            return [SilentJoin(fn, block[index], "taken-event", name)]  # popped, and never named again
    return []


def _pops(stmt: cst.CSTNode) -> bool:
    """The take statement ``name = X.<field>.pop(k)``."""
    value = stmt.body[0].value if isinstance(stmt, cst.SimpleStatementLine) else None
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "pop"


def _joins_itself(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """``fn`` calls a join primitive, or a project function that does (one level: ``self._drain()`` running
    ``current_stream().wait_stream(self.side)``), or one named for joining."""
    for site in fn.calls:
        if site.method in _PRIMITIVES:
            return True
        found = project.call_target(file, site)
        if found is not None and (is_join_step(found[0]) or any(s.method in _PRIMITIVES for s in found[0].calls)):
            return True
    return False


def _evicts(fn: FunctionInfo, take: cst.CSTNode) -> bool:
    """``fn`` also throws away, under the same key, the entry of another container the event guards (``self.bufs.pop(k,
    None)`` as a statement, ``del self.bufs[k]``): an eviction dropping the data with its event, no step going on."""
    call = take.body[0].value
    key = node_code(call.args[0].value) if call.args else None
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call) and node.value is not call \
                and isinstance(node.value.func, cst.Attribute) and node.value.func.attr.value == "pop":
            args = node.value.args
        elif isinstance(node, cst.Del) and isinstance(node.target, cst.Subscript):
            args = [node.target.slice[0].slice] if isinstance(node.target.slice[0].slice, cst.Index) else []
        else:
            continue
        if args and key is not None and node_code(args[0].value) == key:
            return True
    return False


def _only_removes(fn: FunctionInfo, field: str) -> bool:
    """Every mention of ``.<field>`` in ``fn`` pops an entry, clears the container or stores one: it reaches no entry
    it leaves in place (no ``.get(k)``, no ``[k]`` read, no walk, no ``k in`` test). Nested definitions count;
    strings and comments do not."""
    nodes = list(descendants(fn.node.body))
    removing: set[int] = set()  # the `.<field>` nodes in a removing or storing position
    for n in nodes:
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _REMOVALS:
            removing.add(id(n.func.value))  # `X.<field>.pop(k)`, `.clear()`, `.setdefault(k, ev)`
        elif isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Subscript):
            removing.add(id(n.target.value))  # `X.<field>[k] = ev`
    return all(id(n) in removing for n in nodes if isinstance(n, cst.Attribute) and n.attr.value == field)


def _takers(project: Project, field: str) -> list[FunctionInfo]:
    """The functions of the project that take an event out of container ``field`` and wait on it or hand
    it on (``ev = X.<field>.get(k)`` ... ``finish(ev)``): the container's protocol is joined there."""
    memo = derived(project, "event_container_takers")
    if field not in memo:
        memo[field] = [fn for model in project.files_containing((field.encode(),)) for fn in model.iter_functions()
                       if any(f == field and any(handled(stmt, name) for stmt in _until_rebound(block[i + 1:], name))
                              for block, i, name, f in _event_takes(fn.node.body))]
    return memo[field]


def _event_takes(body: cst.CSTNode):
    """(statements, index, name, container field) for each ``name = <events container>.get(k)`` /
    ``name = X.events[k]`` statement of the function, with the block holding it."""
    for node in local_nodes(body):
        for block in _blocks(node):
            for index, stmt in enumerate(block):
                small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
                if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                        and isinstance(small.targets[0].target, cst.Name)):
                    continue
                name = small.targets[0].target.value
                field = _container_field(small.value)
                if field is not None and _EVENT_NAME.search(name):
                    yield block, index, name, field


def _blocks(node: cst.CSTNode) -> list[list]:
    return [list(node.body)] if isinstance(node, cst.IndentedBlock) else []


def _container_field(expr: cst.BaseExpression) -> str | None:
    """``X.<field>.get(k)`` / ``X.<field>[k]`` / ``X.<field>.pop(k)`` of an events container: its field."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("get", "pop"):
        expr = expr.func.value
    elif isinstance(expr, cst.Subscript):
        expr = expr.value
    else:
        return None
    if isinstance(expr, cst.Attribute) and _event_container(expr):
        return expr.attr.value
    return None


def _until_rebound(stmts: list, name: str) -> list:
    out = []
    for stmt in stmts:
        if any(isinstance(n, cst.Assign) and any(name in _bound_names(t.target) for t in n.targets)
               for n in local_nodes(stmt)):
            break
        out.append(stmt)
    return out


def _recorded_into(project: Project, field: str) -> bool:
    from streamlint.model.flow.leaves import names_stream

    """Does code of the project store an event it records into container ``field`` (``X.<field>[k] = ev``
    after ``ev.record(...)``, or of ``s.record_event()``, or of a project function returning an event it records:
    ``ev = self.arena.mark_upload(key, stream)``), or record the entry it stores (``X.<field>.setdefault(k,
    ev).record(stream)``)?"""
    memo = derived(project, "events_recorded_into")
    if field not in memo:
        memo[field] = False
        for model in project.files_containing((field.encode(),)):
            for fn in model.iter_functions():
                recorded = {dotted(site.node.func.value) for site in fn.calls
                            if site.method == "record" and isinstance(site.node.func, cst.Attribute)}
                if any(site.method == "record" and isinstance(site.node.func, cst.Attribute)
                       and isinstance(site.node.func.value, cst.Call) and _callee(site.node.func.value) == "setdefault"
                       and names_stream(site.node.func.value.func.value, field) for site in fn.calls):
                    memo[field] = True
                    return True
                for node in local_nodes(fn.node):
                    if isinstance(node, cst.Assign) and any(
                            isinstance(t.target, cst.Subscript) and names_stream(t.target.value, field)
                            for t in node.targets) and (
                            isinstance(node.value, cst.Name) and (node.value.value in recorded or all(
                                _returns_recorded(project, model, v) for v in fn.name_assigns.get(node.value.value)
                                or [None]))
                            or isinstance(node.value, cst.Call) and _callee(node.value) == "record_event"):
                        memo[field] = True
                        return True
    return memo[field]


def _returns_recorded(project: Project, model: FileModel, value: cst.BaseExpression | None) -> bool:
    """``value`` is ``s.record_event()``, or calls a project function every ``return`` of which hands back an event
    it recorded (``ev = torch.cuda.Event(); ev.record(stream); return ev``, ``return stream.record_event()``)."""
    if isinstance(value, cst.Call) and _callee(value) == "record_event":
        return True  # (``ev = side.record_event()``)
    site = model.call_site(value) if isinstance(value, cst.Call) else None
    found = project.call_target(model, site) if site is not None else None
    if found is None or not found[0].returns:
        return False
    callee = found[0]
    recorded = {site.node.func.value.value for site in callee.calls if site.method == "record"
                and isinstance(site.node.func, cst.Attribute) and isinstance(site.node.func.value, cst.Name)}
    return all(isinstance(r.value, cst.Name) and r.value.value in recorded
               or isinstance(r.value, cst.Call) and _callee(r.value) == "record_event" for r in callee.returns)


__all__ = ["SilentJoin", "handled", "is_join_step", "silent_joins", "taken_events"]
