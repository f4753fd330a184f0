"""Data the caller hands in (model/calleekinds.py, flow/paramcontents.py) and a side stream ordered after a stream
the caller hands in (flow/storage.py: low, not silent)."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, lint_paths
from streamlint.discovery import discover

CONTENTS = FIXTURES / "projects" / "sl201_param_contents"
CALLEES = FIXTURES / "projects" / "sl201_callee_tensor_args"


def _findings(root: Path) -> dict[tuple[str, int], object]:
    files = [str(f) for f in discover([str(root)], root).files]
    return {(Path(f.path).name, f.span.start_line): f for f in lint_paths(root, files) if f.code == "SL201"}


def _line(path: Path, marker: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if marker in text)


def test_a_wait_on_a_handed_stream_lowers_the_argument_race() -> None:
    found = _findings(CONTENTS)
    stash = CONTENTS / "pipeline" / "stash.py"
    low = found[("stash.py", _line(stash, "# expect: SL201 -- low"))]
    assert low.confidence.value == "low"
    assert "a stream the caller hands in" in (low.hint or "")
    assert found[("stash.py", _line(stash, "# expect: SL201 -- medium"))].confidence.value == "medium"


def test_a_callee_typed_argument_is_medium() -> None:
    found = _findings(CALLEES)
    capture = CALLEES / "serving" / "capture.py"
    finding = found[("capture.py", _line(capture, "# expect: SL201"))]
    assert finding.confidence.value == "medium"
    assert "kv_layer" in finding.message
