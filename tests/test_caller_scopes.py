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
    for line in (22, 24):  # every call runs it inside the scheduler's scope, on a stream that may be this one
        finding = found[("runtime.py", line, "SL201")]
        assert finding.confidence.value == "low"
        assert "inside its caller's scope on `self._compute_stream`" in (finding.hint or "")
        assert any("inside a scope on" in r.message for r in finding.related)
    for line in (29, 30, 35, 36):  # a caller outside every scope / in a scope on a stream it made: real races
        assert found[("runtime.py", line, "SL201")].confidence.value == "medium"


def test_streams_made_by_constructors_are_distinct() -> None:
    """A caller's scope on a stream made by a constructor (a field, inline, an element of a list of them, another
    field of the same object) is another stream than the callee's own constructed one; a wrapper that may run
    its block inline is no scope on its argument: every such race stays medium."""
    project = engine_for(PROJECT).project
    lanes = project.file(str(PKG / "lanes.py"))
    methods = lanes.classes["LaneKernels"].methods
    for name in ("gather_rows", "rescore_rows", "project_rows", "mix_rows"):
        assert caller_scopes(project, lanes, methods[name], "self._compute_stream") is None, name
    pool = lanes.classes["ExpertPool"].methods["_combine"]
    assert caller_scopes(project, lanes, pool, "self._compute_stream") is None
    files = [str(f) for f in discover([str(PROJECT)], PROJECT).files]
    for finding in lint_paths(PROJECT, files):
        assert "<stream>" not in (finding.hint or "") + "".join(r.message for r in finding.related)
        if Path(finding.path).name == "lanes.py":
            assert finding.confidence.value != "low", finding


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


def test_only_docstrings_hide_a_mention() -> None:
    """A quoted name after prose with ''' in the module docstring, and a name in a triple-quoted data string,
    are references (an unseen caller may dispatch by them); a name in a docstring's prose is none."""
    files = [str(f) for f in discover([str(PROJECT)], PROJECT).files]
    found = {(Path(f.path).name, f.span.start_line, f.code): f for f in lint_paths(PROJECT, files)}
    for line in (21, 27):  # refresh_pages (getattr by a quoted name), evict_pages (named in HOOKS)
        assert found[("kvhooks.py", line, "SL201")].confidence.value == "medium"
    for line in (32, 33):  # compact_pages: named only in the class docstring
        assert found[("kvhooks.py", line, "SL201")].confidence.value == "low"


def test_docstring_spans_from_a_held_tree_equal_a_parse() -> None:
    """A file the run holds answers the docstring question from its tree (no second parse of a large module):
    the same spans, as byte offsets, as the stdlib parse of its bytes, over every fixture module (non-ASCII
    text, nested classes, one-line bodies, bytes and f-string first statements included)."""
    from streamlint.model.flow.fieldfacts import _docstring_spans, _model_spans

    project = engine_for(PROJECT).project
    checked = 0
    for path in sorted((FIXTURES).rglob("*.py")):
        data = path.read_bytes()
        model = project.file(str(path))
        if model is None or model.module is None:
            continue
        assert sorted(_model_spans(model, data)) == sorted(_docstring_spans(data)), path
        checked += 1
    assert checked > 100


def test_a_wrapper_inline_only_without_a_stream_is_a_scope_that_may_be_the_callee_stream() -> None:
    """``stream_scope(s)`` runs its block inline only where ``s`` is None: when the callee's stream may be None
    too (a field handed in), the two may be one object, None together, and the race is a guess (low). A wrapper
    that runs inline on a flag, or a callee stream that is never None (made by ``Stream()``), keeps medium."""
    from streamlint.model.flow.ambient import plain_scope
    from streamlint.model.flow.inlinewrappers import NONE_ONLY

    project = engine_for(PROJECT).project
    drafting = project.file(str(PKG / "drafting.py"))
    draft = drafting.classes["DraftModel"].methods
    found = caller_scopes(project, drafting, draft["propose_drafts"], "self._stream")
    assert found is not None and found[2] == "self._stream"
    assert caller_scopes(project, drafting, draft["rescore_drafts"], "self._stream") is None  # a flag decides
    pinned = drafting.classes["PinnedDraftModel"].methods["propose_pinned"]
    assert caller_scopes(project, drafting, pinned, "self._stream") is None  # never None: another stream then
    kinds = {}
    for name in ("step", "rescore_step"):
        site = next(s for s in drafting.classes["Verifier"].methods[name].calls if s.method in (
            "propose_drafts", "rescore_drafts"))
        kinds[name] = plain_scope(project, drafting, site)[1]
    assert kinds == {"step": NONE_ONLY, "rescore_step": True}, kinds
    files = [str(f) for f in discover([str(PROJECT)], PROJECT).files]
    found = {(Path(f.path).name, f.span.start_line, f.code): f.confidence.value for f in lint_paths(PROJECT, files)}
    assert found[("drafting.py", 33, "SL201")] == found[("drafting.py", 34, "SL201")] == "low"
    for line in (40, 41, 54, 55):
        assert found[("drafting.py", line, "SL201")] == "medium", line


def test_a_field_chosen_among_made_streams_is_never_none() -> None:
    """``Stream(priority=-1) if fast else Stream()`` and ``stream or Stream()`` are never None: a caller whose
    wrapper runs inline (its stream None) runs the call on another stream, a real race that keeps medium."""
    from streamlint.model.flow.inlinewrappers import may_hold_none

    project = engine_for(PROJECT).project
    drafting = project.file(str(PKG / "drafting.py"))
    for cls in ("EagerDraftModel", "BorrowingDraftModel"):
        assert not may_hold_none(project, drafting, drafting.classes[cls], "self._stream"), cls
    assert may_hold_none(project, drafting, drafting.classes["DraftModel"], "self._stream")
    eager = drafting.classes["EagerDraftModel"].methods["propose_eager"]
    assert caller_scopes(project, drafting, eager, "self._stream") is None
    files = [str(f) for f in discover([str(PROJECT)], PROJECT).files]
    found = {(Path(f.path).name, f.span.start_line, f.code): f.confidence.value for f in lint_paths(PROJECT, files)}
    for line in (97, 98, 112, 113):
        assert found[("drafting.py", line, "SL201")] == "medium", line


SLOTS = FIXTURES / "projects" / "sl201_decode_slot_streams"


def test_a_stream_handed_in_an_object_is_low_only_under_every_callers_scope() -> None:
    """flow/callerscopes.param_caller_scopes: a race with ``slot.compute_stream`` (a decode slot handed in) is low
    when every caller runs the method inside a scope on a stream it was handed (the scheduler's), medium when a
    caller runs it inside a stream it made itself (the drafter's own field, named like the scheduler's) or outside
    every scope (the warm-up)."""
    files = [str(f) for f in discover([str(SLOTS)], SLOTS).files]
    found = {(Path(f.path).name, f.span.start_line): f for f in lint_paths(SLOTS, files) if f.code == "SL201"}
    for line in (34, 36):
        finding = found[("runtime.py", line)]
        assert finding.confidence.value == "low"
        assert "inside its caller's scope on `self._compute_stream`" in (finding.hint or "")
    for line in (40, 41, 45, 46):
        assert found[("runtime.py", line)].confidence.value == "medium"
