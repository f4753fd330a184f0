"""A name's project class from the annotations the code states (flow/typedholders.py), and the class protocol
a function holding such an object reads through it (protocols._holder_inputs)."""
from __future__ import annotations

from pathlib import Path

from harness import engine_for, write
from streamlint.model.flow.typedholders import declared_class, typed_holders

SCHED = '''
import torch


class PrefetchQueue:
    def __init__(self):
        self.copy_stream = torch.cuda.Stream()
        self.ready = torch.cuda.Event()

    def launch_copy(self, host):
        with torch.cuda.stream(self.copy_stream):
            self.staged = host.to("cuda", non_blocking=True)
            self.ready.record(self.copy_stream)


class PagedQueue(PrefetchQueue):
    pass
'''

USERS = '''
from typing import TYPE_CHECKING, Optional, Union

import torch

from sched import PagedQueue

if TYPE_CHECKING:
    from sched import PrefetchQueue


def optional_param(q: Optional["PrefetchQueue"], x):
    return x


def union_param(q: "PrefetchQueue | None", x):
    return x


def union_typing(q: Union[None, PagedQueue], x):
    return x


def foreign(q: "vendor.PrefetchQueue", x):
    return x


def two_classes(q: Union[PagedQueue, "Other"], x):
    return x


def rebound(q: PagedQueue, x):
    q = make_queue()
    return x


def annotated_local(ctx, x):
    q: PrefetchQueue = ctx.queue
    return x


class StagedCopy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, self: "PrefetchQueue", x):
        return x

    def plain(self, x):
        return x
'''


def test_declared_classes(tmp_path: Path) -> None:
    write(tmp_path, "sched.py", SCHED)
    path = write(tmp_path, "users.py", USERS)
    project = engine_for(tmp_path).project
    file = project.file(str(path))

    def cls(fn: str, name: str = "q") -> str | None:
        found = declared_class(project, file, file.functions[fn], name)
        return found[0].name if found is not None else None

    assert cls("optional_param") == "PrefetchQueue"  # (a string inside Optional, a TYPE_CHECKING import)
    assert cls("union_param") == "PrefetchQueue"  # (`X | None` in a string)
    assert cls("union_typing") == "PagedQueue"
    assert cls("foreign") is None  # a class of another package: nothing known
    assert cls("two_classes") is None  # (not one class)
    assert cls("rebound") is None  # (rebound to a call's result in the body)
    assert cls("annotated_local") == "PrefetchQueue"
    assert cls("StagedCopy.forward", "self") == "PrefetchQueue"  # the staticmethod's `self`-like parameter
    assert cls("StagedCopy.plain", "self") is None  # an ordinary method's own instance
    holders = typed_holders(project, file, file.functions["StagedCopy.forward"])
    assert [(n, c.name) for n, c, _ in holders] == [("self", "PrefetchQueue")]
    assert typed_holders(project, file, file.functions["StagedCopy.plain"]) == []
