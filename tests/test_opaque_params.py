"""Confidence of the races on parameters annotated with no tensor type (``Any``, an opaque alias) that the function
uses as a tensor (model/opaqueparams.opaque_param): medium when the use shows a torch tensor only, high when the
function records it on a stream (device memory), as for a ``torch.Tensor`` annotation; a race with the function's
own write keeps its confidence."""

from harness import FIXTURES, lint_paths

from streamlint.finding import Confidence


def test_use_typed_parameter_races_are_medium_unless_recorded():
    path = FIXTURES / "rules" / "sl201_opaque_param_use.py"
    text = path.read_text().splitlines()
    found = {f.span.start_line: f.confidence for f in lint_paths(path.parent, [str(path)], [str(path)])
             if f.code == "SL201"}
    medium = next(i + 1 for i, line in enumerate(text) if "-- medium:" in line)
    high = next(i + 1 for i, line in enumerate(text) if "-- high:" in line)
    own = next(i + 1 for i, line in enumerate(text) if "-- high-own:" in line)
    assert found[medium] == Confidence.MEDIUM
    assert found[high] == Confidence.HIGH
    assert found[own] == Confidence.HIGH  # a race with the function's own in-place write is not a guess
