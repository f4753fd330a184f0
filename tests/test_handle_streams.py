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
    for line in (42, 48):
        finding = found[(line, "SL201")]
        assert finding.confidence.value == "medium"
        assert "is a parameter: this assumes the caller passes a stream other" in (finding.hint or "")
    for line in (54, 63):  # the layer's own stream; a handle it rebinds itself
        assert found[(line, "SL201")].confidence.value == "high"


def test_a_handle_the_function_rebinds_or_defaults_is_not_the_callers() -> None:
    """A handle parameter rebound by a loop, ``:=``, ``+=``, ``with ... as`` or a nested function's ``nonlocal``,
    or whose default is a handle of the layer's own, is not what the caller passed; a local bound to
    ``Stream()`` on another path is the layer's own stream there: those races stay high. A local that wraps the
    same parameter on every path keeps medium."""
    found = {(f.span.start_line, f.code): f for f in lint_paths(FIXTURE.parent, [str(FIXTURE)])}
    highs = {"stage_round_robin": 81, "stage_first_lane": 89, "stage_offset": 96, "stage_leased": 103,
             "stage_after_pick": 114, "stage_or_own": 123, "stage_own_or_handle": 132, "stage_default_lane": 139}
    got = {name: found[(line, "SL201")].confidence.value for name, line in highs.items()}
    assert got == dict.fromkeys(highs, "high"), got
    assert found[(150, "SL201")].confidence.value == "medium"
    assert "is a parameter: this assumes the caller passes a stream other" in (found[(150, "SL201")].hint or "")
