"""Project helpers that make the stream they are handed wait (model/waithelpers.py): which parameters they wait on
every path, and which argument of a call binds one (by position, by keyword, a method's receiver skipped)."""
from __future__ import annotations

from pathlib import Path

from harness import engine_for, write

HELPERS = """
    import torch


    @torch.compiler.disable
    def order_after(waiter, producer):
        waiter.wait_stream(producer)


    def wait_mark(stream: torch.cuda.Stream, mark: torch.cuda.Event):
        stream.wait_event(mark)


    def order_if(waiter, producer, enabled: bool):
        if enabled:
            waiter.wait_stream(producer)


    def order_each(waiters, producer):
        for w in waiters:
            w.wait_stream(producer)


    def order_fresh(waiter, producer):
        waiter = torch.cuda.Stream()
        waiter.wait_stream(producer)


    def join_into(producer, waiter):
        torch.cuda.current_stream().wait_stream(producer)
"""

CALLER = """
    import torch

    from .helpers import join_into, order_after, order_each, order_fresh, order_if, wait_mark


    def step(side, mark):
        cur = torch.cuda.current_stream()
        order_after(side, cur)
        order_after(producer=cur, waiter=side)
        wait_mark(mark=mark, stream=side)
        order_if(side, cur, True)
        order_each([side], cur)
        order_fresh(side, cur)
        join_into(side, cur)


    class Lanes:
        def order(self, lane, producer):
            lane.wait_stream(producer)

        def step(self, side):
            self.order(side, torch.cuda.current_stream())
"""


def test_waited_arguments(tmp_path: Path) -> None:
    from streamlint.model.waithelpers import waited_arguments, waiting_params

    write(tmp_path, "pkg/__init__.py", "")
    helpers = write(tmp_path, "pkg/helpers.py", HELPERS)
    caller = write(tmp_path, "pkg/step.py", CALLER)
    project = engine_for(tmp_path).project
    model = project.file(str(caller))
    fn = model.functions["step"]
    waited = [[model.code(e) for e in waited_arguments(project, model, site)] for site in fn.calls
              if site.function is fn and site.method != "current_stream"]
    assert waited == [
        ["side"],  # positional
        ["side"],  # keyword, in another order
        ["side"],  # an event wait on the stream parameter
        [],  # only under a test
        [],  # in a loop, over a collection
        [],  # rebound before the wait: not the caller's stream
        [],  # the current stream waits: the parameter is the producer
    ]
    method = model.functions["Lanes.step"]
    assert [model.code(e) for e in waited_arguments(project, model, next(c for c in method.calls if c.method == "order"))] == ["side"]  # `self` skipped
    helper_model = project.file(str(helpers))
    order = helper_model.functions["order_after"]
    assert waiting_params(project, order) == {"waiter"}
