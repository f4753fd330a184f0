"""Shortcuts of the warm path (issue 15) that must answer exactly what the longer way answers: LibCST node type
tests without ABCMeta's machinery (streamlint/nodechecks.py), the word index's hits in file order from the
candidates, the by-name field scan without a regex over the whole file, and a same-stream question that does not
resolve the second path when the first one alone decides."""

from __future__ import annotations

import abc
import random
import re
import types

import pytest

from harness import engine_for
from streamlint._lazy import cst
from streamlint.model.flow import provenance
from streamlint.model.flow.fieldfacts import set_by_name
from streamlint.model.wordindex import WordSearch
from streamlint.nodechecks import ExactNodeMeta, install

MODULE = '''
import torch


class Prefetcher:
    """Copies the next batch to the device on a side stream."""

    def __init__(self, device, depth: int = 2):
        self.copy_stream = torch.cuda.Stream(device=device)
        self.slots = [None] * depth
        self.ready = [torch.cuda.Event() for _ in range(depth)]

    @property
    def stream(self):
        return self.copy_stream

    async def fill(self, i, batch, *, non_blocking=True, **kw):
        with torch.cuda.stream(self.copy_stream):
            self.slots[i] = {k: v.to("cuda", non_blocking=non_blocking) for k, v in batch.items()}
            self.ready[i].record(self.copy_stream)
        lam = lambda x: x + 1  # noqa: E731
        return [lam(j) for j in range(3) if j] or (yield)
'''


def test_libcst_node_classes_take_type_checks() -> None:
    assert type(cst.If) is ExactNodeMeta and type(cst.BaseExpression) is ExactNodeMeta  # installed on first use
    assert isinstance(cst.If, abc.ABCMeta)  # still ABCs: abstract classes cannot be built
    with pytest.raises(TypeError):
        cst.BaseExpression()  # type: ignore[abstract]


def test_node_type_tests_answer_as_the_class_hierarchy() -> None:
    module = cst.parse_module(MODULE)
    nodes: list = []
    stack = [module]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.children)
    kinds = [v for v in vars(cst).values() if isinstance(v, type) and isinstance(v, abc.ABCMeta)]
    assert len(nodes) > 300 and len(kinds) > 150
    for node in nodes:
        mro = type(node).__mro__
        for kind in kinds:
            assert isinstance(node, kind) == (kind in mro), (type(node), kind)
            assert issubclass(type(node), kind) == (kind in mro)
        assert isinstance(node, (cst.If, type(node))) and not isinstance(node, (int, str))


def test_no_exact_checks_where_a_virtual_subclass_could_answer() -> None:
    class Node(abc.ABC):
        pass

    class Leaf(Node):
        pass

    class Other:
        pass

    fake = types.ModuleType("fakecst")
    fake.CSTNode, fake.Leaf = Node, Leaf
    Leaf.register(Other)  # a virtual subclass: isinstance(Other(), Leaf) holds without Leaf in its MRO
    assert install(fake) == 0 and type(Leaf) is abc.ABCMeta and isinstance(Other(), Node)

    class Hooked(abc.ABC):
        @classmethod
        def __subclasshook__(cls, sub):
            return True

    class Child(Hooked):
        pass

    hooked = types.ModuleType("hooked")
    hooked.CSTNode, hooked.Child = Hooked, Child
    assert install(hooked) == 0 and isinstance(3, Hooked)

    class Plain(abc.ABC):
        pass

    class PlainLeaf(Plain):
        pass

    plain = types.ModuleType("plain")
    plain.CSTNode, plain.PlainLeaf = Plain, PlainLeaf
    assert install(plain) == 2 and type(PlainLeaf) is ExactNodeMeta
    assert isinstance(PlainLeaf(), Plain) and not isinstance(Other(), Plain)


def _by_name_pattern(data: bytes, attr: str) -> bool:
    return bool(re.search(rb"(?:setattr|__dict__|vars\s*\()[^\n]*?[\"']" + attr.encode() + rb"[\"']", data))


def test_set_by_name_answers_as_the_pattern() -> None:
    rng = random.Random(7)
    tokens = [b"setattr", b"__dict__", b"vars", b"var", b"(", b"vars (", b"vars\n\n(", b"\n", b" ", b"\t", b"'",
              b'"', b"stream", b"streams", b"x", b"self.", b" = ", b",", b"dict__", b"_", b"s(", b"#"]
    differ = 0
    for _ in range(30000):
        data = b"".join(rng.choice(tokens) for _ in range(rng.randrange(0, 16)))
        for attr in ("stream", "x"):
            expected = _by_name_pattern(data, attr)
            assert set_by_name(data, attr.encode()) == expected, (data, attr)
            differ += expected
    assert differ > 30  # (both answers were met)


def test_word_index_hits_in_file_order_from_the_candidates() -> None:
    rng = random.Random(3)
    search = WordSearch(lambda: None, lambda path: None)  # type: ignore[arg-type, return-value]
    files = sorted(f"/p/pkg{rng.randrange(50)}/mod{i}.py" for i in range(400))
    for _ in range(300):
        candidates = {rng.choice(files) for _ in range(rng.randrange(0, 120))} | {"/elsewhere/x.py"}
        assert search._in_order(files, candidates) == [path for path in files if path in candidates]
    repeated = files[:5] + files[:5]
    assert search._in_order(repeated, {files[0]}) == [files[0], files[0]]


SERVER = '''
import torch


class Server:
    def __init__(self, device):
        self.main = torch.cuda.current_stream(device)
        self.side = torch.cuda.Stream(device=device)
        self.copy = torch.cuda.Stream(device=device)
        self.engine = make_engine(device)

    def rebuild(self, device):
        self.engine = make_engine(device)

    def step(self, x):
        with torch.cuda.stream(self.engine.runner.stream):
            y = x * 2
        return y


def make_engine(device):
    return None
'''


def test_a_path_through_a_rebound_field_resolves_no_other_field(tmp_path, monkeypatch) -> None:
    """``self.engine`` is rebound after construction: no path through it is one object, so asking which field
    ``self.engine.runner.stream`` denotes settles nothing about ``self.main``, ``self.side``, ``self.copy`` (their
    stability is project-wide scans per field)."""
    (tmp_path / "server.py").write_text(SERVER, encoding="utf-8")
    project = engine_for(tmp_path).project
    model = project.file(str(tmp_path / "server.py"))
    cls = model.classes["Server"]
    asked: list[str] = []
    real = provenance.stable_field

    def counting(project, file, cls, field, anywhere=False):
        asked.append(field)
        return real(project, file, cls, field, anywhere)

    monkeypatch.setattr(provenance, "stable_field", counting)
    assert provenance.self_alias(project, model, cls, "self.engine.runner.stream", cls.methods["step"]) is None
    assert not {"self.main", "self.side", "self.copy"} & set(asked)
    # the fields themselves are still answered when asked
    assert provenance.same_stream(project, model, cls.methods["step"], "self.side", "self.side")


# ---- walk.children answered again from what it kept (by node identity, bounded, forgotten per file)


def test_kept_children_are_the_computed_ones_and_go_with_the_file(tmp_path, monkeypatch) -> None:
    from streamlint.model import walk

    walk.forget_children()
    module = cst.parse_module(MODULE)
    nodes = list(walk.descendants(module, in_order=True))
    first = {id(n): walk.children(n) for n in nodes}
    assert all(walk.children(n) is first[id(n)] for n in nodes)  # kept: the same answer, not recomputed
    assert all(walk.children(n) == walk._children(n) for n in nodes)  # and what a fresh computation gives
    monkeypatch.setattr(walk, "_CHILDREN_KEPT", 8)
    walk.forget_children()
    for n in nodes:
        walk.children(n)
        assert len(walk._CHILDREN) <= 8  # bounded: cleared when full
    # nothing of a linted file's trees stays kept once its analysis is done
    path = tmp_path / "prefetch.py"
    path.write_text(MODULE, encoding="utf-8")
    monkeypatch.undo()
    engine = engine_for(tmp_path)
    engine.lint_file(str(path))
    assert not walk._CHILDREN
