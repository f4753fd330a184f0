"""A completion handle handed to a project holder that waits it (heldhandles.held_handle) is no plain handle when
its future gets a done-callback queuing stream work: the holder's wait does not join what the callback writes, as
handles.handle_binding already reads a handle the call itself proves (review of session 36)."""

from __future__ import annotations

from tests.harness import lint_text

HOLDER = """
    import logging

    import torch

    log = logging.getLogger(__name__)


    class PendingGather:
        def __init__(self, work, full):
            self.work = work
            self.full = full

        def result(self):
            if self.work is not None:
                self.work.wait()
                self.work = None
            return self.full


    def gather_full_weight(shard, full, group, cast):
        gather_stream = torch.cuda.Stream()
        gather_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(gather_stream):
            staging = torch.empty_like(full)
            work = group.allgather_into_tensor_coalesced([staging], [shard], async_op=True)
            {callback}
        return PendingGather(work, full)


    def project_with_gathered(x, shard, full, group):
        pending = gather_full_weight(shard, full, group, cast=True)
        weight = pending.result()
        return x @ weight
"""

QUEUED = "work.get_future().add_done_callback(lambda done: full.copy_(staging.to(full.dtype)))"
COUNTED = "work.get_future().add_done_callback(lambda done: log.debug('gathered %d shards', len(shard)))"


def _sl201(callback: str) -> list[int]:
    code = HOLDER.replace("{callback}", callback)
    return sorted(f.span.start_line for f in lint_text(code, min_confidence="low") if f.code == "SL201")


def test_a_held_handle_whose_callback_queues_stream_work_keeps_its_data_reading() -> None:
    # the hand-back of the holder (root cause) and the caller's read of what the callback wrote
    assert _sl201(QUEUED) == [27, 32]


def test_a_held_handle_whose_callback_only_logs_stays_a_handle() -> None:
    assert _sl201(COUNTED) == []
