"""Work SL201's runs and facts repeated for the same answer, done once (issue 15: the language-server rows).

Each shortcut must answer exactly what the longer way answers:
- the loop syntax the interpreter reads at each round of a loop on each path (``indexsets.cover_candidates``,
  ``elements.element_use``) is kept per node;
- each class of a module asks who constructs it of every call site of the modules spelling ``Name(`` (its own
  module always does: ``class Name(``): the sites are indexed by their target's last name once per model;
- ``paths.native_mode`` scans the module's calls once per module, not once per function;
- ``Storage.clone`` copies every slot without building the lists ``__init__`` builds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import FIXTURES, engine_for, lint_paths
from streamlint._lazy import cst
from streamlint.discovery import discover
from streamlint.model import handedevents, paths
from streamlint.model.flow import elements, indexsets
from streamlint.model.flow.values import Access, Storage
from streamlint.model.syntax import _NODE_MEMO

LOOP_FIXTURES = sorted((FIXTURES / "rules").glob("sl201_*loop*.py")) + sorted(
    (FIXTURES / "rules").glob("sl201_*element*.py")) + sorted((FIXTURES / "rules").glob("sl201_*index*.py"))

# an expert loop run in several rounds and on several paths (`if mask.any()` splits each round)
MOE = '''
import torch
from torch import nn


class Experts(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(8, 8) for _ in range(n))
        self.streams = [torch.npu.Stream() for _ in range(n)]
        self.order = [0, 1, 2, 3]

    def forward(self, x, ids):
        out = torch.zeros_like(x)
        for k in range(2):
            for e, expert in enumerate(self.experts):
                mask = ids[..., k] == e
                if mask.any():
                    out[mask] += expert(x[mask])
        for i in range(len(self.order)):
            with torch.npu.stream(self.streams[self.order[i]]):
                out = out * 2
        for i in self.order:
            torch.npu.current_stream().wait_stream(self.streams[i])
        return out
'''


def _loops(path: Path) -> list[cst.For]:
    module = cst.parse_module(path.read_text(encoding="utf-8"))
    found: list[cst.For] = []

    class Loops(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            found.append(node)

    module.visit(Loops())
    return found


def _old_cover(node: cst.For) -> list:
    if indexsets._leaves(node):
        return []
    return [(n, c, h) for n, c, h in indexsets.covering_parts(node)
            if indexsets._picks_stream(node.body, n, c if h == "index" else None)]


def _key(findings) -> list:
    return sorted((Path(f.path).name, f.span.start_line, f.span.start_col, f.code, f.message, str(f.confidence))
                  for f in findings)


def test_loop_syntax_answers_equal_the_plain_walks():
    assert LOOP_FIXTURES
    loops = [loop for path in LOOP_FIXTURES for loop in _loops(path)]
    assert len(loops) > 20
    for loop in loops:
        assert indexsets.cover_candidates(loop) == _old_cover(loop)
        names = [n.value for n in cst.ensure_type(loop, cst.For).target.children if isinstance(n, cst.Name)] \
            if not isinstance(loop.target, cst.Name) else [loop.target.value]
        for name in names:
            for producing in (False, True):
                assert elements.element_use(loop.body, name, producing) == \
                    elements._element_use(loop.body, name, producing)
                assert elements.element_use(loop.body, name, producing) == \
                    elements._element_use(loop.body, name, producing)  # (the kept answer)


def test_loop_syntax_walked_once_per_loop(tmp_path, monkeypatch):
    path = tmp_path / "experts.py"
    path.write_text(MOE, encoding="utf-8")
    walked: list[int] = []
    leaves = indexsets._leaves

    def counting(node):
        walked.append(id(node))
        return leaves(node)

    monkeypatch.setattr(indexsets, "_leaves", counting)
    _NODE_MEMO.clear()
    lint_paths(tmp_path, [str(path)], [str(path)])
    assert walked, "the loops were not run"
    assert len(walked) == len(set(walked)), "a loop's syntax was walked again at a later round or path"


@pytest.mark.parametrize("path", LOOP_FIXTURES[::2], ids=lambda p: p.name)
def test_findings_equal_without_the_kept_answers(path, monkeypatch):
    kept = _key(lint_paths(path.parent, [str(path)], [str(path)]))
    monkeypatch.setattr(indexsets, "node_memo", lambda kind, node, compute: compute(node))
    monkeypatch.setattr(elements, "node_memo", lambda kind, node, compute: compute(node))
    assert _key(lint_paths(path.parent, [str(path)], [str(path)])) == kept


def _plain_constructions(project, model0, cls) -> list:
    """handedevents.constructions as the plain scan of every site of every module spelling ``Name(``."""
    order = handedevents._positional_order(project, model0, cls)
    out = []
    for model in project.files_containing((f"{cls.name}(".encode(),),
                                          keep=lambda p: project.may_resolve_call(p, cls.name)):
        for fn, site in handedevents._sites(model):
            if site.target is None or site.target.rsplit(".", 1)[-1] != cls.name:
                continue
            found = project.symbol(site.target, model)
            if found is None or found[0] is not cls:
                continue
            out.append((model, fn, site.node, handedevents._mapped(site.node, order)))
    return out


def test_constructions_equal_the_plain_scan_and_index_each_model_once(monkeypatch):
    projects = sorted(p for p in (FIXTURES / "projects").iterdir() if p.is_dir()
                      and any(b"@dataclass" in f.read_bytes() or b"NamedTuple" in f.read_bytes()
                              for f in p.rglob("*.py")))[:12]
    assert len(projects) >= 5
    scans: list[tuple[str, str]] = []
    sites = handedevents._sites

    def counting(model):
        scans.append((str(root), model.path))
        return sites(model)

    asked = 0
    for root in projects:
        files = [str(f) for f in discover([str(root)], root).files]
        engine = engine_for(root)
        project = engine.project
        models = [m for m in (project.file(f) for f in files) if m is not None]
        for model in models:
            for cls in model.classes.values():
                expected = _plain_constructions(project, model, cls)
                monkeypatch.setattr(handedevents, "_sites", counting)
                got = handedevents.constructions(project, model, cls)
                monkeypatch.setattr(handedevents, "_sites", sites)
                assert [(m.path, f, n, g) for m, f, n, g in got] == [(m.path, f, n, g) for m, f, n, g in expected]
                asked += 1
    assert asked > 20
    assert len(scans) == len(set(scans)), "a module's call sites were scanned again for another class"


def _old_native_mode(file, fn) -> str:
    for sites in (fn.calls, file.calls):
        targets = [site.target or "" for site in sites]
        if any(t.startswith(("torch.npu.", "torch_npu.", "torchair.")) for t in targets):
            return "eager"
        if any(t.startswith(("torch.cuda.", "torch.xpu.")) for t in targets):
            return "cuda"
    return "eager"


def test_native_mode_equals_the_plain_scan_once_per_module():
    checked = 0
    for path in sorted((FIXTURES / "rules").glob("*.py"))[::3]:
        engine = engine_for(path.parent, [str(path)])
        model = engine.project.file(str(path))
        if model is None:
            continue
        for fn in model.functions.values():
            assert paths.native_mode(model, fn) == _old_native_mode(model, fn), (path.name, fn.qualname)
            checked += 1
        if model.functions:
            assert "_native_mode" in model.__dict__ or all(paths._named_mode(f.calls) for f in model.functions.values())
    assert checked > 200


def test_storage_clone_copies_every_slot():
    write = Access("s", 3, None, {"s": 3})
    s = Storage(7, "buf", "local", "side", write)
    s.reads.append(Access("m", 4, None))
    s.uses.append(Access("m", 5, None))
    s.recorded.add("m")
    s.parts.append(write)
    s.origin, s.d2h, s.born, s.exit, s.handed = ("f", None), write, write, None, ("a", "b", "c")
    s.container, s.copies, s.escaped, s.dead = "xs", True, True, True
    c = s.clone()
    for slot in Storage.__slots__:
        assert getattr(c, slot) == getattr(s, slot), slot
    for slot in ("reads", "uses", "recorded", "parts"):
        assert getattr(c, slot) is not getattr(s, slot), slot  # (a path's appends are its own)
