"""Stream provenance stays unknown where a construction, a rebinding or a mutation may be unseen
(flow/provenance.py, flow/fieldfacts.py, flow/confined.py): two different streams are never taken for one."""
from __future__ import annotations

import pytest

from harness import engine_for
from streamlint.model.flow.provenance import same_stream

DEV = "import torch\n\n\ndef make_stream(device):\n    return torch.cuda.Stream(device=device)\n"
RUNTIME = """import torch

from podkit.dev import make_stream


class Runtime:
    def __init__(self, device):
        self._compute_stream = make_stream(device)

    @property
    def compute_stream(self):
        return self._compute_stream
{extra_r}"""
VERIFIER = """import torch
{imports_v}

{deco}class Verifier:
    def __init__(self, runtime, stream, max_batch, device):
        self.runtime = runtime
        self.stream = stream
        self._accepted = torch.zeros(max_batch, dtype=torch.long, device=device)
{extra_v}
    def verify(self, batch):
        with torch.cuda.stream(self.runtime.compute_stream):
            self._accepted[:batch].fill_(0)
        with torch.cuda.stream(self.stream):
            self._accepted[:batch].add_(1)
"""
ENGINE = """import torch

from podkit.runtime import Runtime
from podkit.verifier import Verifier


class Engine:
    def __init__(self, {runtime_param}device):
        self.runtime = {runtime_value}
        self.verifier = Verifier(self.runtime, self.runtime.compute_stream, 8, device)
        self._copy_stream = torch.cuda.Stream(device=device)

    def step(self):
        self.verifier.verify(8)
{extra_e}"""
WARM = "from podkit.dev import make_stream\n{imports}\n\n\ndef warm(runtime, device, kind='Verifier'):\n" \
       "    v = {build}(runtime, make_stream(device), 8, device)\n    v.verify(8)\n"

CASES = {
    # name: (overrides of the templates, extra files)
    "import_alias": ({}, {"warm.py": WARM.format(
        imports="from podkit.verifier import Verifier as DraftVerifier", build="DraftVerifier")}),
    "reexport_alias": ({}, {"__init__.py": "from podkit.verifier import Verifier as BaseVerifier\n",
                            "warm.py": WARM.format(imports="from podkit import BaseVerifier", build="BaseVerifier")}),
    "module_getattr_var": ({}, {"warm.py": WARM.format(
        imports="from podkit import verifier as vmod", build="getattr(vmod, kind)")}),
    "module_getattr_str": ({}, {"warm.py": WARM.format(
        imports="from podkit import verifier as vmod", build='getattr(vmod, "Verifier")')}),
    "module_partial": ({}, {"warm.py": "import functools\n\nfrom podkit import verifier as vmod\n"
                                       "from podkit.dev import make_stream\n\n\ndef warm(runtime, device):\n"
                                       "    build = functools.partial(vmod.Verifier, runtime)\n"
                                       "    build(make_stream(device), 8, device).verify(8)\n"}),
    "module_partial_attr": ({}, {"warm.py": "import functools\n\nimport podkit.verifier\n\n\n"
                                            "BUILD = functools.partial(podkit.verifier.Verifier, None)\n"}),
    "alias_at_end_of_line": ({}, {"warm.py": "from podkit.verifier import Verifier\n\nVerifierCls = Verifier\n\n\ndef warm():\n    return VerifierCls\n"}),
    "decorated_class": ({"imports_v": "\nfrom podkit.registry import register\n", "deco": '@register("default")\n'},
                        {"registry.py": "VERIFIERS = {}\n\n\ndef register(name):\n    def deco(cls):\n"
                                        "        VERIFIERS[name] = cls\n        return cls\n    return deco\n"}),
    "setattr_by_name": ({"extra_e": "\n    def to_copy(self):\n"
                                    "        setattr(self.verifier, \"stream\", self._copy_stream)\n"}, {}),
    "dict_update": ({"extra_v": "\n    def configure(self, **overrides):\n        self.__dict__.update(overrides)\n"},
                    {}),
    # the property's backing field is rebound after construction (the runtime handed in, typed or not)
    "property_backing_reset": ({"runtime_param": "runtime, ", "runtime_value": "runtime",
                                "extra_r": "\n    def reset(self, device):\n"
                                           "        self._compute_stream = make_stream(device)\n"},
                               {"build.py": "from podkit.engine import Engine\n\n\ndef build(cfg, device):\n"
                                            "    return Engine(cfg.runtime_factory(device), device)\n"}),
    "property_backing_reset_typed": ({"runtime_param": "runtime: Runtime, ", "runtime_value": "runtime",
                                      "extra_r": "\n    def reset(self, device):\n"
                                                 "        self._compute_stream = make_stream(device)\n"},
                                     {"build.py": "from podkit.engine import Engine\n\n\ndef build(cfg, device):\n"
                                                  "    return Engine(cfg.runtime_factory(device), device)\n"}),
}
DEFAULTS = {"extra_r": "", "imports_v": "", "deco": "", "extra_v": "", "runtime_param": "",
            "runtime_value": "Runtime(device)", "extra_e": ""}


def _project(tmp_path, overrides: dict, extra: dict):
    values = {**DEFAULTS, **overrides}
    pkg = tmp_path / "podkit"
    pkg.mkdir()
    files = {"__init__.py": "", "dev.py": DEV, "runtime.py": RUNTIME.format(**values),
             "verifier.py": VERIFIER.format(**values), "engine.py": ENGINE.format(**values), **extra}
    for name, text in files.items():
        (pkg / name).write_text(text, encoding="utf-8")
    project = engine_for(tmp_path).project
    model = project.file(str(pkg / "verifier.py"))
    return project, model, model.classes["Verifier"].methods["verify"]


def test_one_visible_construction_is_one_stream(tmp_path) -> None:
    project, model, verify = _project(tmp_path, {}, {})
    assert same_stream(project, model, verify, "self.runtime.compute_stream", "self.stream")


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unseen_construction_or_rebinding_stays_unknown(tmp_path, case: str) -> None:
    project, model, verify = _project(tmp_path, *CASES[case])
    assert not same_stream(project, model, verify, "self.runtime.compute_stream", "self.stream")


SLOTS = """import torch


class Slot:
    def __init__(self, vocab: int, device, stream: torch.cuda.Stream) -> None:
        self.logits = torch.zeros(8, vocab, device=device)
        self.stream = stream


class Runtime:
    def __init__(self, vocab: int, device) -> None:
        self._compute_stream = torch.cuda.Stream(device=device)
        self._spill_stream = torch.cuda.Stream(device=device)
        self.slots = [Slot(vocab, device, self._compute_stream) for _ in range(2)]
{grow}
    def decode(self, k: int) -> None:
        with torch.cuda.stream(self.slots[k].stream):
            pass
"""


@pytest.mark.parametrize("grow, same", [
    ("", True),
    ("\n    def grow(self, vocab, device) -> None:\n        self.slots.append(Slot(vocab, device, self._spill_stream))\n",
     False),
    ("\n    def grow(self, vocab, device) -> None:\n        self.slots[0] = Slot(vocab, device, self._spill_stream)\n",
     False),
    ("\n    def grow(self, vocab, device) -> None:\n        self.slots += [Slot(vocab, device, self._spill_stream)]\n",
     False),
])
def test_a_container_changed_after_construction_is_not_built_alike(tmp_path, grow: str, same: bool) -> None:
    (tmp_path / "slots.py").write_text(SLOTS.format(grow=grow), encoding="utf-8")
    project = engine_for(tmp_path).project
    model = project.file(str(tmp_path / "slots.py"))
    decode = model.classes["Runtime"].methods["decode"]
    assert same_stream(project, model, decode, "self.slots[k].stream", "self._compute_stream") is same


FROZEN = """from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DecodeSlot:
    logits: torch.Tensor
    compute_stream: torch.cuda.Stream


class Runtime:
    def __init__(self, device) -> None:
        self._compute_stream = torch.cuda.Stream(device=device)
        self._copy_stream = torch.cuda.Stream(device=device)
        self.slot = DecodeSlot(logits=torch.zeros(8, device=device), compute_stream=self._compute_stream)

    def decode(self) -> None:
        with torch.cuda.stream(self.slot.compute_stream):
            pass
{move}"""


@pytest.mark.parametrize("move, same", [
    ("", True),
    ("\n    def offload(self) -> None:\n        object.__setattr__(self.slot, \"compute_stream\", self._copy_stream)\n",
     False),
])
def test_a_frozen_field_set_by_name_is_not_one_object(tmp_path, move: str, same: bool) -> None:
    (tmp_path / "slots.py").write_text(FROZEN.format(move=move), encoding="utf-8")
    project = engine_for(tmp_path).project
    model = project.file(str(tmp_path / "slots.py"))
    decode = model.classes["Runtime"].methods["decode"]
    assert same_stream(project, model, decode, "self.slot.compute_stream", "self._compute_stream") is same


CODEC = """import torch


class Detokenizer:
    def __init__(self, table, stream) -> None:
        self.table = table
        self.stream = stream

    def run(self, ids):
        with torch.cuda.stream(self.stream):
            return torch.embedding(self.table, ids)


class Runtime:
    def __init__(self, table, device) -> None:
        self._compute_stream = torch.cuda.Stream(device=device)
        self._detok = Detokenizer(table, self._compute_stream)

    def emit(self, ids):
        with torch.cuda.stream(self._compute_stream):
            return self._detok.run(ids)
"""


@pytest.mark.parametrize("debug, confined", [
    ("", True),
    ("def dump(rt, ids):\n    return getattr(rt, \"_detok\").run(ids)\n", False),
])
def test_a_field_named_in_a_string_is_not_confined(tmp_path, debug: str, confined: bool) -> None:
    from streamlint.model.flow.confined import confined_callers

    (tmp_path / "codec.py").write_text(CODEC, encoding="utf-8")
    (tmp_path / "debug.py").write_text("from codec import Runtime\n\n\n" + debug, encoding="utf-8")
    project = engine_for(tmp_path).project
    model = project.file(str(tmp_path / "codec.py"))
    found = confined_callers(project, model, model.classes["Detokenizer"].methods["run"])
    assert (found is not None) is confined


def test_answers_do_not_depend_on_the_order_of_questions(tmp_path) -> None:
    """A question asked first from deep in a chain of callers (cut by MAX_UP) does not fix the answer at the top."""
    for deep_first in (False, True):
        sub = tmp_path / f"p{int(deep_first)}"
        sub.mkdir()
        project, model, verify = _project(sub, {}, {})
        if deep_first:
            assert not same_stream(project, model, verify, "self.runtime.compute_stream", "self.stream", _depth=3)
        assert same_stream(project, model, verify, "self.runtime.compute_stream", "self.stream")
