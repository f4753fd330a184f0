"""A loop whose body orders the stream it writes on joins each iteration's work at the next one (leaves.loop_joined:
the hand-over of the last iteration is then low; an ordering of that stream itself is a join found by name,
leaves.stream_joined_elsewhere); an ordering of another stream or event joins nothing of it
(review of session 36: any ``synchronize()`` in the loop counted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import lint_paths, write

UPLOADER = """
    import torch


    class ChunkedUploader:
        def __init__(self, chunks):
            self.host = chunks
            self.dev = [torch.empty_like(c, device="cuda") for c in chunks]
            self.upload_stream = torch.cuda.Stream()
            self.scaled = torch.cuda.Event()
            self.scale_stream = torch.cuda.Stream()

        def scale(self, x, s):
            y = x * s
            self.scaled.record()
            return y

        def upload(self):
            for i, chunk in enumerate(self.host):
                {join}
                with torch.cuda.stream(self.upload_stream):
                    self.dev[i].copy_(chunk, non_blocking=True)


    def step(up, x):
        up.upload()
        return x @ up.dev[0]
"""


@pytest.mark.parametrize("join, confidence", [
    ("self.scaled.synchronize()", "medium"),  # the event of the scaling kernel, on the current stream
    ("self.scale_stream.synchronize()", "medium"),  # another stream
    ("torch.cuda.synchronize()", "low"),  # the device: the next iteration joins the previous one's copy
])
def test_only_an_ordering_of_the_written_stream_joins_the_loop(tmp_path: Path, join: str, confidence: str) -> None:
    write(tmp_path, "up/__init__.py", "")
    owner = write(tmp_path, "up/chunks.py", UPLOADER.replace("{join}", join))
    found = [(f.span.start_line, f.confidence.value) for f in lint_paths(tmp_path, [str(owner)], min_confidence="low")
             if f.code == "SL201"]
    assert found == [(22, confidence)]
