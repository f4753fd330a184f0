"""The producer side of a hand-off through an object's field (model/handoffs.unrecorded_stored_siblings)."""

import textwrap

from harness import lint_text

from streamlint.finding import Confidence

CODE = textwrap.dedent('''
    import torch


    class Prefetcher:
        def __init__(self, device):
            self.device = device
            self.ready = []

        def prefetch(self, n: int, forward_stream=None):
            locs = torch.empty(n, dtype=torch.int32, device=self.device)
            rows = torch.empty(n, 8, device=self.device)
            if forward_stream is not None:
                locs.record_stream(forward_stream)
            self.ready.append((locs, rows))

        def forward(self):
            locs, rows = self.ready.pop(0)
            return rows[locs.long()]
''')


def _stored(code: str, tmp_path) -> list:
    return [f for f in lint_text(code, tmp=tmp_path) if f.code == "SL301"]


def test_unrecorded_sibling_is_reported_at_the_store_with_medium_confidence(tmp_path):
    found = _stored(CODE, tmp_path)
    assert [(f.span.start_line, f.confidence) for f in found] == [(14, Confidence.MEDIUM)]  # the append (the text starts at `import torch`)
    assert "`rows` is stored with `locs`" in found[0].message
    assert "rows.record_stream(forward_stream)" in found[0].hint


def test_the_stream_used_for_work_here_says_nothing_about_the_reader(tmp_path):
    code = CODE.replace("        self.ready.append(", "        forward_stream.wait_stream(torch.cuda.current_stream())\n"
                        "        self.ready.append(")
    assert _stored(code, tmp_path) == []


def test_a_host_sibling_needs_no_record(tmp_path):
    code = CODE.replace("rows = torch.empty(n, 8, device=self.device)", "rows = torch.empty(n, 8, pin_memory=True)")
    assert _stored(code, tmp_path) == []


def test_the_reader_recording_what_it_pops_covers_it(tmp_path):
    code = CODE.replace("        return rows[locs.long()]", "        rows.record_stream(torch.cuda.current_stream())\n"
                        "        return rows[locs.long()]")
    assert _stored(code, tmp_path) == []
