"""Transfer engines as readers of device memory outside every stream (the host side of SL201).

A transfer engine (Mooncake's ``TransferEngine.batch_transfer_sync_write``, a store's ``batch_put_from``, ...:
the API table's ``TRANSFER_ENGINE_SEND_METHODS``) is handed raw addresses or buffers and reads that memory by
DMA / RDMA as soon as the host calls it. No stream orders that read: device work still queued on the stream
that writes the memory runs concurrently with the engine. Only a host synchronisation of the producing stream
(``stream.synchronize()``, an event's ``synchronize()``, a device-wide ``synchronize()``, a blocking transfer:
``st.host``, see :mod:`orderings`) before the send orders it. So a send is a host consumer:

- of work this function (or a helper it inlines) queued on a side stream and the host has not synchronised
  (a resharding copy into the send buffer on ``resharding_stream``): SL201 at the send, the side-stream work as
  the related location (medium: which addresses the engine reads is not traced);
- of the work queued before the function on the current stream (the model's KV cache writes, another thread's
  forward) when nothing on this path synchronises the host before the send, and the class's own code shows that
  its sends need one (a method of the class, or of a sibling class sharing its project base, sends after a host
  synchronisation: :func:`class_syncs_before_sends`), unless a host synchronisation precedes the send in the
  function's text under a lone ``if`` or in every arm of an ``if`` / ``elif`` chain
  (:func:`sync_may_precede`: the code synchronises under conditions it knows, once per layer, per expected
  case): medium, the producer is presumed.

A call of a project function that sends (a store wrapper's ``put_batch`` calling
``batch_put_from_multi_buffers``, two levels deep: :func:`sends_through`) is a send. Reported at the send in
the function that lost its synchronisation; sends of inlined helpers are reported in their own function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.apis import TRANSFER_ENGINE_SEND_METHODS
from streamlint.model.flow.results import HostRead
from streamlint.model.flow.values import EVal, State, TVal
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.streams import MAIN, derived
from streamlint.model.syntax import local_nodes

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project


def sends_through(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> str | None:
    """The engine method a project function sends with (directly or through its helpers, two levels down),
    None if it sends nothing (memoised per function)."""
    memo = derived(project, "engine_sends")
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = None  # recursion guard
    found = None
    for site in fn.calls:
        if site.method in TRANSFER_ENGINE_SEND_METHODS:
            found = site.method
            break
    if found is None and _depth < 2:
        for site in fn.calls:
            if site.method is None or not site.method.startswith(("put", "send", "transfer", "write", "batch")):
                continue  # (only calls named like a send are followed: the scan stays cheap)
            target = project.call_target(file, site)
            if target is not None and target[0] is not fn:
                found = sends_through(project, target[1], target[0], _depth + 1)
                if found is not None:
                    break
    memo[id(fn)] = found
    return found


def send_method(project: Project, file: FileModel, site) -> str | None:
    """The engine send a call site makes: the engine method itself or a project wrapper that sends."""
    if site is None or site.method is None:
        return None
    if site.method in TRANSFER_ENGINE_SEND_METHODS:
        return site.method
    if not site.method.startswith(("put", "send", "transfer", "write", "batch")):
        return None
    target = project.call_target(file, site)
    if target is not None:
        return sends_through(project, target[1], target[0])
    recv = site.node.func.value if isinstance(site.node.func, cst.Attribute) else None
    if not site.method.startswith(("put", "transfer")) or not isinstance(recv, cst.Attribute) \
            or not isinstance(recv.value, cst.Name) or recv.value.value != "self" or site.function is None \
            or _constructed(project, file, site.function.class_name, recv.attr.value):
        return None  # (a field built from a library class, ``queue.Queue()``: not a project wrapper)
    # ``self.store.put_batch(...)`` on a field the project cannot type (``put*`` / ``transfer*`` names only: the
    # search is project-wide, memoised per name): the project's methods of that name, when every one sends
    methods = _methods_named(project, site.method)
    sent = [sends_through(project, mod, fn) for fn, mod in methods]
    return sent[0] if sent and all(sent) else None


def _constructed(project: Project, file: FileModel, class_name: str | None, attr: str) -> bool:
    """Is ``self.<attr>`` bound to a constructor call in the class or one of its bases (then its type is that
    constructor's, known or not)?"""
    cls, mod = file.classes.get(class_name or ""), file
    for _ in range(4):
        if cls is None:
            return False
        if attr in cls.raw_attr_types:
            return True
        sym = project.symbol(cls.bases[0], mod) if len(cls.bases) == 1 and cls.bases[0] else None
        cls, mod = (sym[0], sym[1]) if sym is not None and hasattr(sym[0], "raw_attr_types") else (None, mod)
    return False


def _methods_named(project: Project, name: str) -> list:
    """The project's methods called ``name`` (memoised per name; none when too many files define one)."""
    memo = derived(project, "methods_named")
    if name in memo:
        return memo[name]
    marker = (f"def {name}(".encode(),)
    paths = project.paths_containing(marker)
    found = []
    if len(paths) <= MAX_CALLER_FILES:
        for model in filter(None, map(project.file, paths)):
            found.extend((fn, model) for fn in model.functions.values()
                         if fn.class_name is not None and fn.node.name.value == name)
    memo[name] = found
    return found


def _host_sync(site) -> bool:
    name = site.method or (site.target or "").rsplit(".", 1)[-1]
    return name == "synchronize"


def _related_classes(project: Project, file: FileModel, class_name: str | None) -> set[str]:
    """The class and the classes of ``file`` that share a project base class with it (sibling senders)."""
    cls = file.classes.get(class_name or "")
    if cls is None:
        return set()
    mine = {b for b in cls.bases if b and project.symbol(b, file) is not None}
    return {name for name, other in file.classes.items()
            if name == class_name or mine & {b for b in other.bases if b}}


def class_syncs_before_sends(project: Project, file: FileModel, class_name: str | None) -> bool:
    """Does a method of the class (or of a sibling class of the file: same project base) synchronise the host
    before an engine send (in source order)? Then the class's sends read memory device work writes (memoised)."""
    memo = derived(project, "class_syncs_before_sends")
    key = (file.path, class_name)
    if key in memo:
        return memo[key]
    memo[key] = False
    related = _related_classes(project, file, class_name)
    for fn in file.functions.values():
        if fn.class_name not in related:
            continue
        syncs = [file.span(s.node).start_line for s in fn.calls if _host_sync(s)]
        if syncs and any(send_method(project, file, s) is not None and file.span(s.node).start_line > min(syncs)
                         for s in fn.calls):
            memo[key] = True
            break
    return memo[key]


def sync_may_precede(file: FileModel, fn: FunctionInfo, send: cst.CSTNode) -> bool:
    """Does a host synchronisation precede ``send`` in the function's text on a path the code chose to skip
    it on? A synchronisation under a lone ``if`` (``if layer != self.current_layer: stream.synchronize()``:
    once per layer) or in an ``if`` / ``elif`` chain each arm of which synchronises (``if ratio == 1: ...
    elif ratio > 1: ...``: the cases the code expects) is the code's own condition; a chain with an arm that
    does not synchronise, or another arm of an ``if`` whose arm holds the send, is no such sync."""
    line = file.span(send).start_line
    syncs = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
             and n.func.attr.value == "synchronize" and file.span(n).start_line < line]
    if not syncs:
        return False
    nested = {id(n.orelse) for n in local_nodes(fn.node.body) if isinstance(n, cst.If)}
    chains: list[list[cst.CSTNode]] = []  # the arms of each `if` / `elif` / `else` chain
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.If) and id(node) not in nested:
            arms: list[cst.CSTNode] = []
            chain: cst.CSTNode | None = node
            while isinstance(chain, cst.If):
                arms.append(chain.body)
                chain = chain.orelse
            if isinstance(chain, cst.Else):
                arms.append(chain.body)
            chains.append(arms)

    def inside(inner: cst.CSTNode, outer: cst.CSTNode) -> bool:
        return any(n is inner for n in local_nodes(outer))

    def syncs_in(arm: cst.CSTNode) -> bool:
        return any(inside(x, arm) for x in syncs)

    for sync in syncs:
        holding = [(arms, arm) for arms in chains for arm in arms if inside(sync, arm)]
        if not holding:
            return True  # unconditional
        arms, arm = max(holding, key=lambda h: file.span(h[1]).start_line)  # the innermost chain
        if any(inside(send, other) for other in arms if other is not arm):
            continue  # exclusive with the send
        if len(arms) == 1 or all(syncs_in(other) for other in arms):
            return True
    return False


class TransferSends:
    """Engine sends as host consumers of device work (mixin of the interpreter).

    Interp state it uses: ``anchor``, ``cfg``, ``cfile``, ``depth``, ``host_reads``, ``op_sites``, ``project``."""

    def engine_send(self, st: State, e: cst.Call, site) -> None:
        if self.cfg.mode not in ("eager", "cuda") or self.depth != 0 or self.anchor is None:
            return
        method = send_method(self.project, self.cfile, site)
        if method is None:
            return
        if isinstance(e.func, cst.Attribute) and isinstance(e.func.value, cst.Name) \
                and isinstance(st.env.get(e.func.value.value), (TVal, EVal)):
            return  # a tensor's or an event's method
        if id(self.anchor) in self.host_reads:
            return
        label = self.cfile.code(e.func)
        for stream, last in st.work.items():
            if stream == MAIN or stream.startswith("<") or st.host.get(stream, -1) >= last:
                continue
            run = next((r for r in reversed(st.runs) if r.stream == stream), None)
            node = run.node if run is not None else next((n for t, n in self.op_sites.get(stream, ()) if t <= last),
                                                         None)
            self.host_reads[id(self.anchor)] = HostRead(self.anchor, label, stream, node, method, self.cfg.mode,
                                                        "engine")
            return
        if MAIN not in st.host and class_syncs_before_sends(self.project, self.cfile, self.cfn.class_name) \
                and not sync_may_precede(self.cfile, self.cfn, e):
            self.host_reads[id(self.anchor)] = HostRead(self.anchor, label, MAIN, None, method, self.cfg.mode,
                                                        "engine")
