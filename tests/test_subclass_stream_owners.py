"""A stream a class makes for itself is private (joinowners.private_stream) only when neither the class, nor a base,
nor a subclass hands it out or rebinds it: a subclass's method returning ``self.copy_stream`` lets code elsewhere join
it under another name (review of session 36: joinowners looked at the class and its bases only)."""

from __future__ import annotations

from pathlib import Path

from tests.harness import lint_paths, write

PREFETCH = """
    import torch


    class LayerPrefetcher:
        def __init__(self, host_layers):
            self.host_layers = host_layers
            self.copy_stream = torch.cuda.Stream()
            self.slots = [torch.empty_like(h, device="cuda") for h in host_layers[:2]]

        def prefetch(self, layer):
            with torch.cuda.stream(self.copy_stream):
                self.slots[layer % 2].copy_(self.host_layers[layer], non_blocking=True)
"""

# a consumer that is handed a stream and joins it: the prefetcher's when a subclass hands it out
CONSUMER = """
    import torch


    class SlotConsumer:
        def __init__(self, stream):
            self.copy_stream = stream

        def acquire(self, slots, layer):
            torch.cuda.current_stream().wait_stream(self.copy_stream)
            return slots[layer % 2]
"""

TRACED = """
    from offload.prefetch import LayerPrefetcher


    class TracedPrefetcher(LayerPrefetcher):
        def side_stream(self):
            return self.copy_stream
"""

# a subclass that only counts its prefetches: the stream stays the class's own
COUNTED = """
    from offload.prefetch import LayerPrefetcher


    class CountedPrefetcher(LayerPrefetcher):
        def prefetch(self, layer):
            self.count = getattr(self, "count", 0) + 1
            super().prefetch(layer)
"""


def _sl201(root: Path, owner: Path) -> list[int]:
    files = sorted(str(p) for p in root.rglob("*.py"))
    return [f.span.start_line for f in lint_paths(root, files, min_confidence="low")
            if f.path == str(owner) and f.code == "SL201"]


def _project(root: Path, subclass: str) -> Path:
    write(root, "offload/__init__.py", "")
    owner = write(root, "offload/prefetch.py", PREFETCH)
    write(root, "offload/consume.py", CONSUMER)
    write(root, "offload/sub.py", subclass)
    return owner


def test_a_subclass_handing_the_stream_out_makes_it_no_private_stream(tmp_path: Path) -> None:
    assert _sl201(tmp_path, _project(tmp_path, TRACED)) == []


def test_a_subclass_keeping_the_stream_leaves_it_private(tmp_path: Path) -> None:
    assert _sl201(tmp_path, _project(tmp_path, COUNTED)) == [13]
