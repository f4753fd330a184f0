"""A method that leaves a field's write pending on a side stream at its own exit (through a producer method of its
class it runs itself) is read by its next call: the order is the method's own, so the missing join is MEDIUM
and says so (flow/unproven.next_call_order); with the join, or a synchronize before the exit, nothing."""
from __future__ import annotations

from harness import lint_paths

OFFLOADED = '''
import torch


class StaticOffloadedKV:
    def __init__(self, host_keys, device):
        self.host_keys = host_keys
        self._dev_keys = [torch.empty_like(k, device=device) for k in host_keys[:2]]
        self._prefetch_stream = torch.cuda.Stream() if device.type == "cuda" else None

    def update(self, key_states, layer_idx, positions):
        if layer_idx == 0:
            k_out = self.host_keys[0]
        else:
            if self._prefetch_stream is not None:
                torch.cuda.nvtx.range_push(f"kv layer {layer_idx}")
            JOIN
            k_out = self._dev_keys[layer_idx & 1]
        self._prefetch_layer(layer_idx + 1)
        k_out.index_copy_(2, positions, key_states)
        if layer_idx != 0:
            self._write_back(layer_idx, positions, key_states)
        return k_out

    def _write_back(self, layer_idx, positions, key_states):
        self.host_keys[layer_idx][:, :, positions.tolist()] = key_states.cpu()

    def _prefetch_layer(self, layer_idx):
        if layer_idx >= len(self.host_keys):
            return
        if self._prefetch_stream is not None:
            with torch.cuda.stream(self._prefetch_stream):
                self._prefetch_layer_in_context(layer_idx)
        else:
            self._prefetch_layer_in_context(layer_idx)

    def _prefetch_layer_in_context(self, layer_idx):
        self._dev_keys[layer_idx & 1].copy_(self.host_keys[layer_idx], non_blocking=True)
'''


DRAIN = '''
def finish_generation(cache):
    """End of a generate() call: nothing may still be copying into the cache's slots."""
    if getattr(cache, "_prefetch_stream", None) is not None:
        cache._prefetch_stream.synchronize()
'''


def _lint(tmp_path, code: str):
    """The cache module in a project whose other module drains the stream at the end of a generation (so the
    hand-back reading, which needs no code ordering that stream anywhere, does not apply)."""
    (tmp_path / "drain.py").write_text(DRAIN.lstrip("\n"))
    path = tmp_path / "kv.py"
    path.write_text(code)
    return lint_paths(tmp_path, [str(path)])


def _line(text: str, marker: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if marker in line)


def test_a_reader_running_the_producer_itself_is_medium(tmp_path) -> None:
    code = OFFLOADED.replace("JOIN", "pass").lstrip("\n")
    found = {(f.span.start_line, f.code): f for f in _lint(tmp_path, code)}
    finding = found[(_line(code, "k_out.index_copy_"), "SL201")]
    assert finding.confidence.value == "medium"
    assert "which this method runs itself" in (finding.hint or "")


def test_the_join_at_the_entry_is_silent(tmp_path) -> None:
    code = OFFLOADED.replace(
        "JOIN", "torch.cuda.current_stream().wait_stream(self._prefetch_stream)").lstrip("\n")
    found = {(f.span.start_line, f.code) for f in _lint(tmp_path, code)}
    assert (_line(code, "k_out.index_copy_"), "SL201") not in found
