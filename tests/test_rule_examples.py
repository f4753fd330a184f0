"""Each rule's embedded VALID / INVALID examples become test cases (Fixit style)."""

import textwrap

import pytest

from harness import REGISTRY, lint_text

CASES = []
for code, rule in REGISTRY.rules.items():
    for i, example in enumerate(rule.VALID):
        CASES.append(pytest.param(rule, example, True, id=f"{code}-valid-{i}"))
    for i, example in enumerate(rule.INVALID):
        CASES.append(pytest.param(rule, example, False, id=f"{code}-invalid-{i}"))


@pytest.mark.parametrize("rule,example,valid", CASES)
def test_example(rule, example, valid, tmp_path):
    findings = [f for f in lint_text(example.code, tmp=tmp_path) if f.code == rule.code]
    if valid:
        assert findings == [], [f.message for f in findings]
    else:
        assert findings, f"{rule.code} did not flag:\n{textwrap.dedent(example.code)}"
        if example.line is not None:
            assert example.line in {f.span.start_line for f in findings}


@pytest.mark.parametrize("code", [c for c, r in REGISTRY.rules.items() if not r.engine_emitted])
def test_rule_metadata(code):
    rule = REGISTRY.rules[code]
    doc = rule.documentation()
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert heading in doc, f"{code} docstring lacks {heading}"
    assert rule.markers, f"{code} declares no prefilter markers"
    assert rule.INVALID and rule.VALID, f"{code} needs VALID and INVALID examples"
    has_fixed = any(e.fixed is not None for e in rule.INVALID)
    assert has_fixed == (rule.fix_safety is not None), f"{code}: fix_safety must match examples with `fixed`"
    assert rule.name == rule.name.lower() and " " not in rule.name
