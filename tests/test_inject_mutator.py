"""The defect-injection mutator (bench/inject) on our own synthetic MoE / attention modules (no network).

Each mutation kind must yield a module that parses and differs from the original in exactly the
intended way; the equivalence verdicts and the scoring of findings are checked on small cases.
"""

from __future__ import annotations

import ast
import difflib
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.inject.harness import Mutant, from_json, line_map, sample, score, to_json  # noqa: E402
from bench.inject.mutate import KINDS, MARK, sites  # noqa: E402
from bench.inject.report import results_md, undecided_tsv  # noqa: E402

MOE = textwrap.dedent('''\
    import torch
    import torch_npu
    import torchair
    from torchair.scope import npu_stream_switch, npu_wait_tensor


    class SharedExpertMoE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.comm_stream = torch.npu.Stream()
            self.done = torch.npu.Event()

        def forward(self, hidden: torch.Tensor, router_logits: torch.Tensor):
            topk = torch.topk(router_logits, 2)
            with npu_stream_switch("moe_shared", 0):
                npu_wait_tensor(hidden, topk)
                shared = self.shared_experts(hidden, topk)
            routed = self.experts(hidden, topk)
            return routed + shared

        def overlap(self, x):
            cur = torch.npu.current_stream()
            self.comm_stream.wait_stream(cur)
            with torch.npu.stream(self.comm_stream):
                y = self.proj(x)
                self.done.record()
            cur.wait_event(self.done)
            z = y + 1
            return z

        def prefetch(self, batch):
            with torch.npu.stream(self.comm_stream):
                buf = batch.to("npu", non_blocking=True)
            torch.npu.current_stream().wait_stream(self.comm_stream)
            buf.record_stream(torch.npu.current_stream())
            out = buf.sum()
            return out

        def join_all(self, streams, xs):
            outs = []
            for s in streams:
                with torch.npu.stream(s):
                    outs.append(self.proj(xs))
            for s in streams:
                torch.npu.current_stream().wait_stream(s)
            return outs


    def build_backend():
        config = torchair.CompilerConfig()
        config.experimental_config.frozen_parameter = True
        return torchair.get_npu_backend(compiler_config=config)
''')

# Attention-style module without a module-level torchair import, with helpers whose waits protect the caller.
ATTN = textwrap.dedent('''\
    import torch
    from vllm_like.utils import npu_stream_switch, npu_wait_tensor


    def decode(q, kv_cache, slot_mapping, enable_multistream=True):
        k = kv_cache.index_select(0, slot_mapping)
        with npu_stream_switch("mla_secondary", 0, enabled=enable_multistream):
            npu_wait_tensor(q, k, enabled=enable_multistream)
            q_rope = rope(q)
        return attend(q_rope, k)


    def unused_wait(q, k):
        with npu_stream_switch("side", 0):
            npu_wait_tensor(q, k)
        return k


    def sync_helper(stream):
        torch.npu.current_stream().wait_stream(stream)


    def timing(model, x):
        start = torch.npu.Event(enable_timing=True)
        end = torch.npu.Event(enable_timing=True)
        start.record()
        y = model(x)
        end.record()
        end.synchronize()
        return y, start.elapsed_time(end)


    class Cache:
        def swap(self, stream, blocks, staging):
            with torch.npu.stream(stream):
                self.gpu_cache.copy_(blocks)
                staging.copy_(blocks)
            self.gpu_cache.record_stream(stream)
            staging.record_stream(stream)
''')


def _sites(src: str, **kw):
    return sites(src, "pkg/mod.py", tree_is_npu=True, tree_multistream=True, **kw)


def _changes(old: str, new: str) -> list[tuple[str, list[str], list[str]]]:
    a, b = old.splitlines(), new.splitlines()
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append((tag, a[i1:i2], b[j1:j2]))
    return out


def _parses(text: str) -> None:
    ast.parse(text)
    cst.parse_module(text)


def test_every_kind_has_a_site_in_the_synthetic_modules() -> None:
    kinds = {s.kind for s in _sites(MOE)} | {s.kind for s in _sites(ATTN)}
    assert kinds == set(KINDS)


@pytest.mark.parametrize("src", [MOE, ATTN], ids=["moe", "attention"])
def test_every_mutant_parses_and_is_marked(src: str) -> None:
    all_sites = _sites(src)
    assert all_sites
    for site in all_sites:
        out = site.apply()
        _parses(out)
        assert out != src
        assert sum(MARK in ln and "sl-inject-import" not in ln for ln in out.splitlines()) == 1, site.key
        assert site.apply() == out  # deterministic


def _one(src: str, kind: str, detail: str | None = None, qualname: str | None = None):
    found = [s for s in _sites(src) if s.kind == kind and (detail is None or s.detail == detail)
             and (qualname is None or s.qualname == qualname)]
    assert found, (kind, detail, qualname)
    return found[0]


@pytest.mark.parametrize("qualname,detail,old", [
    ("SharedExpertMoE.forward", "npu_wait_tensor", "npu_wait_tensor(hidden, topk)"),
    ("SharedExpertMoE.overlap", "wait_stream", "self.comm_stream.wait_stream(cur)"),
    ("SharedExpertMoE.overlap", "wait_event", "cur.wait_event(self.done)"),
    ("SharedExpertMoE.prefetch", "wait_stream", "torch.npu.current_stream().wait_stream(self.comm_stream)"),
])
def test_delete_wait_replaces_exactly_the_wait_with_pass(qualname: str, detail: str, old: str) -> None:
    site = _one(MOE, "delete-wait", detail, qualname)
    out = site.apply()
    [(tag, before, after)] = _changes(MOE, out)
    assert tag == "replace"
    assert [b.strip() for b in before] == [old]
    assert [a.strip() for a in after] == [f"pass  {MARK}"]
    assert after[0].index("pass") == before[0].index(old[0])  # same indentation


def test_delete_record_stream_and_record_on_the_wrong_stream() -> None:
    deleted = _one(MOE, "delete-record-stream").apply()
    [(_, before, after)] = _changes(MOE, deleted)
    assert before[0].strip() == "buf.record_stream(torch.npu.current_stream())"
    assert after[0].strip() == f"pass  {MARK}"
    wrong = _one(MOE, "record-wrong-stream")
    [(_, before, after)] = _changes(MOE, wrong.apply())
    assert after[0].strip() == f"buf.record_stream(self.comm_stream)  {MARK}"  # the producer's own stream
    assert wrong.verdict == "defect"


def test_record_event_early_moves_the_record_before_the_work() -> None:
    site = _one(MOE, "record-event-early")
    out = site.apply()
    a, b = MOE.splitlines(), out.splitlines()
    assert sorted(x.replace(f"  {MARK}", "") for x in b) == sorted(a)
    rec = next(i for i, ln in enumerate(b) if "self.done.record()" in ln)
    work = next(i for i, ln in enumerate(b) if "y = self.proj(x)" in ln)
    assert rec == work - 1 and b[rec].endswith(MARK)
    assert site.verdict == "defect"  # the event is waited in the same function


@pytest.mark.parametrize("kind,new", [("join-loop-skip-first", "for s in streams[1:]:"),
                                      ("join-loop-skip-last", "for s in streams[:-1]:")])
def test_join_loop_skip(kind: str, new: str) -> None:
    sites_ = [s for s in _sites(MOE) if s.kind == kind]
    assert len(sites_) == 1  # only the loop that waits, not the loop that forks
    [(_, before, after)] = _changes(MOE, sites_[0].apply())
    assert before[0].strip() == "for s in streams:"
    assert after[0].strip() == f"{new}  {MARK}"


def test_join_loop_over_range() -> None:
    src = textwrap.dedent('''\
        import torch
        def join(streams, n):
            for i in range(n):
                torch.npu.current_stream().wait_stream(streams[i])
    ''')
    outs = {s.kind: s.apply() for s in _sites(src) if s.kind.startswith("join-loop")}
    assert "for i in range(1, n):" in outs["join-loop-skip-first"]
    assert "for i in range(n - 1):" in outs["join-loop-skip-last"]


@pytest.mark.parametrize("detail,inserted", [
    ("print", ['print("sl-inject")']),
    ("graph_break", ["torch._dynamo.graph_break()"]),
    ("item", ["_sl_inject = hidden.item()"]),
    ("tolist", ["_sl_inject = hidden.tolist()"]),
    ("cpu", ["_sl_inject = hidden.cpu()"]),
    ("if-tensor", ["if hidden.sum() > 0:", "    _sl_inject = 1"]),
])
def test_break_direct_inserts_first_in_the_scope(detail: str, inserted: list[str]) -> None:
    site = _one(MOE, "break-direct", detail)
    out = site.apply()
    [(tag, before, after)] = _changes(MOE, out)
    assert tag == "insert" and before == []
    assert after == [" " * 12 + inserted[0] + f"  {MARK}", *(" " * 12 + ln for ln in inserted[1:])]
    lines = out.splitlines()
    at = lines.index(after[0])
    assert lines[at - 1].strip() == 'with npu_stream_switch("moe_shared", 0):'
    # `.cpu()` is traced by Dynamo (domain.md §3): inserting it breaks nothing, so it is never counted as a defect
    assert site.verdict == ("equivalent" if detail == "cpu" else "defect")


def test_break_through_a_callee_adds_a_helper_and_one_call() -> None:
    out = _one(MOE, "break-callee").apply()
    changes = _changes(MOE, out)
    assert len(changes) == 2
    assert changes[0][2] == [f"            _sl_inject = _sl_inject_helper(hidden)  {MARK}"]
    tree = ast.parse(out)
    helper = tree.body[-1]
    assert isinstance(helper, ast.FunctionDef) and helper.name == "_sl_inject_helper"
    assert ast.unparse(helper.body[0]) == "return t.tolist()"


def test_single_stream_is_set_right_after_the_config() -> None:
    site = _one(MOE, "single-stream")
    [(tag, _, after)] = _changes(MOE, site.apply())
    assert tag == "insert" and after == [f"    config.ge_config.enable_single_stream = True  {MARK}"]
    assert site.verdict == "defect"
    plain = _one(MOE.replace("npu_stream_switch", "other_scope"), "single-stream")
    assert plain.verdict == "defect"  # verdict follows the tree flag, not the module text
    no_ms = [s for s in sites(MOE, "m.py", tree_multistream=False) if s.kind == "single-stream"][0]
    assert no_ms.verdict == "equivalent"


def test_mode_api_variants() -> None:
    ge = _one(MOE, "mode-api", "record_stream in GE scope")
    [(_, _, after)] = _changes(MOE, ge.apply())
    assert after == [f"            hidden.record_stream(torch.npu.current_stream())  {MARK}"]
    eager = _one(MOE, "mode-api", "npu_wait_tensor in native stream scope", "SharedExpertMoE.join_all")
    out = eager.apply()
    changes = _changes(MOE, out)
    assert len(changes) == 1  # torchair is imported already: no import added
    assert "torchair.scope.npu_wait_tensor(" in changes[0][2][0]
    attn_sites = [s for s in _sites(ATTN) if s.kind == "mode-api" and "native" in s.detail]
    assert attn_sites
    assert "import torchair  # sl-inject-import" in attn_sites[0].apply().splitlines()


def test_superkernel_nest_wraps_and_reindents_the_switch() -> None:
    out = _one(ATTN, "superkernel-nest", qualname="decode").apply()
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if "super_kernel(" in ln)
    assert lines[at] == f'    with torchair.scope.super_kernel("sl_inject", ""):  {MARK}'
    assert lines[at + 1] == '        with npu_stream_switch("mla_secondary", 0, enabled=enable_multistream):'
    assert lines[at + 2] == "            npu_wait_tensor(q, k, enabled=enable_multistream)"
    assert lines[at + 4] == "    return attend(q_rope, k)"
    assert "import torchair  # sl-inject-import" in lines


def test_equivalence_verdicts() -> None:
    by = {(s.kind, s.qualname, s.detail): s for s in _sites(ATTN)}
    # GE orders data edges itself: a deleted npu_wait_tensor with no in-place write around is undecided
    ge = by[("delete-wait", "decode", "npu_wait_tensor")]
    assert ge.verdict == "undecided" and "GE" in ge.reason
    in_place = ATTN.replace("q_rope = rope(q)", "kv_cache.index_copy_(0, slot_mapping, q)")
    assert [s.verdict for s in _sites(in_place) if s.kind == "delete-wait" and s.qualname == "decode"] == ["defect"]
    unused = by[("delete-wait", "unused_wait", "npu_wait_tensor")]
    assert unused.verdict == "equivalent" and "not used after" in unused.reason
    helper = by[("delete-wait", "sync_helper", "wait_stream")]
    assert helper.verdict == "undecided" and "caller" in helper.reason
    early = [s for s in _sites(ATTN) if s.kind == "record-event-early" and s.qualname == "timing"]
    assert early and all(s.verdict == "equivalent" and "timing" in s.reason for s in early)
    rs = {s.detail: s for s in _sites(ATTN) if s.kind == "delete-record-stream"}
    verdicts = sorted((s.verdict, s.reason.split("`")[1]) for s in _sites(ATTN) if s.kind == "delete-record-stream")
    assert verdicts == [("equivalent", "self.gpu_cache"), ("undecided", "staging")]
    assert rs


def test_disabled_scope_makes_an_equivalent_break() -> None:
    src = ATTN.replace('npu_stream_switch("side", 0)', 'npu_stream_switch("side", 0, enabled=False)')
    breaks = [s for s in _sites(src) if s.kind == "break-direct" and s.qualname == "unused_wait"]
    assert breaks and all(s.verdict == "equivalent" for s in breaks)


def test_functions_without_streams_give_no_sites() -> None:
    src = "import torch\n\ndef f(x):\n    y = x.tolist()\n    return y\n"
    assert sites(src, "m.py") == []
    assert sites("def broken(:\n", "m.py") == []


def test_sampling_is_deterministic_and_round_robin() -> None:
    all_sites = _sites(MOE) + _sites(ATTN)
    a = [s.key for s in sample(all_sites, 12, 16, "pkg")]
    b = [s.key for s in sample(list(reversed(all_sites)), 12, 16, "pkg")]
    assert a == b
    assert len({s.kind for s in sample(all_sites, len(KINDS), 16, "pkg")}) == len(KINDS)
    assert a != [s.key for s in sample(all_sites, 12, 17, "pkg")]


def _finding(code: str, line: int, msg: str = "m") -> dict:
    return {"code": code, "start": {"line": line, "column": 0}, "message": msg}


def test_score_ignores_findings_of_the_original_and_uses_the_window() -> None:
    site = _one(MOE, "delete-wait", "wait_event", "SharedExpertMoE.overlap")
    out = site.apply()
    m = Mutant("p", "1", site.path, site.qualname, site.kind, site.detail, site.line, site.api_family,
               site.verdict, site.reason, site.key, source=out)
    # SL501 on line 10 of the original stays: not new. SL201 at the consumer `z = y + 1` is caught.
    consumer = out.splitlines().index("        z = y + 1") + 1
    score(m, site, MOE, [_finding("SL501", 10)], [_finding("SL501", 10), _finding("SL201", consumer)])
    assert m.new == [("SL201", consumer)] and m.caught_rule and m.caught_family and m.extras == []
    # a finding of the family but another rule counts for the family only; one far away not at all
    score(m, site, MOE, [], [_finding("SL202", consumer), _finding("SL301", 2)])
    assert not m.caught_rule and m.caught_family and m.extras == [("SL301", 2)]
    score(m, site, MOE, [], [_finding("SL201", 3)])
    assert not m.caught_family and m.caught_in_file


def test_line_map_follows_inserted_lines() -> None:
    old = ["a", "b", "c"]
    new = ["a", "x", "b", "c"]
    assert line_map(old, new) == {1: 1, 2: 3, 3: 4}


def test_results_round_trip_and_reports() -> None:
    def mutant(kind: str, verdict: str, caught: bool, family: str = "CUDA") -> Mutant:
        m = Mutant("pkg", "1.0", "a.py", "f", kind, "d", 3, family, verdict, "why: `x`", f"a.py::f::{kind}@{verdict}",
                   expected=("SL201",), window=(1, 9), new=[("SL201", 4)] if caught else [("SL501", 2)],
                   caught_rule=caught, caught_family=caught, extras=[] if caught else [("SL501", 2)])
        return m
    ms = [mutant("delete-wait", "defect", True), mutant("delete-wait", "defect", False),
          mutant("join-loop-skip-first", "defect", False, "TorchAir graph"), mutant("delete-wait", "undecided", False)]
    assert [from_json(to_json(m)) for m in ms] == [Mutant(**{**to_json(m), "source": ""}) for m in ms]
    text = results_md(ms, command="python -m bench.inject", seconds=60, packages=["pkg 1.0"])
    assert "Recall over the defects: rule 0.33, family 0.33" in text
    assert "| delete-wait | 2 | 1 | 0.50 | 1 | 0.50 | 1 |" in text
    assert "| join-loop-skip-first |  | TorchAir graph | 1 |" in text
    tsv = undecided_tsv(ms).splitlines()
    assert len(tsv) == 2 and tsv[1].split("\t")[4] == "delete-wait"


def test_scope_wrappers_of_native_streams_make_scope_mutants_equivalent(tmp_path: Path) -> None:
    from bench.inject.harness import ScopeResolver, scope_verdict

    (tmp_path / "pkg" / "torchair_mode").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "utils.py").write_text(textwrap.dedent('''\
        import torch
        from contextlib import nullcontext

        def npu_stream_switch(target_stream, *, enabled=True):
            if not enabled:
                return nullcontext()
            return torch.npu.stream(target_stream)
    '''))
    (tmp_path / "pkg" / "torchair_mode" / "utils.py").write_text(textwrap.dedent('''\
        from contextlib import nullcontext
        from torchair.scope import npu_stream_switch as _npu_stream_switch

        def npu_stream_switch(tag, priority, *, enabled=True):
            return _npu_stream_switch(tag, priority) if enabled else nullcontext()
    '''))
    eager_user = "from pkg.utils import (\n    npu_stream_switch,\n)\n"
    graph_user = "from pkg.torchair_mode.utils import npu_stream_switch, npu_wait_tensor\n"
    direct_user = "from torchair.scope import npu_stream_switch as npu_stream_switch\n"
    local_user = "import torch\ndef npu_stream_switch(s):\n    return torch.npu.stream(s)\n"
    for name, text in [("eager.py", eager_user), ("graph.py", graph_user), ("direct.py", direct_user),
                       ("local.py", local_user), ("relative.py", "from .utils import npu_stream_switch\n"),
                       ("reexport.py", "from pkg.relative import npu_stream_switch, other\n")]:
        (tmp_path / "pkg" / name).write_text(text)
    resolver = ScopeResolver(tmp_path)
    assert resolver.resolve("pkg/eager.py", "npu_stream_switch") == "native"
    assert resolver.resolve("pkg/relative.py", "npu_stream_switch") == "native"
    assert resolver.resolve("pkg/local.py", "npu_stream_switch") == "native"
    assert resolver.resolve("pkg/reexport.py", "npu_stream_switch") == "native"  # through a re-export
    assert resolver.resolve("pkg/graph.py", "npu_stream_switch") == "torchair"
    assert resolver.resolve("pkg/direct.py", "npu_stream_switch") == "torchair"
    assert resolver.resolve("pkg/graph.py", "super_kernel") == "unknown"

    site = _one(ATTN, "break-direct", "print", "decode")
    line = ATTN.splitlines()[site.line - 1]

    def as_mutant(file: str, s=site) -> Mutant:
        return Mutant("p", "1", file, s.qualname, s.kind, s.detail, s.line, s.api_family, s.verdict, s.reason, s.key)
    m = as_mutant("pkg/eager.py")
    scope_verdict(m, line, resolver)
    assert m.verdict == "equivalent" and "torch.npu.stream" in m.reason
    m = as_mutant("pkg/graph.py")
    scope_verdict(m, line, resolver)
    assert m.verdict == "defect"
    wait = _one(ATTN, "delete-wait", "npu_wait_tensor", "decode")
    w = as_mutant("pkg/eager.py", wait)
    scope_verdict(w, line, resolver)
    assert w.verdict == wait.verdict  # only scope kinds are affected


def test_command_line_end_to_end_on_a_local_tree(tmp_path: Path) -> None:
    """The whole harness on a synthetic tree (no network): sample, mutate, lint in context, score."""
    import json

    from bench.inject.__main__ import main

    tree = tmp_path / "trees" / "synthetic-1.0" / "moe_pkg"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text("")
    (tree / "layers.py").write_text(MOE)
    out = tmp_path / "out"
    assert main(["--trees-dir", str(tmp_path / "trees"), "--kinds", "break-direct", "--limit", "2",
                 "--no-report", "--out", str(out), "--jobs", "1"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["package"] == "synthetic" and row["version"] == "1.0" and row["error"] == ""
        assert row["kind"] == "break-direct" and row["verdict"] == "defect"
        # a graph break as the first statement of a torchair.scope.npu_stream_switch scope is SL101, there
        assert row["caught_rule"] and [c for c, _ in row["new"]] == ["SL101"]
        lo, hi = row["window"]
        assert lo <= row["new"][0][1] <= hi


def test_record_stream_protocols_and_elements_are_not_counted_as_defects() -> None:
    from bench.inject.harness import lifetime_verdict

    src = textwrap.dedent('''\
        import torch

        class Ctx:
            def record_stream(self, stream):
                buf = self.make()
                buf.record_stream(stream)

        def protect_all(self, stream, x):
            for ctx in self.contexts:
                ctx.record_stream(stream)
            tmp = torch.empty_like(x)
            tmp.record_stream(stream)
            with torch.cuda.stream(stream):
                tmp.copy_(x)
    ''')
    lines = src.splitlines()
    verdicts = {}
    for site in _sites(src):
        if site.kind != "delete-record-stream":
            continue
        m = Mutant("p", "1", site.path, site.qualname, site.kind, site.detail, site.line, site.api_family,
                   site.verdict, site.reason, site.key)
        lifetime_verdict(m, lines)
        verdicts[lines[site.line - 1].strip()] = m.verdict
    assert verdicts == {"buf.record_stream(stream)": "undecided",  # Ctx.record_stream: the caller decides
                        "ctx.record_stream(stream)": "equivalent",  # element of self.contexts
                        "tmp.record_stream(stream)": "defect"}


def test_join_loops_that_wait_on_the_same_stream_every_time_are_undecided() -> None:
    from bench.inject.harness import loop_verdict

    src = textwrap.dedent('''\
        import torch

        def per_stream(streams, xs):
            cur = torch.cuda.current_stream()
            for s in streams:
                cur.wait_stream(s)
            return xs

        def same_stream(layers, side, xs):
            for layer in layers:
                if layer.offloaded:  # control flow is not work
                    torch.cuda.current_stream().wait_stream(
                        side
                    )
            return xs

        def work_and_wait(chunks, streams, xs):
            outs = []
            for i, chunk in enumerate(chunks):
                with torch.cuda.stream(streams[i]):
                    outs.append(chunk @ xs)
                torch.cuda.current_stream().wait_stream(streams[i])
            return outs
    ''')
    lines = src.splitlines()
    verdicts = {}
    for site in _sites(src):
        if site.kind != "join-loop-skip-first":
            continue
        m = Mutant("p", "1", site.path, site.qualname, site.kind, site.detail, site.line, site.api_family,
                   site.verdict, site.reason, site.key)
        loop_verdict(m, lines)
        verdicts[site.qualname] = m.verdict
    # a body that also does the work: skipping an iteration drops the work with its wait (out of domain)
    assert verdicts == {"per_stream": "defect", "same_stream": "undecided", "work_and_wait": "equivalent"}


HOST_SYNC = textwrap.dedent('''\
    import threading
    from threading import Event, Thread

    import torch


    class Prefetcher(Thread):
        def __init__(self, ctx):
            super().__init__()
            self._ready: Event = Event()
            self._slots = [ctx.Event() for _ in range(4)]
            self._stop_evt = threading.Event()
            self.stream = torch.cuda.Stream()
            self.copied = torch.cuda.Event()

        def run(self, batch):
            self._ready.wait()
            self._slots[0].wait()
            self._stop_evt.wait()
            with torch.cuda.stream(self.stream):
                out = batch.cuda(non_blocking=True)
                self.copied.record()
            self.copied.wait()
            return out * 2


    def time_it(fn, iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / iters
''')


def test_host_events_and_timing_synchronize_are_not_stream_defects() -> None:
    found = [(s.kind, s.detail, s.line, s.verdict) for s in sites(HOST_SYNC, "prefetch.py")]
    waits = [(line, verdict) for kind, detail, line, verdict in found if kind == "delete-wait"]
    # threading.Event / mp context events / `Event` imported from threading give no site; the device event does
    assert (23, "defect") in waits
    assert not [w for w in waits if w[0] in (17, 18, 19)]
    # synchronize() around timing events, no second stream: out of the linter's domain, never a defect
    syncs = [(line, verdict) for kind, detail, line, verdict in found if detail == "synchronize"]
    assert syncs == [(30, "equivalent"), (35, "equivalent")]


def test_judged_verdicts_replace_the_automatic_ones(tmp_path: Path) -> None:
    from bench.inject.harness import apply_judged, load_judged
    path = tmp_path / "judged.tsv"
    path.write_text("package\tversion\tkey\tverdict\treason\n"
                    "p\t1\tm.py::f::delete-wait:wait_stream@3\tout-of-domain\thost barrier\n"
                    "p\t1\tm.py::g::delete-wait:wait_stream@2\tdefect\tfork: x read on s before produced\n"
                    "p\t1\tbroken line without enough columns\n", encoding="utf-8")
    judged = load_judged(path)
    assert set(judged) == {"m.py::f::delete-wait:wait_stream@3", "m.py::g::delete-wait:wait_stream@2"}
    ms = [Mutant("p", "1", "m.py", q, "delete-wait", "wait_stream", 3, "CUDA", v, "auto", k)
          for q, v, k in (("f", "defect", "m.py::f::delete-wait:wait_stream@3"),
                          ("g", "undecided", "m.py::g::delete-wait:wait_stream@2"),
                          ("h", "defect", "m.py::h::delete-wait:wait_stream@9"))]
    assert apply_judged(ms, judged) == 2
    assert [(m.verdict, m.reason) for m in ms] == [
        ("equivalent", "judged: host barrier"), ("defect", "judged: fork: x read on s before produced"),
        ("defect", "auto")]


def test_before_after_table_scores_both_runs_with_todays_verdicts() -> None:
    def mk(key: str, verdict: str, caught: bool) -> Mutant:
        m = Mutant("p", "1", "m.py", "f", "delete-wait", "wait_stream", 3, "CUDA", verdict, "r", key,
                   expected=("SL201", "SL205"))
        m.caught_rule = m.caught_family = caught
        return m
    after = [mk("a", "defect", True), mk("b", "defect", True), mk("c", "equivalent", True)]
    # the earlier run called `b` undecided: today's verdict decides, so `b` counts as a defect in both columns
    before = {"a": mk("a", "defect", False), "b": mk("b", "undecided", True), "c": mk("c", "equivalent", False)}
    text = results_md(after, command="x", seconds=1.0, packages=["p 1"], before=before)
    assert "| all | 2 | 1 | 0.50 | 2 | 1.00 |" in text
    assert "| rule family: SL2xx | 2 | 1 | 0.50 | 2 | 1.00 |" in text
    assert "before 0, after 1 of 1." in text


def test_results_name_writes_its_own_report_pair(tmp_path, monkeypatch) -> None:
    """`--results HELDOUT` writes HELDOUT.md + heldout-undecided.tsv and names the earlier run it compares with;
    the committed RESULTS.md / undecided.tsv are left alone."""
    import json

    import bench.inject.__main__ as cli
    from bench.inject.harness import to_json

    def mk(key: str, caught: bool) -> Mutant:
        m = Mutant("p", "1", "m.py", "f", "delete-wait", "wait_stream", 3, "CUDA", "defect", "r", key,
                   expected=("SL201", "SL205"))
        m.caught_rule = m.caught_family = caught
        return m
    earlier = tmp_path / "sample-heldout.jsonl"
    earlier.write_text(json.dumps(to_json(mk("a", False))) + "\n", encoding="utf-8")
    monkeypatch.setattr(cli, "HERE", tmp_path)
    cli._write_reports([mk("a", True)], "x", 1.0, ["p 1"], before=earlier, name="HELDOUT")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["HELDOUT.md", "heldout-undecided.tsv", "sample-heldout.jsonl"]
    text = (tmp_path / "HELDOUT.md").read_text(encoding="utf-8")
    assert "`sample-heldout.jsonl`" in text and "| all | 1 | 0 | 0.00 | 1 | 1.00 |" in text


def test_report_from_with_no_report_writes_nothing(tmp_path, monkeypatch, capsys) -> None:
    """`--report-from RAW --no-report` prints the report and leaves RESULTS.md / undecided.tsv alone (it used to
    rewrite them whatever the flag said)."""
    import json

    import bench.inject.__main__ as cli
    from bench.inject.harness import to_json

    m = Mutant("p", "1", "m.py", "f", "delete-wait", "wait_stream", 3, "CUDA", "defect", "r", "k",
               expected=("SL201", "SL205"))
    raw = tmp_path / "raw" / "results.jsonl"
    raw.parent.mkdir()
    raw.write_text(json.dumps(to_json(m)) + "\n", encoding="utf-8")
    reports = tmp_path / "reports"
    reports.mkdir()
    monkeypatch.setattr(cli, "HERE", reports)
    assert cli.main(["--report-from", str(raw), "--no-report", "--trees-dir", str(tmp_path)]) == 0
    assert list(reports.iterdir()) == []
    assert "Recall over the defects" in capsys.readouterr().out
    assert cli.main(["--report-from", str(raw), "--trees-dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in reports.iterdir()) == ["RESULTS.md", "undecided.tsv"]


def _row(package: str, version: str, site) -> dict:
    return {"package": package, "version": version, "file": site.path, "qualname": site.qualname,
            "kind": site.kind, "line": site.line, "key": site.key}


def test_exclusion_drops_the_sites_of_earlier_samples() -> None:
    """Same key; same file + function + line with another edit; the same site (package-relative file, function,
    edit) in another release of the package. Other packages and other lines of the function stay."""
    from bench.inject.harness import Exclusion, package_relative, site_identity
    new = sites(MOE, "moe-2.0/moe/layers.py", tree_is_npu=True, tree_multistream=True)
    old = sites(MOE, "moe-1.0/moe/layers.py", tree_is_npu=True, tree_multistream=True)
    assert package_relative("moe-2.0/moe/layers.py", "2.0") == "moe/layers.py"
    assert package_relative("torchrec/distributed/x.py", "1.9.2") == "torchrec/distributed/x.py"
    assert site_identity(new[0].key, "2.0") == site_identity(old[0].key, "1.0")
    overlap = next(s for s in new if s.kind == "delete-record-stream")
    twin = next(s for s in new if s is not overlap and s.qualname == overlap.qualname and s.line == overlap.line
                and s.kind != overlap.kind)  # another edit of the same statement
    same_key = next(s for s in new if s.kind == "delete-wait" and s.qualname == "SharedExpertMoE.overlap")
    other_release = next(s for s in old if s.kind.startswith("join-loop"))
    rows = [_row("moe", "2.0", overlap), _row("moe", "2.0", same_key), _row("moe", "1.0", other_release),
            _row("attn", "1.0", next(s for s in old if s.kind == "break-direct")), {"meta": {}}]
    ex = Exclusion(rows)
    reasons = {s.key: ex.reason("moe", "2.0", s) for s in new}
    assert reasons[overlap.key] == reasons[same_key.key] == "same key"
    assert reasons[twin.key] == "same file+function+line"
    moved = next(s for s in new if site_identity(s.key, "2.0") == site_identity(other_release.key, "1.0"))
    assert reasons[moved.key] == "same site in another release"
    # the break-direct row is another package's: the same site of moe stays
    assert all(reasons[s.key] is None for s in new if s.kind == "break-direct")
    # the other way round: the 1.0 twin of a 2.0 row is excluded too
    assert ex.reason("moe", "1.0", next(s for s in old if s.key.endswith(overlap.key.split("::", 1)[1]))) == \
        "same site in another release"
    kept = ex.filter("moe", "2.0", new)
    assert len(kept) == len(new) - 4 and len(kept) > 4
    assert ex.dropped == {"same key": 2, "same file+function+line": 1, "same site in another release": 1}


def test_command_line_samples_held_out_from_an_earlier_sample(tmp_path: Path) -> None:
    """--sample-only writes the sample with its verdicts and no lint; --exclude-sample on that output draws
    a second sample with none of its sites, in the same release or the other one."""
    import json

    from bench.inject.__main__ import main
    from bench.inject.harness import site_identity

    for version in ("1.0", "2.0"):
        tree = tmp_path / "trees" / f"synthetic-{version}" / "moe_pkg"
        tree.mkdir(parents=True)
        (tree / "__init__.py").write_text("")
        (tree / "layers.py").write_text(MOE)
        (tree / "attn.py").write_text(ATTN)

    def draw(out: Path, *extra: str) -> list[dict]:
        assert main(["--trees-dir", str(tmp_path / "trees"), "--cap", "6", "--seed", "5", "--sample-only",
                     "--no-report", "--out", str(out), "--jobs", "1", *extra]) == 0
        return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]

    first = draw(tmp_path / "a")
    assert len(first) == 12 and all(r["new"] == [] and r["expected"] == [] and not r["caught_rule"] for r in first)
    second = draw(tmp_path / "b", "--exclude-sample", str(tmp_path / "a" / "results.jsonl"))
    assert len(second) == 12
    taken = {site_identity(r["key"], r["version"]) for r in first}
    lines = {(r["file"], r["qualname"], r["line"]) for r in first}
    for r in second:
        assert site_identity(r["key"], r["version"]) not in taken
        assert (r["file"], r["qualname"], r["line"]) not in lines
    # without the exclusion the same seed draws the same sample again
    assert [r["key"] for r in draw(tmp_path / "c")] == [r["key"] for r in first]


def test_linter_reports_a_crash_instead_of_no_findings(tmp_path, monkeypatch):
    """A streamlint run that dies before printing its JSON (an import error while the checkout is being
    edited, say) must be an error of that mutant, never an empty list of findings that scores as a miss."""
    from bench.inject import harness

    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "mod.py").write_text("import torch\n\n\ndef f(x):\n    return x\n", encoding="utf-8")
    crashing = tmp_path / "python"
    crashing.write_text("#!/bin/sh\necho 'Traceback: ImportError' >&2\nexit 1\n", encoding="utf-8")
    crashing.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setattr(harness.sys, "executable", str(crashing))
    with pytest.raises(RuntimeError, match="without output"):
        harness.Linter(tree, work).lint("pkg/mod.py", "import torch\n")
    monkeypatch.undo()
    (tmp_path / "work2").mkdir()
    assert harness.Linter(tree, tmp_path / "work2").lint("pkg/mod.py", None) == []


def test_a_file_with_a_utf8_bom_gives_mutants_that_compile(tmp_path: Path) -> None:
    """A source file saved with a UTF-8 byte-order mark (read as text it starts with U+FEFF, which
    compile() of a str rejects though Python runs the file) still gives mutants, not 'does not compile'."""
    import json

    from bench.inject.__main__ import main

    tree = tmp_path / "trees" / "synthetic-1.0" / "moe_pkg"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text("")
    (tree / "layers.py").write_bytes(b"\xef\xbb\xbf" + MOE.encode("utf-8"))
    out = tmp_path / "out"
    assert main(["--trees-dir", str(tmp_path / "trees"), "--cap", "6", "--seed", "5", "--sample-only",
                 "--no-report", "--out", str(out), "--jobs", "1"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows and all(r["error"] == "" for r in rows)


def test_show_finds_a_key_in_the_cached_trees_and_skips_unfetched_releases(tmp_path: Path, monkeypatch,
                                                                             capsys) -> None:
    """`--show KEY` looks the key up in the corpus cache's trees only: releases of the manifest that were never
    fetched are skipped (it used to stop with "not in the cache and --offline was given")."""
    from bench.inject.__main__ import _show

    src = textwrap.dedent("""\
        import torch

        def step(x):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                y = x * 2
            torch.cuda.current_stream().wait_stream(side)
            return y + 1
        """)
    tree = tmp_path / "trees" / "toypkg-1.0"
    (tree / "toypkg").mkdir(parents=True)
    (tree / "toypkg" / "mod.py").write_text(src)
    key = next(s.key for s in sites(src, "toypkg/mod.py", tree_multistream=True) if s.kind == "delete-wait")
    monkeypatch.setenv("STREAMLINT_REALCODE_CACHE", str(tmp_path))
    assert _show([key, "toypkg/mod.py::nothing::delete-wait:x@1"], None) == 0
    out = capsys.readouterr().out
    assert f"===== {key} [" in out and "(toypkg 1.0)" in out and MARK in out  # the mutant's diff
    assert "toypkg/mod.py::nothing::delete-wait:x@1: not found in the cached trees" in out


def test_new_functions_keep_only_functions_other_releases_lack(tmp_path: Path) -> None:
    """--new-functions: a site is dropped when its function (package-relative file + qualified name) exists in an
    unselected release of the package (an sdist's release directory aside), in a named redistribution, or in a
    selected release drawn earlier; a function only the new release has, or one moved to another file, stays."""
    from bench.inject.harness import TreeRef
    from bench.inject.newcode import NewFunctions, qualnames

    assert qualnames(MOE) >= {"SharedExpertMoE.overlap", "SharedExpertMoE.join_all", "build_backend"}
    old = tmp_path / "moe-1.0" / "moe-1.0" / "moe"  # an sdist: the release directory inside the tree
    old.mkdir(parents=True)
    # 1.0 has SharedExpertMoE without `overlap`; `decode` of ATTN lives in a redistribution under another name
    (old / "layers.py").write_text(MOE.replace("def overlap(", "def overlap_old("))
    fork = tmp_path / "fork-0.1" / "moe"
    fork.mkdir(parents=True)
    (fork / "attn.py").write_text(ATTN.replace("def swap(", "def swap_old("))
    (fork / "layers.py").write_text("def unrelated():\n    pass\n")
    new_sites = sites(MOE, "moe/layers.py", tree_is_npu=True, tree_multistream=True)
    attn_sites = sites(ATTN, "moe/attn.py", tree_is_npu=True, tree_multistream=True)
    moved = sites(MOE, "moe/moved.py", tree_is_npu=True, tree_multistream=True)
    fresh = NewFunctions([("moe", "1.0", tmp_path / "moe-1.0")], [("fork", "0.1", tmp_path / "fork-0.1")])
    tree = TreeRef("moe", "2.0", tmp_path / "moe-2.0")
    reasons = {s.key: fresh.reason("moe", "2.0", s) for s in new_sites + attn_sites + moved}
    assert {s.qualname for s in new_sites if reasons[s.key] is None} == {"SharedExpertMoE.overlap"}
    assert all(reasons[s.key] == "in an unselected release of the package" for s in new_sites
               if s.qualname != "SharedExpertMoE.overlap")
    assert {s.qualname for s in attn_sites if reasons[s.key] is None} == {"Cache.swap"}
    assert all(reasons[s.key] == "in a named release" for s in attn_sites if s.qualname != "Cache.swap")
    # moved to another module: a method of a class the old release has is not new, a top-level function is
    assert {reasons[s.key] for s in moved if "." in s.qualname and s.qualname != "SharedExpertMoE.overlap"} == \
        {"in an unselected release of the package"}
    top = [s for s in moved if "." not in s.qualname]
    assert top and all(reasons[s.key] is None for s in top)
    kept = fresh.filter(tree, new_sites)
    assert {s.qualname for s in kept} == {"SharedExpertMoE.overlap"}
    # a second selected release of the package shares `overlap` with the first one drawn: dropped there
    (tmp_path / "moe-2.0" / "moe").mkdir(parents=True)
    (tmp_path / "moe-2.0" / "moe" / "layers.py").write_text(MOE)
    later = sites(MOE, "moe-2.1/moe/layers.py", tree_is_npu=True, tree_multistream=True)
    assert fresh.filter(TreeRef("moe", "2.1", tmp_path / "moe-2.1"), later) == []
    assert fresh.dropped["in an earlier selected release"] >= 1
    # another package is never compared with moe's releases
    assert all(fresh.reason("attn", "1.0", s) is None for s in new_sites)
