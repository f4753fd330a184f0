"""An event's waiter orders only the work its stream queued before the record, wherever the event travels:
helper work the interpreter sees only through the callee's effect summary (flow/devicework.py), events
taken out of a field's container, event fields made by another package (presumed waiters, medium)."""
from harness import lint_text

from streamlint.finding import Confidence

HELPER = """
import torch


def _fill(dst, parts):
    for i, p in enumerate(parts):
        dst[i].copy_(p, non_blocking=True)


def _count(parts):
    return len(parts)


class Sender:
    def __init__(self, buf):
        self.buf = buf
        self.stream = torch.cuda.Stream()
        self.ready = {}

    def send(self, step, parts):
        ev = torch.cuda.Event()
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            ev.record()
            _fill(self.buf, parts)
        self.ready[step] = ev

    def take(self, step):
        torch.cuda.current_stream().wait_event(self.ready.get(step))
        return self.buf
"""

PRESUMED = """
import torch
from other_pkg.runner import RunnerBase


class Patched(RunnerBase):
    def copy_out(self, tokens):
        with torch.cuda.stream(self.out_stream):
            self.out_event.record()
            self.out_stream.wait_stream(torch.cuda.current_stream())
            self.host_tokens.copy_(tokens, non_blocking=True)
"""


def _early(code: str, tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    return [(f.span.start_line, f.confidence) for f in lint_text(code, tmp=tmp_path) if f.code == "SL201"]


def test_helper_work_after_the_record(tmp_path):
    assert [line for line, _ in _early(HELPER, tmp_path)] == [23]
    fixed = HELPER.replace("            ev.record()\n            _fill(self.buf, parts)\n",
                           "            _fill(self.buf, parts)\n            ev.record()\n")
    assert fixed != HELPER and _early(fixed, tmp_path / "fixed") == []
    host_only = HELPER.replace("            _fill(self.buf, parts)\n", "            _count(parts)\n")
    assert host_only != HELPER and _early(host_only, tmp_path / "host") == []  # no device work after the record


def test_event_never_taken_out_of_its_container_guards_nothing(tmp_path):
    unwaited = HELPER.replace("        torch.cuda.current_stream().wait_event(self.ready.get(step))\n", "")
    assert unwaited != HELPER and _early(unwaited, tmp_path) == []


def test_event_field_made_by_another_package_is_presumed_waited(tmp_path):
    assert _early(PRESUMED, tmp_path) == [(8, Confidence.MEDIUM)]  # never high: the waiter is not seen
    made_here = PRESUMED.replace("    def copy_out(self, tokens):\n",
                                 "    def __init__(self):\n        self.out_event = torch.cuda.Event()\n\n"
                                 "    def copy_out(self, tokens):\n")
    assert made_here != PRESUMED and _early(made_here, tmp_path / "made") == []  # made here, waited nowhere
