"""Class protocols whose producer reaches its side-stream scope through a helper method of the class, or ends
in a ``return`` (model/flow/protocols.py), with the event kept by ``setdefault`` (model/flow/fieldfamilies.py),
recorded on ``self.side or current_stream()`` (model/flow/scopenone.py) and the entries walked through
``list(self.F.items())`` (model/flow/elements.py)."""

from pathlib import Path

from harness import lint_paths, lint_text

from streamlint.finding import Confidence

PROJECT = Path(__file__).parent.parent / "fixtures/projects/sl201_helper_producer_protocols"


def _sl201(rel: str) -> list:
    files = [str(p) for p in sorted((PROJECT / "actoff").glob("*.py"))]
    return [f for f in lint_paths(PROJECT, [str(PROJECT / rel)], files) if f.code == "SL201"]


def test_a_helper_reached_producer_is_reported_at_medium_with_the_producer_as_related():
    found = _sl201("actoff/offload.py")
    assert len(found) == 1, [(f.line, f.message) for f in found]
    assert "`self.spilled`" in found[0].message and "`self.h2d`" in found[0].message
    assert found[0].confidence == Confidence.MEDIUM
    assert any("pack()" in (r.message or "") for r in found[0].related)


def test_a_producer_ending_in_return_is_summarised():
    found = _sl201("actoff/kvtier.py")
    assert len(found) == 1, [(f.line, f.message) for f in found]
    assert "`self.slots`" in found[0].message
    assert found[0].confidence == Confidence.MEDIUM


def test_a_record_on_an_or_stream_outside_the_scope_covers_nothing(tmp_path):
    # the path that never entered `self.side`'s scope copies on the current stream: no pending field, and the
    # `or` stays unknown there (the scoped path alone makes `self.side or ...` the side stream)
    code = '''
        import torch

        class Spill:
            def __init__(self):
                self.side = torch.cuda.Stream() if torch.cuda.is_available() else None
                self.host: dict[int, torch.Tensor] = {}
                self.done: dict[int, torch.cuda.Event] = {}

            def put(self, key, t):
                buf = torch.empty(t.numel(), dtype=t.dtype, device=self.target)
                buf.copy_(t.reshape(-1))
                ev = torch.cuda.Event()
                self.done.setdefault(key, ev).record(self.side or torch.cuda.current_stream())
                self.host[key] = buf
                return key

            def get(self, key):
                return self.host[key].sum()
    '''
    found = [f for f in lint_text(code, tmp=tmp_path) if f.code == "SL201"]
    assert found == [], [(f.line, f.message) for f in found]
