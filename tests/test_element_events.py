"""Side-stream products and their events carried through container fields (model/flow/elementevents.py)."""

import textwrap

from harness import lint_text

from streamlint.finding import Confidence

HEAD = textwrap.dedent('''
    import torch


    class Prefetcher:
        def __init__(self, loader, device):
            self.loader = iter(loader)
            self.device = device
            self.copy_stream = torch.cuda.Stream()
            self._batches = []
            self._ready = []

        def _fetch(self):
            batch = next(self.loader)
            done = torch.cuda.Event()
            with torch.cuda.stream(self.copy_stream):
                batch = batch.to(self.device, non_blocking=True)
            self._batches.append(batch)
            done.record(self.copy_stream)
            self._ready.append(done)
''')

DROPPED = '''
    def __next__(self):
        done = self._ready.pop(0)
        batch = self._batches.pop(0)
        self._fetch()
        return batch
'''


def _elements(code: str, tmp_path) -> list:
    return [f for f in lint_text(code, tmp=tmp_path) if f.code == "SL201" and f.related
            and f.related[0].message.endswith("recorded here") and ("handed out" in f.message or " read with" in f.message)]


def _cls(*methods: str) -> str:
    return HEAD + "".join(textwrap.indent(textwrap.dedent(m), "    ") for m in methods)


def test_dropped_element_event_is_reported_at_the_hand_out(tmp_path):
    found = _elements(_cls(DROPPED), tmp_path)
    assert [f.confidence for f in found] == [Confidence.MEDIUM]
    assert "`batch`" in found[0].message and "`done`" in found[0].message
    assert "done.wait()" in found[0].hint


def test_waited_element_event_is_silent(tmp_path):
    code = _cls(DROPPED.replace("self._ready.pop(0)\n", "self._ready.pop(0)\n        done.wait()\n"))
    assert _elements(code, tmp_path) == []


def test_container_also_filled_with_unknown_values_is_silent(tmp_path):
    push = '''
    def push(self, batches):
        self._batches.extend(batches)
'''
    assert _elements(_cls(DROPPED, push), tmp_path) == []
    store = '''
    def put_back(self, batch):
        self._batches.append(batch)
'''
    assert _elements(_cls(DROPPED, store), tmp_path) == []


def test_unrelated_keys_are_silent(tmp_path):
    lifo = DROPPED.replace("self._batches.pop(0)", "self._batches.pop()")
    assert _elements(_cls(lifo), tmp_path) == []


def test_join_step_in_another_method_is_silent(tmp_path):
    sync = '''
    def sync(self):
        for ev in self._ready:
            ev.wait()
'''
    assert _elements(_cls(DROPPED, sync), tmp_path) == []
    join = '''
    def drain(self):
        torch.cuda.current_stream().wait_stream(self.copy_stream)
'''
    assert _elements(_cls(DROPPED, join), tmp_path) == []


def test_event_recorded_before_the_copy_is_no_element_event(tmp_path):
    early = HEAD.replace("        done.record(self.copy_stream)\n", "").replace(
        "        done = torch.cuda.Event()\n", "        done = torch.cuda.Event()\n"
        "        done.record(self.copy_stream)\n")
    code = early + textwrap.indent(textwrap.dedent(DROPPED), "    ")
    assert _elements(code, tmp_path) == []


def test_element_event_recorded_before_the_copy_is_reported_at_the_record(tmp_path):
    early = HEAD.replace("        done.record(self.copy_stream)\n", "").replace(
        "        done = torch.cuda.Event()\n", "        done = torch.cuda.Event()\n"
        "        done.record(self.copy_stream)\n").replace(
        "batch.to(self.device, non_blocking=True)", "move_to(batch, self.device)")
    waited = DROPPED.replace("self._ready.pop(0)\n", "self._ready.pop(0)\n        done.wait()\n")
    code = "from helpers import move_to\n" + early + textwrap.indent(textwrap.dedent(waited), "    ")
    found = [f for f in lint_text(code, tmp=tmp_path) if f.code == "SL201"]
    assert len(found) == 1 and "recorded before its copy" in found[0].message
    assert found[0].confidence == Confidence.MEDIUM
    assert code.splitlines()[found[0].span.start_line - 1].strip() == "done.record(self.copy_stream)"
