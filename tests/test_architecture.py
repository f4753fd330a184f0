"""The package's import graph has no cycle, and the semantic model never imports the layers above it.

Every import counts: module level, inside functions (lazy imports) and under ``if TYPE_CHECKING:``
(a type-only import still says which module knows about which, and a cycle there is a cycle in the
design). Built with ``ast`` over ``streamlint/`` and ``rules/``; nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("streamlint", "rules")


def _modules(root: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the project modules it imports (``from a import b`` counts ``a`` and, when it is a
    module, ``a.b``)."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
            else:
                continue
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for succ in edges:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_cycle_finder_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_import_graph_reads_relative_and_lazy_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "streamlint"
    pkg.mkdir()
    (tmp_path / "rules").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from streamlint.a import f\n")
    graph = import_graph(tmp_path)
    assert graph["streamlint.a"] == {"streamlint", "streamlint.b"}
    assert graph["streamlint.b"] == {"streamlint.a"}
    assert cycles(graph) == [["streamlint.a", "streamlint.b"]]


def test_no_import_cycle_in_the_package() -> None:
    assert cycles(import_graph()) == []


def test_the_model_imports_no_layer_above_it() -> None:
    """The model reads its options as a ModelOptions value: never the CLI's settings, the engine or
    the rule machinery."""
    above = {"streamlint.config", "streamlint.registry", "streamlint.rule", "streamlint.engine", "streamlint.cli",
             "streamlint.parallel", "streamlint.cache", "streamlint.lsp", "streamlint.graph"}
    graph = import_graph()
    leaks = {m: sorted(graph[m] & above) for m in graph if m.startswith("streamlint.model") and graph[m] & above}
    assert leaks == {}


def test_no_model_file_is_longer_than_one_sitting() -> None:
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "streamlint" / "model").rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 700}
    assert long == {}


def _string_parts(path: Path) -> list[tuple[int, str]]:
    """Every string literal and f-string text part of a file, with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
    return found


def test_stream_keys_are_built_in_one_module() -> None:
    """Stream identity (``tag:<tag>``, ``tag?:<code>``, the entry stream) is spelled out only in
    model/streams.py; every other module asks it (scope_stream_key, tagged_stream_key, MAIN)."""
    spelled = [f"{p.relative_to(ROOT)}:{line}" for p in sorted((ROOT / "streamlint" / "model").rglob("*.py"))
               if p.name != "streams.py"
               for line, text in _string_parts(p) if text.startswith(("tag:", "tag?:", "<main>", "<unknown stream>"))]
    assert spelled == []


def test_tensor_typing_lives_in_one_module() -> None:
    """Only model/tensors.py defines what is a tensor: no other model module defines a tensor-typing
    class or function (TensorTyper, *is_tensor*, *returns_tensor*, param kinds)."""
    found = []
    for path in sorted((ROOT / "streamlint" / "model").rglob("*.py")):
        if path.name == "tensors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and (
                    "tensor" in node.name.lower() and ("is_" in node.name or "returns" in node.name
                                                       or "typer" in node.name.lower() or "kind" in node.name)
                    or node.name in ("param_kinds", "tensor_method", "_tensor_op_target")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert found == []


# The layers of streamlint/model (see streamlint/model/__init__.py): a module may import its own layer
# and the layers below, never one above.
LAYERS = {
    1: {"apis", "file", "uses", "syntax", "walk", "positions", "options", "lifetimes", "summary", "bytescan",
        "placement", "modpaths", "hostguards", "hostpools", "wordindex", "tensornames", "release", "compilecalls", "filefacts",
        "hostannotations", "paramrefs", "slotpools", "stepchains"},
    2: {"project", "projectscans", "paths", "compile", "wrappers", "queries", "streams", "entries", "accelerators", "captures", "stepstate",
        "attrstreams", "devobjects", "devfields", "heldhandles", "heldslots", "eventguards", "hostobjects", "hostresults",
        "freeing", "ctxfactories", "argkinds", "devicenames", "handedevents", "reaching", "modvalues",
        "streamjoins", "waithelpers", "streamviews"},
    3: {"tensors", "tensorvocab", "tensoruse", "dataflow", "flow", "breaks", "waits", "families", "scopes", "environment",
        "recorders", "handoffs", "hostattrs", "dataswaps", "paramjoins", "slotevents", "calleekinds", "opaqueparams"},
}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] != ["streamlint", "model"] or len(parts) < 3:
        return None
    return next((n for n, names in LAYERS.items() if parts[2] in names), None)


def test_every_model_module_has_a_layer() -> None:
    unplaced = [m for m in import_graph() if m.startswith("streamlint.model.") and _layer(m) is None]
    assert unplaced == []


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {t}" for m, targets in graph.items() if _layer(m) is not None
                  for t in targets if _layer(t) is not None and _layer(t) > _layer(m))


def test_upward_import_is_seen() -> None:
    graph = {"streamlint.model.file": {"streamlint.model.apis", "streamlint.model.flow.values"},
             "streamlint.model.flow.values": {"streamlint.model.streams"}}
    assert upward_imports(graph) == ["streamlint.model.file -> streamlint.model.flow.values"]


def test_model_imports_point_down_the_layers() -> None:
    assert upward_imports(import_graph()) == []
