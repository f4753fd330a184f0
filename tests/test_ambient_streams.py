"""The stream a method runs on by its callers, and two names of one stream object (flow/ambient.py)."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, engine_for, lint_paths
from streamlint.discovery import discover
from streamlint.model.flow.ambient import ambient_stream, field_alias

PROJECT = FIXTURES / "projects" / "sl201_engine_compute_stream"
PKG = PROJECT / "servekit"


def _findings() -> dict[tuple[str, int, str], str]:
    files = [str(f) for f in discover([str(PROJECT)], PROJECT).files]
    return {(Path(f.path).name, f.span.start_line, f.code): f.confidence.value for f in lint_paths(PROJECT, files)}


def test_ambient_stream_and_aliases() -> None:
    engine = engine_for(PROJECT)
    project = engine.project
    runtime = project.file(str(PKG / "runtime.py"))
    vocoder = project.file(str(PKG / "vocoder.py"))
    cls = runtime.classes["SpeechRuntime"]
    assert field_alias(project, runtime, cls, "self._vocoder.stream") == "self._compute_stream"
    assert field_alias(project, runtime, cls, "self._spill.stream") == "self._copy_stream"
    assert field_alias(project, runtime, cls, "self._vocoder.weight") is None  # (not a field of the runtime)
    methods = cls.methods
    assert ambient_stream(project, runtime, methods["_sample_rows"]) == "self._compute_stream"
    assert ambient_stream(project, runtime, methods["_commit_ids"]) == "self._compute_stream"
    assert ambient_stream(project, runtime, methods["_offload"]) == "self._compute_stream"
    assert ambient_stream(project, runtime, methods["normalize"]) is None  # also called outside the scope
    assert ambient_stream(project, runtime, methods["on_tokens"]) is None  # handed away as a callback
    assert ambient_stream(project, runtime, methods["warmup"]) is None  # the builder runs it on its own stream
    codec = vocoder.classes["FrameVocoder"].methods
    assert ambient_stream(project, vocoder, codec["synthesize_frames"]) == "self.stream"  # translated to its object
    assert ambient_stream(project, vocoder, codec["render_chunk"]) is None  # built twice, with two streams


def test_confidence_follows_what_the_callers_show() -> None:
    found = _findings()
    assert found[("runtime.py", 90, "SL201")] == "high"  # the warm-up on the builder's stream: a real second stream
    assert found[("runtime.py", 58, "SL201")] == "medium"  # the copy stream: a real second stream
    assert found[("runtime.py", 72, "SL201")] == "low"  # one caller runs it on the compute stream itself
    assert found[("runtime.py", 80, "SL201")] == "low"  # so does one caller of the callback
    assert found[("vocoder.py", 22, "SL201")] == "medium"  # a caller runs it with another stream of its own current
    assert ("runtime.py", 34, "SL201") not in found and ("runtime.py", 34, "SL301") not in found
    assert ("vocoder.py", 15, "SL201") not in found
