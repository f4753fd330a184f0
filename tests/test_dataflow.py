"""Cross-stream dataflow (streamlint/model/dataflow.py) through the SL2xx/SL3xx rules: the behaviours the
fixtures do not pin down (options, flag correlation, helpers, robustness, determinism)."""


from harness import lint_text

HEADER = """
import torch
import torch.distributed as dist
from torchair.scope import npu_stream_switch, npu_wait_tensor
"""


def codes(code: str, tmp_path, **settings) -> list[tuple[str, int]]:
    return sorted((f.code, f.span.start_line) for f in lint_text(HEADER + code, tmp=tmp_path, **settings)
                  if f.code[:3] in ("SL2", "SL3"))


def test_flags_are_correlated_but_distinct_flags_are_not(tmp_path):
    same = """
class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        if self.multistream:
            self.side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(self.side) if self.multistream else torch.npu.stream(None):
            pass
        if self.multistream:
            with torch.npu.stream(self.side):
                y = x * 2
            torch.npu.current_stream().wait_stream(self.side)
        else:
            y = x * 2
        return x + y
"""
    assert [c for c in codes(same, tmp_path) if c[0] == "SL201"] == []
    different = same.replace("if self.multistream:\n            with", "if self.other:\n            with")
    assert ("SL201", 13) in codes(different, tmp_path)  # forked only when multistream, switched when other


def test_cached_current_stream_getter_is_the_main_stream(tmp_path):
    code = """
_CURRENT = None

def current_stream():
    global _CURRENT
    if _CURRENT is None:
        _CURRENT = torch.npu.current_stream()
    return _CURRENT

class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        with torch.npu.stream(self.side):
            self.side.wait_stream(current_stream())
            y = x * 2
        current_stream().wait_stream(self.side)
        return x + y
"""
    assert [c for c in codes(code, tmp_path) if c[0] == "SL201"] == []


def test_stream_none_and_host_scalars_are_not_cross_stream(tmp_path):
    code = """
class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        with torch.npu.stream(None):
            y = x * 2
        n = y.sum().item()
        self.side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(self.side):
            z = torch.zeros(n)
        torch.npu.current_stream().wait_stream(self.side)
        return y, z
"""
    assert [c for c in codes(code, tmp_path) if c[0] == "SL201"] == []


def test_async_collective_handle_wait_orders(tmp_path):
    code = """
class R:
    def reduce(self, grad: torch.Tensor):
        self.comm.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(self.comm):
            work = dist.all_reduce(grad, async_op=True)
        work.wait()
        return grad.norm()
"""
    assert codes(code, tmp_path) == []


def test_ge_explicit_join_waits_option(tmp_path):
    code = """
class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        h = self.norm(x)
        with npu_stream_switch("22"):
            shared = self.shared_experts(h)
        return h + shared
"""
    assert codes(code, tmp_path) == []  # GE syncs data edges itself
    strict = codes(code, tmp_path, rule_options={"SL201": {"ge-explicit-join-waits": True}})
    assert ("SL201", 9) in strict and ("SL201", 10) in strict


def test_sl301_strict_reports_escapes_at_low_confidence(tmp_path):
    code = """
class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        h = self.norm(x)
        self.side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(self.side):
            score = self.stat(h)
        return h, score, self.side
"""
    assert [c for c in codes(code, tmp_path) if c[0] == "SL301"] == []
    found = [f for f in lint_text(HEADER + code, tmp=tmp_path, rule_options={"SL301": {"strict": True}})
             if f.code == "SL301"]
    assert [f.span.start_line for f in found] == [10] and found[0].confidence.value == "low"


def test_sl202_counts_plain_aliases_as_later_uses(tmp_path):
    code = """
def f(self, x, dep):
    h = x
    with npu_stream_switch("22"):
        npu_wait_tensor(x, dep)
        y = self.proj(h)
    return y
"""
    assert codes(code, tmp_path) == []
    assert codes(code.replace("self.proj(h)", "self.proj(dep)"), tmp_path) == [("SL202", 8)]


def test_many_branches_stay_bounded_and_deterministic(tmp_path):
    """2**30 paths through the flags: the path budget merges them (the analysis finishes and still finds the
    fork and the join; measured speed belongs to bench/, not to a timed assertion)."""
    branches = "".join(f"        if self.f{i}:\n            x = x + {i}\n" for i in range(30))
    code = f"""
class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
{branches}        with torch.npu.stream(self.side):
            y = x * 2
        for i in range(4):
            while self.go:
                y = y + x
        return x + y
"""
    first = codes(code, tmp_path)
    assert first == codes(code, tmp_path)
    assert not any(c == "SL000" for c, _ in first)
    assert ("SL201", 68) in first and ("SL201", 71) in first  # fork of x, join of y in the loop


def test_odd_syntax_does_not_crash(tmp_path):
    code = """
class M(torch.nn.Module):
    async def forward(self, x: torch.Tensor, *args, **kwargs):
        with torch.npu.stream(self.side), open("f") as fh:
            f = lambda t: t * 2
            y = [f(v) for v in args if (n := v.numel())]
            match x:
                case None:
                    pass
            del y[0], fh
            global G
            a, *rest = x.chunk(3)
            x[0], x[1] = rest[0], a
            y = await self.g(x)
            yield y
        try:
            raise ValueError
        except ValueError:
            pass
        finally:
            x += 1
"""
    found = [f for f in lint_text(HEADER + code, tmp=tmp_path) if f.code == "SL000"]
    assert found == []


def test_sl205_helper_method_is_judged_in_its_caller(tmp_path):
    code = """
class M(torch.nn.Module):
    def _launch(self, x: torch.Tensor):
        self.side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(self.side):
            y = x * 2
        return y

    def forward(self, x: torch.Tensor):
        y = self._launch(x)
        torch.npu.current_stream().wait_stream(self.side)
        return y

def build():
    return torch.compile(M(), backend="npugraph_ex")
"""
    assert [c for c in codes(code, tmp_path) if c[0] == "SL205"] == []
    unjoined = code.replace("        torch.npu.current_stream().wait_stream(self.side)\n", "")
    assert [c for c in codes(unjoined, tmp_path) if c[0] == "SL205"] == [("SL205", 8)]


def test_mode_dispatch_branches_are_analysed_per_path(tmp_path):
    code = """
class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        h = self.norm(x)
        if self.exe_mode == "ge_graph":
            with npu_stream_switch("22"):
                shared = self.shared_experts(h)
        else:
            self.side.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(self.side):
                shared = self.shared_experts(h)
            torch.npu.current_stream().wait_stream(self.side)
        return h + shared

def build(cfg):
    return torch.compile(M(), backend="npugraph_ex")
"""
    assert [c for c in codes(code, tmp_path) if c[0] == "SL201"] == []


def test_event_recorded_by_the_caller_covers_arguments(tmp_path):
    code = """
class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        with torch.npu.stream(self.side):
            self.ready.wait()
            y = x * 2
        torch.npu.current_stream().wait_stream(self.side)
        return y
"""
    assert [c for c in codes(code, tmp_path) if c[0] == "SL201"] == []


def test_flows_follow_edits_of_other_files(tmp_path):
    from harness import engine_for

    (tmp_path / "helpers.py").write_text(
        "import torch\n\ndef join(stream):\n    torch.npu.current_stream().wait_stream(stream)\n", encoding="utf-8")
    model = tmp_path / "model.py"
    model.write_text(
        "import torch\nfrom helpers import join\n\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x: torch.Tensor):\n"
        "        self.side.wait_stream(torch.npu.current_stream())\n"
        "        with torch.npu.stream(self.side):\n"
        "            y = x * 2\n"
        "        join(self.side)\n"
        "        return x + y\n", encoding="utf-8")
    engine = engine_for(tmp_path)
    assert [f for f in engine.lint_file(str(model)).findings if f.code == "SL201"] == []
    engine.set_override(str(tmp_path / "helpers.py"), b"import torch\n\ndef join(stream):\n    pass\n")
    assert [f.span.start_line for f in engine.lint_file(str(model)).findings if f.code == "SL201"] == [10]


def test_current_stream_kept_on_self_is_the_main_stream(tmp_path):
    code = """
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.main_stream = torch.npu.current_stream()
        self.side = torch.npu.Stream()

    def forward(self, x: torch.Tensor):
        self.side.wait_stream(self.main_stream)
        with torch.npu.stream(self.side):
            y = x * 2
        self.main_stream.wait_stream(self.side)
        return x + y
"""
    assert [c for c in codes(code, tmp_path) if c[0] == "SL201"] == []


def test_recursion_limits_in_the_interpreter_give_no_internal_error(tmp_path, monkeypatch):
    from streamlint.model import dataflow

    chain = " + ".join(["x"] * 150)
    code = f"""
class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        with torch.npu.stream(self.side):
            y = {chain}
        return y
"""
    assert [f.code for f in lint_text(HEADER + code, tmp=tmp_path) if f.code == "SL000"] == []

    def explode(self):
        raise RecursionError

    monkeypatch.setattr(dataflow.Interp, "run", explode)
    assert [f.code for f in lint_text(HEADER + code, tmp=tmp_path) if f.code in ("SL000", "SL201")] == []

def test_the_call_site_search_does_not_parse_a_large_project_for_a_common_name(tmp_path):
    """A stream parameter is the caller's current stream when every call site says so; finding the call
    sites reads the files that mention the name, and gives up for a name too common to parse them all
    (linting one file must cost what that file reaches, not the repository)."""
    from harness import engine_for

    (tmp_path / "kv").mkdir()
    (tmp_path / "kv" / "__init__.py").write_text("")
    (tmp_path / "kv" / "offload.py").write_text(
        "import torch\n\n\n"
        "def offload(kv: torch.Tensor, stream):\n"
        "    with torch.npu.stream(stream):\n"
        "        return kv.cpu()\n", encoding="utf-8")

    def caller(i: int) -> str:
        return f"import torch\nfrom kv.offload import offload\n\n\ndef step_{i}(kv):\n    return offload(kv, torch.npu.current_stream())\n"

    def parsed(callers: int) -> int:
        for old in tmp_path.glob("layer_*.py"):
            old.unlink()
        for i in range(callers):
            (tmp_path / f"layer_{i}.py").write_text(caller(i), encoding="utf-8")
        engine = engine_for(tmp_path)
        engine.lint_file(str(tmp_path / "kv" / "offload.py"))
        return sum(1 for model in engine.project._files.values() if model is not None)

    assert parsed(5) >= 6  # a few call sites: each caller's module is read
    assert parsed(200) < 30  # a name in 200 files: the search gives up instead of parsing them


def test_the_compile_target_search_does_not_parse_a_large_project_for_a_common_name(tmp_path):
    """A compile helper compiles whatever its callers pass (`torch.compile(model, backend=...)` with `model`
    a parameter); finding what they pass parses the files that call the helper, and gives up for a helper
    called from too many files to parse them all."""
    from harness import engine_for

    (tmp_path / "runner").mkdir()
    (tmp_path / "runner" / "__init__.py").write_text("")
    (tmp_path / "runner" / "build.py").write_text(
        "import torch\nimport torchair\n\n\n"
        "def compile_graph(model):\n"
        "    config = torchair.CompilerConfig()\n"
        "    return torch.compile(model, backend=torchair.get_npu_backend(compiler_config=config))\n",
        encoding="utf-8")
    (tmp_path / "moe.py").write_text(
        "import torch\nfrom torchair.scope import npu_stream_switch\n\n\n"
        "class SharedExperts(torch.nn.Module):\n"
        "    def forward(self, x: torch.Tensor):\n"
        "        with npu_stream_switch('shared', 0):\n"
        "            return x * 2\n", encoding="utf-8")

    def caller(i: int) -> str:
        return f"from runner.build import compile_graph\n\n\ndef make_{i}(model):\n    return compile_graph(model)\n"

    def parsed(callers: int) -> int:
        for old in tmp_path.glob("stage_*.py"):
            old.unlink()
        for i in range(callers):
            (tmp_path / f"stage_{i}.py").write_text(caller(i), encoding="utf-8")
        engine = engine_for(tmp_path)
        engine.lint_file(str(tmp_path / "moe.py"))
        return sum(1 for model in engine.project._files.values() if model is not None)

    assert parsed(5) >= 6  # a few callers: each caller's module is read to see what it compiles
    assert parsed(200) < 30  # a helper called from 200 files: the search gives up instead of parsing them


def test_race_across_a_thread_handshake_is_medium(tmp_path):
    """Another thread may order the streams before it signals (``s.wait_stream(cur)`` then ``flag.set()``):
    a race whose two accesses lie on either side of a host handshake is not reported at high confidence."""
    code = """
import threading


class Loop:
    def __init__(self):
        self.stream = torch.cuda.Stream()

    def run(self, go: threading.Event, factor: torch.Tensor, mixing: torch.Tensor):
        stream = self.stream
        factor.copy_(mixing)
        go.wait()
        with torch.cuda.stream(stream):
            factor.fill_(0.5)
        stream.synchronize()

    def run_unsignalled(self, factor: torch.Tensor, mixing: torch.Tensor):
        stream = self.stream
        factor.copy_(mixing)
        with torch.cuda.stream(stream):
            factor.fill_(0.5)
        stream.synchronize()
"""
    found = sorted((f.span.start_line, f.confidence.value) for f in lint_text(HEADER + code, tmp=tmp_path)
                   if f.code == "SL201")
    assert found == [(17, "medium"), (24, "high")]


def test_race_with_a_stream_parameter_is_medium(tmp_path):
    """Whether a stream parameter is the caller's current stream is the caller's choice: a race between
    the entry stream and a stream parameter is never reported at high confidence: medium when a call of the
    function is seen, low when none is (the race then rests wholly on an unseen caller)."""
    code = """
class Offload:
    def __init__(self):
        self.side = torch.cuda.Stream()

    def offload(self, k: torch.Tensor, rope: torch.Tensor, host: torch.Tensor, stream: torch.cuda.Stream):
        kv = torch.cat([k, rope], dim=-1)
        with torch.cuda.stream(stream):
            host.copy_(kv, non_blocking=True)

    def offload_side(self, k: torch.Tensor, rope: torch.Tensor, host: torch.Tensor):
        kv = torch.cat([k, rope], dim=-1)
        with torch.cuda.stream(self.side):
            host.copy_(kv, non_blocking=True)
"""
    found = sorted((f.span.start_line, f.confidence.value) for f in lint_text(HEADER + code, tmp=tmp_path)
                   if f.code == "SL201" and "kv" in f.message)
    assert found == [(12, "low"), (17, "high")]  # (no call of offload is seen: low, flow/chosenstreams.py)
    caller = """

def evict(cache: Offload, k: torch.Tensor, rope: torch.Tensor, host: torch.Tensor) -> None:
    cache.offload(k, rope, host, torch.cuda.Stream())
"""
    found = sorted((f.span.start_line, f.confidence.value) for f in lint_text(HEADER + code + caller, tmp=tmp_path)
                   if f.code == "SL201" and "kv" in f.message)
    assert found == [(12, "medium"), (17, "high")]  # (a caller is seen: medium)


def test_step_state_race_is_medium_and_an_own_write_stays_high(tmp_path):
    """A ``self.*`` buffer another method rewrites every step (stepstate.py) is read on a side stream as an
    argument would be: medium, since that method is assumed to run first on the current stream. A write in
    the same function stays a plain race (high); an ``__init__``-only buffer is long-lived (nothing)."""
    code = """
class Bucket:
    def __init__(self, n):
        self.flat = torch.zeros(n, device="cuda")
        self.table = torch.zeros(n, device="cuda")
        self.scratch = torch.zeros(n, device="cuda")
        self.side = torch.cuda.Stream()

    def add(self, g):
        self.flat.add_(g)

    def reduce(self):
        with torch.cuda.stream(self.side):
            dist.all_reduce(self.flat)
            y = self.table * 2
        torch.cuda.current_stream().wait_stream(self.side)
        return y

    def reduce_after_fill(self, g):
        self.scratch.copy_(g)
        with torch.cuda.stream(self.side):
            z = self.scratch * 2
        torch.cuda.current_stream().wait_stream(self.side)
        return z
"""
    found = sorted((f.span.start_line, f.confidence.value) for f in lint_text(HEADER + code, tmp=tmp_path)
                   if f.code == "SL201")
    assert found == [(17, "medium"), (25, "high")]


BUDGET_LAYER = """
import torch
import torch.distributed as dist


class DualBatchMoELayer(torch.nn.Module):
    def __init__(self, experts, comm_stream, tp_size: int, use_graph_update: bool):
        super().__init__()
        self.experts = experts
        self.comm_stream = comm_stream
        self.tp_size = tp_size
        self.use_graph_update = use_graph_update

    def forward(self, hidden: list, contexts: list, update_stream, graph_state, shape: int):
        if self.use_graph_update:
            with torch.npu.stream(update_stream):
                for layer, handle, event in zip(graph_state.layers, graph_state.handles[shape],
                                                graph_state.events[shape]):
                    torch.npu.graph_task_update_begin(update_stream, handle)
                    layer.output.copy_(layer.query @ layer.key_cache)
                    torch.npu.graph_task_update_end(update_stream)
                    event.record(update_stream)
            return hidden
        for i, ctx in enumerate(contexts):
            out = self.experts(hidden[i])
            ctx.before_comm.record()
            with torch.npu.stream(self.comm_stream):
                {first}
                ctx.before_comm.wait()
                if self.tp_size > 1:
                    dist.all_gather_into_tensor(ctx.gathered, out)
                    hidden[i] = ctx.gathered * ctx.scale
                else:
                    hidden[i] = out * ctx.scale
                {last}
        return hidden
"""


def test_early_record_found_in_a_function_over_the_path_budget(tmp_path, monkeypatch):
    """A function too large for the path-sensitive run (the budget is lowered here to make this one so)
    still has its early records reported, from one path through each record; not the timely ones."""
    from streamlint.model.flow import control

    monkeypatch.setattr(control, "MAX_STEPS", 30)
    early = BUDGET_LAYER.replace("{first}", "ctx.after_comm.record()").replace("{last}", "")
    timely = BUDGET_LAYER.replace("{first}", "").replace("{last}", "ctx.after_comm.record()")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    found = [(f.code, f.span.start_line) for f in lint_text(early, tmp=tmp_path / "a") if f.code == "SL201"]
    assert found == [("SL201", 27)]
    assert not [f for f in lint_text(timely, tmp=tmp_path / "b") if f.code == "SL201"]


def test_side_writes_left_to_callers_confidence_follows_the_callers(tmp_path):
    """A long-lived tensor written on a side stream and left unjoined (flow/leaves.py): low confidence when no
    caller is visible, medium when a caller goes on without an ordering, silent when every caller
    synchronizes right after the call."""
    service = """
class Mover:
    def __init__(self):
        self.move_stream = torch.cuda.Stream()

    def move(self, reqs):
        with torch.cuda.stream(self.move_stream):
            for r in reqs:
                dst = r.tensor[0:4]
                dst.copy_(r.src, non_blocking=True)
"""

    def found(callers: str) -> list[tuple[int, str]]:
        return sorted((f.span.start_line, f.confidence.value) for f in lint_text(HEADER + service + callers,
                                                                                  tmp=tmp_path)
                      if f.code == "SL201" and "left to the caller" in f.message)

    assert found("") == [(13, "low")]
    assert found("\n\ndef step(m, reqs):\n    m.move(reqs)\n    return reqs[0].tensor.sum()\n") == [(13, "medium")]
    assert found("\n\ndef step(m, reqs):\n    m.move(reqs)\n    torch.cuda.synchronize()\n") == []


HOOKS_OVER_JOINED_RESULT = """
import torch


def run_hooks(x, hooks, side):
    outs = []
    with torch.cuda.stream(side):
        y = x * 2
    torch.cuda.current_stream().wait_stream(side)
    for hook in hooks:
        outs.append(hook(y))
    return outs
"""


def test_an_unresolved_callee_inside_a_call_outside_the_project_is_no_crash(tmp_path) -> None:
    """``outs.append(hook(y))``: a call of a parameter handed to a call outside the project (a list's
    append) once crashed the record hand-off check (project.symbol(None)); the joined result is fine."""
    findings = lint_text(HOOKS_OVER_JOINED_RESULT, tmp=tmp_path)
    assert [f.code for f in findings if f.code in ("SL000", "SL201", "SL301")] == []
