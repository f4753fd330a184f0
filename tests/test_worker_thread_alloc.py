"""Confidence of SL201's allocation race in a function that runs only on worker threads (flow/hostargs.py
``worker_thread_only``, also through ``functools.partial``): fixtures/rules/sl201_worker_thread_scratch.py says
where the findings are; this says how sure they are."""

from pathlib import Path

from harness import lint_text

from streamlint.finding import Confidence

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "rules" / "sl201_worker_thread_scratch.py"


def _found(tmp_path) -> dict[int, Confidence | None]:
    return {f.span.start_line: f.confidence for f in lint_text(FIXTURE.read_text(), tmp=tmp_path) if f.code == "SL201"}


def _lines(marker: str) -> list[int]:
    return [i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1) if marker in text]


def test_a_worker_threads_allocation_first_written_on_its_stream_is_low(tmp_path):
    found = _found(tmp_path)
    low = _lines("# expect: SL201 -- low")
    assert len(low) == 1 and found[low[0]] is Confidence.LOW


def test_the_same_allocation_on_the_spawning_thread_stays_sure(tmp_path):
    found = _found(tmp_path)
    sure = _lines("# expect: SL201 -- sure")
    assert len(sure) == 2 and all(found[line] in (None, Confidence.HIGH, Confidence.MEDIUM) for line in sure)
