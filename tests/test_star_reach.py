"""Names followed through star imports without parsing the star-imported modules that cannot bind them
(``Project._star_finds_nothing`` / ``_follow_unparsed``, the module summary's ``bound`` and ``stars``): the same
answers, the same steps of each question's budget, fewer LibCST parses (issue 15: transformers' model zoo)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness import FIXTURES, engine_for, write
from streamlint.model.project import Project, _SYMBOL_STEPS
from streamlint.model.summary import summarize

ZOO = FIXTURES / "projects" / "sl201_model_zoo_star_exports"
DPT = "zoo/models/dpt/modeling_dpt.py"


def _lint(root: Path, rel: str, monkeypatch: pytest.MonkeyPatch, shortcut: bool):
    with monkeypatch.context() as patch:
        if not shortcut:
            patch.setattr(Project, "_star_finds_nothing", lambda *args: False)
        engine = engine_for(root)
        report = engine.lint_file(str(root / rel))
    found = sorted((os.path.relpath(f.path, root), f.span.start_line, f.code, f.message) for f in report.findings)
    return found, {os.path.relpath(p, root) for p in engine._parsed}


def test_a_name_inherited_through_a_model_zoo_parses_no_module_that_only_spells_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``AutoBackbone.from_config`` (inherited: no module defines it under that name) is looked up through every
    model package's star imports; the modelling modules that spell ``AutoBackbone`` only in a docstring are not
    parsed, and the findings are those of following every module (the star-exported stream helpers still found)."""
    root = tmp_path / "zoo"
    shutil.copytree(ZOO, root)
    found, parsed = _lint(root, DPT, monkeypatch, shortcut=True)
    before, parsed_before = _lint(root, DPT, monkeypatch, shortcut=False)
    assert found == before
    assert [f[1:3] for f in found] == [(21, "SL201")]
    prose_only = {"zoo/models/detr/modeling_detr.py", "zoo/models/vitdet/modeling_vitdet.py"}
    assert prose_only <= parsed_before  # (what the lookup parsed before)
    assert not prose_only & parsed, sorted(parsed)
    assert "zoo/models/offload/streams.py" in parsed  # (the helpers the findings rest on)


def _zoo(root: Path, packages: int) -> None:
    """A zoo with every shape the shortcut must answer as the full lookup does: prose mentions, bindings by
    ``def`` / ``class`` / assignment / class-body import / ``try`` import, a submodule named like the name, star
    cycles, a package star-importing a module that binds the name late in the order, and (with many packages) a
    question that runs out of its budget of steps."""
    names = [f"p{i:03d}" for i in range(packages)]
    write(root, "zoo/__init__.py", "from .models import *\nfrom .late import *\n")
    write(root, "zoo/late.py", "from .models.p000 import *\n\n\ndef late_helper(x):\n    return x\n")
    write(root, "zoo/models/__init__.py", "".join(f"from .{n} import *\n" for n in names))
    for i, n in enumerate(names):
        nxt = names[(i + 1) % len(names)]
        write(root, f"zoo/models/{n}/__init__.py",
              f"from .modeling_{n} import *\nfrom .configuration_{n} import *\n"
              + (f"from ..{nxt} import *\n" if i % 5 == 0 else ""))  # (cycles through the packages)
        write(root, f"zoo/models/{n}/configuration_{n}.py", f"class Config{i}:\n    model_type = '{n}'\n")
        kind = i % 7
        body = f'"""Model {n}: see ``AutoBackbone``, ``Helper`` and ``late_helper`` in the docs."""\nimport torch\n\n\n'
        if kind == 1:
            body += "def Helper(x):\n    return torch.relu(x)\n"
        elif kind == 2:
            body += "class Holder:\n    from torch import nn as Helper\n"
        elif kind == 3:
            body += "try:\n    from torch.nn import Identity as Helper\nexcept ImportError:\n    Helper = None\n"
        elif kind == 4:
            body += "def build():\n    Helper = torch.nn.Identity  # (a local: binds nothing at module level)\n    return Helper\n"
        elif kind == 5:
            write(root, f"zoo/models/{n}/modeling_{n}/Helper.py", "def run(x):\n    return x\n")
            write(root, f"zoo/models/{n}/modeling_{n}/__init__.py", "")
            continue
        elif kind == 6:
            body += "Helper = torch.nn.Identity\n"
        write(root, f"zoo/models/{n}/modeling_{n}.py", body + "\n\nclass Block(torch.nn.Module):\n    pass\n")
    write(root, "run.py", "import zoo\n")


QUESTIONS = ("zoo.AutoBackbone.from_config", "zoo.Helper", "zoo.Helper.run", "zoo.late_helper", "zoo.Block.forward",
             "zoo.models.AutoBackbone", "zoo.models.p003.Helper", "zoo.models.p004.Helper", "zoo.Missing.name")


def _answers(root: Path, monkeypatch: pytest.MonkeyPatch, shortcut: bool):
    with monkeypatch.context() as patch:
        if not shortcut:
            patch.setattr(Project, "_star_finds_nothing", lambda *args: False)
        engine = engine_for(root)
        project = engine.project
        context = project.file(str(root / "run.py"))
        answers = []
        for question in QUESTIONS:
            found = project.symbol(question, context)
            answers.append((question, None if found is None else (found[0].name if hasattr(found[0], "name")
                                                                   else found[0].qualname, found[1].path),
                            len(project._symbol_seen)))
        return answers, len(engine._parsed)


@pytest.mark.parametrize("packages", [14, _SYMBOL_STEPS + 40])
def test_star_lookups_answer_and_spend_their_budget_as_the_full_lookup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, packages: int) -> None:
    _zoo(tmp_path, packages)
    answers, parsed = _answers(tmp_path, monkeypatch, shortcut=True)
    full, parsed_full = _answers(tmp_path, monkeypatch, shortcut=False)
    assert answers == full
    assert any(a[1] is not None for a in answers) and any(a[1] is None for a in answers)
    if packages > _SYMBOL_STEPS:
        assert any(a[2] > _SYMBOL_STEPS for a in answers)  # (a question ran out of its budget)
    assert parsed < parsed_full


SAMPLES = sorted(FIXTURES.rglob("*.py"))[::3] + sorted((FIXTURES.parent / "streamlint" / "model").glob("*.py"))[::4]

TRICKY = '''\
"""Mentions: Documented, Commented."""
import os.path
import numpy as np
from . import sibling
from .pkg.mod import *
from os import (sep as separator, getcwd)
# Commented = 1
try:
    from .fast import *
except ImportError:
    Fallback = None
if os.name:
    Cond, (Deep, *Rest) = 1, (2, 3, 4)
for Loop in range(2):
    pass
with open(__file__) as Handle:
    pass
[Comp for Comp in ()]
(Walrus := 3)


class Outer:
    from json import dumps as Dumped
    Attr = 1

    class Inner:
        def method(self):
            Local = 1

    def helper(self, Arg=(Default := 2)):
        from .x import *
        Hidden = 2


def top():
    Hidden2 = 3


async def atop():
    pass
'''


@pytest.mark.parametrize("path", SAMPLES + [None], ids=lambda p: "tricky" if p is None else p.name)
def test_the_summary_binds_what_the_model_binds_and_lists_its_star_imports(path: "Path | None") -> None:
    from streamlint._lazy import cst
    from streamlint.model.file import FileModel
    from streamlint.source import SourceFile

    data = TRICKY.encode() if path is None else path.read_bytes()
    source = SourceFile.from_bytes("m.py", data)
    for name, is_package in (("pkg.sub.m", False), ("pkg.sub", True), ("m", False)):
        model = FileModel(source, cst.parse_module(source.text), name, is_package)
        summary = summarize(data)
        assert summary.calls is not None
        bound = set(model.names) | {q for q in model.functions if "." not in q} | set(model.classes)
        assert bound <= summary.bound, sorted(bound - summary.bound)
        assert summary.star_modules(name, is_package) == model.star_imports
    if path is None:
        assert {"Documented", "Commented", "Local", "Hidden", "Hidden2"}.isdisjoint(summary.bound)
        assert {"os", "np", "sibling", "separator", "getcwd", "Fallback", "Cond", "Deep", "Rest", "Loop", "Handle",
                "Comp", "Walrus", "Dumped", "Attr", "Inner", "method", "Default", "top", "atop"} <= summary.bound
        assert summary.stars == (".pkg.mod", ".fast", ".x")


ELEMENTS = '''\
import torch
from . import builders
from .blocks import Expert as E

make, size = builders.MoeLayer, 4
(head, (tail, last)), other = (builders.Head, (builders.Tail, E)), None
alias = make


class Router:
    def route(self, x):
        gate, spare = torch.nn.Linear, builders.Gate
        return gate(x), spare(x), alias(x), head(x), tail(x), last(x), self.pick(x)
'''


@pytest.mark.parametrize("path", SAMPLES + [None], ids=lambda p: "elements" if p is None else p.name)
def test_every_call_the_model_resolves_ends_in_a_leaf_the_summary_may_resolve(path: "Path | None") -> None:
    """``handedevents.constructions`` skips, unparsed, a module whose summary says no call of it resolves to
    ``…Name``: every call site's resolved target (``FileModel.resolve``, tuple element bindings included) must
    end in a leaf ``ModuleSummary.may_resolve_call`` accepts."""
    from streamlint._lazy import cst
    from streamlint.model.file import FileModel
    from streamlint.source import SourceFile

    data = ELEMENTS.encode() if path is None else path.read_bytes()
    source = SourceFile.from_bytes("m.py", data)
    model = FileModel(source, cst.parse_module(source.text), "pkg.m", False)
    summary = summarize(data)
    sites = [*model.module_calls, *(site for fn in model.iter_functions() for site in fn.calls)]
    leaves = {site.target.rsplit(".", 1)[-1] for site in sites if site.target}
    assert {leaf for leaf in leaves if not summary.may_resolve_call(leaf)} == set()
    if path is None:
        assert {"MoeLayer", "Head", "Tail", "Expert", "Gate"} <= summary.element_calls
        assert not summary.may_resolve_call("Router")


def test_constructions_of_a_base_class_parse_only_modules_that_may_call_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``handedevents.constructions``: the bytes ``StepRecord(`` are in every ``class XStepRecord(StepRecord):``; the
    modules whose summary says no call resolves to ``…StepRecord`` are not parsed, and the constructions found are
    those of parsing every module that spells the bytes (a tuple-bound alias included)."""
    from streamlint.model import handedevents

    write(tmp_path, "train/records.py", "import torch\n\n\nclass StepRecord:\n    def __init__(self, done):\n"
          "        self.done = done\n\n    def wait(self):\n        torch.npu.current_stream().wait_event(self.done)\n")
    for i in range(8):
        write(tmp_path, f"train/stage{i}.py", "from train.records import StepRecord\n\n\n"
              f"class Stage{i}StepRecord(StepRecord):\n    pass\n")
    write(tmp_path, "train/loop.py", "import torch\nfrom train import records\n\n\ndef step(stream):\n"
          "    make, n = records.StepRecord, 1\n    ev = stream.record_event()\n    return make(done=ev), records.StepRecord(ev)\n")

    def built(keep: bool):
        with monkeypatch.context() as patch:
            if not keep:
                patch.setattr(Project, "may_resolve_call", lambda *args: True)
            engine = engine_for(tmp_path)
            model = engine.project.file(str(tmp_path / "train/records.py"))
            found = handedevents.constructions(engine.project, model, model.classes["StepRecord"])
            return ([(os.path.relpath(m.path, tmp_path), sorted(given)) for m, _, _, given in found],
                    {os.path.relpath(p, tmp_path) for p in engine._parsed})

    found, parsed = built(True)
    every, parsed_every = built(False)
    assert found == every == [("train/loop.py", ["done"])]  # (`make`: a local of the function, not followed)
    assert parsed == {"train/records.py", "train/loop.py"}
    assert {f"train/stage{i}.py" for i in range(8)} <= parsed_every
