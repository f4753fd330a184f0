"""A side stream ordered after, or joined onto, a stream the caller hands in through a closure's enclosing function
(flow/chosenstreams.handed_wait): the race rests on that stream being another than the caller's current one (low);
no ordering, one before the work, or a stream the method may pick itself keep medium. A race on a stream parameter
that a caller read binds to its current stream, no caller read binding another, is low too
(flow/callerstreams.current_at_some_site)."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, lint_paths
from streamlint.discovery import discover

ROOT = FIXTURES / "projects" / "sl201_handed_join"
PARKER = ROOT / "parking" / "parker.py"


def _findings() -> dict[int, object]:
    files = [str(f) for f in discover([str(ROOT)], ROOT).files]
    return {f.span.start_line: f for f in lint_paths(ROOT, files) if f.code == "SL201" and f.path.endswith("parker.py")}


def _lines(marker: str) -> list[int]:
    return [i for i, text in enumerate(Path(PARKER).read_text().splitlines(), 1) if marker in text]


def test_a_closure_ordered_after_its_parents_stream_parameter_is_low() -> None:
    found = _findings()
    low = _lines("# expect: SL201 -- low")
    assert len(low) == 2
    for line in low:
        assert found[line].confidence.value == "low", line
        assert "a stream the caller hands in" in (found[line].hint or ""), line
    medium = _lines("# expect: SL201 -- medium")
    assert len(medium) == 6  # (two: the batch scheduler, a caller read, hands in a stream it never entered)
    for line in medium:
        assert found[line].confidence.value == "medium", line


SOME = FIXTURES / "projects" / "sl201_some_caller_current"


def test_a_race_on_a_stream_parameter_some_caller_binds_to_its_current_stream_is_low() -> None:
    files = [str(f) for f in discover([str(SOME)], SOME).files]
    found = {f.span.start_line: f for f in lint_paths(SOME, files) if f.code == "SL201" and f.path.endswith("launcher.py")}
    launcher = SOME / "decoding" / "launcher.py"
    text = launcher.read_text().splitlines()
    low = next(i for i, t in enumerate(text, 1) if "# expect: SL201 -- low" in t)
    medium = [i for i, t in enumerate(text, 1) if "# expect: SL201 -- medium" in t]
    assert found[low].confidence.value == "low"  # one caller read enters the stream it passes; the other hands on
    # its own caller's choice, and no call of that one is seen
    assert "passes its current stream as `stream`" in (found[low].hint or "")
    assert len(medium) == 2  # a caller read passes a stream it did not enter nor order; so does one without
    # stream work of its own, in another module, through an untyped receiver (offline.py): read, not skipped
    for line in medium:
        assert found[line].confidence.value == "medium", line


DEFAULTED = FIXTURES / "projects" / "sl201_defaulted_stream_params"


def test_a_stream_parameter_defaulted_to_the_current_stream_by_a_wrapper_is_low() -> None:
    """`stream=stream or torch.cuda.current_stream()` in the wrapper: its callers that leave the stream out (through
    an untyped receiver; a call that cannot bind to the raw transport's signature is not one of its sites) or name
    the current stream pass the current one; a wrapper caller handing a bulk stream it never ordered keeps medium."""
    files = [str(f) for f in discover([str(DEFAULTED)], DEFAULTED).files]
    found = {f.span.start_line: f for f in lint_paths(DEFAULTED, files)
             if f.code == "SL201" and f.path.endswith("transport.py")}
    text = (DEFAULTED / "relay" / "transport.py").read_text().splitlines()
    low = next(i for i, t in enumerate(text, 1) if "# expect: SL201 -- low" in t)
    medium = next(i for i, t in enumerate(text, 1) if "# expect: SL201 -- medium" in t)
    assert found[low].confidence.value == "low"
    assert "passes its current stream as `stream`" in (found[low].hint or "")
    assert found[medium].confidence.value == "medium"


SCOPED = FIXTURES / "projects" / "sl201_scoped_default_streams"


def test_a_defaulted_stream_under_a_callers_side_block_or_through_an_options_field() -> None:
    """`stream or current_stream()` left out (or `current_stream()` named) inside a caller's side-stream block hands
    the block's stream: low only when the caller made the tensor inside that block (read from the text when the
    caller's run does not resolve an untyped receiver), else medium; `opts.stream or current_stream()` is the stream
    whoever built `opts` chose: low when every seen caller builds it without one, medium when one sets it."""
    files = [str(f) for f in discover([str(SCOPED)], SCOPED).files]
    found = {f.span.start_line: f for f in lint_paths(SCOPED, files) if f.code == "SL201" and f.path.endswith("raw.py")}
    text = (SCOPED / "gradsync" / "raw.py").read_text().splitlines()
    low = [i for i, t in enumerate(text, 1) if "# expect: SL201 -- low" in t]
    medium = [i for i, t in enumerate(text, 1) if "# expect: SL201 -- medium" in t]
    assert len(low) == 3 and len(medium) == 8
    for line in low:
        assert found[line].confidence.value == "low", line
        assert "passes its current stream as `stream`" in (found[line].hint or ""), line
    for line in medium:
        assert found[line].confidence.value == "medium", line
