"""Repository scale: linting one file parses what it reaches, not every file that mentions a marker;
the answers are the same alone, in the whole tree, cold, warm, from the CLI and the language server;
a changed dependency invalidates what it must (issue 15)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from harness import cli, engine_for, write
from streamlint.model.summary import may_compile_bytes, summarize

UTILS = '''\
"""Stream helpers: a leading switch flag turns each helper into a no-op."""
import torchair as tng

from pkg import model  # import cycle: model imports utils


class Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def side_stream(flag: bool, tag: str):
    if flag:
        return tng.scope.npu_stream_switch(tag, 0)
    return Nothing()


def record(flag: bool, events, idx: int):
    if flag:
        tng.ops.npu_tagged_event_record(events[idx])


def wait(flag: bool, events, idx: int):
    if flag:
        tng.ops.npu_tagged_event_wait(events[idx])
'''
MODEL = '''\
import torch
import torchair as tng
from torch import nn

from pkg.utils import record, side_stream, wait


class Block(nn.Module):
    def __init__(self, flag):
        super().__init__()
        self.flag = flag
        self.events = [tng.ops.npu_create_tagged_event("a"), tng.ops.npu_create_tagged_event("b")]
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        record(self.flag, self.events, 0)
        with side_stream(self.flag, "s1"):
            wait(self.flag, self.events, 0)
            y = self.proj(x)
            record(self.flag, self.events, 1)
        wait(self.flag, self.events, 1)
        return x + y
'''
CONFIG = '''\
from torchair.configs.compiler_config import CompilerConfig


def build_config(mode):
    config = CompilerConfig()
    config.mode = {mode!r}
    return config
'''
COMPILER = '''\
"""Compiles whatever model its callers pass, with the config they pass."""
import torch
import torchair as tng


def compile_model(model, config):
    return torch.compile(model, backend=tng.get_npu_backend(compiler_config=config), dynamic=False)
'''
LAUNCHER = '''\
from pkg.cfg import build_config
from pkg.compiler import compile_model
from pkg.model import Block


def main():
    return compile_model(Block(True), build_config())
'''
# files that mention every marker (streams, compile, the helper's name) but compile nothing and call
# nothing that matters: a large repository is mostly this
NOISE = '''\
"""Notes on torch.compile and compile_model: this module does not compile anything."""
import re

PATTERN = re.compile(r"stream_(\\d+)")  # a regular expression, not a compile site


def describe(stream_name):
    # compile_model(...) is documented elsewhere; torch.npu.Stream objects are not created here
    return "compile " + stream_name
'''


def _project(root: Path, mode: str = "max-autotune", noise: int = 30) -> Path:
    write(root, "pkg/__init__.py", "")
    write(root, "pkg/utils.py", UTILS)
    write(root, "pkg/model.py", MODEL)
    write(root, "pkg/cfg.py", CONFIG.format(mode=mode).replace("build_config(mode)", "build_config()"))
    write(root, "pkg/compiler.py", COMPILER)
    write(root, "pkg/launcher.py", LAUNCHER)
    for i in range(noise):
        write(root, f"pkg/noise/n{i:03}.py", NOISE)
    write(root, "pkg/noise/__init__.py", "")
    return root / "pkg" / "model.py"


def _codes(findings) -> list[tuple[str, int]]:
    return sorted((f.code, f.span.start_line) for f in findings)


# ---- what a summary keeps: a superset of what the model would resolve


@pytest.mark.parametrize("source", [
    "import torch\ntorch.compile(m)\n",
    "from torch import compile as tc\ntc(m)\n",
    "import torch\nc = torch.compile\ncc = c\ncc(m)\n",
    "import torchair.inference as inf\ninf.cache_compile(f)\n",
    "import torch as re\nre.compile(m)\n",  # `re` is not the regex module here
    "import torch\n@torch.compile(backend='npu')\ndef f(x):\n    return x\n",
    "import torch\nimport re\nre.compile('x')\ntorch.compiler.compile(m)\n",
])
def test_a_module_that_may_compile_is_kept(source: str) -> None:
    data = source.encode()
    assert may_compile_bytes(data)
    assert summarize(data).may_compile("pkg.mod")


@pytest.mark.parametrize("source", [
    "import re\nP = re.compile('x')\n",
    '"""We compile nothing."""\nx = 1\n',
    "def compiled_model():\n    return None\n",
    # a parameter called like a function resolves to nothing; `re` is the regex module
    "import re\nP = re.compile('x')\nclass C:\n    @classmethod\n    def make(cls):\n        return cls()\n",
    "import re\nimport triton\nclass K:\n    def run(self):\n        return triton.compile(self)\n",
])
def test_a_module_that_cannot_compile_is_not_parsed_for_compile_sites(source: str) -> None:
    data = source.encode()
    assert not (may_compile_bytes(data) and summarize(data).may_compile("pkg.mod"))


@pytest.mark.parametrize("source", [
    # an attribute anywhere in a loop's iterable binds the loop variable (``for f in (torch.compile, g)``)
    "import torch\nfor f in (torch.compile, g):\n    f(m)\n",
    "import torch\nfor f in (torch.\n          compile - 0, g):\n    f(m)\n",
    "import torch\nfor f in [torch.compile[0]]:\n    f(m)\n",
    # a `#` inside a string on the line is no comment
    "import torch\nx = '#'; torch.compile(m)\n",
    "import torch\nc = (torch  # the compiler\n     .compile)\nc(m)\n",
    "import torch\nc = torch.compile if fast else None\n",
    "from torch import compile\ncompile(m)\n",
    "import torch\nrun(torch.compile)\n",
    # a comment naming re.compile does not hide a real call
    "import re, torch\n# re.compile(x)\ntorch.compile(m)\n",
])
def test_a_compile_leaf_the_summary_may_read_is_kept_by_the_byte_filter(source: str) -> None:
    assert may_compile_bytes(source.encode())


@pytest.mark.parametrize("source", [
    "# torch.compile(model) is slow here; keep eager\nx = 1\n",
    '"""One compile plus N-1 cache hits; compile-time shapes."""\nx = 1\n',
    "from pkg.kernels.compile import build\nfrom pkg.kernels.compile.flags import FLAGS\nbuild(FLAGS)\n",
    "log.info('these kernels compile once; compile-time shapes only')\n",
    "import re\n# torch.compile(m) would not help here\nP = re.compile('x')\n",
])
def test_prose_comments_and_module_paths_are_not_summarized_for_compile_sites(source: str) -> None:
    """Words that are no callee and no bound value: the module is not even read with ``ast``."""
    data = source.encode()
    assert not may_compile_bytes(data)
    assert not summarize(data).may_compile("pkg.mod")


@pytest.mark.parametrize("source, module, compiles", [
    # `self.compile(...)` is `<module>.<Class>.compile`: a compile API only for class `compiler` in `torch`
    ("class Runner:\n    def go(self, m):\n        return self.compile(m)\n", "pkg.runner", False),
    ("class compiler:\n    def go(self, m):\n        return self.compile(m)\n", "torch", True),
    # a local, a parameter: resolves to nothing; a relative import: decided by the module's name
    ("def build():\n    kernel = make()\n    kernel.compile()\n", "pkg.k", False),
    ("def build(kernel):\n    return kernel.compile()\n", "pkg.k", False),
    ("from .codecache import Cache\ndef f(src):\n    return Cache.compile(src)\n", "pkg.a", False),
    ("from .. import compile\ndef f(m):\n    return compile(m)\n", "pkg.sub.mod", False),
    ("from .. import compile\ndef f(m):\n    return compile(m)\n", "torch.sub.mod", True),
    # imports and aliases inside a function are followed
    ("def f(m):\n    import torch\n    return torch.compile(m)\n", "pkg.a", True),
    ("def f(m):\n    from torch import _dynamo as d\n    return d.compile(m)\n", "pkg.a", False),
    ("import torch\ndef f(m):\n    c = torch.compile\n    cc = c\n    return cc(m)\n", "pkg.a", True),
    ("import re\ndef f(m):\n    c = re.compile\n    return c(m)\n", "pkg.a", False),
    ("import torch\nclass M:\n    @torch.compile(backend='npu')\n    def forward(self, x):\n        return x\n",
     "pkg.a", True),
])
def test_the_summary_resolves_names_as_the_model_does(source: str, module: str, compiles: bool) -> None:
    assert summarize(source.encode()).may_compile(module) is compiles


def test_every_compile_site_of_the_fixtures_is_kept_by_its_summary() -> None:
    """Superset check against the model: each fixture module whose calls resolve to a compile API
    (FileModel.resolve + apis.lookup) is kept by its summary under its module name."""
    from streamlint.engine import parse_source
    from streamlint.model import apis
    from streamlint.model.apis import Role

    root = Path(__file__).resolve().parent.parent / "fixtures"
    checked = 0
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        rel = path.relative_to(root).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        module, is_package = ".".join(parts[-2:]), path.name == "__init__.py"
        parsed = parse_source(str(path), data, module, is_package)
        if parsed.model is None:
            continue
        sites = [c for c in parsed.model.calls if (spec := apis.lookup(c.target)) is not None
                 and spec.role in (Role.TORCH_COMPILE, Role.CACHE_COMPILE)]
        if sites:
            checked += 1
            assert may_compile_bytes(data) and summarize(data).may_compile(module, is_package), path
    assert checked > 20


def test_the_summary_walk_visits_what_ast_walk_visits() -> None:
    """The summary's own traversal (``compilecalls._walk``, ``_children``) yields the nodes of ``ast.walk`` /
    ``ast.iter_child_nodes`` in the same order, less the Load / Store / Del markers, on every fixture module
    and on the shapes whose fields hold lists with None (dict unpacking, defaults of keyword-only args)."""
    import ast

    from streamlint.model import compilecalls as summary_module

    root = Path(__file__).resolve().parent.parent / "fixtures"
    sources = [path.read_bytes() for path in sorted(root.rglob("*.py"))]
    sources.append(b"d = {**a, 'k': 1}\ndef f(*, a, b=1): return lambda *, c=2: {**d}\n")
    walked = 0
    for data in sources:
        try:
            tree = ast.parse(data)
        except SyntaxError:
            continue
        expected = [n for n in ast.walk(tree) if not isinstance(n, ast.expr_context)]
        assert [id(n) for n in summary_module._walk(tree)] == [id(n) for n in expected]
        for node in expected:
            children = [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.expr_context)]
            assert summary_module._children(node) == children
        walked += 1
    assert walked > 100


def test_calls_through_aliases_are_kept() -> None:
    summary = summarize(b"from pkg.compiler import compile_model as cm\nf = cm\nf(x)\n"
                        b"for layer in self.layers:\n    layer(x)\n")
    assert summary.may_call("compile_model") and summary.may_call("layers")
    assert not summary.may_call("describe")


def test_unparsable_content_excludes_nothing() -> None:
    summary = summarize(b"def f(:\n    compile(\n")
    assert summary.calls is None and summary.may_compile("pkg.mod") and summary.may_call("anything")


# ---- the project: one file costs what it reaches


def test_one_file_parses_what_it_reaches_not_every_file_with_a_marker(tmp_path: Path) -> None:
    model = _project(tmp_path)
    engine = engine_for(tmp_path)
    findings = engine.lint_file(str(model)).findings
    parsed = {os.path.relpath(p, tmp_path) for p in engine._parsed}
    assert not {p for p in parsed if "noise" in p}, sorted(parsed)  # 30 files mention every marker
    assert ("SL502", 16) in _codes(findings)  # the config in cfg.py (GE) reached through compile_model


def test_same_findings_alone_in_the_tree_cold_warm_and_in_the_server(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    alone = _codes(engine_for(tmp_path).lint_file(str(model)).findings)
    assert alone and all(code == "SL502" for code, _ in alone)
    whole = engine_for(tmp_path)
    in_tree = [f for p in sorted(tmp_path.rglob("*.py")) for f in whole.lint_file(str(p)).findings
               if os.path.abspath(f.path) == str(model)]
    assert _codes(in_tree) == alone

    args = ["check", "--isolated", "--output-format", "json", "--exit-zero", "-q"]
    runs = []
    for extra in (["--no-cache", str(model)], [str(model)], [str(model)], [str(tmp_path)], [str(model)],
                  ["-j", "2", str(tmp_path)]):
        result = cli([*args, *extra])
        runs.append(sorted((f["code"], f["start"]["line"]) for f in json.loads(result.output)
                           if os.path.abspath(f["filename"]) == str(model)))
    assert all(run == alone for run in runs), runs

    from lsprotocol import types

    from streamlint.lsp import StreamlintServer

    class Server(StreamlintServer):
        encoding = types.PositionEncodingKind.Utf16  # (no client handshake in-process)

    server = Server()
    try:
        text = model.read_text()
        cached = server.lint(model.as_uri(), str(model), text, 1)  # the CLI's cached result
        fresh = server.lint(model.as_uri(), str(model), text + "\n", 2)  # linted, with cached summaries
        edited = server.lint(model.as_uri(), str(model), text + "\n\n", 3)  # after an edit
    finally:
        server.worker.shutdown()
    assert _codes(cached.findings) == _codes(fresh.findings) == _codes(edited.findings) == alone


NAMESPACE_HELPER = """
import torch


def device_stream():
    return torch.cuda.current_stream()
"""

NAMESPACE_LAYER = """
import torch

from kvserve.runtime.streams import device_stream


def apply_qk_norm(q, k, q_weight, k_weight, alt_stream):
    current = device_stream()
    alt_stream.wait_stream(current)
    q = torch.nn.functional.rms_norm(q, q.shape[-1:], q_weight)
    with torch.cuda.stream(alt_stream):
        k = torch.nn.functional.rms_norm(k, k.shape[-1:], k_weight)
    current.wait_stream(alt_stream)
    return q, k


def apply_unordered(q, k, k_weight, alt_stream):
    with torch.cuda.stream(alt_stream):
        k = torch.nn.functional.rms_norm(k, k.shape[-1:], k_weight)
    return q, k
"""


def test_a_namespace_package_file_linted_from_outside_its_tree_resolves_its_package(tmp_path: Path, monkeypatch) -> None:
    """No project marker, ``kvserve/runtime/`` without ``__init__.py``: linted by path from another folder,
    the file's absolute import of its own package still resolves (the fork and join through the helper
    that returns the current stream are seen), as when linted from the tree's top."""
    tree = tmp_path / "tree"
    write(tree, "kvserve/__init__.py", "")
    write(tree, "kvserve/runtime/streams.py", NAMESPACE_HELPER)
    layer = write(tree, "kvserve/runtime/layers/qk_norm.py", NAMESPACE_LAYER)
    (tmp_path / "elsewhere").mkdir()
    # every confidence: the unordered function's stream is its unseen caller's choice (low)
    args = ["check", "--isolated", "--no-cache", "--min-confidence", "low", "--output-format", "json", "--exit-zero", "-q"]
    runs = {}
    for cwd, target in ((tree, "kvserve/runtime/layers/qk_norm.py"), (tmp_path / "elsewhere", str(layer)),
                        (tmp_path / "elsewhere", str(layer.parent))):
        monkeypatch.chdir(cwd)
        runs[(cwd.name, target)] = sorted((f["code"], f["start"]["line"]) for f in json.loads(cli([*args, target]).output))
    assert set(map(tuple, runs.values())) == {(("SL201", 19),)}, runs  # only the unordered function


def test_summaries_are_cached_by_content_and_reused_by_a_run_of_another_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    cli(["check", "--isolated", "--exit-zero", "-q", str(tmp_path / "pkg" / "launcher.py")])
    stored = list((tmp_path / ".streamlint_cache" / "v2").glob("summaries-*.json"))
    assert len(stored) == 1
    entries = json.loads(stored[0].read_text())["summaries"]
    assert len(entries) >= 3  # the compiling modules' summaries, at least

    from streamlint.cache import SummaryCache
    from streamlint.config import Settings
    from streamlint.parallel import lint_files
    from streamlint.cache import ResultCache
    from harness import REGISTRY

    engine = engine_for(tmp_path)
    settings = Settings(select=("ALL",), project_root=str(tmp_path))
    cache = ResultCache.for_settings(settings, REGISTRY)
    reports, _ = lint_files(engine, [str(model)], jobs=1, cache=cache)
    assert engine.project.summaries.computed == 0  # every summary it needed came from the cache
    assert _codes(reports[0].findings) == _codes(engine_for(tmp_path).lint_file(str(model)).findings)
    assert SummaryCache(cache.directory).load()  # still readable after the second run wrote it


def test_editing_the_module_that_holds_the_config_changes_the_dependent_findings(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    args = ["check", "--isolated", "--output-format", "json", "--exit-zero", "-q", str(model)]
    before = json.loads(cli(args).output)
    assert any(f["code"] == "SL502" for f in before)
    # reduce-overhead: tagged events are the documented way; no SL502 any more
    write(tmp_path, "pkg/cfg.py", CONFIG.format(mode="reduce-overhead").replace("build_config(mode)", "build_config()"))
    after = json.loads(cli(args).output)
    assert not any(f["code"] == "SL502" for f in after)
    fresh = _codes(engine_for(tmp_path).lint_file(str(model)).findings)
    assert sorted((f["code"], f["start"]["line"]) for f in after) == fresh


def test_editing_a_file_into_a_compile_site_is_seen_on_the_warm_run(tmp_path: Path, monkeypatch) -> None:
    """A module whose summary said "compiles nothing" starts compiling: its new content has a new
    summary, and the dependent file's findings change."""
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    (tmp_path / "pkg" / "launcher.py").unlink()
    args = ["check", "--isolated", "--output-format", "json", "--exit-zero", "-q", str(model)]
    before = json.loads(cli(args).output)
    assert not any(f["code"] == "SL502" for f in before)  # nothing compiles Block: path unknown
    write(tmp_path, "pkg/noise/n000.py", NOISE + LAUNCHER)
    after = json.loads(cli(args).output)
    assert any(f["code"] == "SL502" for f in after)


# ---- whole tree: bounded memory, summaries of pool workers kept


def test_an_engine_that_lets_its_trees_go_gives_the_same_findings(tmp_path: Path, monkeypatch) -> None:
    """Past MODEL_BYTES_KEPT of parsed source, the engine drops every tree between two files (memory of a
    whole-tree run stays bounded); the next files parse again what they need: same findings."""
    from streamlint import parallel

    _project(tmp_path, noise=3)
    files = sorted(str(p) for p in tmp_path.rglob("*.py"))

    def run(kept: int):
        monkeypatch.setattr(parallel, "MODEL_BYTES_KEPT", kept)
        engine = engine_for(tmp_path)
        reports, _ = parallel.lint_files(engine, files, jobs=1)
        return [(r.path, _codes(r.findings)) for r in reports], engine

    keep_all, kept_engine = run(1 << 30)
    release, released_engine = run(1)
    assert release == keep_all and any(codes for _, codes in keep_all)
    assert len(released_engine._parsed) < len(kept_engine._parsed)


def test_what_an_engine_holds_is_bounded_and_gives_the_same_findings(tmp_path: Path, monkeypatch) -> None:
    """Memory that must not grow with the tree (issue 15): a module parsed for another file's question
    keeps no stdlib tree (the file's own report parses it again when it is linted), and the contents kept
    for byte searches stop at SCAN_BYTES_KEPT (a search past it reads the file again). Same findings as
    each file linted alone by a fresh engine, in an order where every module is parsed as a dependency
    before it is linted."""
    from streamlint import parallel
    from streamlint.model import projectscans as scans_module

    _project(tmp_path, noise=3)
    files = sorted((str(p) for p in tmp_path.rglob("*.py")), key=lambda p: ("utils" in p, "model" in p, p),
                   reverse=True)
    alone = [(p, _codes(engine_for(tmp_path).lint_file(p).findings)) for p in files]
    assert any(codes for _, codes in alone)

    budget = 600  # bytes: a few of the files
    monkeypatch.setattr(scans_module, "SCAN_BYTES_KEPT", budget)
    monkeypatch.setattr(parallel, "MODEL_BYTES_KEPT", 1 << 30)
    engine = engine_for(tmp_path)
    reads: list[str] = []
    read = engine.read
    monkeypatch.setattr(engine, "read", lambda path: reads.append(path) or read(path))
    engine.project.reader = engine.read
    dependency = str(tmp_path / "pkg" / "model.py")
    engine.lint_file(str(tmp_path / "pkg" / "launcher.py"))  # parses model.py for its questions
    parsed = engine._parsed[dependency]
    assert parsed.model is not None and parsed.tree is None and "_ast_tree" not in parsed.model.__dict__
    reports, _ = parallel.lint_files(engine, files, jobs=1)
    assert [(r.path, _codes(r.findings)) for r in reports] == alone
    held = engine.project._scan_bytes
    assert sum(map(len, held.values())) == engine.project._scan_kept <= budget
    assert len(reads) > len(set(reads))  # past the budget, a byte search reads a file again
    assert all(p.tree is None for p in engine._parsed.values())  # each report let its tree go


def test_a_pool_worker_sends_back_the_summaries_it_made(tmp_path: Path) -> None:
    from streamlint import parallel

    model = _project(tmp_path, noise=0)
    engine = engine_for(tmp_path)
    parallel._WORKER["engine"] = engine
    try:
        _results, _profile, made = parallel._worker_run([(str(model), model.read_bytes())])
    finally:
        parallel._WORKER.pop("engine", None)
    assert made and set(made) <= set(engine.project.summaries.entries)
    parent = engine_for(tmp_path).project.summaries
    parent.add(made)
    assert parent.dirty and set(made) <= set(parent.entries)


# ---- compile facts on demand: a module whose compiles have no execution path, or that cannot compile the
# function asked about, is not parsed; the answers are those of the whole project's compile sites


@pytest.mark.parametrize("source, moded", [
    ("import torch\ntorch.compile(m)\n", False),
    ("import torch\ntorch.compile(m, backend='inductor', dynamic=True)\n", False),
    ("import torch\n@torch.compile(fullgraph=True)\ndef f(x):\n    return x\n", False),
    ("import torch\ntorch.compile(m, backend='npu')\n", True),
    ("import torch\ntorch.compile(m, backend='npu' if ge else 'inductor')\n", True),
    ("import torch\ntorch.compile(m, backend=make_backend())\n", True),
    ("from torchair.inference import cache_compile\ncache_compile(f)\n", True),
    ("from torchair.inference import cache_compile as compile\ncompile(f)\n", True),
    ("import torch\nc = torch.compile\nc(m)\n", True),
    ("import torch\ndef f(m):\n    for c in (torch.compile,):\n        c(m)\n", True),
])
def test_a_summary_says_whether_a_compile_may_have_an_execution_path(source: str, moded: bool) -> None:
    assert summarize(source.encode()).moded is moded


@pytest.mark.parametrize("source, from_callers", [
    ("import torch\ndef compile_model(model, cfg):\n    return torch.compile(model)\n", True),
    ("import torch\ndef compile_model(model):\n    m = model.npu()\n    return torch.compile(m)\n", True),
    ("import torch\nclass R:\n    def go(self, model):\n        self.m = model\n        return torch.compile(self.m)\n",
     True),
    ("import torch\nclass R:\n    def go(self):\n        return torch.compile(self.model)\n", False),
    ("import torch\nfrom pkg.model import Block\ndef build(flag):\n    return torch.compile(Block(flag))\n", True),
    ("import torch\nfrom pkg.model import Block\ndef build():\n    return torch.compile(Block())\n", False),
    ("import torch\nmodel = torch.compile(Net())\n", False),
])
def test_a_summary_says_whether_a_compile_may_compile_what_callers_pass(source: str, from_callers: bool) -> None:
    assert summarize(source.encode()).compiles_callers_args is from_callers


def _fixture_projects() -> list[Path]:
    root = Path(__file__).resolve().parent.parent / "fixtures" / "projects"
    return sorted(p for p in root.iterdir() if p.is_dir())


def test_the_summary_flags_hold_for_every_compile_site_of_the_fixtures() -> None:
    """Superset check against the model: a module whose summary says "no execution path" has only sites
    without modes; one whose summary says "compiles nothing its callers pass" never asks its callers."""
    from streamlint.model import compile as compile_mod

    asked: list[str] = []
    real = compile_mod.caller_arguments

    def spy(project, file, fn, param):
        found = real(project, file, fn, param)
        if found:  # what the callers pass is compiled
            asked.append(file.path)
        return found

    checked = 0
    for project in _fixture_projects():
        engine = engine_for(project)
        compile_mod.caller_arguments, asked[:] = spy, []
        try:
            sites = engine.project.compile_sites()
        finally:
            compile_mod.caller_arguments = real
        for cs in sites:
            summary = summarize(Path(cs.file.path).read_bytes())
            checked += 1
            assert summary.moded or not cs.modes, cs.file.path
        for path in asked:
            assert summarize(Path(path).read_bytes()).compiles_callers_args, path
    assert checked > 10


def test_compile_facts_on_demand_are_those_of_every_compile_site() -> None:
    """For every function of the fixture projects: its execution path and whether it is compiled itself,
    asked one file at a time (parsing only what may matter), equal the answers from every compile site
    of the project (what a whole-tree run computes before forking its workers)."""
    compared = 0
    for project in _fixture_projects():
        lazy, full = engine_for(project), engine_for(project)
        full.project.path_index.prepare()
        for path in sorted(project.rglob("*.py")):
            a, b = lazy.project.file(str(path)), full.project.file(str(path))
            if a is None:
                continue
            for qualname, fn in a.functions.items():
                other = b.functions[qualname]
                pa, pb = lazy.project.execution_path(a, fn), full.project.execution_path(b, other)
                assert (pa.modes, pa.source, [(e.path, e.span) for e in pa.evidence]) == \
                    (pb.modes, pb.source, [(e.path, e.span) for e in pb.evidence]), (path, qualname)
                assert lazy.project.path_index.is_graph_entry(a, fn) is \
                    full.project.path_index.in_graph_entries(b, other), (path, qualname)
                compared += 1
    assert compared > 100


RENAMED = {
    "pkg/__init__.py": "from pkg.model import Block as B  # re-exported under another name\n",
    "pkg/alias.py": "from pkg import B\n\nBlockAlias = B\n",
    "pkg/runner.py": '''\
import torch

from pkg.alias import BlockAlias


def build():
    return torch.compile(BlockAlias(True))  # inductor: no execution path, but Block.forward is compiled
''',
}


OTHER = '''\
import torch


class Other(torch.nn.Module):
    pass


def go():
    return torch.compile(Other())
'''


def test_a_function_compiled_under_a_renamed_reexport_is_a_graph_entry(tmp_path: Path) -> None:
    model = _project(tmp_path, noise=3)
    (tmp_path / "pkg" / "launcher.py").unlink()
    for rel, text in RENAMED.items():
        write(tmp_path, rel, text)
    for i in range(20):  # modeless compiles of other models: never parsed for Block's questions
        write(tmp_path, f"pkg/other/o{i:02}.py", OTHER)
    write(tmp_path, "pkg/other/__init__.py", "")
    engine = engine_for(tmp_path)
    file = engine.project.file(str(model))
    forward = file.functions["Block.forward"]
    assert engine.project.path_index.is_graph_entry(file, forward)
    parsed = {os.path.relpath(p, tmp_path) for p in engine._parsed}
    assert not {p for p in parsed if "other" in p}, sorted(parsed)
    assert engine.project.path_index.in_graph_entries(file, forward)


def test_the_byte_test_of_the_caller_search_keeps_every_module_whose_summary_may_call_the_name() -> None:
    """``Project.files_calling`` reads a module's summary only when its bytes may call the name: a superset
    of ``ModuleSummary.may_call``, checked on every fixture module for every name the fixtures call or define."""
    import ast as stdlib_ast

    from streamlint.model.projectscans import _may_call_bytes

    root = Path(__file__).resolve().parent.parent / "fixtures"
    modules = [p.read_bytes() for p in sorted(root.rglob("*.py"))]
    names: set[str] = set()
    for data in modules:
        try:
            tree = stdlib_ast.parse(data)
        except SyntaxError:
            continue
        names |= {n.name for n in stdlib_ast.walk(tree) if isinstance(n, (stdlib_ast.FunctionDef, stdlib_ast.ClassDef))}
        names |= set(summarize(data).calls or ())
    checked = 0
    for data in modules:
        summary = summarize(data)
        for name in names:
            if name.encode() in data and summary.may_call(name):
                checked += 1
                assert _may_call_bytes(data, name.encode()), (name, data[:200])
    assert checked > 1000


def _may_call_bytes_reference(data: bytes, name: bytes) -> bool:
    """The caller search's byte test as one regular expression (its first version): the literal-first scan of
    ``bytescan.may_call_bytes`` must answer the same."""
    import re

    w = re.escape(name)
    called = re.compile(rb"(?<![A-Za-z0-9_])" + w + rb"\s*\(|(?<![A-Za-z0-9_])" + w + rb"\s+as\s"
                        rb"|=\s*\(?\s*(?:[A-Za-z_][A-Za-z0-9_]*\s*\.\s*)*" + w + rb"(?![A-Za-z0-9_])")
    if called.search(data):
        return True
    return re.search(rb"(?<![A-Za-z0-9_])for(?![A-Za-z0-9_])", data) is not None \
        and re.search(rb"\.\s*" + w + rb"(?![A-Za-z0-9_])", data) is not None


@pytest.mark.parametrize("source, name", [
    ("x = a.b . \n  offload\n", "offload"), ("x = (offload)\n", "offload"), ("x == offload\n", "offload"),
    ("y = preoffload\n", "offload"), ("for i in r:\n    self. offload\n", "offload"), ("self.offload\n", "offload"),
    ("offload  (x)\n", "offload"), ("import a.offload as o\n", "offload"), ("f(k=obj.\n  offload)\n", "offload"),
    ("x = 1 + offload\n", "offload"), ("x = a['k'].offload\n", "offload"), ("offload", "offload"),
])
def test_the_literal_scan_of_the_caller_search_answers_as_its_regular_expression(source: str, name: str) -> None:
    from streamlint.model.bytescan import may_call_bytes

    assert may_call_bytes(source.encode(), name.encode()) is _may_call_bytes_reference(source.encode(), name.encode())


def test_the_literal_scan_answers_as_the_regular_expression_on_every_fixture_module() -> None:
    from streamlint.model.bytescan import may_call_bytes

    root = Path(__file__).resolve().parent.parent / "fixtures"
    names = ("forward", "offload", "wait", "record_stream", "compile", "run", "_stream", "s", "step", "x")
    checked = 0
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        for name in names:
            assert may_call_bytes(data, name.encode()) is _may_call_bytes_reference(data, name.encode()), (path, name)
            checked += 1
    assert checked > 1000


NAMESAKE = '''\
"""A second host cache with methods of the same names; its docs show the call: `mgr.offload(kv, ids, 0, s)`."""


class DiskKVManager:
    def offload(self, kv_device, slot_ids, layer_idx, stream):
        return None  # writes nothing yet: offload( is a name here, not a call

    def gather(self, kv_device, slot_ids, stream):
        return kv_device
'''


def test_the_call_site_search_parses_only_modules_that_may_call_the_function(tmp_path: Path) -> None:
    """``current_stream_params`` looks for every call of ``HostKVManager.offload``: modules that only define a
    method of that name or spell the call in a docstring are ruled out by their summary, not parsed with
    LibCST, and the findings are those of the project without them."""
    import shutil

    src = Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "sl201_stream_argument_call_sites"
    plain, noisy = tmp_path / "plain", tmp_path / "noisy"
    shutil.copytree(src, plain)
    shutil.copytree(src, noisy)
    for i in range(8):
        write(noisy, f"kvoffload/disk/d{i}.py", NAMESAKE)
    write(noisy, "kvoffload/disk/__init__.py", "")

    def lint(root: Path):
        engine = engine_for(root)
        found = [(f.code, f.span.start_line, f.message) for f in engine.lint_file(str(root / "kvoffload" / "manager.py")).findings]
        return engine, sorted(found)

    _, expected = lint(plain)
    engine, found = lint(noisy)
    assert found == expected and expected
    parsed = {os.path.relpath(p, noisy) for p in engine._parsed}
    assert not {p for p in parsed if "disk" in p}, sorted(parsed)


def test_a_project_fact_is_asked_again_after_an_edit(tmp_path: Path) -> None:
    """Project-wide memos live with the path index, which an edit (an editor buffer, a changed file)
    replaces: a field's type read from another module is read again once that module changes."""
    from streamlint.model.handoffs import _field_recordable

    holder = write(tmp_path, "pkg/holder.py", "import torch\n\n\nclass Holder:\n    buf: torch.Tensor\n")
    write(tmp_path, "pkg/user.py", "def use(h):\n    return h.buf\n")
    engine = engine_for(tmp_path)
    engine.lint_file(str(tmp_path / "pkg" / "user.py"))
    assert _field_recordable(engine.project, "buf")
    engine.set_override(str(holder), b"class Holder:\n    buf: int\n")
    assert not _field_recordable(engine.project, "buf")


def test_a_release_keeps_what_the_compile_sites_reach_and_the_recent_models(tmp_path: Path) -> None:
    """An engine that lets its trees go (Engine.release_models) keeps the compile facts (plain data keyed by
    path and qualified name) and the most recently used models up to the bytes it is told: a model's
    execution path is answered again without parsing the compiling modules (the compiler, its caller),
    with the same modes, source and evidence."""
    model = _project(tmp_path, noise=3)
    engine = engine_for(tmp_path)
    file = engine.project.file(str(model))
    engine.project.path_index.prepare()

    def paths(f):
        return {q: (p.modes, p.source, [(e.path, e.span) for e in p.evidence])
                for q, fn in f.functions.items() for p in [engine.project.execution_path(f, fn)]}

    before = paths(file)
    assert any(source == "compile" for _, source, _ in before.values())
    engine.project.file(str(tmp_path / "pkg" / "utils.py"))  # the most recently used model
    utils = engine.project.file(str(tmp_path / "pkg" / "utils.py"))
    engine.release_models(len((tmp_path / "pkg" / "utils.py").read_bytes()))
    assert [os.path.relpath(p, tmp_path) for p in engine._parsed] == ["pkg/utils.py"]
    assert engine.project.file(str(tmp_path / "pkg" / "utils.py")) is utils
    again = engine.project.file(str(model))
    assert again is not file and paths(again) == before
    parsed = {os.path.relpath(p, tmp_path) for p in engine._parsed}
    assert "pkg/compiler.py" not in parsed and "pkg/launcher.py" not in parsed, sorted(parsed)


def test_a_release_frees_its_trees_without_a_collection_and_a_released_object_refuses_questions(tmp_path: Path) -> None:
    """The project a release replaces and the models it lets go are emptied (model/release.py): reference counting
    frees them at once (before, their reference cycles, a function and its call sites, a project and its memoised
    analyses, kept every released tree until the engine's next gc.collect), while a kept model is untouched and
    answers as before. An object of a released tree raises when asked, also through ``getattr`` with a default
    (never an empty answer); the findings of every file linted after the release are those of a fresh engine."""
    import gc
    import weakref

    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.release import ReleasedError

    _project(tmp_path, noise=3)
    files = sorted(str(p) for p in tmp_path.rglob("*.py"))
    alone = [_codes(engine_for(tmp_path).lint_file(p).findings) for p in files]
    engine = engine_for(tmp_path)
    assert [_codes(engine.lint_file(p).findings) for p in files] == alone
    utils = str(tmp_path / "pkg" / "utils.py")
    size = len(Path(utils).read_bytes())
    engine.project.file(utils)  # the most recently asked: the one kept
    kept = engine._parsed[utils].model
    kept_state = dict(kept.__dict__)
    refs = {path: weakref.ref(p.model) for path, p in engine._parsed.items() if p.model is not None}
    model = engine._parsed[str(tmp_path / "pkg" / "model.py")].model
    function = next(iter(model.functions.values()))
    assert function.calls or function.scopes or function.assigns  # (a cycle to break)
    old = weakref.ref(engine.project)
    del model
    assert len(refs) > 5
    gc.disable()
    try:
        engine._let_go(size)  # (release_models without its collection)
        alive = sorted(os.path.relpath(path, tmp_path) for path, ref in refs.items() if ref() is not None)
        assert alive == ["pkg/utils.py"] and old() is None
    finally:
        gc.enable()
    assert engine._parsed[utils].model is kept and kept.__dict__ == kept_state
    assert isinstance(function, FunctionInfo) and not isinstance(function, FileModel)
    with pytest.raises(ReleasedError):
        function.calls
    with pytest.raises(ReleasedError):
        getattr(function, "node", None)
    with pytest.raises(ReleasedError):
        function.qualname = "x"
    assert [_codes(engine.lint_file(p).findings) for p in files] == alone


def test_a_release_keeps_the_module_most_files_ask_before_the_last_file_s_own(tmp_path: Path) -> None:
    """A release keeps first what the files of the last releases asked most often (Engine._keep_order: a module
    every file reaches), then the most recently asked: a file's own module asked last does not push out the one the
    next file will ask again (only recency did, and a tree whose files reach more than the budget parsed its
    common modules again for every file)."""
    _project(tmp_path, noise=3)
    engine = engine_for(tmp_path)
    common, size = str(tmp_path / "pkg" / "utils.py"), len((tmp_path / "pkg" / "utils.py").read_bytes())
    for i in range(3):  # three files, each releasing after it: each asks the common module, then its own
        engine.project.file(common)
        engine.project.file(str(tmp_path / "pkg" / "noise" / f"n{i:03}.py"))
        engine.release_models(size)
        # (the first release knows no history: the last asked, the smaller own module, is kept)
        assert list(engine._parsed) == [common] if i else [str(tmp_path / "pkg" / "noise" / "n000.py")], i
    engine.project.file(str(tmp_path / "pkg" / "cfg.py"))  # a file that does not ask it: it stays, being hot
    cfg = str(tmp_path / "pkg" / "cfg.py")
    digest = engine.content_digest(cfg)
    assert digest == hashlib.sha256((tmp_path / "pkg" / "cfg.py").read_bytes()).hexdigest()
    engine.release_models(size)
    assert list(engine._parsed) == [common]
    # the content digests go with the parsed files they were taken of (Engine._let_go), and come back the same
    assert cfg not in engine._digests and engine.content_digest(cfg) is None
    engine.project.file(str(tmp_path / "pkg" / "compiler.py"))
    engine.release_models(1 << 20)  # room for all: every parsed file kept, the hottest first
    assert list(engine._parsed)[0] == common and len(engine._parsed) == 2
    engine.project.file(cfg)  # parsed again: the digest of the same bytes
    assert engine.content_digest(cfg) == digest


def test_a_release_does_not_carry_compile_facts_of_a_function_defined_twice(tmp_path: Path) -> None:
    """A reached function that is not its module's entry for its name (an earlier ``def`` of the same name)
    has no key that survives a release: then the compile facts are computed again, as before."""
    _project(tmp_path, noise=0)
    text = (tmp_path / "pkg" / "model.py").read_text(encoding="utf-8")
    write(tmp_path, "pkg/model.py", text + "\n\ndef helper():\n    pass\n\n\ndef helper():  # noqa\n    pass\n")
    engine = engine_for(tmp_path)
    engine.project.path_index.prepare()
    assert engine.project.path_index.carried() is not None
    file = engine.project.file(str(tmp_path / "pkg" / "model.py"))
    first = next(fn for fn in file.function_of.values() if fn is not None and fn.qualname == "helper"
                 and fn is not file.functions["helper"])
    index = engine.project.path_index
    index._reached_ids[id(first)] = ({"reduce-overhead"}, [])  # as if a compile site reached it
    assert index.carried() is None


def test_the_caller_search_sees_a_call_added_by_an_edit(tmp_path: Path) -> None:
    """The byte searches of project-wide scans are memoised per marker (Project.paths_containing) and the
    caller search per function: an edit (an editor buffer) that adds a call is seen by the next search."""
    from streamlint.model.flow.callers import callers_of

    lib = write(tmp_path, "pkg/lib.py", "def launch(x):\n    return x\n")
    write(tmp_path, "pkg/a.py", "from pkg.lib import launch\n\n\ndef go(x):\n    return launch(x)\n")
    other = write(tmp_path, "pkg/b.py", "def idle():\n    pass\n")
    engine = engine_for(tmp_path)
    file = engine.project.file(str(lib))
    sites = callers_of(engine.project, file, file.functions["launch"])
    assert [os.path.relpath(m.path, tmp_path) for m, _ in sites] == ["pkg/a.py"]
    engine.set_override(str(other), b"from pkg.lib import launch\n\n\ndef run(y):\n    return launch(y)\n")
    file = engine.project.file(str(lib))
    sites = callers_of(engine.project, file, file.functions["launch"])
    assert sorted(os.path.relpath(m.path, tmp_path) for m, _ in sites) == ["pkg/a.py", "pkg/b.py"]


# ---- what the compile sites reach, kept across runs with what it observed (streamlint/reachcache.py)


def test_reach_facts_are_reused_while_their_observations_hold_and_recomputed_when_one_changes(
        tmp_path: Path, monkeypatch) -> None:
    from harness import REGISTRY
    from streamlint import reachcache
    from streamlint.cache import ResultCache
    from streamlint.config import Settings
    from streamlint.parallel import lint_files

    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path, noise=4)
    computed: list[int] = []
    compute = reachcache._compute
    monkeypatch.setattr(reachcache, "_compute", lambda engine: computed.append(1) or compute(engine))

    def run(path: Path) -> list[tuple[str, int]]:
        cache = ResultCache.for_settings(Settings(select=("ALL",), project_root=str(tmp_path)), REGISTRY)
        reports, _ = lint_files(engine_for(tmp_path), [str(path)], jobs=1, cache=cache)
        return _codes(reports[0].findings)

    def fresh() -> list[tuple[str, int]]:  # no cache at all
        return _codes(engine_for(tmp_path).lint_file(str(model)).findings)

    run(tmp_path / "pkg" / "launcher.py")  # computes and stores them
    assert len(computed) == 1
    stored = json.loads(next((tmp_path / ".streamlint_cache" / "v2").glob("reach-*.json")).read_text())
    assert any(qualname == "Block.forward" and modes == ["ge"] for _, qualname, modes, _ in stored["reached"])
    assert run(model) == fresh() and ("SL502", 16) in fresh()  # another file: reused
    assert len(computed) == 1
    # a comment appended to a file the computation only searched (it mentions compile_model): still reused
    write(tmp_path, "pkg/noise/n001.py", NOISE + "\n# edited\n")
    assert run(model) == fresh() and len(computed) == 1
    # a module it parsed changes (the config's: reduce-overhead, no SL502 any more): computed again
    write(tmp_path, "pkg/cfg.py", CONFIG.format(mode="reduce-overhead").replace("build_config(mode)", "build_config()"))
    assert run(model) == fresh() and len(computed) == 2 and not any(c == "SL502" for c, _ in fresh())
    write(tmp_path, "pkg/cfg.py", CONFIG.format(mode="max-autotune").replace("build_config(mode)", "build_config()"))
    assert run(model) == fresh() and len(computed) == 3
    # no compile site any more (the launcher gone), then a module that only searched starts compiling
    (tmp_path / "pkg" / "launcher.py").unlink()
    assert run(model) == fresh() and len(computed) == 4 and not any(c == "SL502" for c, _ in fresh())
    write(tmp_path, "pkg/noise/n000.py", NOISE + LAUNCHER)
    assert run(model) == fresh() and len(computed) == 5 and ("SL502", 16) in fresh()
    assert run(model) == fresh() and len(computed) == 5
    # a new file (the package form of a module it resolved): computed again
    write(tmp_path, "pkg/compiler/__init__.py", COMPILER)
    assert run(model) == fresh() and len(computed) == 6


def test_a_reach_record_of_another_shape_is_a_miss(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path, noise=2)
    args = ["check", "--isolated", "--output-format", "json", "--exit-zero", "-q", str(model)]
    first = json.loads(cli(args).output)
    for junk in ('{"format": 1, "files": 3}', "[1, 2]", '{"format": 1, "files": null, "isfile": {}, "contains": [], '
                 '"content": {}, "scans": [], "reached": [["x", "y", [1], []]]}', "not json"):
        for stored in (tmp_path / ".streamlint_cache" / "v2").glob("*.json"):
            if stored.name.startswith(("reach-", "results-")):
                stored.write_text(junk)
        assert json.loads(cli(args).output) == first


def test_a_planted_reach_record_is_a_miss_never_a_crash_nor_a_read_outside(tmp_path: Path, monkeypatch) -> None:
    """The record lives in the linted repository (untrusted): questions of an unknown shape, a pattern for the
    renames search, paths outside the project are a miss (computed again), not an error or a read."""
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path, noise=2)
    args = ["check", "--isolated", "--output-format", "json", "--exit-zero", "-q", str(model)]
    first = cli(args)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.py"
    outside.write_text("x = 1\n")
    records = [p for p in (tmp_path / ".streamlint_cache" / "v2").glob("reach-*.json")]
    assert records
    good = {p: json.loads(p.read_text()) for p in records}
    plants = [("scans", ["calling", [], None]), ("scans", ["renames", ["(a+)+$"], []]),
              ("scans", ["no-such-question", [1], 1]), ("contains", [str(outside), ["x"], True]),
              ("content", (str(outside), "0" * 64))]
    for field, plant in plants:
        for path, record in good.items():
            changed = json.loads(json.dumps(record))
            if field == "content":
                changed["content"][plant[0]] = plant[1]
            else:
                changed[field].insert(0, plant)
            path.write_text(json.dumps(changed))
        for stored in (tmp_path / ".streamlint_cache" / "v2").glob("results-*.json"):
            stored.unlink()
        again = cli(args)
        assert again.exit_code == first.exit_code, (plant, again.output)
        assert json.loads(again.output) == json.loads(first.output), plant


def _names_under_stream_withs_by_line(data: bytes) -> set[bytes]:
    """The line-by-line reading ``sidecalls._names_under_stream_withs`` replaced (the reference)."""
    from streamlint.model.flow.sidecalls import _CALLED

    found: set[bytes] = set()
    scope = -1
    for line in data.split(b"\n"):
        text = line.lstrip()
        if not text or text.startswith(b"#"):
            continue
        level = len(line) - len(text)
        if scope >= 0 and level <= scope:
            scope = -1
        if scope >= 0:
            found.update(_CALLED.findall(text))
        elif text.startswith((b"with ", b"async with ")) and b"stream" in text.lower():
            scope = level
            found.update(_CALLED.findall(text.partition(b":")[2]))
    return found


def test_names_under_stream_withs_jumps_between_scopes_with_the_same_answer() -> None:
    """The caller side-stream byte pass walks only the lines under a stream ``with``: same names as the
    line-by-line reading on every fixture and on nested, closing, commented, one-line and CRLF scopes."""
    from streamlint.model.flow.sidecalls import _names_under_stream_withs

    texts = [b"with stream(s): f(x)\n  g(y)\nh(z)",
             b"    with torch.npu.stream(s):\n        a(b)\n\n        # c(d)\n        e(f)\n    g(h)\n    with x:\n"
             b"  with Stream():\n   k()",
             b"with STREAM:\r\n  f()\r\nwith y: stream(z)\n q()",
             b"", b"with s", b"x = 'with stream'\n  f()\nwith stream:\n",
             b"def f():\n    with a.stream(s):\n        with b.stream(t):\n            g(x)\n        h(y)\n    i(z)\n"
             b"async with stream_ctx() as s:\n    j(w)\n"]
    texts += [p.read_bytes() for p in (Path(__file__).resolve().parent.parent / "fixtures").rglob("*.py")]
    assert sum(b"stream" in t for t in texts) > 50
    for text in texts:
        assert _names_under_stream_withs(text) == _names_under_stream_withs_by_line(text), text[:200]


def test_compile_byte_test_skips_leaves_inside_one_line_strings() -> None:
    """A compile leaf inside a string or comment opened on its own line is not read by the summary: the
    byte test drops such a module, and keeps every form where the leaf may be code (a call after a closed
    string, an f-string field, a string continued by a backslash, a triple quote on the line)."""
    dropped = [
        b"MSG = ('When you enable torch.compile or use the cache_compile feature, '\n       'pass it on.')\n",
        b"x = \"it's not torch.compile(model)\"\n",
        b"y = 'a' + \"b # torch.compile(m)\"\n",
        b"def f():\n    '''Doc.\n\n    don't torch.compile(this)\n    '''\n",
    ]
    kept = [
        b"import torch\nm = 'a' if c else torch.compile(model)\n",
        b"import torch\nm = f'{torch.compile(model)}'\n",
        b"import torch\ns = 'a \\\n' + torch.compile(model)\n",
        b"import torch\ns = '''a''' + torch.compile(model)\n",
        b"import torch\ns = \"x\"; m = torch.compile(model)\n",
    ]
    for data in dropped:
        assert not may_compile_bytes(data), data
        assert not summarize(data).may_compile("m")
    for data in kept:
        assert may_compile_bytes(data), data
        assert summarize(data).may_compile("m"), data


STAR_USER = '''\
import torch
from zoo import side_scope


def overlap_step(x: torch.Tensor, side):
    with side_scope(side):
        y = x * 2  # the wrapper switches to the side stream: x is read there with no wait
    return y
'''


def test_a_name_looked_up_through_star_reexports_parses_only_modules_that_spell_it(tmp_path: Path) -> None:
    """A package re-exporting every model package by star imports (``from .bert import *`` in ``models/__init__``,
    ``from .modeling_bert import *`` in each) resolves a name by parsing only the modules that spell it or star-import
    further: the modelling modules that do not spell it are not parsed, and the answer is the same."""
    write(tmp_path, "zoo/__init__.py", "from .models import *\n")
    names = [f"m{i:02d}" for i in range(12)]
    write(tmp_path, "zoo/models/__init__.py", "".join(f"from .{n} import *\n" for n in names + ["scopes"]))
    for n in names:
        write(tmp_path, f"zoo/models/{n}/__init__.py", f"from .modeling_{n} import *\n")
        write(tmp_path, f"zoo/models/{n}/modeling_{n}.py", f"import torch\n\n\nclass Block{n}(torch.nn.Module):\n"
              "    def forward(self, x):\n        return torch.relu(x)\n")
    write(tmp_path, "zoo/models/scopes/__init__.py", "from .streams import *\n")
    write(tmp_path, "zoo/models/scopes/streams.py", "import torch\n\n\ndef side_scope(stream):\n"
          "    return torch.npu.stream(stream)\n")
    write(tmp_path, "run.py", STAR_USER)
    engine = engine_for(tmp_path)
    found = [(f.code, f.span.start_line) for f in engine.lint_file(str(tmp_path / "run.py")).findings]
    assert ("SL201", 7) in found, found
    parsed = {os.path.relpath(p, tmp_path) for p in engine._parsed}
    assert "zoo/models/scopes/streams.py" in parsed
    assert not {p for p in parsed if "modeling_" in p}, sorted(parsed)


def test_a_release_lets_the_node_memos_drop_the_released_trees(tmp_path: Path) -> None:
    """The module-level memos of syntactic facts (syntax.node_memo, elementsets) hold each answer with its
    node: after Engine.release_models they hold only nodes of the kept trees, else every released tree stayed
    alive through them (issue 15: a whole-tree run grew with the tree)."""
    from streamlint.model import syntax
    from streamlint.model.flow import elementsets

    _project(tmp_path, noise=3)
    engine = engine_for(tmp_path)
    for path in sorted(tmp_path.rglob("*.py")):
        engine.lint_file(str(path))
    utils = str(tmp_path / "pkg" / "utils.py")
    engine.project.file(utils)  # the most recently used model: the one a release keeps

    def held() -> set[int]:
        return {id(node) for node, *_ in list(syntax._NODE_MEMO.values()) + list(elementsets._MEMO.values())}

    def nodes(path: str) -> set[int]:
        model = engine._parsed[path].model
        return {id(n) for fn in model.functions.values() for n in (fn.node, fn.node.body)}

    released = set().union(*(nodes(p) for p in engine._parsed if p != utils))
    assert held() & released  # (the memos did answer for the trees about to be released)
    engine.release_models(len(Path(utils).read_bytes()))
    assert list(engine._parsed) == [utils]
    assert held() <= nodes(utils)


def test_a_release_frees_the_released_models(tmp_path: Path) -> None:
    """A released model is garbage in reference cycles: the release collects it (issue 15: left to the
    collector's oldest generation, a whole-tree run's memory grew with the tree)."""
    import gc
    import weakref

    _project(tmp_path, noise=3)
    engine = engine_for(tmp_path)
    for path in sorted(tmp_path.rglob("*.py")):
        engine.lint_file(str(path))
    utils = str(tmp_path / "pkg" / "utils.py")
    engine.project.file(utils)
    released = [weakref.ref(p.model) for path, p in engine._parsed.items() if path != utils and p.model is not None]
    assert released
    gc.disable()  # (only the release may collect)
    try:
        engine.release_models(len(Path(utils).read_bytes()))
    finally:
        gc.enable()
    assert all(ref() is None for ref in released)


INSTALLER = '''\
import torch

_streams = {}


def install_streams_{i}():
    for idx, stream in _streams.items():
        with torch.cuda.device(idx):
            torch.cuda.set_stream(stream)


def start_{i}():
    install_streams_{i}()
'''

INSTALLED = {
    "pkg/__init__.py": "",
    "pkg/helpers.py": '''\
import torch

_device_streams = {}


def scaled(x):
    return x * 2


def device_stream(idx):
    return _device_streams.get(idx)
''',
    "pkg/model.py": '''\
import torch

from pkg.helpers import device_stream, scaled


def forward(x, side):
    with torch.cuda.stream(side):
        y = scaled(x)
    return y + 1


def forward_on_device(x, idx):
    with torch.cuda.stream(device_stream(idx)):
        y = x * 3
    return y
''',
}


def test_a_helper_that_returns_no_registry_entry_never_scans_the_stream_installers(tmp_path: Path) -> None:
    """``streams.installed_stream_getter`` reads the returned values' shape (``G.get(k)`` / ``G[k]`` of a module
    global) before the project-wide scan of functions calling ``set_stream``, which parses each of them: every
    inlined project helper returning anything asked that scan (torch-npu's _graph_tree.py: 11 of its 17 parses)."""
    for rel, text in INSTALLED.items():
        write(tmp_path, rel, text)
    write(tmp_path, "pkg/installers/__init__.py", "")
    for i in range(6):
        write(tmp_path, f"pkg/installers/i{i}.py", INSTALLER.replace("{i}", str(i)))
    model = tmp_path / "pkg" / "model.py"
    engine = engine_for(tmp_path)
    file = engine.project.file(str(model))
    from streamlint.model.streams import installed_stream_getter

    helpers = engine.project.file(str(tmp_path / "pkg" / "helpers.py"))
    assert not installed_stream_getter(engine.project, helpers, helpers.functions["scaled"])
    parsed = {os.path.relpath(p, tmp_path) for p in engine._parsed}
    assert not {p for p in parsed if "installers" in p}, sorted(parsed)
    # a getter of a module global still asks the scan (its registry is installed by no function here)
    assert not installed_stream_getter(engine.project, helpers, helpers.functions["device_stream"])
    parsed = {os.path.relpath(p, tmp_path) for p in engine._parsed}
    assert {p for p in parsed if "installers" in p}, sorted(parsed)
    assert file is not None
    # and the findings are those of a whole-tree run
    alone = _codes(engine_for(tmp_path).lint_file(str(model)).findings)
    whole = engine_for(tmp_path)
    in_tree = [f for p in sorted(tmp_path.rglob("*.py")) for f in whole.lint_file(str(p)).findings
               if os.path.abspath(f.path) == str(model)]
    assert _codes(in_tree) == alone


def test_the_caller_search_gives_the_same_answer_whatever_order_it_reads_the_summaries_in(tmp_path: Path) -> None:
    """``Project.paths_calling`` reads the summaries of the modules that may call a name smallest first when more
    may call it than ``limit``: the answer is the one of reading them in project order (None past the limit,
    else the hits in project order)."""
    import random

    rng = random.Random(15)
    for i in range(40):
        pad = "\n".join(f"x{j} = {j}" for j in range(rng.randrange(1, 400)))
        body = rng.choice(["def go(m):\n    return m.compile()\n",  # a call: kept by the summary
                           "# m.compile() in a comment only\ndef go(m):\n    return m\n",
                           "def go(m):\n    run = m.compile\n    return run()\n",  # an alias of it
                           "def go(m):\n    return m\n"])
        write(tmp_path, f"pkg/m{i:02}.py", f"{pad}\n{body}")
    write(tmp_path, "pkg/__init__.py", "")
    project = engine_for(tmp_path).project

    def reference(limit):
        paths = []
        for path in project.paths_containing((b"compile",)):
            summary = project.summary(path)
            if summary is not None and summary.may_call("compile"):
                paths.append(path)
                if limit is not None and len(paths) > limit:
                    return None
        return paths

    every = reference(None)
    assert 5 < len(every) < 35, len(every)
    for limit in (None, 0, 3, len(every) - 1, len(every), len(every) + 1, 39):
        assert project.paths_calling("compile", limit) == reference(limit), limit


def test_a_run_that_analyses_nothing_imports_no_analysis(tmp_path: Path) -> None:
    """Start-up floor: a lint whose files have no marker (or come from the cache) loads neither LibCST, nor
    the rules' model modules (imported at a rule's first check, or before a forked pool), nor the fix and
    pool machinery; one that analyses a file loads LibCST and the model."""
    import subprocess
    import sys

    for rel, text in (("plain.py", "x = 1\n"), ("pkg/__init__.py", ""), ("pkg/utils.py", UTILS)):
        write(tmp_path, rel, text)
    probe = (
        "import sys\n"
        "from streamlint.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "heavy = ['libcst._nodes.base', 'streamlint.model.dataflow', 'streamlint.model.breaks', 'streamlint.fixes',\n"
        "         'multiprocessing', 'concurrent.futures']\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "STREAMLINT_CACHE_DIR"}

    def loaded(*args: str) -> list[str]:
        proc = subprocess.run([sys.executable, "-c", probe, "check", "--isolated", "--no-cache", "-q", "-j", "1", *args],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        return json.loads(proc.stderr.strip().splitlines()[-1].replace("'", '"'))

    assert loaded("plain.py") == []
    assert loaded("pkg/utils.py") == ["libcst._nodes.base", "streamlint.model.breaks", "streamlint.model.dataflow"]


# ---- what the compile sites reach, asked for one file: only the sites that may reach it (issue 15)

OTHER_COMPILED = '''\
import torch
import torchair as tng
from torch import nn
from torchair.configs.compiler_config import CompilerConfig


class Net(nn.Module):
    def forward(self, x):
        return x


def build():
    config = CompilerConfig()
    config.mode = "reduce-overhead"
    return torch.compile(Net(), backend=tng.get_npu_backend(compiler_config=config))
'''


def _repo_with_unrelated_compile_sites(root: Path, sites: int = 20) -> Path:
    model = _project(root, noise=3)
    write(root, "pkg/others/__init__.py", "")
    for i in range(sites):  # modules with moded compile sites of their own models: they reach nothing of pkg
        write(root, f"pkg/others/o{i:02}.py", OTHER_COMPILED)
    return model


def _reach_answers(engine, path: Path) -> list:
    file = engine.project.file(str(path))
    answers = []
    for qualname, fn in file.functions.items():
        p = engine.project.execution_path(file, fn)
        answers.append((qualname, sorted(p.modes), p.source, [(e.path, e.span, e.message) for e in p.evidence]))
    return answers


def test_one_file_parses_only_the_compile_sites_that_may_reach_it(tmp_path: Path) -> None:
    """Counted, not timed: a one-file run of a repository with many moded compile sites parses the modules
    whose sites may reach the file (the launcher that compiles its model, the compiler it calls), not the
    others, and answers as the reach of every compile site does."""
    model = _repo_with_unrelated_compile_sites(tmp_path)
    lazy, full = engine_for(tmp_path), engine_for(tmp_path)
    full.project.path_index.prepare()
    assert _reach_answers(lazy, model) == _reach_answers(full, model)
    assert lazy.project.path_index._reached is None  # (the whole reach was never computed)
    parsed = {os.path.relpath(p, tmp_path) for p in lazy._parsed}
    assert not {p for p in parsed if "others" in p}, sorted(parsed)
    assert {"pkg/launcher.py", "pkg/compiler.py"} <= parsed
    assert len({p for p in {os.path.relpath(p, tmp_path) for p in full._parsed} if "others" in p}) == 20
    findings = lazy.lint_file(str(model)).findings
    assert _codes(findings) == _codes(engine_for(tmp_path).lint_file(str(model)).findings)
    assert ("SL502", 16) in _codes(findings)
    assert not {p for p in {os.path.relpath(p, tmp_path) for p in lazy._parsed} if "others" in p}


def test_a_compile_site_that_reaches_the_file_through_an_import_chain_is_found(tmp_path: Path) -> None:
    """One of the unrelated modules compiles the model through a re-export and a relative import of a
    package's ``__init__``: its site is found (parsed, its modes and evidence given), the others not."""
    model = _repo_with_unrelated_compile_sites(tmp_path)
    write(tmp_path, "pkg/others/__init__.py", "from pkg.model import Block as Blk  # re-exported, renamed\n")
    write(tmp_path, "pkg/others/o07.py", OTHER_COMPILED.replace(
        "    return torch.compile(Net()", "    from . import Blk\n    return torch.compile(Blk(True)"))
    # a compiler of what its callers pass that never spells the model's module: its caller does
    write(tmp_path, "pkg/others/o08.py", COMPILER.replace("whatever model", "whatever net").replace(
        "compile_model(model, config)", "compile_it(net, cfg)")
          .replace("torch.compile(model,", "torch.compile(net,").replace("compiler_config=config", "compiler_config=cfg"))
    write(tmp_path, "pkg/run2.py", "from pkg import model\nfrom pkg.others.o08 import compile_it\n"
          "from pkg.cfg2 import build_config\n\n\ndef go():\n    return compile_it(model.Block(True), build_config())\n")
    write(tmp_path, "pkg/cfg2.py", CONFIG.format(mode="reduce-overhead").replace("build_config(mode)", "build_config()"))
    assert b"model" not in (tmp_path / "pkg/others/o08.py").read_bytes()
    lazy, full = engine_for(tmp_path), engine_for(tmp_path)
    full.project.path_index.prepare()
    answers = _reach_answers(lazy, model)
    assert answers == _reach_answers(full, model)
    forward = next(a for a in answers if a[0] == "Block.forward")
    assert "reduce-overhead" in forward[1] and any(e[0].endswith("o08.py") for e in forward[3]), forward
    parsed = {os.path.relpath(p, tmp_path) for p in lazy._parsed}
    assert {"pkg/others/o07.py", "pkg/others/o08.py"} <= parsed
    assert not {p for p in parsed if "others/o" in p and not p.endswith(("o07.py", "o08.py"))}, sorted(parsed)


MLA = '''\
import torch
import torchair
from torch import nn


class MLAPrefill(nn.Module):
    """Overlaps the rope of the latent KV with the query projection."""

    def __init__(self, dim):
        super().__init__()
        self.q_proj = nn.Linear(dim, dim)
        self.kv_proj = nn.Linear(dim, dim)

    def forward(self, x, cos, sin):
        q = self.q_proj(x)
        with torchair.scope.npu_stream_switch("kv_rope", 0, enable_inner_parallel=True):
            kv = self.kv_proj(x) * cos + sin
        return q, kv
'''
NET_COMPILER = COMPILER.replace("whatever model", "whatever net").replace("compile_model(model, config)", "compile_model(net, config)") \
    .replace("torch.compile(model,", "torch.compile(net,")
TRAIN = '''\
from {module} import compile_model
from pkg.cfg import build_config
from pkg.mla import MLAPrefill


def main():
    model = MLAPrefill(1024)
    return compile_model(model, build_config())
'''


@pytest.mark.parametrize("compiler, package_init, caller, module", [
    # a flat directory without __init__.py: its own source root, the module is `npu_utils`
    ("tools/npu_utils.py", None, "scripts/train.py", "npu_utils"),
    ("tools/npu_utils.py", None, "pkg/train.py", "npu_utils"),
    # a vendored package: the module name is its __init__.py chain, not its path from the root
    ("vendor/npu_utils/compiling.py", "vendor/npu_utils/__init__.py", "pkg/train.py", "npu_utils.compiling"),
    ("third_party/npu_utils/compiler.py", "third_party/npu_utils/__init__.py", "pkg/train.py", "npu_utils.compiler"),
    ("libs/core/src/npu_utils/compiler.py", "libs/core/src/npu_utils/__init__.py", "pkg/train.py", "npu_utils.compiler"),
    # the control: in the caller's package
    ("pkg/npu_utils.py", None, "pkg/train.py", "pkg.npu_utils"),
])
def test_a_compiler_of_its_callers_arguments_outside_the_callers_packages_is_followed(
        tmp_path: Path, compiler: str, package_init: "str | None", caller: str, module: str) -> None:
    """The only compile site of the model compiles what its callers pass, from a module whose dotted name does
    not spell the directories between it and its caller (`tools/`, `vendor/`, `third_party/`, `libs/core/src/`):
    a caller found by that name makes the site reach the model, so the one-file run follows it (its path is
    reduce-overhead: SL103 on the ignored `enable_inner_parallel=`, not SL502 on an eager scope) as the whole
    reach does, and still skips the unrelated sites."""
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/mla.py", MLA)
    write(tmp_path, "pkg/cfg.py", CONFIG.format(mode="reduce-overhead").replace("build_config(mode)", "build_config()"))
    write(tmp_path, "others/__init__.py", "")
    for i in range(8):
        write(tmp_path, f"others/o{i:02}.py", OTHER_COMPILED)
    write(tmp_path, compiler, NET_COMPILER)
    if package_init is not None:
        write(tmp_path, package_init, "")
    write(tmp_path, caller, TRAIN.format(module=module))
    mla = tmp_path / "pkg" / "mla.py"
    lazy, full = engine_for(tmp_path), engine_for(tmp_path)
    full.project.path_index.prepare()
    findings = _codes(lazy.lint_file(str(mla)).findings)
    assert findings == _codes(full.lint_file(str(mla)).findings)
    assert ("SL103", 16) in findings and not [f for f in findings if f[0] == "SL502"], findings
    assert lazy.project.path_index._reached is None  # (answered from the sites that may reach the file)
    parsed = {os.path.relpath(p, tmp_path) for p in lazy._parsed}
    assert compiler in parsed and not {p for p in parsed if p.startswith("others/o")}, sorted(parsed)


def test_a_caller_found_by_its_own_module_name_is_followed(tmp_path: Path) -> None:
    """Two flat directories each hold an `npu_utils.py`: the one in `scripts/` calls a `compile_model` of its own
    (never spelling `npu_utils`), and its call's dotted name is the compiler's in `tools/`, so the whole reach
    takes its argument as what the compiler compiles; the one-file run answers the same."""
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/mla.py", MLA)
    write(tmp_path, "pkg/cfg.py", CONFIG.format(mode="reduce-overhead").replace("build_config(mode)", "build_config()"))
    write(tmp_path, "others/__init__.py", "")
    for i in range(8):
        write(tmp_path, f"others/o{i:02}.py", OTHER_COMPILED)
    write(tmp_path, "tools/npu_utils.py", NET_COMPILER)
    write(tmp_path, "scripts/npu_utils.py", TRAIN.replace("from {module} import compile_model\n", "") + '''

def compile_model(net, config):
    return net
''')
    assert b"npu_utils" not in (tmp_path / "scripts/npu_utils.py").read_bytes()
    mla = tmp_path / "pkg" / "mla.py"
    lazy, full = engine_for(tmp_path), engine_for(tmp_path)
    full.project.path_index.prepare()
    assert _codes(lazy.lint_file(str(mla)).findings) == _codes(full.lint_file(str(mla)).findings)
    assert lazy.project.path_index._reached is None


RUN = '''\
import torch
import torchair as tng
from torchair.configs.compiler_config import CompilerConfig
{imports}


def build():
    config = CompilerConfig()
    config.mode = "reduce-overhead"
    return torch.compile({expr}, backend=tng.get_npu_backend(compiler_config=config))
'''


@pytest.mark.parametrize("model, inits, run, imports, expr", [
    # a namespace package's sibling imports it from the directory above (a checkout): spells `models`
    ("ns/models/model.py", "", "ns/serve/run.py", "from models.model import Block", "Block(True)"),
    ("ns/models/model.py", "", "ns/serve/run.py", "from ns.models.model import Block", "Block(True)"),
    # src layout, imported from a test directory without __init__.py (`src/` is not spelled)
    ("src/pkg/model.py", "src/pkg", "tests/bench/test_run.py", "from pkg import model", "model.Block(True)"),
    # a script directory inside a package, importing its neighbour by its bare name
    ("pkg/model.py", "pkg", "pkg/tools/run.py", "from model import Block", "Block(True)"),
    # relative imports of the target package's __init__.py from two levels below, and of a module
    ("pkg/blocks/__init__.py", "pkg pkg/blocks/a pkg/blocks/a/b", "pkg/blocks/a/b/run.py", "from ... import Block",
     "Block(True)"),
    ("pkg/model.py", "pkg pkg/serve", "pkg/serve/run.py", "from .. import model", "model.Block(True)"),
    # a dotted name across a line continuation; aliases of the module
    ("pkg/model.py", "pkg", "app/run.py", "from pkg \\\n    . model import Block", "Block(True)"),
    ("pkg/model.py", "pkg", "app/run.py", "import pkg.model as m", "m.Block(True)"),
    ("pkg/model.py", "pkg", "app/run.py", "import pkg.model\n\nmod = pkg.model", "mod.Block(True)"),
])
def test_a_compile_site_reaching_the_file_by_any_import_form_is_followed(
        tmp_path: Path, model: str, inits: str, run: str, imports: str, expr: str) -> None:
    """The backward byte relation keeps a compile site whatever import form and directory layout leads it to the
    file (the reviewer's layouts): the one-file answers equal the whole reach's, with the site's evidence."""
    for package in inits.split():
        write(tmp_path, f"{package}/__init__.py", "")
    write(tmp_path, model, MODEL.replace("from pkg.utils import record, side_stream, wait\n", "")
          .replace("record(self.flag, self.events, 0)", "tng.ops.npu_tagged_event_record(self.events[0])")
          .replace("side_stream(self.flag, \"s1\")", "tng.scope.npu_stream_switch(\"s1\", 0)")
          .replace("            wait(self.flag, self.events, 0)\n", "")
          .replace("            record(self.flag, self.events, 1)\n", "")
          .replace("        wait(self.flag, self.events, 1)\n", ""))
    write(tmp_path, "others/__init__.py", "")
    for i in range(8):
        write(tmp_path, f"others/o{i:02}.py", OTHER_COMPILED)
    write(tmp_path, run, RUN.format(imports=imports, expr=expr))
    target = tmp_path / model
    lazy, full = engine_for(tmp_path), engine_for(tmp_path)
    full.project.path_index.prepare()
    answers = _reach_answers(lazy, target)
    assert answers == _reach_answers(full, target)
    forward = next(a for a in answers if a[0] == "Block.forward")
    assert forward[1] == ["reduce-overhead"] and any(e[0].endswith(run) for e in forward[3]), forward
    assert lazy.project.path_index._reached is None
    assert not {p for p in map(str, lazy._parsed) if "/others/o" in p}


def test_every_fixture_file_alone_gets_the_execution_paths_of_every_compile_site() -> None:
    """A fresh engine per fixture file (nothing asked before it): the execution path of each of its functions,
    with its evidence, equals the answer from every compile site of the project; and the fixture projects
    give the on-demand reach something to skip."""
    compared = spared = 0
    for project in _fixture_projects():
        full = engine_for(project)
        full.project.path_index.prepare()
        for path in sorted(project.rglob("*.py")):
            lazy = engine_for(project)
            if lazy.project.file(str(path)) is None:
                continue
            assert _reach_answers(lazy, path) == _reach_answers(full, path), path
            compared += 1
            spared += lazy.project.path_index._reached is None and bool(lazy.project.path_index._partial_paths
                                                                            or lazy.project.path_index._reaching)
    assert compared > 300 and spared >= 5, (compared, spared)  # (most fixture projects have one or two sites)



_ENCODED = {
    'pkg/modèle.py': MODEL,
    'pkg/cfg.py': '''\
from torchair.configs.compiler_config import CompilerConfig


def build_config():
    config = CompilerConfig()
    config.mode = 'reduce-overhead'
    return config
''',
    'pkg/utils.py': UTILS,
    'others/o00.py': '''\
import torch
import torchair as tng
from torch import nn
from torchair.configs.compiler_config import CompilerConfig


class Net(nn.Module):
    def forward(self, x):
        return x


def build():
    config = CompilerConfig()
    config.mode = "reduce-overhead"
    return torch.compile(Net(), backend=tng.get_npu_backend(compiler_config=config))
''',
}


def test_a_module_word_an_importer_spells_in_another_source_encoding_is_followed(tmp_path: Path) -> None:
    """`from pkg.modèle import Block` in a latin-1 file is not the UTF-8 bytes of the module word: the byte
    relation cannot tell, so the one-file run answers for the whole project (the reviewer's case: the compile
    site in `app/serve.py` was lost, and the model's scope reported as eager)."""
    for rel, text in _ENCODED.items():
        write(tmp_path, rel, text)
    for rel in ("pkg/__init__.py", "app/__init__.py", "others/__init__.py"):
        write(tmp_path, rel, "")
    for i in range(1, 4):
        write(tmp_path, f"others/o{i:02}.py", _ENCODED["others/o00.py"])
    (tmp_path / "app" / "serve.py").write_bytes(_SERVE.encode("latin-1"))
    model = tmp_path / "pkg" / "modèle.py"
    lazy, full = engine_for(tmp_path), engine_for(tmp_path)
    full.project.path_index.prepare()
    expected = _codes(full.lint_file(str(model)).findings)
    assert "SL502" not in expected  # (the reduce-overhead compile site reaches it: no eager-path finding)
    assert _codes(lazy.lint_file(str(model)).findings) == expected


_SERVE = '''\
# -*- coding: latin-1 -*-
import torch
import torchair as tng
from pkg.cfg import build_config
from pkg.modèle import Block


def build():
    return torch.compile(Block(True), backend=tng.get_npu_backend(compiler_config=build_config()))
'''


# ---- the marker searches of project-wide scans over the joined contents (bytescan.JoinedTree)


def test_the_joined_marker_search_answers_as_a_test_of_each_file() -> None:
    """Every marker tuple gets the files a test of each file gives (any marker a substring), in order: markers
    answered by the dotted / quoted word indexes, by a shared substring, one by one; at file boundaries, next to
    NUL bytes and non-ASCII bytes, overlapping quotes (``'a'b'`` holds ``'b'``), an empty file."""
    import random

    from streamlint.model.bytescan import join_contents

    contents = {
        "a.py": b"self.stream = s\nx.side=t\nengine.stream += 1\n",
        "b.py": b"",
        "c.py": b"name = 'a'b'\nq = \"side\"\n",
        "d.py": b".stream",  # ends with the word: the next file starts after a NUL
        "e.py": b"=x.stream_pool = 1\n\x00.side =\n",
        "f.py": "x.côté = 1\nx.c\u00f4t = 2\ny.streamer=3\n".encode(),
        "g.py": b"setattr(o, 'stream', v)\nd[\"stream'] = 1\n",
    }
    order = sorted(contents)
    joined = join_contents(order, lambda p: contents[p], 1 << 20)
    assert joined is not None
    words = [b"stream", b"side", b"a", b"b", b"c", b"stream_pool", b"streamer", b"x", b"self", b"c\xc3\xb4t"]
    cases: list[tuple[bytes, ...]] = [(b"'b'",), (b"'a'",), (b"=x",), (b"\n",), (b"1\n",)]
    for w in words:
        cases += [tuple(b"." + w + op for op in (b" =", b"=", b" +=")), (b'"' + w + b'"', b"'" + w + b"'"),
                  (b"." + w,), (w,), (w + b" =", b"(" + w)]
    rng = random.Random(7)
    blob = b"".join(contents.values())
    for _ in range(300):
        at = rng.randrange(len(blob))
        part = blob[at:at + rng.randint(1, 6)].replace(b"\x00", b"")
        if part:
            cases.append((part,))
    for markers in cases:
        expected = [p for p in order if any(m in contents[p] for m in markers)]
        assert joined.hits(markers) == expected, markers


def test_paths_containing_gives_the_same_files_joined_or_file_by_file(tmp_path: Path, monkeypatch) -> None:
    """Project.paths_containing over the joined contents and, past JOINED_BYTES, file by file: the same files,
    an unreadable one left out by both."""
    from streamlint.model import projectscans as scans_module

    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/a.py", "def f(o, s):\n    o.stream = s\n    setattr(o, 'side', s)\n")
    write(tmp_path, "pkg/b.py", "class A:\n    def g(self, s):\n        self.stream=s\n")
    write(tmp_path, "pkg/c.py", "x = 'side'\n")
    markers = [tuple(f".stream{op}".encode() for op in (" =", "=", " +=")), (b"'side'", b'"side"'), (b"stream",),
               (b"side", b"zzz")]
    engine = engine_for(tmp_path)
    reader = engine.project.reader
    assert reader is not None
    hidden = str(tmp_path / "pkg" / "c.py")

    def read(path: str) -> bytes:
        if os.path.abspath(path) == hidden:
            raise OSError("unreadable")
        return reader(path)

    monkeypatch.setattr(scans_module, "JOIN_AFTER", 0)
    engine.project.reader = read
    joined = [engine.project.paths_containing(m) for m in markers]
    assert engine.project._blob is not None and engine.project._blob[1] is not None
    monkeypatch.setattr(scans_module, "JOINED_BYTES", 10)
    joins: list[int] = []
    join_contents = scans_module.bytescan.join_contents
    monkeypatch.setattr(scans_module.bytescan, "join_contents", lambda *a: joins.append(1) or join_contents(*a))
    fresh = engine_for(tmp_path)
    fresh.project.reader = read
    each = [fresh.project.paths_containing(m) for m in markers]
    assert fresh.project._blob is not None and fresh.project._blob[1] is None
    assert joins == [1]  # (a tree over the limit is tried once, then tested file by file)
    assert joined == each
    assert [sorted(os.path.relpath(p, tmp_path) for p in found) for found in joined] == [
        ["pkg/a.py", "pkg/b.py"], ["pkg/a.py"], ["pkg/a.py", "pkg/b.py"], ["pkg/a.py"]]


# ---- the recordable-field search (handoffs._field_recordable): module summaries list the annotated class fields


@pytest.mark.parametrize(("source", "fields"), [
    ("class A:\n    buf: int\n    n: int = 0\n    m = 1\n", {"buf", "n"}),
    ("def f(buf: int) -> dict:\n    return {buf: 1, 'x': buf[buf:]}\n", set()),  # spells `buf:`, declares nothing
    ("def f():\n    class Inner:\n        class Deeper:\n            buf: int\n    return Inner\n", {"buf"}),
    ("class A:\n    def m(self):\n        self.buf: int = 0\n        local: int = 1\n", set()),  # not class-level
    ("class A:\n    (buf): int\n", {"buf"}),
])
def test_the_summary_lists_the_annotated_class_fields(source: str, fields: set[str]) -> None:
    summary = summarize(source.encode())
    assert summary.class_fields == fields
    assert all(summary.may_annotate_field(f) for f in fields) and not summary.may_annotate_field("other")


def test_an_unparsable_module_may_annotate_any_field() -> None:
    assert summarize(b"class A:\n    buf: int\n  def (:\n").may_annotate_field("anything")


def test_the_summary_keeps_every_class_field_annotation_the_model_reads() -> None:
    """Superset check against the model, over every fixture: each field of each class that
    ``syntax.class_field_annotation`` finds is in the module summary's ``class_fields``; and the list survives
    the cache's JSON."""
    import libcst as cst

    from streamlint.engine import parse_source
    from streamlint.model.summary import ModuleSummary
    from streamlint.model.syntax import class_field_annotation

    root = Path(__file__).resolve().parent.parent / "fixtures"
    checked = 0
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        parsed = parse_source(str(path), data, path.stem, False)
        if parsed.model is None:
            continue
        summary = summarize(data)
        assert ModuleSummary.from_json(json.loads(json.dumps(summary.to_json()))) == summary
        for cls in parsed.model.classes.values():
            for stmt in cls.node.body.body:
                for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                    target = getattr(small, "target", None)
                    name = getattr(target, "value", None)
                    if isinstance(name, str) and class_field_annotation(cls.node, name) is not None:
                        checked += 1
                        assert summary.may_annotate_field(name), (path, cls.node.name.value, name)
    assert checked > 50


_SIGNATURES = "def merge(contexts: list, n: int) -> int:\n    return len(contexts[n:])\n"


def test_the_recordable_field_search_parses_only_modules_that_may_declare_it_and_sees_a_new_one(
        tmp_path: Path, monkeypatch) -> None:
    """SL301's question "does every project class that declares field F hold recordable objects?" (a byte
    search for ``F:``) parses only the modules whose summary may annotate F, not the ones that spell ``F:`` in a
    signature or a slice; a module edited to declare F with another type changes the answer, on a warm run of
    the command line (its summary is by content) and in an engine given the edit (the language server)."""
    import shutil

    from streamlint.model.handoffs import _field_recordable

    monkeypatch.chdir(tmp_path)
    shutil.copytree(Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "sl301_handoff_siblings",
                    tmp_path, dirs_exist_ok=True)
    for i in range(12):
        write(tmp_path, f"trainer/merge{i:02}.py", _SIGNATURES)
    stages = tmp_path / "trainer" / "stages.py"
    engine = engine_for(tmp_path)
    before = _codes(engine.lint_file(str(stages)).findings)
    assert ("SL301", 75) in before
    assert _field_recordable(engine.project, "contexts")
    parsed = {os.path.relpath(p, tmp_path) for p in engine._parsed}
    assert not {p for p in parsed if "merge" in p}, sorted(parsed)

    args = ["check", "--isolated", "--output-format", "json", "--exit-zero", "-q", "--select", "SL301", str(stages)]
    cold = json.loads(cli(args).output)
    assert ("SL301", 75) in [(f["code"], f["start"]["line"]) for f in cold]
    declares = _SIGNATURES + "\n\nclass Cursor:\n    contexts: int = 0\n"
    edited = write(tmp_path, "trainer/merge07.py", declares)
    warm = json.loads(cli(args).output)
    assert ("SL301", 75) not in [(f["code"], f["start"]["line"]) for f in warm]
    fresh = engine_for(tmp_path)
    assert sorted((f["code"], f["start"]["line"]) for f in warm) == \
        [c for c in _codes(fresh.lint_file(str(stages)).findings) if c[0] == "SL301"]
    assert not _field_recordable(fresh.project, "contexts")

    engine.set_override(str(edited), declares.encode())
    assert not _field_recordable(engine.project, "contexts")
    assert ("SL301", 75) not in _codes(engine.lint_file(str(stages)).findings)


def test_the_recordable_field_search_sees_a_declaration_spelled_with_a_space(tmp_path: Path, monkeypatch) -> None:
    """``contexts : int = 0`` declares the field as ``contexts: int = 0`` does: the byte search looks for both
    spellings, so a class declaring it with another type is seen and SL301's hand-off question changes."""
    import shutil

    from streamlint.model.handoffs import _field_recordable

    monkeypatch.chdir(tmp_path)
    shutil.copytree(Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "sl301_handoff_siblings",
                    tmp_path, dirs_exist_ok=True)
    assert _field_recordable(engine_for(tmp_path).project, "contexts")
    write(tmp_path, "trainer/cursor.py", "class Cursor:\n    contexts : int = 0\n")
    assert not _field_recordable(engine_for(tmp_path).project, "contexts")


def test_the_recording_scope_scan_parses_only_modules_spelling_its_three_words(tmp_path: Path) -> None:
    """``calleerecords.scope_recorded_fields``: a recording scope is a ``@contextmanager`` generator recording a
    parameter after its ``yield``; only modules that spell ``contextmanager``, ``yield`` and ``record`` are parsed
    for it (a module with context managers that record nothing is not), and the answer is the same."""
    from streamlint.model.flow.calleerecords import scope_recorded_fields

    write(tmp_path, "sched/__init__.py", "")
    write(tmp_path, "sched/guards.py", '''\
from contextlib import contextmanager

import torch


@contextmanager
def lane(stream, done):
    with torch.cuda.stream(stream):
        try:
            yield
        finally:
            done.record(stream)
''')
    write(tmp_path, "sched/stage.py", '''\
from sched.guards import lane


class Stage:
    def run(self, x):
        with lane(self.stream, self.finished):
            return x * 2
''')
    for i in range(6):  # context managers that yield but record nothing: never parsed for the question
        write(tmp_path, f"sched/timer{i}.py", f'''\
import contextlib
import time


@contextlib.contextmanager
def timed_{i}(label):
    start = time.perf_counter()
    yield
    print(label, time.perf_counter() - start)
''')
    write(tmp_path, "sched/pinned.py", '''\
from contextlib import contextmanager

import torch


@contextmanager
def keep_alive(tensor, stream):
    yield tensor
    tensor.record_stream(stream)  # (record_stream, not a call of `record`: not a recording scope)
''')
    engine = engine_for(tmp_path)
    assert scope_recorded_fields(engine.project) == frozenset({"finished"})
    parsed = {os.path.relpath(p, tmp_path) for p in engine._parsed}
    assert not {p for p in parsed if "timer" in p or "pinned" in p}, sorted(parsed)
    assert "sched/guards.py" in parsed and "sched/stage.py" in parsed


def test_the_kept_budget_counts_a_large_module_the_next_file_reaches_through_a_star_import(
        tmp_path: Path, monkeypatch) -> None:
    """Before a file is analysed, the kept trees are let go down to the budget less the large modules its imports lead
    to (here through a package that star-imports a generated module) and the engine does not hold: the file parses
    them on top of the kept trees. A module it does not reach, or one already held, is not counted; the findings
    are those of an engine that keeps everything."""
    from streamlint import parallel

    model = _project(tmp_path, noise=4)
    ops = "".join(f"def op_{i}(x, stream=None):\n    return x.clone()\n\n\n" for i in range(40))
    write(tmp_path, "pkg/gen/__init__.py", "")
    write(tmp_path, "pkg/gen/raw_ops.py", ops)
    write(tmp_path, "pkg/gen/api.py", "from pkg.gen.raw_ops import *  # noqa: F403\n")
    user = write(tmp_path, "pkg/custom_op.py", '''\
        import torch
        from pkg.gen import api as g


        def run(x):
            s = torch.npu.Stream()
            with torch.npu.stream(s):
                y = g.op_3(x)
            return y
        ''')
    big = len((tmp_path / "pkg" / "gen" / "raw_ops.py").read_bytes())
    monkeypatch.setattr(parallel, "LARGE_REACH", big - 1)
    engine = engine_for(tmp_path)
    data = user.read_bytes()
    assert parallel._large_reach(engine, str(user), data) == big
    assert parallel._large_reach(engine, str(model), model.read_bytes()) == 0  # (reaches no large module)
    engine.lint_file(str(model))
    held = engine.parsed_bytes()
    monkeypatch.setattr(parallel, "MODEL_BYTES_KEPT", held + big // 2)
    parallel._bounded(engine, str(user), data)
    assert engine.parsed_bytes() <= held - big // 2  # let go down to the budget less the large module
    found = _codes(engine.lint_file(str(user)).findings)
    assert engine.holds_parsed(str(tmp_path / "pkg" / "gen" / "raw_ops.py"))
    assert parallel._large_reach(engine, str(user), data) == 0  # (held now: not counted again)
    monkeypatch.setattr(parallel, "MODEL_BYTES_KEPT", 1 << 30)
    assert _codes(engine_for(tmp_path).lint_file(str(user)).findings) == found


def test_the_summary_lists_only_the_functions_a_module_defines_at_its_top_level() -> None:
    """``ModuleSummary.module_functions``: ``def`` / ``async def`` directly in the module body, decorated or not;
    not a method, a nested function, or a def under ``if`` / ``try`` (not asserted to be one); unparsable content
    defines nothing for certain; the names survive the cache's JSON."""
    from streamlint.model.summary import ModuleSummary

    summary = summarize(b'''\
import functools


@functools.lru_cache(maxsize=None)
def bucket_sizes(n):
    def inner(k):
        return k
    return [inner(i) for i in range(n)]


async def drain_completions(queue):
    return await queue.get()


class StagingRing:
    def refill_slots(self, stream):
        return stream


if HAS_NPU:
    def pick_device():
        return "npu"
''')
    assert summary.module_functions == frozenset({"bucket_sizes", "drain_completions"})
    assert summary.defines_function("drain_completions")
    assert not summary.defines_function("refill_slots") and not summary.defines_function("pick_device")
    assert not summary.defines_function("inner")
    assert ModuleSummary.from_json(json.loads(json.dumps(summary.to_json()))) == summary
    assert not summarize(b"def refill_slots(:\n").defines_function("refill_slots")


_RING = '''\
import torch


class PinnedRing:
    def __init__(self, host, dev):
        self.host, self.dev = host, dev

    def upload_slot_block(self, stream):
        with torch.npu.stream(stream):
            self.dev.copy_(self.host, non_blocking=True)
'''

_SHIM = '''\
def upload_slot_block(buffers, stream):
    """A module function of the same name (a compatibility shim): the name is not one class's method."""
    for buf in buffers:
        buf.upload(stream)
'''


def test_a_module_function_of_a_duck_method_name_is_known_from_the_summary_without_a_parse(tmp_path: Path) -> None:
    """``duckmethods.method_definitions``: a module whose summary shows a top-level ``def name`` makes the answer
    None (not one class's method) without parsing it, as its model would; without it the class method is found;
    a module edited from the function to a method changes the answer (summary by content)."""
    from streamlint.model.flow.duckmethods import method_definitions
    from streamlint.model.flow.devicework import every_method_queues_work

    write(tmp_path, "serve/__init__.py", "")
    write(tmp_path, "serve/ring.py", _RING)
    shim = write(tmp_path, "serve/compat.py", _SHIM)
    engine = engine_for(tmp_path)
    assert method_definitions(engine.project, "upload_slot_block") is None
    assert not {os.path.relpath(p, tmp_path) for p in engine._parsed}, sorted(engine._parsed)

    shim.write_text("def upload_other(buffers, stream):\n    pass\n", encoding="utf-8")
    engine = engine_for(tmp_path)
    found = method_definitions(engine.project, "upload_slot_block")
    assert found is not None and [(f.node.name.value, cls.name) for f, cls, _ in found] == \
        [("upload_slot_block", "PinnedRing")]
    import libcst as cst

    assert every_method_queues_work(engine.project, cst.parse_expression("ring.upload_slot_block(s)").func)

    engine.set_override(str(shim), _SHIM.encode())  # (an editor buffer: the language server's engine)
    assert method_definitions(engine.project, "upload_slot_block") is None
