"""A stream argument that names the stream its caller has made current (flow/retainedstreams.py): a worker thread's
``set_stream`` (in the worker or in the function that calls it through ``self``) or a scope the caller entered
through a method of its object; a launcher's race on that stream parameter is then low. A caller that passes a
stream it never made current (none entered, or another one set) keeps medium."""
from __future__ import annotations

from harness import FIXTURES, lint_project

ROOT = FIXTURES / "projects" / "sl201_retained_worker_streams"


def _launcher_findings() -> tuple[dict[int, object], list[str]]:
    found = {f.span.start_line: f for f in lint_project(ROOT) if f.code == "SL201" and f.path.endswith("launcher.py")}
    return found, (ROOT / "vocoder" / "launcher.py").read_text().splitlines()


def test_a_stream_the_callers_thread_or_scope_made_current_is_low() -> None:
    found, text = _launcher_findings()
    low = [i for i, t in enumerate(text, 1) if "# expect: SL201 -- low" in t]
    assert len(low) == 1
    assert found[low[0]].confidence.value == "low"
    assert "passes its current stream as `stream`" in (found[low[0]].hint or "")


def test_a_stream_no_caller_made_current_keeps_medium() -> None:
    found, text = _launcher_findings()
    medium = [i for i, t in enumerate(text, 1) if "# expect: SL201 -- medium" in t]
    assert len(medium) == 2  # (a scoring call hands a stream never entered; a rescoring call, and a warm-up thread
    # that set another stream, hand the decode stream)
    for line in medium:
        assert found[line].confidence.value == "medium", line
