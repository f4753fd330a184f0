"""One defect, one finding (session 43, held-out 35g): a caller that meets the GE family only through its helper's
`npu_wait_tensor`, unsupported on the helper's path, gets no SL501; the helper's SL502 names the caller's call."""
from __future__ import annotations

from harness import FIXTURES, lint_paths

FIXTURE = FIXTURES / "rules" / "sl501_callee_unsupported_one_cause.py"


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1) if marker in text)


def test_the_helpers_sl502_names_the_callers_whose_mix_it_is() -> None:
    found = lint_paths(FIXTURE.parent, [str(FIXTURE)])
    wait = _line("npu_wait_tensor(logits, hidden)")
    sl502 = [f for f in found if f.code == "SL502" and f.span.start_line == wait]
    assert len(sl502) == 1
    related = {r.span.start_line for r in sl502[0].related if "one cause" in r.message}
    assert _line("scores = self._score_drafts(hidden, draft_ids)") in related  # forward: its SL501 folded here
    assert not any(f.code == "SL501" and f.span.start_line == _line("only _score_drafts' SL502") for f in found)
