"""Values a helper builds only from what code not seen gives (flow/unseenbuilds.py, hosthelpers.opaque_returns),
objects holding a stream (flow/hostnames.stream_holder_names) and uses only through a library's own tensor methods
(flow/foreignuses.py): the fixtures sl201_unseen_chunk_lookups and sl201_stream_holding_communicators, with the
confidence of each finding."""

from pathlib import Path

from harness import engine_for, lint_paths, lint_project

from streamlint.finding import Confidence
from streamlint.model.flow.hosthelpers import opaque_returns
from streamlint.model.flow.hostnames import stream_holder_names

FIXTURES = Path(__file__).parent.parent / "fixtures"
LOOKUPS = FIXTURES / "projects/sl201_unseen_chunk_lookups"
HOLDERS = FIXTURES / "rules/sl201_stream_holding_communicators.py"


def _found(findings) -> dict[tuple[str, int], object]:
    return {(f.code, f.span.start_line): f for f in findings if f.code[:3] in ("SL2", "SL3")}


def test_blocks_handed_out_by_unseen_objects_are_a_guess():
    found = _found(lint_project(LOOKUPS))
    share = next(line for code, line in found if code == "SL201" and "`blocks`" in found[(code, line)].message)
    assert found[("SL201", share)].confidence == Confidence.LOW, found[("SL201", share)]
    assert "_blocks()`, whose code makes no device tensor: it assembles" in (found[("SL201", share)].hint or "")
    assert found[("SL301", share)].confidence == Confidence.LOW, found[("SL301", share)]
    assert "hands back: its code makes no tensor" in (found[("SL301", share)].hint or "")
    # the helper's own torch.cat, an unseen call handed the helper's tensor itself: device data, high
    for name in ("`staged`", "`embedded`", "`encoded`"):
        line = next(ln for code, ln in found if code == "SL201" and name in found[(code, ln)].message)
        assert found[("SL201", line)].confidence in (None, Confidence.HIGH), found[("SL201", line)]
        assert found[("SL301", line)].confidence in (None, Confidence.HIGH), found[("SL301", line)]


def _answers(tmp_path, code: str, question) -> dict[str, object]:
    path = tmp_path / "helpers.py"
    path.write_text(code)
    project = engine_for(tmp_path).project
    model = project.file(str(path))
    return {fn.node.name.value: question(project, model, fn) for fn in model.iter_functions()}


def test_what_a_helper_builds_from_unseen_code(tmp_path):
    answers = _answers(tmp_path, '''
import torch


class Lookup:
    def pairs(self, ids):
        out = []
        for first, last, key in self.index.ranges(ids):
            out.append((key, first, last))
        return out, len(out)

    def table(self, ids):
        by_key = {}
        for key, obj in self.store.fetch(ids):
            by_key[key] = obj
        return [by_key.get(k) for k in self.index.keys_of(ids)]

    def sizes(self, ids):
        total = 0
        for obj in self.store.fetch(self.wanted):
            total += obj.byte_size()
        return (self.store.fetch(self.wanted), total) if total else ([], 0)

    def empty(self, ids):
        return [], 0

    def gathered(self, ids):
        out = []
        for first, last, _ in self.index.ranges(ids):
            out.append(ids[first:last])
        return out, 0

    def computed(self, ids):
        rows = [torch.cat([r, r]) for r in self.store.fetch(ids)]
        return rows, len(rows)

    def viewed(self, ids):
        return [obj.view(-1) for obj in self.store.fetch(ids)]

    def experts(self, hidden):
        outs = []
        for expert in self.experts:
            outs.append(expert.forward(hidden))  # computed on the caller's tensor by code not seen
        return outs, len(outs)

    def pair(self, hidden: torch.Tensor):
        return self.attn.run(hidden), self.mlp.run(hidden)

    def records(self, ids: torch.Tensor):
        keys = []
        for first, last, key in self.index.ranges(ids):  # each element unpacked: records, not a computed tensor
            keys.append(key)
        return self.store.take_many(keys), len(keys)

    def in_context(self, ids):
        with self.store.session() as s:
            s.fetch(ids)
        return s, 0
''', opaque_returns)
    assert answers["pairs"] and answers["table"] and answers["sizes"] and answers["records"]
    assert not answers["experts"] and not answers["pair"]
    # only host values, the caller's tensor, a torch op, a tensor method, a `with` target: no guess
    assert not answers["empty"] and not answers["gathered"] and not answers["computed"]
    assert not answers["viewed"] and not answers["in_context"]


def _lint(path: Path):
    return _found(lint_paths(path.parent, [str(path)], [str(path)]))


def test_communicators_holding_a_stream_are_no_tensors():
    found = _lint(HOLDERS)
    assert "`grad` is produced" in found[("SL201", 31)].message, found[("SL201", 31)]  # not `comm`
    assert not [k for k in found if k[1] in (19, 42)], found
    assert ("SL201", 52) in found  # a bucket scaled in place is a tensor, whatever it holds
    # a buffer reaching a communicator only through the library's own methods: its use's stream is a guess
    handle = found[("SL301", 64)]
    assert handle.confidence == Confidence.LOW and "`data.ensure_registered()`" in (handle.hint or ""), handle
    assert found[("SL301", 77)].confidence in (None, Confidence.HIGH), found[("SL301", 77)]


def test_stream_holders(tmp_path):
    answers = _answers(tmp_path, '''
import torch


def holders(group, engine_factory, x, n):
    comm = group.communicator()
    comm.side_stream.wait_event(torch.cuda.current_stream().record_event())
    comm.reduce(x)
    engine = engine_factory.open(n)
    with torch.cuda.stream(engine.copy_stream):
        engine.upload(x)
    handed = group.communicator()
    handed.reduce(x)
    torch.cuda.current_stream().wait_stream(handed.side_stream)
    keep(handed)
    twice = group.communicator()
    twice = group.communicator()
    twice.reduce(x)
    twice.side_stream.synchronize()
    bucket = group.bucket(n)
    bucket.div_(n)
    bucket.reduce_stream.synchronize()
    plain = group.communicator()
    plain.reduce(x)
''', lambda project, model, fn: stream_holder_names(fn))
    assert answers["holders"] == {"comm", "engine"}
