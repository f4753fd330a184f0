"""A race resting wholly on a stream an unseen caller chooses is low (flow/chosenstreams.py); host bookkeeping
after an early record is no work (flow/devicework.host_bookkeeping)."""
from __future__ import annotations

from harness import FIXTURES, engine_for, lint_paths
from streamlint.model.flow.chosenstreams import callers_unseen

CHOSEN = FIXTURES / "rules" / "sl201_unseen_caller_stream.py"
BOOKKEEPING = FIXTURES / "rules" / "sl201_host_bookkeeping_after_release.py"


def _found(path) -> dict[tuple[int, str], object]:
    return {(f.span.start_line, f.code): f for f in lint_paths(path.parent, [str(path)])}


def test_callers_unseen() -> None:
    project = engine_for(CHOSEN.parent).project
    model = project.file(str(CHOSEN))
    fns = {fn.node.name.value: fn for fn in model.iter_functions()}
    got = {name: callers_unseen(project, model, fns[name])
           for name in ("stage_rows", "project_shard", "refresh_rows", "work", "warm_copy")}
    assert got == {"stage_rows": True, "project_shard": True, "refresh_rows": False, "work": False,
                   "warm_copy": True}


def test_a_race_on_an_unseen_callers_stream_is_low() -> None:
    found = _found(CHOSEN)
    for line in (18, 25, 33, 83):  # a stream parameter, a wrapped handle, a factory parameter's result, a
        # closure's enclosing function's parameter
        finding = found[(line, "SL201")]
        assert finding.confidence.value == "low", line
        assert "which the caller chooses, and no call in the project chooses it" in (finding.hint or "")
    for line in (40, 52, 63, 74, 96):  # a caller is seen; the function's own stream; a nested worker its parent
        # calls; a parameter the function rebinds to a stream of its own; a closure on its parent's own stream
        assert found[(line, "SL201")].confidence.value == "medium", line
    for line in (112, 125, 140):  # a nested worker its method calls by name; a closure on its parent's parameter,
        # the parent called with a fresh stream; a forward run through the module's __call__
        finding = found[(line, "SL201")]
        assert finding.confidence.value == "medium", line
        assert "which the caller chooses" not in (finding.hint or ""), line


def test_host_bookkeeping_after_a_release_is_no_work() -> None:
    found = _found(BOOKKEEPING)
    lines = sorted(line for line, code in found if code == "SL201")
    assert lines == [67, 93]  # the twins: an opaque collective on the staged buffer, device counters bumped
