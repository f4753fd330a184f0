"""A stream wrapped from a handle the caller passes is the caller's stream, as a stream parameter is
(flow/handlestreams.py)."""
from __future__ import annotations

from harness import FIXTURES, engine_for, lint_paths
from streamlint._lazy import cst
from streamlint.model.flow.handlestreams import handle_param

FIXTURE = FIXTURES / "rules" / "sl201_caller_handle_stream.py"


def test_handle_param_recognises_the_wraps() -> None:
    project = engine_for(FIXTURE.parent).project
    model = project.file(str(FIXTURE))
    methods = model.classes["OffloadedExperts"].methods
    found = {}
    for name in ("stage", "stage_by_pointer", "stage_rewrapped", "stage_joined"):
        fn = methods[name]
        value = fn.name_assigns["stream"][0]
        found[name] = handle_param(model, fn, value)
    assert found == {"stage": "cuda_stream", "stage_by_pointer": "handle", "stage_rewrapped": None,
                     "stage_joined": "cuda_stream"}
    fn = methods["stage_on_copy_stream"]
    assert handle_param(model, fn, cst.parse_expression("torch.cuda.Stream()")) is None


def test_a_race_with_a_wrapped_handle_is_medium() -> None:
    found = {(f.span.start_line, f.code): f for f in lint_paths(FIXTURE.parent, [str(FIXTURE)])}
    for line in (22, 28):
        finding = found[(line, "SL201")]
        assert finding.confidence.value == "medium"
        assert "is a parameter: this assumes the caller passes a stream other" in (finding.hint or "")
    for line in (34, 43):  # the layer's own stream; a handle it rebinds itself
        assert found[(line, "SL201")].confidence.value == "high"
