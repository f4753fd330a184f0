"""A context-manager method of a held object that keeps the caller's block on its stream (model/heldscopes.py)."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, engine_for, lint_project
from streamlint.model.file import dotted
from streamlint.model.flow.ambient import plain_scope
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.callerscopes import caller_scopes

PROJECT = FIXTURES / "projects" / "sl201_leased_encoder_scopes"
PKG = PROJECT / "asrserve"


def test_a_held_lease_is_a_scope_on_the_held_objects_stream() -> None:
    project = engine_for(PROJECT).project
    decoders = project.file(str(PKG / "decoder.py"))
    for name in ("GreedyDecoder", "BeamDecoder"):
        decode = decoders.classes[name].methods["decode"]
        sites = callers_of(project, decoders, decode) or []
        assert sites
        for model, site in sites:
            found = plain_scope(project, model, site)
            assert found and dotted(found[0]) == "self._session._stream" and not found[1], (name, found)


def test_a_held_lease_on_the_callees_stream_is_that_stream() -> None:
    project = engine_for(PROJECT).project
    decoders = project.file(str(PKG / "decoder.py"))
    greedy = decoders.classes["GreedyDecoder"].methods["decode"]
    found = caller_scopes(project, decoders, greedy, "self.compute_stream")
    assert found is not None and found[2] == "self._session._stream"  # built with the runtime's compute stream
    beam = decoders.classes["BeamDecoder"].methods["decode"]
    assert caller_scopes(project, decoders, beam, "self.compute_stream") is None  # a session stream of its own


def test_only_the_lease_on_another_stream_is_reported() -> None:
    found = [(Path(f.path).name, f.span.start_line, f.confidence.value) for f in lint_project(PROJECT)
             if f.code == "SL201"]
    assert found == [("decoder.py", 30, "medium")], found
