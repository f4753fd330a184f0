"""SL301 for a field's tensor read on a side stream and dropped unjoined by another method (flow/fielddrops.py):
how sure the findings of fixtures/projects/sl301_field_drops are, and that looking for a drop never overflows the
stack (a recursion error there is swallowed by the coarse fallback of the flow analysis, which hides it)."""

import os
from pathlib import Path

from harness import lint_paths

import streamlint.model.flow.fielddrops as fielddrops
from streamlint.finding import Confidence

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "sl301_field_drops"


def _line(rel: str, marker: str) -> int:
    lines = (ROOT / rel).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def test_field_drops_are_medium_and_bounded(monkeypatch):
    errors: list[BaseException] = []
    original = fielddrops._field_drop

    def watched(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except RecursionError as exc:
            errors.append(exc)
            raise

    monkeypatch.setattr(fielddrops, "_field_drop", watched)
    monkeypatch.chdir(ROOT)
    files = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py"))
    found = {(os.path.basename(f.path), f.span.start_line): f.confidence
             for f in lint_paths(ROOT, files, min_confidence="low") if f.code == "SL301"}
    assert not errors  # (ShuffledTally: two locals aliasing each other in a loop)
    tally = "moeroute/tally.py"
    # the order of the reading and the dropping method's calls is not seen: medium, never high
    assert found[("tally.py", _line(tally, "route() / retire() let the routing go unjoined"))] is Confidence.MEDIUM
    assert found[("tally.py", _line(tally, "the record below is on the compute stream"))] is Confidence.MEDIUM
    assert ("tally.py", _line(tally, "step() settles before route() rebinds")) not in found
    assert ("tally.py", _line(tally, "a cycle of aliases is not followed")) not in found
    assert ("tally.py", _line(tally, "step() joins right after the call")) not in found
    assert ("tally.py", _line(tally, "every drop waits on the event first")) not in found
