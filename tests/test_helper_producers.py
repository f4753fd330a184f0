"""Class protocols whose producer reaches its side-stream scope through a helper method of the class, or ends
in a ``return`` (model/flow/protocols.py), with the event kept by ``setdefault`` (model/flow/fieldfamilies.py),
recorded on ``self.side or current_stream()`` (model/flow/scopenone.py) and the entries walked through
``list(self.F.items())`` (model/flow/elements.py)."""

import textwrap
from pathlib import Path

from harness import lint_paths, lint_text

from streamlint.finding import Confidence

PROJECT = Path(__file__).parent.parent / "fixtures/projects/sl201_helper_producer_protocols"


def _sl201(rel: str) -> list:
    files = [str(p) for p in sorted((PROJECT / "actoff").glob("*.py"))]
    return [f for f in lint_paths(PROJECT, [str(PROJECT / rel)], files) if f.code == "SL201"]


def test_a_helper_reached_producer_is_reported_at_medium_with_the_producer_as_related():
    found = _sl201("actoff/offload.py")
    assert len(found) == 1, [(f.span.start_line, f.message) for f in found]
    assert "`self.on_host`" in found[0].message and "`self.upload`" in found[0].message
    assert found[0].confidence == Confidence.MEDIUM
    assert any("swap_out()" in (r.message or "") for r in found[0].related)


def test_a_producer_ending_in_return_is_summarised():
    found = _sl201("actoff/kvtier.py")
    assert len(found) == 1, [(f.span.start_line, f.message) for f in found]
    assert "`self.slots`" in found[0].message
    assert found[0].confidence == Confidence.MEDIUM


def test_an_or_stream_is_the_side_stream_only_on_the_path_that_entered_its_scope(tmp_path):
    # `put` copies on `self.side` on one path and on the current stream on the other; the event recorded on
    # `self.side or current_stream()` covers the scoped copy: `get` waits it, `peek` does not
    code = '''
        import torch

        class HostMirror:
            def __init__(self, side=None):
                self.side = side
                self.held: dict[int, torch.Tensor] = {}
                self.ready: dict[int, torch.cuda.Event] = {}

            def put(self, key, t, overlap):
                buf = torch.empty_like(t)
                if overlap and self.side is not None:
                    self.side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(self.side):
                        buf.copy_(t, non_blocking=True)
                else:
                    buf.copy_(t)
                ev = torch.cuda.Event()
                ev.record(self.side or torch.cuda.current_stream())
                self.ready[key] = ev
                self.held[key] = buf

            def get(self, key):
                torch.cuda.current_stream().wait_event(self.ready[key])
                return self.held[key].sum()

            def peek(self, key):
                return self.held[key].sum()
    '''
    found = [f for f in lint_text(code, tmp=tmp_path) if f.code == "SL201"]
    last = len(textwrap.dedent(code).strip("\n").splitlines())  # `peek`'s read, the last line
    assert [f.span.start_line for f in found] == [last], [(f.span.start_line, f.message) for f in found]
    assert found[0].confidence == Confidence.MEDIUM
