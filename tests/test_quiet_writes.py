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
    assert source("infer", "self._obs") is None  # _fill_obs() is infer()'s own call, seen where it runs
    assert source("lookup", "self._table") == "refresh_table"
    assert source("decode", "self.state.hidden") == "reset_state"  # DecodeState() fills a tensor: a write
    assert source("replay_view", "self.view.data") == "set_view"  # SlotView(x * 2.0) hands it a tensor
    assert source("replay_pairs", "self._pair_in") is None  # run_pairs_eager() ends with a blocking .cpu()
    assert source("replay_scores", "self._scores") == "refresh_scores"  # its .item() comes before the write
    assert source("infer_pairs", "self._obs_b2") is None  # enable_pairs() only allocates it (torch.empty)


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
    assert [f.span.start_line for f in found] == [9]  # the argument's read first, the local's write related
    assert found[0].confidence is Confidence.HIGH  # the local's write-after-write assumes nothing
    assert [r.span.start_line for r in found[0].related] == [10]
