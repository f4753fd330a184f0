"""Gradients reached through objects of unknown type (flow/gradplaces.py) and device handles known by the stream
they enter (model/heldhandles.py): what each finding rests on shows in its confidence."""

from __future__ import annotations

import pytest

from streamlint.model.flow.gradplaces import gradient_place
from tests.harness import FIXTURES, lint_paths


@pytest.mark.parametrize(("key", "grad"), [
    ("handle.flat_param.grad", "handle.flat_param.grad"),
    ("handle.flat_param.grad.data", "handle.flat_param.grad"),
    ("p.grad.T", "p.grad"),
    ("handle.grad_clip", None),  # a setting, no gradient
    ("batch.data", None),  # `.data` of an unknown object says nothing
    ("grad", None),  # a bare name: a local or a parameter, typed elsewhere
    ("model.grad()", None),  # reached through a call
    ("grads[0]", None),
])
def test_a_gradient_is_an_attribute_chain_ending_in_grad(key: str, grad: str | None) -> None:
    assert gradient_place(key) == grad


def _sl201(name: str) -> dict[int, str]:
    path = FIXTURES / "rules" / name
    return {f.span.start_line: f.confidence.value for f in lint_paths(path.parent, [str(path)], [str(path)],
                                                                     min_confidence="low") if f.code == "SL201"}


def test_a_gradient_read_unforked_by_a_method_its_caller_runs_is_medium() -> None:
    # the reducer's caller is seen: the race rests on backward having produced the gradient on its current stream
    assert _sl201("sl201_gradient_places.py") == {28: "medium", 46: "medium"}


def test_a_hook_whose_stream_the_unseen_caller_chooses_stays_low() -> None:
    # no call of the hook in the project: its stream comes from `state`, which the framework passes
    assert _sl201("sl201_held_handles_recorded_streams.py") == {25: "low"}
