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


GUESSED = """
import torch


class PinnedMeta:
    def __init__(self, n):
        self.cpu = torch.empty(n, dtype=torch.int32, pin_memory=True)
        self.gpu = torch.empty(n, dtype=torch.int32, device="cuda")

    def copy_meta_to_gpu(self, n):
        self.gpu[:n].copy_(self.cpu[:n], non_blocking=True)


class LayerPrefetcher:
    def __init__(self, layers, meta):
        self.layers = layers
        self.meta = meta
        self.copy_stream = torch.cuda.Stream()
        self.buffers = [torch.empty_like(l) for l in layers]
        self.ready_events = [torch.cuda.Event() for _ in layers]

    def prefetch(self, i, n):
        with torch.cuda.stream(self.copy_stream):
            self.ready_events[i].record()
            self.meta.copy_meta_to_gpu(n)
            self.buffers[i].copy_(self.layers[i], non_blocking=True)

    def wait_layer(self, i):
        torch.cuda.current_stream().wait_event(self.ready_events[i])
        return self.buffers[i]
"""


def test_early_record_confidence_follows_the_strongest_uncovered_work(tmp_path):
    # a guessed call (a method on an untyped receiver) then a certain copy: the certain one decides (high)
    findings = [f for f in lint_text(GUESSED, tmp=tmp_path) if f.code == "SL201"]
    assert [(f.span.start_line, f.confidence) for f in findings] == [(23, Confidence.HIGH)]
    assert [r.span.start_line for r in findings[0].related] == [25] and "unknown class" not in findings[0].hint
    guessed_only = GUESSED.replace("            self.buffers[i].copy_(self.layers[i], non_blocking=True)\n", "")
    assert guessed_only != GUESSED and _early(guessed_only, tmp_path / "g") == [(23, Confidence.MEDIUM)]
    certain_first = GUESSED.replace(
        "            self.meta.copy_meta_to_gpu(n)\n            self.buffers[i].copy_(self.layers[i], non_blocking=True)\n",
        "            self.buffers[i].copy_(self.layers[i], non_blocking=True)\n            self.meta.copy_meta_to_gpu(n)\n")
    assert certain_first != GUESSED and _early(certain_first, tmp_path / "c") == [(23, Confidence.HIGH)]


ASIDE = """
import torch


class LayerPrefetcher:
    def __init__(self, layers):
        self.layers = layers
        self.copy_stream = torch.cuda.Stream()
        self.weights = [torch.empty_like(l) for l in layers]
        self.stats_gpu = torch.zeros(len(layers), device="cuda")
        self.stats_host = torch.zeros(len(layers), pin_memory=True)
        self.weights_ready = [torch.cuda.Event() for _ in layers]

    def prefetch(self, i):
        with torch.cuda.stream(self.copy_stream):
            self.weights[i].copy_(self.layers[i], non_blocking=True)
            self.weights_ready[i].record()
            self.stats_host.copy_(self.stats_gpu, non_blocking=True)

    def wait_layer(self, i):
        torch.cuda.current_stream().wait_event(self.weights_ready[i])
        return self.weights[i]

    def read_stats(self):
        with torch.cuda.stream(self.copy_stream):
            self.stats_gpu.mul_(0.5)
        self.copy_stream.synchronize()
        return self.stats_host.tolist()
"""


def test_aside_join_covers_work_the_waiters_do_not_read(tmp_path):
    # read_stats() synchronises the copy stream: the stats copied after the record are joined for their reader
    assert _early(ASIDE, tmp_path) == []
    read_by_waiter = ASIDE.replace("        return self.weights[i]\n", "        return self.weights[i], self.stats_host\n")
    assert read_by_waiter != ASIDE and _early(read_by_waiter, tmp_path / "w") == [(16, Confidence.MEDIUM)]
    writes_weights = ASIDE.replace("            self.stats_host.copy_(self.stats_gpu, non_blocking=True)\n",
                                   "            self.stats_host.copy_(self.stats_gpu, non_blocking=True)\n"
                                   "            self.weights[i].mul_(2.0)\n")
    assert writes_weights != ASIDE and _early(writes_weights, tmp_path / "m") == [(16, Confidence.MEDIUM)]
    caller_reads = ASIDE + "\n\ndef forward(pf, i):\n    w = pf.wait_layer(i)\n    return w @ pf.stats_host\n"
    assert _early(caller_reads, tmp_path / "c") == [(16, Confidence.MEDIUM)]  # read after the waiting method
    unknown = ASIDE.replace("            self.stats_host.copy_(self.stats_gpu, non_blocking=True)\n",
                            "            torch.mul(self.stats_gpu, 2.0, out=stats)\n")
    assert unknown != ASIDE and _early(unknown, tmp_path / "u") == [(16, Confidence.MEDIUM)]
