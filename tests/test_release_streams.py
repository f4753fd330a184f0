"""Release streams stored on an object, waited for before a side-stream overwrite (model/flow/releasestreams.py)."""

import textwrap

from harness import lint_text

from streamlint.finding import Confidence

SLOTS = '''
import torch


class Window:
    def __init__(self, n: int):
        self.kv = torch.empty(n, device="cuda")
        self.host = torch.empty(n, pin_memory=True)
        self.last_user = None


class Paging:
    def __init__(self):
        self.copy = torch.cuda.Stream()

    def evict(self, win: Window) -> None:
        cur = torch.cuda.current_stream()
        win.kv.record_stream(cur)
        win.last_user = cur

    def refill(self, win: Window) -> None:
        {wait}
        with torch.cuda.stream(self.copy):
            win.kv.copy_(win.host, non_blocking=True)
        {clear}
'''


def _sl201(tmp_path, wait: str = "", clear: str = ""):
    text = textwrap.dedent(SLOTS).replace("{wait}", wait or "pass").replace("{clear}", clear or "pass")
    return [f for f in lint_text(text, tmp=tmp_path) if f.code == "SL201" and "may still read" in f.message]


def test_overwrite_with_no_wait_on_the_stored_stream_is_medium_when_the_writer_handles_it(tmp_path):
    found = _sl201(tmp_path, clear="win.last_user = None")
    assert len(found) == 1
    assert "`win.kv`" in found[0].message and found[0].confidence == Confidence.MEDIUM
    assert "win.last_user" in (found[0].hint or "")


def test_overwrite_by_a_writer_that_never_names_the_stored_stream_is_low(tmp_path):
    found = _sl201(tmp_path)
    assert len(found) == 1 and found[0].confidence == Confidence.LOW


def test_a_wait_on_the_stored_stream_or_a_fork_orders_the_overwrite(tmp_path):
    assert _sl201(tmp_path, wait="self.copy.wait_stream(win.last_user)") == []
    assert _sl201(tmp_path, wait="self.copy.wait_stream(torch.cuda.current_stream())") == []
    guarded = "if win.last_user is not None:\n            self.copy.wait_stream(win.last_user)"
    assert _sl201(tmp_path, wait=guarded) == []
    assert len(_sl201(tmp_path, wait="if win.last_user is not None:\n            pass")) == 1
