"""A race on a stream parameter whose seen callers the analysis cannot read (flow/callerstreams.unread_choice) is low;
a seen caller handing a stream of its own making (flow/callerstreams._fresh_argument), or a helper that forks the
handed stream itself, keeps medium / high."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, lint_paths, lint_project

UNREAD = FIXTURES / "rules" / "sl201_launch_stream_unread.py"
CHAIN = FIXTURES / "rules" / "sl201_launch_stream_chain.py"
PROJECT = FIXTURES / "projects" / "sl201_launch_stream_unread"


def _found(root: Path, files: list[str]) -> dict:
    return {(Path(f.path).name, f.span.start_line, f.code): f.confidence.value for f in lint_paths(root, files)}


def test_unread_and_omitted_launch_streams_are_low() -> None:
    found = _found(UNREAD.parent, [str(UNREAD)])
    name = UNREAD.name
    # a plan's stream of unknown origin; a None-defaulted stream a seen call leaves out
    assert found[(name, 15, "SL201")] == found[(name, 16, "SL201")] == "low"
    assert found[(name, 33, "SL201")] == found[(name, 33, "SL301")] == "low"
    assert (name, 16, "SL301") not in found or found[(name, 16, "SL301")] == "low"


def test_streams_the_caller_makes_or_the_helper_forks_keep_their_confidence() -> None:
    found = _found(UNREAD.parent, [str(UNREAD)])
    name = UNREAD.name
    for line in (48, 63):  # a field made in __init__, a local `Stream()`
        assert found[(name, line, "SL201")] == "medium" and found[(name, line, "SL301")] == "high"
    assert found[(name, 75, "SL201")] == "medium" and found[(name, 75, "SL301")] == "high"  # forked by the helper


def test_an_inline_fresh_stream_is_read_as_another_stream() -> None:
    """`_launch_scale(x, torch.cuda.Stream())` from a caller doing no stream work of its own: its collecting run
    hands no fact, the call's text shows a second stream (was "unread", which the rules now take for low)."""
    found = _found(CHAIN.parent, [str(CHAIN)])
    assert found[(CHAIN.name, 26, "SL201")] == "medium" and found[(CHAIN.name, 26, "SL301")] == "high"


def test_across_modules_a_package_copy_stream_keeps_the_helper_medium() -> None:
    found = {(Path(f.path).name, f.span.start_line, f.code): f.confidence.value for f in lint_project(PROJECT)}
    assert found[("attention.py", 8, "SL201")] == found[("attention.py", 10, "SL201")] == "low"
    assert found[("attention.py", 17, "SL201")] == "medium" and found[("attention.py", 17, "SL301")] == "high"


def test_a_helper_recording_its_inputs_for_the_stream_keeps_medium() -> None:
    """`frame.record_stream(stream)` in the helper itself: its own code expects a second stream (the inference
    preprocessing bug of the corpus has this shape), so an unread caller does not lower the race."""
    found = _found(UNREAD.parent, [str(UNREAD)])
    assert found[(UNREAD.name, 90, "SL201")] == "medium"
