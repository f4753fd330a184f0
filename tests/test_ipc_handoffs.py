"""Hand-offs to another process (flow/ipchandoffs.py) and bound-method callbacks (flow/callablerefs.py)."""

import textwrap

import libcst as cst
from harness import engine_for, lint_text

from streamlint.model.flow.callablerefs import method_reference
from streamlint.model.flow.ipchandoffs import process_queue

CODE = '''
import multiprocessing
import queue
from typing import Optional

import torch
import torch.multiprocessing as mp


class Ledger:
    def release(self, keys):
        pass

    @property
    def size(self):
        return 0


class Base:
    def __init__(self):
        self.ledger = Ledger()


class Owner(Base):
    spare: "mp.Queue"
    declared: mp.SimpleQueue

    def __init__(self, handed: mp.Queue, maybe: Optional[mp.Queue], plain, local_q: queue.Queue):
        super().__init__()
        self.handed = handed
        self.maybe = maybe
        self.plain = plain
        self.local_q = local_q
        self.built = multiprocessing.Queue()
        ctx = mp.get_context("spawn")
        self.from_ctx = ctx.Queue()
        self.managed = mp.Manager().Queue()
        self.unknown = make_queue()

    def use(self, q: mp.JoinableQueue, t: queue.Queue):
        local = mp.SimpleQueue()
        for r in (self.handed, self.maybe, self.plain, self.local_q, self.built, self.from_ctx, self.managed,
                  self.unknown, self.declared, q, t, local):
            r.put(None)
        self.ledger.release([])
        self.release_all()
        return self.ledger.size

    def release_all(self):
        pass


def make_queue():
    return queue.Queue()
'''


def _model(tmp_path):
    path = tmp_path / "owner.py"
    path.write_text(textwrap.dedent(CODE).lstrip("\n"), encoding="utf-8")
    engine = engine_for(tmp_path, [str(path)])
    return engine.project, engine.project.file(str(path))


def _receivers(file):
    fn = file.functions["Owner.use"]
    loop = next(n for n in fn.node.body.body if isinstance(n, cst.For))
    return fn, [el.value for el in loop.iter.elements]


def test_process_queues_by_what_the_code_says(tmp_path):
    _, file = _model(tmp_path)
    fn, receivers = _receivers(file)
    got = [process_queue(file, fn, r) for r in receivers]
    #          handed maybe plain  local_q built from_ctx managed unknown declared q     t      local
    assert got == [True, True, False, False, True, True, True, False, True, True, False, True]


def test_bound_methods_are_callbacks(tmp_path):
    project, file = _model(tmp_path)
    fn = file.functions["Owner.use"]
    exprs = [n for n in (s.node.func for s in fn.calls) if isinstance(n, cst.Attribute)]
    release = next(e for e in exprs if e.attr.value == "release")
    release_all = next(e for e in exprs if e.attr.value == "release_all")
    assert method_reference(project, file, fn, release)  # a field built by the base class's __init__
    assert method_reference(project, file, fn, release_all)
    size = fn.returns[0].value
    assert not method_reference(project, file, fn, size)  # a property is a value
    assert not method_reference(project, file, fn, release.value)  # the field itself


def test_put_on_process_queue_is_a_read_on_the_current_stream():
    found = lint_text('''
        import torch
        import torch.multiprocessing as mp


        class Pub:
            def __init__(self, q: mp.Queue):
                self.q = q
                self.side = torch.cuda.Stream()

            def send(self, x: torch.Tensor):
                self.side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.side):
                    y = x * 2
                self.q.put(y)
    ''')
    assert [(f.code, f.span.start_line) for f in found if f.code == "SL201"] == [("SL201", 14)]
