"""Every fixture file and project: findings must equal the inline `# expect:` annotations."""

import pytest

from harness import compare, fixture_cases

CASES = fixture_cases()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fixture(case):
    name, root, files = case
    problems = compare(root, files, single=name.startswith("rules/"))
    assert not problems, "\n".join(problems)
