"""A non-blocking copy to the host of a value of unknown placement, followed on the same stream by a blocking
host read or copy of another value of unknown placement: if both are device data (as the code takes them), the
blocking call waited for the copy, so the host read of the copy's result is reported low, not medium."""

from harness import lint_text

HEADER = """import torch
from torch.distributed._functional_collectives import all_to_all_single


class Splits:
    def __init__(self, group, ep):
        self.group = group
        self.ep = ep

    def run(self, module, inputs, single):
        routed, counts, scores = inputs
        if single:
            back = counts
        else:
            back = torch.ops._c10d_functional.wait_tensor(all_to_all_single(counts, None, None, self.group))
        send = counts.view(self.ep, -1).sum(dim=1).to(torch.device("cpu"), non_blocking=True)
"""


def _confidences(between: str, tmp_path) -> list[str]:
    code = HEADER + between + "        return send.tolist()\n"
    return [f.confidence.value for f in lint_text(code, tmp=tmp_path) if f.code == "SL201"]


def test_no_blocking_call_stays_medium(tmp_path):
    assert _confidences("", tmp_path) == ["medium"]


def test_blocking_copy_of_unplaced_value_lowers(tmp_path):
    assert _confidences("        recv = back.view(self.ep, -1).to(torch.device('cpu'))\n", tmp_path) == ["low"]
    assert _confidences("        recv = back.cpu()\n", tmp_path) == ["low"]


def test_host_read_of_unplaced_value_lowers(tmp_path):
    assert _confidences("        n = int(counts.sum().item())\n", tmp_path) == ["low"]


def test_asynchronous_or_host_only_calls_do_not_lower(tmp_path):
    assert _confidences("        recv = back.to('cpu', non_blocking=True)\n", tmp_path) == ["medium"]
    assert _confidences("        staged = counts.pin_memory()\n", tmp_path) == ["medium"]
    assert _confidences("        n = len([1, 2, 3])\n", tmp_path) == ["medium"]
