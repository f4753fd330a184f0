"""Project functions that convert the caller's stream into a torch stream (model/streamviews.py): their result is
the caller's stream, judged as a stream parameter."""
from __future__ import annotations

from harness import FIXTURES, engine_for, lint_paths
from streamlint.model.streamviews import view_param

FIXTURE = FIXTURES / "rules" / "sl201_caller_stream_views.py"


def test_view_param_recognises_conversions_only() -> None:
    project = engine_for(FIXTURE.parent).project
    model = project.file(str(FIXTURE))
    found = {name: view_param(project, model, model.functions[name])
             for name in ("as_torch_stream", "staging_stream", "launch_context", "rms_norm")}
    # staging_stream may make a stream of its own; launch_context yields (a scope, not a conversion); rms_norm
    # returns a tensor
    assert found == {"as_torch_stream": "stream", "staging_stream": None, "launch_context": None, "rms_norm": None}


def test_races_on_a_converted_caller_stream_are_low() -> None:
    """Through a context-manager wrapper, a wrapper of it, an inline conversion and a converted local: every race
    is with the stream the caller chose (low), none with an unknown stream of the library's (medium before)."""
    findings = [f for f in lint_paths(FIXTURE.parent, [str(FIXTURE)]) if f.code == "SL201"]
    assert findings
    assert {f.confidence.value for f in findings} == {"low"}, [(f.span.start_line, f.confidence) for f in findings]
    assert not any("<unknown stream>" in f.message for f in findings)


CHAIN = FIXTURES / "rules" / "sl201_launch_stream_chain.py"


def test_a_launch_stream_handed_down_from_an_unseen_public_api_is_low() -> None:
    """flow/chosenstreams.rests_on_unseen_caller with the execution path: every seen call of the helper hands on its
    own caller's stream, up to a public API no call of which is seen (low, SL301 too); a helper the package calls with
    a stream of its own keeps medium / high."""
    found = {(f.span.start_line, f.code): f.confidence.value for f in lint_paths(CHAIN.parent, [str(CHAIN)])}
    assert found[(13, "SL201")] == found[(14, "SL201")] == "low"
    assert (14, "SL301") not in found or found[(14, "SL301")] == "low"
    assert found[(25, "SL201")] == found[(26, "SL201")] == "medium"
    assert found[(26, "SL301")] == "high"


INTEROP = FIXTURES / "projects" / "sl201_launch_stream_interop"


def test_stream_views_across_modules() -> None:
    """The conversion and the launch scope in one module, a wrapper of the scope in a second, the ops in a third:
    the ops' races are with the caller's stream (low); a stream the package pools itself is its own (not low)."""
    from pathlib import Path

    from streamlint.discovery import discover

    files = [str(f) for f in discover([str(INTEROP)], INTEROP).files]
    found = {(Path(f.path).name, f.span.start_line): f.confidence.value
             for f in lint_paths(INTEROP, files) if f.code == "SL201"}
    assert found[("norm.py", 11)] == found[("norm.py", 19)] == found[("norm.py", 20)] == "low"
    assert found[("norm.py", 26)] == "medium" and found[("norm.py", 27)] == "high"
