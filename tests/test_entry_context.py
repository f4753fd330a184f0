"""Call-site context (flow/entryctx.py): a callee's findings that rest on what its callers hand it are the
same whether its file is linted alone or with its callers, and carry the call site."""

from __future__ import annotations

from harness import FIXTURES, lint_paths

PROJECT = FIXTURES / "projects" / "sl201_caller_entry_context"
RECORDS = FIXTURES / "projects" / "sl301_caller_entry_context"


def _found(root, callee: str, scope: list[str] | None) -> list[tuple[int, str, str]]:
    path = str(root / callee)
    return sorted((f.span.start_line, f.code, f.message) for f in lint_paths(root, [path], scope)
                  if f.code in ("SL201", "SL301"))


def test_callee_alone_or_with_its_callers() -> None:
    for root, callee, caller in ((PROJECT, "draftkit/decoder.py", "draftkit/drafter.py"),
                                 (PROJECT, "draftkit/grads.py", "draftkit/sharding.py"),
                                 (RECORDS, "speechsvc/publish.py", "speechsvc/service.py")):
        alone = _found(root, callee, None)  # the callee's file alone (its callers found in the project)
        assert alone
        # linting the caller first (its flows cached) changes nothing
        path = str(root / caller)
        both = [f for f in lint_paths(root, [path, str(root / callee)], None) if str(f.path).endswith(callee)
                and f.code in ("SL201", "SL301")]
        assert sorted((f.span.start_line, f.code, f.message) for f in both) == alone


def test_seeded_finding_names_the_call_site() -> None:
    findings = [f for f in lint_paths(PROJECT, [str(PROJECT / "draftkit/decoder.py")], None) if f.code == "SL201"]
    assert findings
    for f in findings:
        assert f.confidence.name == "MEDIUM"
        assert any(str(r.path).endswith("drafter.py") and "called here" in r.message for r in f.related)
        assert "assumes the callers shown" in (f.hint or "")


SETTLED = FIXTURES / "projects" / "sl201_settled_caller_args"


def test_settled_arguments_alone_or_with_their_callers() -> None:
    """Every caller of `gather_shard` hands a weight shard built at construction: no finding there, whichever file
    is linted first; the callees some caller hands a fresh gradient, a step buffer or a field it just rewrote keep
    theirs at medium."""
    callee, caller = "shardsim/comm.py", "shardsim/stack.py"
    alone = _found(SETTLED, callee, None)
    both = sorted((f.span.start_line, f.code, f.message) for f in lint_paths(
        SETTLED, [str(SETTLED / caller), str(SETTLED / callee)], None) if str(f.path).endswith(callee)
        and f.code in ("SL201", "SL301"))
    assert alone == both
    text = (SETTLED / callee).read_text().splitlines()
    assert [line for line, _, _ in alone] == [i for i, t in enumerate(text, 1) if "# expect: SL201" in t]
    for f in lint_paths(SETTLED, [str(SETTLED / callee)], None):
        if f.code == "SL201":
            assert f.confidence.name == "MEDIUM"
