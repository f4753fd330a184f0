"""A value made by calls from a guessed result is a guess as well (flow/guessedresults.py): a reservation a store
of unknown type hands back for ids hashed with a host object of unknown type frees, at most, what a guess says is
device memory (SL301 low); the same reservation for ids made from a device tensor keeps its confidence."""
from __future__ import annotations

from harness import FIXTURES, lint_project

ROOT = FIXTURES / "projects" / "sl301_guessed_result_chain"


def test_a_free_resting_on_a_chain_of_guesses_is_low_and_one_made_from_a_tensor_is_not() -> None:
    found = {f.span.start_line: f for f in lint_project(ROOT) if f.code == "SL301"}
    text = (ROOT / "kvserve" / "offload.py").read_text().splitlines()
    guess = next(i for i, t in enumerate(text, 1) if "-- low: a guess chain" in t)
    sure = next(i for i, t in enumerate(text, 1) if "-- made from a device tensor" in t)
    made = next(i for i, t in enumerate(text, 1) if "-- made with torch by the server's own method" in t)
    assert found[guess].confidence.value == "low"
    assert found[sure].confidence.value == "high"
    assert found[made].confidence.value == "high"  # (a project method's torch-made result: no guess)
