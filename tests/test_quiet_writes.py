"""Step writes that leave nothing on the caller's stream (stepstate.own_steps, flow/quietwrites.py), a runtime's
stream synchronisation through the raw handle (flow/syncops.py), and one finding per missing wait whatever the
kinds and assumptions of its races (flow/results.py one_per_cause)."""

from harness import FIXTURES, engine_for, lint_text

from streamlint.finding import Confidence
from streamlint.model.flow.handedfields import step_source

FRONTEND = FIXTURES / "rules" / "sl201_graph_stream_frontend.py"


def test_step_sources_of_the_graph_frontend() -> None:
    project = engine_for(FRONTEND.parent, [str(FRONTEND)]).project
    model = project.file(str(FRONTEND))
    methods = model.classes["GraphFrontend"].methods

    def source(method: str, key: str) -> str | None:
        return step_source(project, model, methods[method], key, "cuda")

    assert source("infer", "self.engine.obs_slot") is None  # set_prompt() builds a DenoiseEngine: no device work
    assert source("infer", "self._obs") == "_fill_obs"  # infer_staged() runs it too, on the current stream
    assert source("infer_prompt", "self._prompt") is None  # _fill_prompt() is its own call, before each use
    assert source("lookup", "self._table") == "refresh_table"
    assert source("decode", "self.state.hidden") == "reset_state"  # DecodeState() fills a tensor: a write
    assert source("replay_view", "self.view.data") == "set_view"  # SlotView(x * 2.0) hands it a tensor
    assert source("replay_pairs", "self._pair_in") is None  # run_pairs_eager() ends with a blocking .cpu()
    assert source("replay_scores", "self._scores") == "refresh_scores"  # its .item() comes before the write
    assert source("infer_pairs", "self._obs_b2") is None  # enable_pairs() only allocates it (torch.empty)


VLA = FIXTURES / "rules" / "sl201_vla_graph_pipeline.py"


def test_step_sources_of_the_vla_policy_server() -> None:
    project = engine_for(VLA.parent, [str(VLA)]).project
    model = project.file(str(VLA))
    methods = model.classes["PolicyServer"].methods

    def source(method: str, key: str) -> str | None:
        return step_source(project, model, methods[method], key, "cuda")

    assert source("calibrate", "self.pipeline.image_slot") is None  # numpy rope table, cudaMalloc'd slots
    assert source("replay_rope", "self.rope_pipeline.rope") == "set_rope_length"  # a torch copy to the device
    assert source("infer_guided", "self._img_b2[]") is None  # infer_pair() reads back in `for b in range(PAIR)`
    assert source("replay_many", "self._img_n[]") == "infer_many"  # `for b in range(active)` may run no round
    assert source("calibrate_state", "self._state") is None  # infer() runs _fill_state() on the graph stream too
    assert source("warmup_lang", "self._lang") == "_fill_lang"  # step_eager() runs it on the current stream
    assert source("warmup_tokens", "self._tokens") == "_fill_tokens"  # prefetch_tokens(): on another stream
    # its own call: the early `return self.infer_guided(obs)` runs nothing before it; `self._check` is a module function
    assert source("infer_views", "self._views[]") is None


def test_keeps_cpu_loop_with_break() -> None:
    """A counted loop that may leave before its blocking read."""
    code = '''
    import torch

    PAIR = 2


    class Sampler:
        def __init__(self, vocab: int):
            self.side = torch.cuda.Stream()
            self.probs = torch.zeros(PAIR, vocab, device="cuda")

        def update(self, logits: torch.Tensor, skip: bool) -> list:
            self.probs.copy_(torch.softmax(logits, dim=-1))
            out = []
            for b in range(PAIR):
                if skip:
                    break
                out.append(self.probs[b].argmax().cpu())
            return out

        def draft(self) -> torch.Tensor:
            with torch.cuda.stream(self.side):
                out = self.probs.topk(4, dim=-1).indices
            torch.cuda.current_stream().wait_stream(self.side)
            return out
    '''
    lines = sorted(f.span.start_line for f in lint_text(code) if f.code == "SL201")
    assert lines == [22]


def test_counted_loop_read_back_settles() -> None:
    """A loop over a positive module constant runs its first round: its blocking read settles the write."""
    code = '''
    import torch

    PAIR = 2


    class Sampler:
        def __init__(self, vocab: int):
            self.side = torch.cuda.Stream()
            self.probs = torch.zeros(PAIR, vocab, device="cuda")

        def update(self, logits: torch.Tensor) -> list:
            self.probs.copy_(torch.softmax(logits, dim=-1))
            out = []
            for b in range(PAIR):
                out.append(self.probs[b].argmax().cpu())
            return out

        def draft(self) -> torch.Tensor:
            with torch.cuda.stream(self.side):
                out = self.probs.topk(4, dim=-1).indices
            torch.cuda.current_stream().wait_stream(self.side)
            return out
    '''
    assert [f.span.start_line for f in lint_text(code) if f.code == "SL201"] == []
    assert sorted(f.span.start_line for f in lint_text(code.replace("range(PAIR)", "range(0)"))
                  if f.code == "SL201") == [20]


def test_keeps_own_call_on_another_stream() -> None:
    """The helper is the function's own call in its graph-stream scope, but another method runs it in the scope
    of a different stream: its writes there are not ordered before the graph stream's read."""
    code = '''
    import torch


    class Frontend:
        def __init__(self):
            self.graph_stream = torch.cuda.Stream()
            self.aux_stream = torch.cuda.Stream()
            self.state = torch.zeros(32, device="cuda")
            self.out = torch.zeros(32, device="cuda")

        def _fill(self, s: torch.Tensor) -> None:
            self.state.copy_(s)

        def prefetch(self, s: torch.Tensor) -> None:
            with torch.cuda.stream(self.aux_stream):
                self._fill(s)

        def run(self, s: torch.Tensor) -> torch.Tensor:
            with torch.cuda.stream(self.graph_stream):
                self._fill(s)
                self.out.copy_(self.state * 2.0)
            torch.cuda.current_stream().wait_stream(self.graph_stream)
            return self.out
    '''
    from streamlint.model.stepstate import own_steps
    import tempfile
    from pathlib import Path

    import textwrap

    d = Path(tempfile.mkdtemp())
    path = d / "frontend.py"
    path.write_text(textwrap.dedent(code).lstrip("\n"), encoding="utf-8")
    def steps(text: str) -> frozenset[str]:
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        project = engine_for(d, [str(path)]).project
        model = project.file(str(path))
        cls = model.classes["Frontend"]
        return own_steps(project, model, cls, cls.methods["run"], "self.state")

    assert steps(code) == frozenset()
    same = code.replace("with torch.cuda.stream(self.aux_stream):", "with torch.cuda.stream(self.graph_stream):")
    assert steps(same) == frozenset({"_fill"})
    same = textwrap.dedent(same)
    # a context that only times the stream enters none: prefetch() then runs _fill() on the current stream
    timed = same.replace("with torch.cuda.stream(self.graph_stream):\n            self._fill(s)",
                         "with self._stream_timer(self.graph_stream):\n            self._fill(s)", 1)
    assert timed != same and steps(timed) == frozenset()
    # a stream field rebound in a step (rotating streams) is not one stream: no call under it is the same stream
    rotated = same.replace("    def _fill(", "    def rotate(self) -> None:\n        self.graph_stream = self.aux_stream\n\n    def _fill(")
    assert rotated != same and steps(rotated) == frozenset()
    # a module function held in a field and handed the object itself may write any field before the own call
    handed = same.replace("self.out = torch.zeros(32, device=\"cuda\")",
                          "self.out = torch.zeros(32, device=\"cuda\")\n        self._hook = _stage_hook")
    handed = "def _stage_hook(obj, s):\n    obj.state.mul_(0.5)\n\n" + handed
    called = handed.replace("    def run(self, s: torch.Tensor) -> torch.Tensor:\n",
                            "    def run(self, s: torch.Tensor) -> torch.Tensor:\n        self._hook(s, 1.0)\n")
    assert called != handed and "_fill" in steps(called)
    assert "_fill" not in steps(called.replace("self._hook(s, 1.0)", "self._hook(self, s)"))


def test_certain_calls() -> None:
    """Only the calls a statement line runs on every path count as its blocking reads."""
    import libcst as cst

    from streamlint.model.syntax import certain_calls

    def names(src: str) -> set[str]:
        return {cst.Module([]).code_for_node(c.func) for c in certain_calls(cst.parse_statement(src))}

    assert names("rows.append(out.cpu() if debug else None)") == {"rows.append"}
    assert names("flag = 'nan' if out.isnan().any().item() else 'ok'") == {"out.isnan().any().item", "out.isnan().any", "out.isnan"}
    assert names("ok = check(a) and b.cpu()") == {"check"}
    assert names("rows = [out[b].cpu() for b in range(n())]") == {"range", "n"}
    assert names("f = lambda: out.cpu()") == set()
    assert names("assert out.cpu().sum() > 0") == set()
    assert names("x = out.float().cpu()") == {"out.float().cpu", "out.float"}


STEPS = FIXTURES / "rules" / "sl201_vla_step_certainty.py"


def test_step_sources_need_certain_facts() -> None:
    project = engine_for(STEPS.parent, [str(STEPS)]).project
    model = project.file(str(STEPS))

    def source(cls: str, method: str, key: str) -> str | None:
        return step_source(project, model, model.classes[cls].methods[method], key, "cuda")

    assert source("DebugPairServer", "replay", "self._img_b2") == "stage_pair"  # `... if self.debug else None`
    assert source("DebugFrameServer", "replay", "self._img") == "stage"  # `self.debug and self._out.cpu()`
    assert source("CheckedFrameServer", "replay", "self._img") is None  # the conditional's test always runs
    assert source("ActiveBatchServer", "replay", "self._img_n") == "stage_many"  # a comprehension over `active`
    assert source("TimedStateServer", "infer", "self._state") == "_fill_state"  # the timer enters no stream
    assert source("GraphStateServer", "infer", "self._state") is None  # every caller: the fixed graph stream
    assert source("DoubleBufferedServer", "step", "self._state") == "_fill_state"  # `self.cur` rotates
    assert source("RecalibratedServer", "infer", "self._state") is None  # calibrate() synchronises its stream
    assert source("UnsyncedRecalibratedServer", "infer", "self._state") == "_fill_state"  # and without the sync


def test_native_stream_synchronize_joins_the_stream() -> None:
    code = '''
    import ctypes

    import torch

    _rt = ctypes.CDLL("libcudart.so")


    class Runner:
        def __init__(self) -> None:
            self.side = torch.cuda.Stream()
            self.buf = torch.zeros(8, device="cuda")

        def run_synced(self) -> torch.Tensor:
            with torch.cuda.stream(self.side):
                out = self.buf * 2
            handle = self.side.cuda_stream
            _rt.cudaStreamSynchronize(ctypes.c_void_p(handle))
            return out

        def run_unsynced(self) -> torch.Tensor:
            with torch.cuda.stream(self.side):
                out = self.buf * 2
            _rt.cudaMemGetInfo(ctypes.c_void_p(self.side.cuda_stream))
            return out
    '''
    lines = sorted(f.span.start_line for f in lint_text(code) if f.code == "SL201")
    assert lines == [24]  # only the return of run_unsynced: not a synchronisation by its name


def test_one_finding_per_missing_wait_takes_its_surest_race() -> None:
    code = '''
    import torch

    SIDE = torch.cuda.Stream()


    def stage(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        with torch.cuda.stream(SIDE):
            a = x + 1
            y.zero_()
        torch.cuda.current_stream().wait_stream(SIDE)
        return a + y
    '''
    found = [f for f in lint_text(code) if f.code == "SL201"]
    assert [f.span.start_line for f in found] == [10]  # the finding names the local's write (its surest race)
    assert found[0].confidence is Confidence.HIGH  # the local's write-after-write assumes nothing
    assert [r.span.start_line for r in found[0].related] == [7, 9]  # its producer, the argument's earlier read


# Reviewer's reproducers (review of ftriage): each must keep its finding(s).


def test_keeps_own_after() -> None:
    """The refresh is infer's own call only AFTER the side-stream read: the previous step's write races."""
    code = '''
    import torch


    class ExpertPrefetcher:
        """Copies the next layer's expert weights on a side stream; the routing table is refreshed each step."""

        def __init__(self, n_experts: int, dim: int):
            self.copy_stream = torch.cuda.Stream()
            self.route = torch.zeros(n_experts, dtype=torch.long, device="cuda")
            self.weights = torch.zeros(n_experts, dim, device="cuda")
            self.staged = torch.zeros(n_experts, dim, device="cuda")
            self.logits = torch.zeros(n_experts, n_experts, device="cuda")

        def _refresh_route(self) -> None:
            self.route.copy_(self.logits.argmax(dim=-1))

        def prefetch(self) -> torch.Tensor:
            # the side stream reads self.route, which the previous call's _refresh_route wrote on the current stream
            with torch.cuda.stream(self.copy_stream):
                self.staged.copy_(self.weights.index_select(0, self.route), non_blocking=True)
            # the refresh for the next step, on the current stream, AFTER the side-stream read
            self._refresh_route()
            torch.cuda.current_stream().wait_stream(self.copy_stream)
            return self.staged
    '''
    lines = sorted(f.span.start_line for f in lint_text(code) if f.code == "SL201")
    assert lines == [20]


def test_keeps_own_cond() -> None:
    """The own call is on one branch only; step() runs it too."""
    code = '''
    import torch


    class DecodeLoop:
        def __init__(self, slots: int, dim: int):
            self.side = torch.cuda.Stream()
            self.tokens = torch.zeros(slots, dtype=torch.long, device="cuda")
            self.next_tokens = torch.zeros(slots, dtype=torch.long, device="cuda")
            self.table = torch.zeros(1000, dim, device="cuda")
            self.hidden = torch.zeros(slots, dim, device="cuda")
            self.warm = False

        def _fill_tokens(self) -> None:
            self.tokens.copy_(self.next_tokens)

        def step(self) -> None:
            self._fill_tokens()  # every step: tokens written on the current stream

        def embed(self) -> torch.Tensor:
            if not self.warm:  # only the first call refills on its own
                self._fill_tokens()
                self.warm = True
            with torch.cuda.stream(self.side):
                self.hidden.copy_(self.table.index_select(0, self.tokens))
            torch.cuda.current_stream().wait_stream(self.side)
            return self.hidden
    '''
    lines = sorted(f.span.start_line for f in lint_text(code) if f.code == "SL201")
    assert lines == [24]


def test_keeps_cpu_loop() -> None:
    """The blocking read is in a loop that may run no round."""
    code = '''
    import torch


    class Sampler:
        def __init__(self, vocab: int, slots: int):
            self.side = torch.cuda.Stream()
            self.probs = torch.zeros(slots, vocab, device="cuda")

        def update(self, logits: torch.Tensor, finished: list) -> list:
            self.probs.copy_(torch.softmax(logits, dim=-1))
            done = []
            for i in finished:  # may be empty: then nothing blocks
                done.append(self.probs[i].argmax().cpu())
            return done

        def draft(self) -> torch.Tensor:
            with torch.cuda.stream(self.side):
                out = self.probs.topk(4, dim=-1).indices
            torch.cuda.current_stream().wait_stream(self.side)
            return out
    '''
    lines = sorted(f.span.start_line for f in lint_text(code) if f.code == "SL201")
    assert lines == [18]


def test_keeps_cpu_return() -> None:
    """A return leaves before the blocking read."""
    code = '''
    import torch


    class Sampler:
        def __init__(self, vocab: int, slots: int):
            self.side = torch.cuda.Stream()
            self.probs = torch.zeros(slots, vocab, device="cuda")
            self.trace = False

        def update(self, logits: torch.Tensor) -> None:
            self.probs.copy_(torch.softmax(logits, dim=-1))
            if not self.trace:
                return
            print(self.probs.max().item())

        def draft(self) -> torch.Tensor:
            with torch.cuda.stream(self.side):
                out = self.probs.topk(4, dim=-1).indices
            torch.cuda.current_stream().wait_stream(self.side)
            return out
    '''
    lines = sorted(f.span.start_line for f in lint_text(code) if f.code == "SL201")
    assert lines == [18]


def test_keeps_cpu_hosttensor() -> None:
    """The blocking read is of a host tensor: it waits for nothing."""
    code = '''
    import torch


    class Sampler:
        def __init__(self, vocab: int, slots: int):
            self.side = torch.cuda.Stream()
            self.probs = torch.zeros(slots, vocab, device="cuda")

        def update(self, logits: torch.Tensor, lengths: list) -> list:
            self.probs.copy_(torch.softmax(logits, dim=-1))
            host_lens = torch.tensor(lengths)  # a CPU tensor: .tolist() does not wait for the device
            return host_lens.tolist()

        def draft(self) -> torch.Tensor:
            with torch.cuda.stream(self.side):
                out = self.probs.topk(4, dim=-1).indices
            torch.cuda.current_stream().wait_stream(self.side)
            return out
    '''
    lines = sorted(f.span.start_line for f in lint_text(code) if f.code == "SL201")
    assert lines == [16]


def test_keeps_quiet_ctor() -> None:
    """The constructor casts a device tensor it is handed inside a host object."""
    code = '''
    import torch


    class RopeCache:
        def __init__(self, spec):
            # spec is a host config object holding a device tensor: the cast queues a kernel on the current stream
            self.table = spec.base_table.to(spec.dtype)
            self.length = spec.length


    class Server:
        def __init__(self, spec):
            self.side = torch.cuda.Stream()
            self.spec = spec
            self.rope = RopeCache(spec)
            self.positions = torch.arange(8, device="cuda")

        def resize(self, length: int) -> None:
            self.spec.length = length
            self.rope = RopeCache(self.spec)

        def prefetch(self) -> torch.Tensor:
            with torch.cuda.stream(self.side):
                out = self.rope.table.index_select(0, self.positions)
            torch.cuda.current_stream().wait_stream(self.side)
            return out
    '''
    lines = sorted(f.span.start_line for f in lint_text(code) if f.code == "SL201")
    assert lines == [24]


def test_keeps_raw_for() -> None:
    """The handle local is rebound by a loop over other streams."""
    code = '''
    import ctypes

    import torch

    cudart = ctypes.CDLL("libcudart.so")


    class GraphRunner:
        def __init__(self, dim: int, n: int):
            self.pool = [torch.cuda.Stream() for _ in range(n)]
            self.graph_stream = torch.cuda.Stream()
            self.out = torch.zeros(dim, device="cuda")

        def run(self, x: torch.Tensor) -> torch.Tensor:
            handle = self.graph_stream.cuda_stream
            with torch.cuda.stream(self.graph_stream):
                self.out.copy_(x * 2.0)
            for handle in [s.cuda_stream for s in self.pool]:  # rebinds the local: pool streams only
                cudart.cudaStreamSynchronize(ctypes.c_void_p(handle))
            return self.out + 1.0
    '''
    lines = sorted(f.span.start_line for f in lint_text(code) if f.code == "SL201")
    assert lines == [17, 20]


def test_keeps_fold_branch() -> None:
    """Uses in two branches need two waits."""
    code = '''
    import torch


    class MoECombine:
        def __init__(self):
            self.comm = torch.cuda.Stream()

        def combine(self, expert_out: torch.Tensor, weights: torch.Tensor, use_shared: bool) -> torch.Tensor:
            shared = expert_out.mean(0)     # produced on the current stream here: certain
            if use_shared:
                with torch.cuda.stream(self.comm):
                    weights.mul_(0.5)       # an argument (medium): needs a wait before it
                torch.cuda.current_stream().wait_stream(self.comm)
                return weights
            with torch.cuda.stream(self.comm):
                shared.mul_(0.5)            # other path: its own wait needed here, certain race
            torch.cuda.current_stream().wait_stream(self.comm)
            return shared
    '''
    lines = sorted(f.span.start_line for f in lint_text(code) if f.code == "SL201")
    assert lines == [12, 16]


def test_folds_branches_inside_one_scope() -> None:
    """Uses in two branches of one side-stream scope: one fork before the ``with`` orders both, one finding."""
    code = '''
    import torch


    class Dequant:
        def __init__(self):
            self.stream_zero = torch.cuda.Stream()

        def run(self, packed: torch.Tensor, grouped: bool) -> torch.Tensor:
            zero = packed.to("cuda", non_blocking=True)
            with torch.cuda.stream(self.stream_zero):
                if grouped:
                    out = zero.float() * 2.0
                else:
                    out = zero.float() + 1.0
            torch.cuda.current_stream().wait_stream(self.stream_zero)
            return out
    '''
    lines = sorted(f.span.start_line for f in lint_text(code) if f.code == "SL201")
    assert lines == [12]  # (one finding: the first use; the other branch's is related)


def test_field_view_getter_skips_objects() -> None:
    """A method returning a held project object (``-> "Chunk"``) is not a view getter; one returning tensor views is."""
    from types import SimpleNamespace

    import libcst as cst

    from streamlint.model.flow.viewresults import field_view_getter

    def method(src: str) -> SimpleNamespace:
        node = cst.parse_module(src).body[0]
        rets = [s for line in node.body.body for s in getattr(line, "body", ()) if isinstance(s, cst.Return)]
        return SimpleNamespace(class_name="Chunk", params=("self",), node=node, returns=rets)

    assert not field_view_getter(method('def grad(self) -> "Chunk":\n    return self.grad_chunk\n'))
    assert not field_view_getter(method("def grad(self) -> Chunk:\n    return self.grad_chunk\n"))
    assert field_view_getter(method("def bufs(self) -> list[torch.Tensor]:\n    return [self.ring[0][:4], self.ring[1]]\n"))
    assert field_view_getter(method("def buf(self):\n    return self.ring[0]\n"))
