"""Project context managers that capture a graph: a class whose ``__enter__`` starts a graph capture.

``torch.cuda.graph`` / ``torch.npu.graph`` are in the API table (Role.GRAPH_CAPTURE) and ``@contextmanager``
helpers around them are wrappers (:mod:`streamlint.model.wrappers`). A capture object with its own
``__enter__`` (a breakable or segmented capture, a capture with warm-up) is neither: ``with cap:`` has no
call to classify. Its ``__enter__`` is read instead (through the ``self`` methods it calls, a few levels
down):

* it enters ``torch.cuda.graph(...)`` (or calls a wrapper of it): the capture synchronises the device at
  entry, exactly as the API does -> ``"sync"``;
* it calls ``<graph>.capture_begin(...)`` itself: capture starts without any synchronisation -> ``"deferred"``.

In both cases the work queued inside the ``with`` is captured: it does not run there, it runs when the
graph is replayed (on the replaying stream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from streamlint._lazy import cst

from streamlint.model.apis import SPECS, Role
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo, ScopeSite
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.placement import host_source, host_target, non_blocking
from streamlint.model.streams import derived
from streamlint.model.syntax import contains, local_nodes, node_code, stub_body

if TYPE_CHECKING:
    from streamlint.model.project import Project

_CAPTURE_BEGIN = "capture_begin"  # torch.cuda.CUDAGraph.capture_begin / torch.npu.NPUGraph.capture_begin
_MAX_DEPTH = 3
# the graph parameter of the capture APIs (``torch.cuda.graph(cuda_graph, ...)``, ``torch.npu.graph(npu_graph, ...)``)
# and the plain ``graph=`` a project's own capture helper takes (``with capture_into(graph=self.graph):``)
_GRAPH_KEYWORDS = frozenset(p for spec in SPECS.values() if spec.role is Role.GRAPH_CAPTURE
                            for p in spec.params[:1]) | {"graph"}


def capture_kind(project: Project, file: FileModel, site: ScopeSite | None) -> str | None:
    """"sync" / "deferred" when the with-item enters a project capture object (see the module doc)."""
    if site is None:
        return None
    call = _constructor(site)
    cs = file.call_site(call) if call is not None else None
    if cs is not None and cs.target is None:
        return _annotated_capture(project, file, site.function, call)
    if cs is None or cs.target is None:
        return None
    found = project.symbol(cs.target, file)
    if found is None or not isinstance(found[0], ClassInfo):
        return None
    cls, mod = found
    memo = derived(project, "capture_kind")
    key = (mod.path, cls.name)
    if key not in memo:
        memo[key] = None  # (recursion guard)
        enter = cls.methods.get("__enter__")
        memo[key] = _enters_capture(project, mod, enter, 0) if enter is not None else None
    return memo[key]


def _annotated_capture(project: Project, file: FileModel, fn: FunctionInfo | None, call: cst.Call) -> str | None:
    """``"sync"`` when the with-item calls a method of a parameter annotated with a project class (``backend:
    GraphBackend`` ... ``with backend.capture(stream=s):``) and every project method that call can run is a
    ``@contextmanager`` entering ``torch.cuda.graph`` / ``torch.npu.graph`` (or a wrapper of it) before it
    yields: the class's own method, or, for a ``typing.Protocol`` whose method is a stub, the method of every
    project class providing all the protocol's methods (a device backend per platform). The capture API
    synchronises the device at entry, whichever backend runs. None otherwise (no implementation seen, or one
    that does something else)."""
    func = call.func
    if fn is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    recv = func.value.value
    if recv in ("self", "cls") or recv not in fn.all_params or recv in fn.name_assigns:
        return None
    params = (*fn.node.params.posonly_params, *fn.node.params.params, *fn.node.params.kwonly_params)
    ann = next((p.annotation for p in params if p.name.value == recv), None)
    if ann is None or not isinstance(ann.annotation, (cst.Name, cst.Attribute)):
        return None
    qual = file.resolve(ann.annotation, fn)
    found = project.symbol(qual, file) if qual is not None else None
    if found is None or not isinstance(found[0], ClassInfo):
        return None
    cls, mod = found
    memo = derived(project, "annotated_capture")
    key = (mod.path, cls.name, func.attr.value)
    if key not in memo:
        memo[key] = None  # (recursion guard)
        impls = _implementations(project, mod, cls, func.attr.value)
        memo[key] = "sync" if impls and all(_enters_graph_api(project, f, m) for m, f in impls) else None
    return memo[key]


def _implementations(project: Project, file: FileModel, cls: ClassInfo,
                     name: str) -> list[tuple[FunctionInfo, FileModel]]:
    """The project methods a call of ``name`` on a ``cls`` object can run: the class's own (not a stub), or,
    for a protocol, those of every project class defining all its methods (empty past a few files)."""
    own = cls.methods.get(name)
    if not any(b.rsplit(".", 1)[-1] == "Protocol" for b in cls.bases):
        return [(own, file)] if own is not None and not stub_body(own.node) else []
    if own is None:
        return []
    paths = set(project.paths_containing((f"def {name}(".encode(),)))
    for other_name in cls.methods:  # an implementation defines every method of the protocol: files defining all
        paths &= set(project.paths_containing((f"def {other_name}(".encode(),)))
    if len(paths) > MAX_CALLER_FILES:  # common names: too many files to parse; not followed
        return []
    out = []
    for path in sorted(paths):
        model = project.file(path)
        for other in (model.classes.values() if model is not None else ()):
            if other is cls or name not in other.methods or not all(m in other.methods for m in cls.methods):
                continue
            if not stub_body(other.methods[name].node) and _conforms(own, other.methods[name]):
                out.append((other.methods[name], model))
    return out


def _conforms(protocol: FunctionInfo, candidate: FunctionInfo) -> bool:
    """Can ``candidate`` be called as the protocol method is declared: does the protocol name every parameter
    the candidate requires (no default, past ``self``)? A class that merely shares the method names with other
    parameters (``capture(self, model, static_input, *, stream)`` against ``capture(self, *, pool, stream)``)
    is no implementation of the protocol, whatever its body does."""
    declared = {p.name.value for p in _parameters(protocol.node)}
    params = candidate.node.params
    positional = [*params.posonly_params, *params.params][1:]  # past `self`
    own = protocol.node.params
    if isinstance(own.star_kwarg, cst.Param) or isinstance(own.star_arg, cst.Param):
        return True  # (``capture(self, **options)``: the protocol takes any parameter the candidate requires)
    required = [p for p in (*positional, *params.kwonly_params) if p.default is None]
    return all(p.name.value in declared for p in required)


def _parameters(node: cst.FunctionDef) -> list[cst.Param]:
    params = node.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def _enters_graph_api(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Is ``fn`` a ``@contextmanager`` whose only ``yield`` is inside ``with torch.cuda.graph(...):`` on every
    path (the ``with`` a statement of its body, or of ``with`` / ``try`` blocks there: not ``nullcontext() if
    eager else torch.cuda.graph(...)``, not under an ``if``)?"""
    if not any(d.rsplit(".", 1)[-1] == "contextmanager" for d in fn.decorators):
        return False
    yields = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.Yield)]
    if len(yields) != 1:
        return False
    stack: list = list(fn.node.body.body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, cst.With):
            if contains(stmt.body, yields[0]) and any(
                    _capture_value(project, file, fn, item.item) or _exit_stack_enters(project, file, fn, stmt, item,
                                                                                     yields[0])
                    for item in stmt.items):
                return True
            stack.extend(stmt.body.body)
        elif isinstance(stmt, cst.Try):
            stack.extend(stmt.body.body)
    return False


def _capture_value(project: Project, file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression) -> bool:
    """Is ``expr`` a graph capture context: ``torch.cuda.graph(g)`` itself, or a local bound once to one
    (``capture = torch.npu.graph(npu_graph=g, **kwargs)`` ... ``with capture:``)?"""
    if isinstance(expr, cst.Name):
        values = fn.name_assigns.get(expr.value, [])
        expr = values[0] if len(values) == 1 else expr
    site = file.call_site(expr) if isinstance(expr, cst.Call) else None
    return site is not None and any(u.role is Role.GRAPH_CAPTURE for u in project.api_uses(file, site))


def _exit_stack_enters(project: Project, file: FileModel, fn: FunctionInfo, stmt: cst.With, item: cst.WithItem,
                       yield_: cst.Yield) -> bool:
    """``with ExitStack() as stack:`` around the yield whose body enters a capture context into the stack
    (``stack.enter_context(capture)``) before the yield, unconditionally (a statement of its body or of ``with``
    blocks there): the stack keeps the capture open until it exits, after the yield."""
    call = item.item
    if not (isinstance(call, cst.Call) and (dotted(call.func) or "").rsplit(".", 1)[-1] == "ExitStack"
            and item.asname is not None and isinstance(item.asname.name, cst.Name)):
        return False
    name = item.asname.name.value

    def before(stmts: Sequence[cst.CSTNode]) -> bool:
        for s in stmts:
            if isinstance(s, cst.With):
                if before(s.body.body):
                    return True
                if contains(s, yield_):
                    return False
                continue
            if contains(s, yield_):
                return False
            if isinstance(s, cst.SimpleStatementLine) and any(
                    isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
                    and isinstance(small.value.func, cst.Attribute) and small.value.func.attr.value == "enter_context"
                    and isinstance(small.value.func.value, cst.Name) and small.value.func.value.value == name
                    and small.value.args and _capture_value(project, file, fn, small.value.args[0].value)
                    for small in s.body):
                return True
        return False

    return before(stmt.body.body)


def _constructor(site: ScopeSite) -> cst.Call | None:
    """The call that built the with-item's object: ``with Cap(...):`` or ``cap = Cap(...)`` ... ``with cap:``
    (a local bound once in the function)."""
    item = site.item.item
    if isinstance(item, cst.Call):
        return item
    fn = site.function
    if isinstance(item, cst.Name) and fn is not None:
        values = fn.name_assigns.get(item.value, [])
        if len(values) == 1 and isinstance(values[0], cst.Call):
            return values[0]
    return None


def _enters_capture(project: Project, file: FileModel, fn: FunctionInfo, depth: int) -> str | None:
    found: str | None = None
    for site in fn.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == _CAPTURE_BEGIN:
            found = found or "deferred"
            continue
        if any(u.role is Role.GRAPH_CAPTURE for u in project.api_uses(file, site)):
            return "sync"
        if depth < _MAX_DEPTH and fn.class_name is not None and site.target is not None \
                and site.target.startswith(f"{file.module_name}.{fn.class_name}."):
            target = project.call_target(file, site)
            if target is not None and target[0] is not fn:
                inner = _enters_capture(project, target[1], target[0], depth + 1)
                if inner == "sync":
                    return inner
                found = found or inner
    return found


def captured_host_outputs(project: Project, file: FileModel, fn: FunctionInfo, graph: str) -> tuple[str, ...]:
    """The host buffers the graph ``graph`` (a replay receiver's code: ``self.graph``, ``g``) copies its results
    into: the pinned destinations of the asynchronous device-to-host copies queued inside its capture
    (``with torch.cuda.graph(graph):`` / a capture object / ``graph.capture_begin()`` .. ``capture_end()``, in
    this function or, for a graph held on ``self``, in any method of the class; through ``self`` methods the
    capture calls, a level down). A replay re-runs those copies on the replaying stream: after it the host
    buffers are pending until a host synchronisation covers the replay (``Replays.replay``), as after an
    eager ``pinned.copy_(x, non_blocking=True)``. Memoised per class (or function) and graph."""
    cls = file.classes.get(fn.class_name or "") if graph.startswith("self.") else None
    owner = cls.methods.values() if cls is not None else [fn]
    memo = derived(project, "captured_host_outputs")
    key = (file.path, cls.name if cls is not None else fn.qualname, graph)
    if key not in memo:
        found: dict[str, None] = {}
        for method in owner:
            for region in _capture_regions(project, file, method, graph):
                for node, where in _region_nodes(file, cls, method, region):
                    dest = _host_copy_destination(node, where, cls)
                    if dest is not None:
                        found[dest] = None
        memo[key] = tuple(found)
    return memo[key]


def _capture_regions(project: Project, file: FileModel, fn: FunctionInfo, graph: str) -> list[cst.CSTNode]:
    """The statements a function captures into ``graph``: the body of a capture ``with`` naming it, the
    statements between ``graph.capture_begin()`` and ``graph.capture_end()``."""
    out: list[cst.CSTNode] = []
    for site in fn.scopes:
        for call in site.calls:
            cs = file.call_site(call)
            if cs is None or not (any(u.role is Role.GRAPH_CAPTURE for u in project.api_uses(file, cs))
                                  or capture_kind(project, file, site) is not None):
                continue
            named = [a.value for a in call.args if a.keyword is None][:1] + [
                a.value for a in call.args if a.keyword is not None and a.keyword.value in _GRAPH_KEYWORDS]
            if any(file.code(x) == graph for x in named):
                out.append(site.with_node.body)
    begins = [s.node for s in fn.calls if s.method == "capture_begin" and _receiver(file, s.node) == graph]
    ends = [s.node for s in fn.calls if s.method == "capture_end" and _receiver(file, s.node) == graph]
    if begins and ends:
        start, stop = file.span(begins[0]).start_line, file.span(ends[-1]).start_line
        out += [stmt for stmt in _statements(fn.node.body) if start < file.span(stmt).start_line < stop]
    return out


def _receiver(file: FileModel, call: cst.Call) -> str | None:
    return file.code(call.func.value) if isinstance(call.func, cst.Attribute) else None


def _statements(node: cst.CSTNode):
    """Every simple statement under ``node`` (not in nested functions or classes)."""
    for n in local_nodes(node):
        if isinstance(n, cst.SimpleStatementLine):
            yield n


def _region_nodes(file: FileModel, cls: ClassInfo | None, fn: FunctionInfo, region: cst.CSTNode):
    """The nodes of a capture region with the function they are in: its own, and those of the ``self``
    methods it calls (a level down)."""
    seen = {id(fn)}
    for node in local_nodes(region):
        yield node, fn
        if cls is None or not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute) \
                or not isinstance(node.func.value, cst.Name) or node.func.value.value != "self":
            continue
        method = cls.methods.get(node.func.attr.value)
        if method is not None and id(method) not in seen:
            seen.add(id(method))
            for inner in local_nodes(method.node.body):
                yield inner, method


def _host_copy_destination(node: cst.CSTNode, fn: FunctionInfo, cls: ClassInfo | None) -> str | None:
    """``self.out_cpu.copy_(y, non_blocking=True)`` with a host-placed destination (every assignment of it
    host memory: ``torch.empty(..., device="cpu", pin_memory=True)``), or ``self.out_cpu =
    y.to("cpu", non_blocking=True)``: the destination's code."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "copy_" \
            and non_blocking(node) and host_source(node.func.value, fn, cls):
        return node_code(node.func.value)
    if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call) \
            and isinstance(node.value.func, cst.Attribute) and non_blocking(node.value) \
            and host_target(node.value, node.value.func.attr.value):
        target = node.targets[0].target
        if isinstance(target, (cst.Name, cst.Attribute)):
            return node_code(target)
    return None

