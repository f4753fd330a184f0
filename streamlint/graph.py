"""`streamlint graph FILE[::QUALNAME]`: a function's stream structure as Mermaid, DOT or HTML.

The graph is built from the semantic model (the same one the rules read): statements in program order,
grouped into the stream scopes that enclose them (``npu_stream_switch``, ``torch.npu.stream``,
``limit_core_num``, ``super_kernel`` … — also through project wrappers), waits and records
(``npu_wait_tensor``, ``torchair.ops.wait``, tagged events, ``Event.record/wait``, ``wait_stream``,
``wait_event``), cross-stream edges (a value produced on one stream and read on another, an event
recorded on one stream and waited on another, the producer a wait depends on), and the lines carrying
findings (the file is linted with the configured rules) in red.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from typing import Iterable

from streamlint._lazy import cst

from streamlint.finding import Finding
from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.breaks import describe_scope
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.project import Project
from streamlint.model.syntax import local_nodes
from streamlint.model.walk import children

FORMATS = ("mermaid", "dot", "html")
_SCOPE_ROLES = apis.STREAM_SCOPE_ROLES | apis.NO_BREAK_SCOPE_ROLES | {Role.GRAPH_CAPTURE}
_WAIT_ROLES = {Role.WAIT_TENSOR, Role.OPS_WAIT, Role.TAGGED_EVENT_WAIT}
_RECORD_ROLES = {Role.OPS_RECORD, Role.TAGGED_EVENT_RECORD}
_MAX_LABEL = 70


@dataclass(frozen=True)
class GNode:
    id: str
    line: int
    end_line: int
    label: str
    kind: str  # "stmt" | "control" | "wait" | "record"
    cluster: str | None
    stream: str
    findings: tuple[str, ...] = ()


@dataclass(frozen=True)
class GCluster:
    id: str
    label: str
    parent: str | None
    kind: str  # "function" | "stream" | "scope" (core limit, SuperKernel, other TorchAir) | "capture"
    stream: str


@dataclass(frozen=True)
class GEdge:
    src: str
    dst: str
    kind: str  # "seq" | "data" (label "fork: x" / "join: x" / "cross: x") | "wait" | "event"
    label: str = ""


@dataclass
class StreamGraph:
    path: str
    title: str
    nodes: list[GNode] = field(default_factory=list)
    clusters: list[GCluster] = field(default_factory=list)
    edges: list[GEdge] = field(default_factory=list)

    def node(self, node_id: str) -> GNode:
        return next(n for n in self.nodes if n.id == node_id)

    @property
    def finding_nodes(self) -> list[GNode]:
        return [n for n in self.nodes if n.findings]


# ------------------------------------------------------------------------------------------ building


def select_functions(file: FileModel, qualname: str | None) -> list[FunctionInfo]:
    """Functions named by QUALNAME (exact, or a trailing component), or — without one — every function
    with a stream scope or a wait."""
    functions = list(file.functions.values())
    if qualname:
        exact = [f for f in functions if f.qualname == qualname]
        if exact:
            return exact
        return [f for f in functions if f.qualname.endswith("." + qualname)]
    return [f for f in functions if f.scopes or any(c.method in ("wait_stream", "wait_event", "wait")
                                                    for c in f.calls)]


def build_graph(project: Project, file: FileModel, functions: Iterable[FunctionInfo],
                findings: Iterable[Finding] = ()) -> StreamGraph:
    graph = StreamGraph(file.path, os.path.basename(file.path))
    by_line: dict[int, list[str]] = {}
    for f in findings:
        if os.path.abspath(f.path) == os.path.abspath(file.path):
            by_line.setdefault(f.span.start_line, []).append(f"{f.code} {f.message}")
    for fn in functions:
        _Builder(project, file, fn, graph, by_line).run()
    return graph


class _Builder:
    def __init__(self, project: Project, file: FileModel, fn: FunctionInfo, graph: StreamGraph,
                 findings: dict[int, list[str]]) -> None:
        self.project = project
        self.file = file
        self.fn = fn
        self.g = graph
        self.findings = findings
        self.sites = {id(s.item): s for s in fn.scopes}
        self.calls = {id(c.node): c for c in fn.calls}
        self.defs: dict[str, GNode] = {}  # name -> node of its latest assignment (program order)
        self.last_on_stream: dict[str, GNode] = {}
        self.records: dict[str, GNode] = {}  # event expression -> node recording it
        self.prev: GNode | None = None
        self._pending_record: str | None = None
        self.fid = f"f{len([c for c in graph.clusters if c.kind == 'function'])}"

    def run(self) -> None:
        self.g.clusters.append(GCluster(self.fid, f"{self.fn.qualname} (L{self.file.span(self.fn.node).start_line})",
                                        None, "function", "current"))
        self.suite(self.fn.node.body, self.fid, "current")

    # ---- structure
    def suite(self, suite: cst.BaseSuite, cluster: str, stream: str) -> None:
        if isinstance(suite, cst.IndentedBlock):
            for stmt in suite.body:
                self.stmt(stmt, cluster, stream)
        else:
            self.leaf(suite, suite, cluster, stream)

    def stmt(self, stmt: cst.CSTNode, cluster: str, stream: str) -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            self.leaf(stmt, stmt, cluster, stream)
        elif isinstance(stmt, cst.If):
            self.header(stmt, f"if {self._code(stmt.test)}:", stmt.test, cluster, stream)
            self.suite(stmt.body, cluster, stream)
            orelse = stmt.orelse
            while orelse is not None:
                if isinstance(orelse, cst.If):
                    self.header(orelse, f"elif {self._code(orelse.test)}:", orelse.test, cluster, stream)
                    self.suite(orelse.body, cluster, stream)
                    orelse = orelse.orelse
                else:
                    self.suite(orelse.body, cluster, stream)
                    orelse = None
        elif isinstance(stmt, (cst.For, cst.While)):
            head = (f"for {self._code(stmt.target)} in {self._code(stmt.iter)}:" if isinstance(stmt, cst.For)
                    else f"while {self._code(stmt.test)}:")
            self.header(stmt, head, stmt.iter if isinstance(stmt, cst.For) else stmt.test, cluster, stream)
            self.suite(stmt.body, cluster, stream)
        elif isinstance(stmt, cst.With):
            self.with_(stmt, cluster, stream)
        elif isinstance(stmt, cst.Try):
            self.header(stmt, "try:", None, cluster, stream)
            self.suite(stmt.body, cluster, stream)
            for handler in stmt.handlers:
                self.suite(handler.body, cluster, stream)
            if stmt.finalbody is not None:
                self.suite(stmt.finalbody.body, cluster, stream)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            kind = "def" if isinstance(stmt, cst.FunctionDef) else "class"
            self.header(stmt, f"{kind} {stmt.name.value}", None, cluster, stream)
        else:
            self.header(stmt, self._code(stmt).splitlines()[0] if self._code(stmt) else "", None, cluster, stream)

    def with_(self, stmt: cst.With, cluster: str, stream: str) -> None:
        for item in stmt.items:
            site = self.sites.get(id(item))
            scope = self.project.scope_use(self.file, site) if site is not None else None
            roles = scope.roles() if scope is not None else set()
            if scope is None or not roles & _SCOPE_ROLES:
                self.header(stmt, f"with {self._code(item.item)}:", item.item, cluster, stream)
                continue
            new_stream = stream
            kind = "scope"
            switch = next((u for u in scope.uses if u.role in apis.STREAM_SCOPE_ROLES), None)
            if switch is not None:
                arg = switch.value("stream_tag" if switch.role is Role.STREAM_SWITCH else "stream")
                new_stream = self._code(arg) if arg is not None else "?"
                kind = "stream"
            elif Role.GRAPH_CAPTURE in roles:
                kind = "capture"
            line = self.file.span(item).start_line
            cid = f"{self.fid}c{len(self.g.clusters)}"
            label = f"{describe_scope(scope).replace('`', '')} L{line}"
            self.g.clusters.append(GCluster(cid, label, cluster, kind, new_stream))
            # the context manager expression is evaluated on the enclosing stream
            self._scan_refs(None, item.item)
            cluster, stream = cid, new_stream
        self.suite(stmt.body, cluster, stream)

    # ---- nodes
    def header(self, stmt: cst.CSTNode, text: str, expr: cst.CSTNode | None, cluster: str, stream: str) -> None:
        line = self.file.span(stmt).start_line
        node = self._add(line, line, text, "control", cluster, stream)
        if expr is not None:
            self._scan_refs(node, expr)

    def leaf(self, stmt: cst.CSTNode, body: cst.CSTNode, cluster: str, stream: str) -> None:
        span = self.file.span(stmt)
        smalls = getattr(body, "body", None)
        if isinstance(smalls, (list, tuple)) and smalls and not isinstance(smalls[0], cst.BaseCompoundStatement):
            text = "; ".join(" ".join(self._code(small).strip().rstrip(";").split()) for small in smalls)
        else:
            text = " ".join(self._code(body).strip().split())
        kind, extra = self._classify(body)
        node = self._add(span.start_line, span.end_line, text, kind, cluster, stream)
        ordered = {(src.id, node.id) for _, src, _ in extra if src is not None}
        self._scan_refs(node, body, skip=ordered)
        for edge_kind, src, label in extra:
            if src is not None and src.id != node.id:
                self.g.edges.append(GEdge(src.id, node.id, edge_kind, label))
        self._scan_defs(node, body)

    def _add(self, line: int, end_line: int, text: str, kind: str, cluster: str, stream: str) -> GNode:
        label = f"L{line} {text}"
        if len(label) > _MAX_LABEL:
            label = label[: _MAX_LABEL - 1] + "…"
        found: list[str] = []
        for ln in range(line, (end_line if kind != "control" else line) + 1):
            found.extend(self.findings.get(ln, ()))
        node = GNode(f"n{len(self.g.nodes)}", line, end_line, label, kind, cluster, stream, tuple(found))
        self.g.nodes.append(node)
        if self.prev is not None:
            self.g.edges.append(GEdge(self.prev.id, node.id, "seq"))
        self.prev = node
        self.last_on_stream[stream] = node
        return node

    # ---- edges
    def _classify(self, body: cst.CSTNode) -> tuple[str, list[tuple[str, GNode | None, str]]]:
        kind = "stmt"
        extra: list[tuple[str, GNode | None, str]] = []
        for call in _calls_in(body):
            site = self.calls.get(id(call))
            if site is None:
                continue
            uses = self.project.api_uses(self.file, site)
            roles = {u.role for u in uses}
            if roles & _WAIT_ROLES:
                kind = "wait"
                for use in uses:
                    if use.role is Role.WAIT_TENSOR:
                        dep = use.value("dependency")
                        name = dotted(dep) if dep is not None else None
                        if name:
                            extra.append(("wait", self.defs.get(name), f"waits for {name}"))
                    elif use.role is Role.OPS_WAIT:
                        tensors = use.value("tensors")
                        for el in getattr(tensors, "elements", ()):
                            name = dotted(el.value)
                            if name:
                                extra.append(("wait", self.defs.get(name), f"waits for {name}"))
                    elif use.role is Role.TAGGED_EVENT_WAIT:
                        ev = use.value("event")
                        key = self._code(ev) if ev is not None else ""
                        extra.append(("event", self.records.get(key), f"event {key}"))
            elif roles & _RECORD_ROLES:
                kind = "record"
                for use in uses:
                    if use.role is Role.TAGGED_EVENT_RECORD:
                        ev = use.value("event")
                        if ev is not None:
                            self._pending_record = self._code(ev)
            elif site.method in ("record", "record_event") and site.receiver is not None and not roles:
                kind = "record"
                self._pending_record = self._code(site.receiver)
            elif site.method in ("wait", "wait_event", "wait_stream") and site.receiver is not None:
                kind = "wait"
                if site.method == "wait":
                    key = self._code(site.receiver)
                    extra.append(("event", self.records.get(key), f"event {key}"))
                elif site.node.args:
                    key = self._code(site.node.args[0].value)
                    if site.method == "wait_event":
                        extra.append(("event", self.records.get(key), f"event {key}"))
                    else:
                        src = self._last_on_stream_named(key)
                        extra.append(("wait", src, f"wait_stream({key})"))
        return kind, extra

    def _last_on_stream_named(self, key: str) -> GNode | None:
        return self.last_on_stream.get(key)

    def _scan_refs(self, node: GNode | None, expr: cst.CSTNode, skip: set[tuple[str, str]] = frozenset()) -> None:
        """Data edges: a name read here whose latest assignment ran on another stream."""
        if node is None:
            return
        seen: set[str] = set()
        for name in _names_read(expr):
            src = self.defs.get(name)
            if src is None or src.stream == node.stream or name in seen or src.id == node.id \
                    or (src.id, node.id) in skip:
                continue
            seen.add(name)
            role = "fork" if src.stream == "current" else "join" if node.stream == "current" else "cross"
            self.g.edges.append(GEdge(src.id, node.id, "data", f"{role}: {name}"))

    def _scan_defs(self, node: GNode, body: cst.CSTNode) -> None:
        for name in _names_written(body):
            self.defs[name] = node
        if self._pending_record:
            self.records[self._pending_record] = node
            self._pending_record = None

    def _code(self, node: cst.CSTNode | None) -> str:
        if node is None:
            return ""
        try:
            return " ".join(self.file.code(node).split())
        except Exception:  # noqa: BLE001 - nodes built outside the module
            return cst.Module([]).code_for_node(node)


def _calls_in(node: cst.CSTNode) -> list[cst.Call]:
    return [n for n in local_nodes(node) if isinstance(n, cst.Call)]


def _names_read(node: cst.CSTNode) -> list[str]:
    out: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and n is not node:
            continue
        if isinstance(n, cst.Assign):
            stack.append(n.value)
            continue
        if isinstance(n, cst.AnnAssign):
            if n.value is not None:
                stack.append(n.value)
            continue
        if isinstance(n, cst.Attribute):
            name = dotted(n)
            if name and name.startswith("self."):
                out.append(".".join(name.split(".")[:2]))
            stack.append(n.value)
            continue
        if isinstance(n, cst.Call):
            stack.extend(a.value for a in n.args)
            if isinstance(n.func, cst.Attribute):
                stack.append(n.func.value)
            continue
        if isinstance(n, cst.Name):
            out.append(n.value)
            continue
        stack.extend(reversed(children(n)))
    return out


def _names_written(node: cst.CSTNode) -> list[str]:
    out: list[str] = []

    def target(t: cst.BaseExpression) -> None:
        if isinstance(t, cst.Name):
            out.append(t.value)
        elif isinstance(t, (cst.Tuple, cst.List)):
            for el in t.elements:
                target(el.value)
        elif isinstance(t, cst.StarredElement):
            target(t.value)
        elif isinstance(t, cst.Attribute):
            name = dotted(t)
            if name and name.startswith("self.") and name.count(".") == 1:
                out.append(name)

    for n in local_nodes(node):
        if isinstance(n, cst.Assign):
            for t in n.targets:
                target(t.target)
        elif isinstance(n, (cst.AnnAssign, cst.AugAssign)):
            target(n.target)
    # in-place tensor methods (x.add_(), x.copy_()) write their receiver
    for call in _calls_in(node):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value.endswith("_") \
                and not call.func.attr.value.startswith("_"):
            name = dotted(call.func.value)
            if name and "." not in name:
                out.append(name)
    return out


# ------------------------------------------------------------------------------------------ rendering


def render(graph: StreamGraph, fmt: str) -> str:
    if fmt == "mermaid":
        return render_mermaid(graph)
    if fmt == "dot":
        return render_dot(graph)
    if fmt == "html":
        return render_html(graph)
    raise ValueError(f"unknown graph format {fmt!r} (choose from {', '.join(FORMATS)})")


def _children(graph: StreamGraph, parent: str | None) -> tuple[list[GCluster], list[GNode]]:
    return ([c for c in graph.clusters if c.parent == parent], [n for n in graph.nodes if n.cluster == parent])


def _mermaid_text(text: str) -> str:
    text = text.replace("#", "#35;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
    return text.replace("|", "#124;").replace("`", "#96;")


_EDGE_MERMAID = {"seq": "-->", "data": "-.->", "wait": "==>", "event": "==>"}


def render_mermaid(graph: StreamGraph) -> str:
    lines = ["flowchart TD", f"  %% streamlint graph of {graph.title}"]

    def emit(cluster: GCluster, depth: int) -> None:
        pad = "  " * depth
        lines.append(f'{pad}subgraph {cluster.id}["{_mermaid_text(cluster.label)}"]')
        lines.append(f"{pad}  direction TB")
        sub, nodes = _children(graph, cluster.id)
        for node in nodes:
            lines.append(f'{pad}  {node.id}["{_mermaid_text(node.label)}"]')
        for child in sub:
            emit(child, depth + 1)
        lines.append(f"{pad}end")

    top, loose = _children(graph, None)
    for node in loose:
        lines.append(f'  {node.id}["{_mermaid_text(node.label)}"]')
    for cluster in top:
        emit(cluster, 1)
    for edge in graph.edges:
        arrow = _EDGE_MERMAID.get(edge.kind, "-->")
        label = f'|"{_mermaid_text(edge.label)}"|' if edge.label else ""
        lines.append(f"  {edge.src} {arrow}{label} {edge.dst}")
    lines += [
        "  classDef finding fill:#fde2e2,stroke:#d00000,stroke-width:2px,color:#900000;",
        "  classDef wait fill:#e8f0fe,stroke:#1a56db;",
        "  classDef record fill:#e6f4ea,stroke:#137333;",
        "  classDef control fill:#f5f5f5,stroke:#888888;",
    ]
    for kind in ("wait", "record", "control"):
        ids = [n.id for n in graph.nodes if n.kind == kind and not n.findings]
        if ids:
            lines.append(f"  class {','.join(ids)} {kind};")
    bad = [n.id for n in graph.finding_nodes]
    if bad:
        lines.append(f"  class {','.join(bad)} finding;")
    for cluster in graph.clusters:
        if cluster.kind == "stream":
            lines.append(f"  style {cluster.id} fill:#eef6ff,stroke:#1a56db;")
        elif cluster.kind in ("scope", "capture"):
            lines.append(f"  style {cluster.id} fill:#fff8e6,stroke:#b7791f;")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


_EDGE_DOT = {
    "seq": "",
    "data": ' [style=dashed, color="#6b7280"',
    "wait": ' [style=bold, color="#1a56db"',
    "event": ' [style=bold, color="#137333"',
}


def render_dot(graph: StreamGraph) -> str:
    lines = [
        "digraph streamlint {",
        f'  label="{_dot_text("streamlint graph of " + graph.title)}";',
        "  rankdir=TB;",
        '  node [shape=box, fontname="monospace", fontsize=10];',
    ]

    def node_line(node: GNode, pad: str) -> str:
        attrs = [f'label="{_dot_text(node.label)}"']
        if node.findings:
            tip = "\n".join(node.findings)
            attrs += ["color=red", "fontcolor=red", "penwidth=2", f'tooltip="{_dot_text(tip)}"']
        elif node.kind == "wait":
            attrs += ['color="#1a56db"']
        elif node.kind == "record":
            attrs += ['color="#137333"']
        elif node.kind == "control":
            attrs += ["style=rounded"]
        return f"{pad}{node.id} [{', '.join(attrs)}];"

    def emit(cluster: GCluster, depth: int) -> None:
        pad = "  " * depth
        lines.append(f"{pad}subgraph cluster_{cluster.id} {{")
        lines.append(f'{pad}  label="{_dot_text(cluster.label)}";')
        color = {"stream": "#1a56db", "scope": "#b7791f", "capture": "#b7791f"}.get(cluster.kind, "#888888")
        lines.append(f'{pad}  style=rounded; color="{color}";')
        sub, nodes = _children(graph, cluster.id)
        for node in nodes:
            lines.append(node_line(node, pad + "  "))
        for child in sub:
            emit(child, depth + 1)
        lines.append(f"{pad}}}")

    top, loose = _children(graph, None)
    for node in loose:
        lines.append(node_line(node, "  "))
    for cluster in top:
        emit(cluster, 1)
    for edge in graph.edges:
        style = _EDGE_DOT.get(edge.kind, "")
        if edge.label:
            style = (style + ", " if style else " [") + f'label="{_dot_text(edge.label)}"'
        lines.append(f"  {edge.src} -> {edge.dst}{style + ']' if style else ''};")
    lines.append("}")
    return "\n".join(lines) + "\n"


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#1f2937}
h1{font-size:1.2em} code,pre{font-family:ui-monospace,monospace;font-size:.85em}
.cluster{border:1px solid #9ca3af;border-radius:6px;padding:.4em .6em;margin:.4em 0 .4em 1em}
.cluster.function{border-color:#374151;margin-left:0}
.cluster.stream{background:#eef6ff;border-color:#1a56db}
.cluster.scope,.cluster.capture{background:#fff8e6;border-color:#b7791f}
.cluster>.title{font-weight:600;font-size:.85em;margin-bottom:.3em}
.stmt{padding:.1em .3em;border-left:3px solid transparent;white-space:pre-wrap}
.stmt.wait{border-left-color:#1a56db}.stmt.record{border-left-color:#137333}.stmt.control{color:#6b7280}
.stmt.finding{background:#fde2e2;border-left-color:#d00000;color:#900000}
.finding-msg{color:#d00000;font-size:.8em;margin-left:2em}
.stream-tag{color:#6b7280;font-size:.75em;margin-left:.5em}
table{border-collapse:collapse;font-size:.85em} td,th{border:1px solid #d1d5db;padding:.2em .5em}
"""


def render_html(graph: StreamGraph) -> str:
    esc = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>streamlint graph: {esc(graph.title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>streamlint graph of <code>{esc(graph.path)}</code></h1>",
    ]

    def node_html(node: GNode) -> None:
        classes = " ".join(["stmt", node.kind] + (["finding"] if node.findings else []))
        out.append(f'<div class="{classes}" id="{node.id}"><code>{esc(node.label)}</code>'
                   f'<span class="stream-tag">stream: {esc(node.stream)}</span></div>')
        for msg in node.findings:
            out.append(f'<div class="finding-msg">{esc(msg)}</div>')

    def emit(cluster: GCluster) -> None:
        out.append(f'<div class="cluster {cluster.kind}" id="{cluster.id}">'
                   f'<div class="title">{esc(cluster.label)}</div>')
        # keep program order: interleave nodes and sub-clusters by first line
        sub, nodes = _children(graph, cluster.id)
        items: list[tuple[int, int, object]] = [(n.line, i, n) for i, n in enumerate(nodes)]
        for j, c in enumerate(sub):
            first = min((n.line for n in graph.nodes if _inside(graph, n, c.id)), default=10 ** 9)
            items.append((first, 10 ** 6 + j, c))
        for _, _, item in sorted(items, key=lambda t: (t[0], t[1])):
            if isinstance(item, GNode):
                node_html(item)
            else:
                emit(item)  # type: ignore[arg-type]
        out.append("</div>")

    top, loose = _children(graph, None)
    for node in loose:
        node_html(node)
    for cluster in top:
        emit(cluster)
    cross = [e for e in graph.edges if e.kind != "seq"]
    if cross:
        out.append("<h2>Cross-stream edges</h2><table><tr><th>from</th><th>to</th><th>kind</th><th>what</th></tr>")
        for e in cross:
            out.append(f"<tr><td>{esc(graph.node(e.src).label)}</td><td>{esc(graph.node(e.dst).label)}</td>"
                       f"<td>{esc(e.kind)}</td><td>{esc(e.label)}</td></tr>")
        out.append("</table>")
    out.append("<details><summary>Mermaid source</summary><pre>")
    out.append(esc(render_mermaid(graph)))
    out.append("</pre></details></body></html>")
    return "\n".join(out) + "\n"


def _inside(graph: StreamGraph, node: GNode, cluster_id: str) -> bool:
    parents = {c.id: c.parent for c in graph.clusters}
    current = node.cluster
    while current is not None:
        if current == cluster_id:
            return True
        current = parents.get(current)
    return False


def run_graph(target: str, fmt: str = "mermaid", config_file: str | None = None, isolated: bool = False) -> str:
    """Lint FILE with the configured rules and render the stream graph of QUALNAME (or of every
    function with a stream scope or wait). Raises ValueError with a user-facing message."""
    from pathlib import Path

    from streamlint.config import ConfigError, load_settings
    from streamlint.engine import Engine
    from streamlint.registry import RegistryError, load_registry

    path, qualname = split_target(target)
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such file")
    try:
        registry = load_registry()  # installed packs only: the configuration's `plugins` imports nothing
        settings = load_settings(registry, Path(path).absolute(), Path(config_file) if config_file else None,
                                 isolated)
    except (ConfigError, RegistryError) as exc:
        raise ValueError(str(exc)) from None
    engine = Engine(settings, registry)
    parsed = engine.parse(os.path.abspath(path))
    model = parsed.model
    if model is None:
        reason = parsed.failure.message if parsed.failure is not None else "cannot parse"
        raise ValueError(f"{path}: {reason}")
    functions = select_functions(model, qualname)
    if not functions:
        names = ", ".join(sorted(model.functions)) or "(none)"
        what = f"no function {qualname!r}" if qualname else "no function with a stream scope or wait"
        raise ValueError(f"{path}: {what}; functions: {names}")
    report = engine.lint_file(os.path.abspath(path))
    engine.project.add(model)
    graph = build_graph(engine.project, model, functions, report.findings)
    return render(graph, fmt)


def split_target(target: str) -> tuple[str, str | None]:
    """``FILE::QUALNAME`` → (FILE, QUALNAME)."""
    if "::" in target:
        path, _, qualname = target.partition("::")
        return path, qualname or None
    return target, None


__all__ = ["FORMATS", "GCluster", "GEdge", "GNode", "StreamGraph", "build_graph", "render", "render_dot",
           "render_html", "render_mermaid", "run_graph", "select_functions", "split_target"]

