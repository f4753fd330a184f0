"""The stream scopes every project caller enters around a call (flow/callerscopes.py)."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, engine_for, lint_paths
from streamlint.discovery import discover
from streamlint.model.flow.callerscopes import caller_scopes

PROJECT = FIXTURES / "projects" / "sl201_caller_scope_streams"
PKG = PROJECT / "batchserve"


def test_caller_scopes_answers() -> None:
    project = engine_for(PROJECT).project
    runtime = project.file(str(PKG / "runtime.py"))
    methods = runtime.classes["DecodeRuntime"].methods
    found = caller_scopes(project, runtime, methods["launch_batch"], "self._compute_stream")
    assert found is not None and found[2] == "self._compute_stream"  # the scheduler's, two callers up
    assert Path(found[0].path).name == "scheduler.py"
    assert caller_scopes(project, runtime, methods["prefill_batch"], "self._compute_stream") is None  # outside a scope
    assert caller_scopes(project, runtime, methods["score_batch"], "self._compute_stream") is None  # a fresh stream
    assert caller_scopes(project, runtime, methods["launch_batch"], "compute") is None  # not a field


def test_confidence_follows_the_callers_scopes() -> None:
    files = [str(f) for f in discover([str(PROJECT)], PROJECT).files]
    found = {(Path(f.path).name, f.span.start_line, f.code): f for f in lint_paths(PROJECT, files)}
    for line in (21, 23):  # every call runs it inside the scheduler's scope, on a stream that may be this one
        finding = found[("runtime.py", line, "SL201")]
        assert finding.confidence.value == "low"
        assert "inside its caller's scope on `self._compute_stream`" in (finding.hint or "")
        assert any("inside a scope on" in r.message for r in finding.related)
    for line in (28, 29, 34, 35):  # a caller outside every scope / in a scope on a stream it made: real races
        assert found[("runtime.py", line, "SL201")].confidence.value == "medium"


def test_a_stream_argument_that_is_the_entered_place_is_the_current_stream() -> None:
    import streamlint.model.flow.interp  # noqa: F401  (registers the callers' collecting run)
    from streamlint.model.flow.entryctx import entry_context

    project = engine_for(PROJECT).project
    model = project.file(str(PKG / "collectives.py"))
    methods = model.classes["OverlappedReducer"].methods
    found = entry_context(project, model, methods["_reduce"], "cuda")
    assert found is not None and ("stream", "stream", "current") in found[0]  # `with stream(s): f(x, s)`, s = streams[i]
    found = entry_context(project, model, methods["_gather"], "cuda")
    assert found is None or ("stream", "stream", "current") not in found[0]  # one call hands a stream not entered
