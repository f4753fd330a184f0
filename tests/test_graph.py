"""`streamlint graph`: the structure of the emitted Mermaid / DOT / HTML (not pixels)."""

import functools
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import FIXTURES, engine_for
from streamlint.cli import main
from streamlint.graph import build_graph, render, select_functions

SL101_FILE = FIXTURES / "rules" / "sl101_graph_break.py"
MLA_PROJECT = FIXTURES / "projects" / "sl1_mla_attention"


@functools.lru_cache(maxsize=None)
def _graph(root: Path, path: Path, qualname: str, single: bool = True):
    engine = engine_for(root, [str(path)] if single else None)
    report = engine.lint_file(str(path))
    model = engine.parse(str(path)).model
    engine.project.add(model)
    functions = select_functions(model, qualname)
    assert functions, qualname
    return build_graph(engine.project, model, functions, report.findings)


def _node_for_line(graph, line: int):
    return next(n for n in graph.nodes if n.line == line)


def _cluster_chain(graph, node):
    parents = {c.id: c for c in graph.clusters}
    chain = []
    current = node.cluster
    while current is not None:
        chain.append(parents[current])
        current = parents[current].parent
    return chain


def test_model_groups_statements_by_stream_scope():
    graph = _graph(SL101_FILE.parent, SL101_FILE, "DeepseekV3MoE.forward")
    before = _node_for_line(graph, 71)  # print before the scope
    inside = _node_for_line(graph, 80)  # print inside npu_stream_switch("moe_shared")
    after = _node_for_line(graph, 83)
    assert [c.kind for c in _cluster_chain(graph, before)] == ["function"]
    assert [c.kind for c in _cluster_chain(graph, after)] == ["function"]
    chain = _cluster_chain(graph, inside)
    assert chain[0].kind == "stream" and 'npu_stream_switch("moe_shared")' in chain[0].label
    assert inside.stream == '"moe_shared"' and before.stream == "current"
    # findings in red: the lines SL101 reports, and not the clean ones around them
    assert any(msg.startswith("SL101") for msg in inside.findings)
    assert not any(msg.startswith("SL101") for msg in before.findings + after.findings)
    # the npu_wait_tensor is a wait node with a wait edge from the producer of its dependency
    wait = _node_for_line(graph, 78)
    assert wait.kind == "wait"
    producer = _node_for_line(graph, 72)
    assert any(e.kind == "wait" and e.src == producer.id and e.dst == wait.id for e in graph.edges)
    # a value produced on the side stream and read after the scope: a cross-stream data edge
    shared = _node_for_line(graph, 79)
    ret = _node_for_line(graph, 84)
    assert any(e.kind == "data" and e.src == shared.id and e.dst == ret.id and e.label == "join: shared_out"
               for e in graph.edges)


def test_nested_scopes_and_multi_item_with():
    graph = _graph(SL101_FILE.parent, SL101_FILE, "DualScopeDecoder.forward")
    k_log = _node_for_line(graph, 232)
    kinds = [c.kind for c in _cluster_chain(graph, k_log)]
    assert kinds == ["stream", "scope", "function"]  # npu_stream_switch inside limit_core_num (`with a, b:`)
    nested = _node_for_line(graph, 239)
    labels = [c.label for c in _cluster_chain(graph, nested)]
    assert "limit_core_num" in labels[0] and 'npu_stream_switch("outer")' in labels[1]
    assert nested.stream == '"outer"'  # the core limit keeps the enclosing stream


def test_mermaid_structure():
    graph = _graph(SL101_FILE.parent, SL101_FILE, "DeepseekV3MoE.forward")
    text = render(graph, "mermaid")
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    opened = [ln for ln in lines if ln.strip().startswith("subgraph ")]
    assert len(opened) == len([ln for ln in lines if ln.strip() == "end"])
    inside = _node_for_line(graph, 80)
    # the node is declared between its subgraph's header and its `end`
    start = next(i for i, ln in enumerate(lines) if "subgraph" in ln and "moe_shared" in ln)
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == "end")
    assert any(ln.strip().startswith(f"{inside.id}[") for ln in lines[start:end])
    finding_line = next(ln for ln in lines if ln.strip().startswith("class ") and ln.strip().endswith("finding;"))
    assert inside.id in re.split(r"[ ,;]", finding_line)
    assert re.search(r'n\d+ ==>\|"waits for router_logits"\| n\d+', text)
    assert '"' not in "".join(ln.split('["', 1)[1].rsplit('"]', 1)[0] for ln in lines if '["' in ln)


def test_dot_structure():
    graph = _graph(SL101_FILE.parent, SL101_FILE, "DeepseekV3MoE.forward")
    text = render(graph, "dot")
    assert text.startswith("digraph streamlint {") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    assert "subgraph cluster_" in text
    inside = _node_for_line(graph, 80)
    node_line = next(ln for ln in text.splitlines() if ln.strip().startswith(f"{inside.id} ["))
    assert "color=red" in node_line and "SL101" in node_line
    clean = _node_for_line(graph, 72)
    assert "color=red" not in next(ln for ln in text.splitlines() if ln.strip().startswith(f"{clean.id} ["))


def test_html_is_self_contained():
    graph = _graph(SL101_FILE.parent, SL101_FILE, "DeepseekV3MoE.forward")
    text = render(graph, "html")
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text and "http://" not in text and "https://" not in text
    inside = _node_for_line(graph, 80)
    assert re.search(rf'<div class="stmt [a-z]+ finding" id="{inside.id}">', text)
    assert "Cross-stream edges" in text and "flowchart TD" in text  # Mermaid source embedded


def test_tagged_event_edge_across_modules():
    path = MLA_PROJECT / "models" / "decoder.py"
    graph = _graph(MLA_PROJECT, path, "DeepseekDecoderLayer.forward", single=False)
    record = _node_for_line(graph, 51)
    wait = _node_for_line(graph, 54)
    assert record.kind == "record" and wait.kind == "wait"
    assert any(e.kind == "event" and e.src == record.id and e.dst == wait.id for e in graph.edges)
    assert any(m.startswith("SL101") for m in _node_for_line(graph, 50).findings)


def test_native_event_and_wrapper_scopes():
    path = FIXTURES / "projects" / "sl1_npugraph_ex_decode" / "models" / "qwen3_moe.py"
    graph = _graph(path.parent.parent, path, "Qwen3MoeSparseBlock.forward", single=False)
    side = _cluster_chain(graph, _node_for_line(graph, 46))[0]
    assert side.kind == "stream" and "side_stream" in side.label  # project wrapper around torch.npu.stream
    core = _cluster_chain(graph, _node_for_line(graph, 52))[0]
    assert core.kind == "scope" and "limit_core_num" in core.label
    record, wait = _node_for_line(graph, 48), _node_for_line(graph, 64)
    assert any(e.kind == "event" and e.src == record.id and e.dst == wait.id for e in graph.edges)


def test_select_functions_without_qualname():
    engine = engine_for(SL101_FILE.parent, [str(SL101_FILE)])
    model = engine.parse(str(SL101_FILE)).model
    names = {f.qualname for f in select_functions(model, None)}
    assert "DeepseekV3MoE.forward" in names and "SharedExpertMLP.forward" not in names
    assert [f.qualname for f in select_functions(model, "rollback")] == ["EagleDraftVerifier.rollback"]


@pytest.fixture
def small_project(tmp_path):
    """A copy of the SL101 fixture in its own directory (the CLI lints the project around the file)."""
    target = tmp_path / "model.py"
    shutil.copy(SL101_FILE, target)
    return target


@pytest.mark.parametrize("fmt,head", [("mermaid", "flowchart TD"), ("dot", "digraph"), ("html", "<!DOCTYPE html>")])
def test_cli(small_project, tmp_path, fmt, head):
    out = tmp_path / f"graph.{fmt}"
    result = CliRunner().invoke(
        main, ["graph", f"{small_project}::EagleDraftVerifier.forward", "--isolated", "--format", fmt, "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert text.startswith(head) and "spec_verify" in text


def test_cli_stdout(small_project):
    result = CliRunner().invoke(main, ["graph", f"{small_project}::rollback", "--isolated"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("flowchart TD") and "spec_rollback" in result.output


def test_cli_errors(small_project, tmp_path):
    result = CliRunner().invoke(main, ["graph", f"{small_project}::NoSuchFunction", "--isolated"])
    assert result.exit_code == 2 and "no function" in result.output
    result = CliRunner().invoke(main, ["graph", str(tmp_path / "missing.py")])
    assert result.exit_code == 2
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["graph", str(broken)])
    assert result.exit_code == 2
