"""Every fixture file and project: findings must equal the inline `# expect:` annotations."""

import pytest

from harness import compare, fixture_cases

CASES = fixture_cases()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fixture(case):
    name, root, files = case
    problems = compare(root, files, single=name.startswith("rules/"))
    assert not problems, "\n".join(problems)


def test_project_codes_are_checked_in_every_file(tmp_path):
    """A code annotated in one file of a project is checked in all of its files (fixtures/README.md): a finding
    in a file without annotations is a mismatch, not ignored."""
    from pathlib import Path

    from harness import write

    race = '''
        import torch

        def overlap(x: torch.Tensor):
            side = torch.cuda.Stream()
            y = x * 2
            with torch.cuda.stream(side):
                z = y + 1{note}
            return z{note}
        '''
    a = write(tmp_path, "pkg/a.py", race.format(note="  # expect: SL201"))
    b = write(tmp_path, "pkg/b.py", race.format(note=""))
    problems = compare(tmp_path, [Path(a), Path(b)], single=False)
    assert any(p.startswith("pkg/b.py:") and "SL201 expected 0, got 1" in p for p in problems), problems
    assert not any(p.startswith("pkg/a.py:") for p in problems), problems
