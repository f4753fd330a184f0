"""Project lifetime helpers taken as record_stream (flow/helperrecords.py): confidences on the fixture."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, lint_paths
from streamlint.discovery import discover

PROJECT = FIXTURES / "projects" / "sl301_lifetime_trackers"


def _findings() -> dict:
    files = [str(f) for f in discover([str(PROJECT)], PROJECT).files]
    return {(Path(f.path).name, f.span.start_line, f.code): f for f in lint_paths(PROJECT, files)}


def _line(name: str, text: str) -> int:
    lines = (PROJECT / "kvswap" / name).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_fork_from_a_handed_stream_is_low() -> None:
    found = _findings()
    line = _line("swapout.py", "n = page.norm()  # expect: SL201 -- low")
    assert found[("swapout.py", line, "SL201")].confidence.value == "low"
    line = _line("swapout.py", "n = page.norm()  # expect: SL201 -- nothing orders")
    assert found[("swapout.py", line, "SL201")].confidence.value != "low"


def test_a_kept_pair_is_no_record() -> None:
    found = _findings()
    for text in ("return pages  # expect: SL301 -- a (page, stream) pair", "return pages  # expect: SL301 -- the metrics"):
        finding = found[("swapin.py", _line("swapin.py", text), "SL301")]
        assert finding.confidence.value != "low", finding
    assert ("swapin.py", _line("swapin.py", "return pages  # ok: SL301 -- the worker's ledger"), "SL301") not in found
