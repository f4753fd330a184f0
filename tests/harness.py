"""Shared test helpers: run the engine on fixtures and on rule examples, read inline expectations."""

from __future__ import annotations

import os
import re
import textwrap
from collections import Counter
from pathlib import Path

from streamlint.config import Settings
from streamlint.discovery import discover
from streamlint.engine import Engine
from streamlint.finding import Finding
from streamlint.registry import load_registry

ROOT = Path(__file__).resolve().parent.parent
# SL105 at 2:39 (int tag), SL104 at 2:42 (reserved priority)
BAD = "import torchair\nwith torchair.scope.npu_stream_switch(1, 3):\n    pass\n"
CLEAN = "import torchair\nwith torchair.scope.npu_stream_switch('side'):\n    pass\n"
FIXTURES = ROOT / "fixtures"
REGISTRY = load_registry()
_ANNOTATION = re.compile(r"#\s*(expect|ok):\s*([A-Z0-9,\s]+?)(?:\s+x(\d+))?\s*(?:--.*)?$")


def engine_for(root: Path, files: list[str] | None = None, **settings) -> Engine:
    base = Settings(select=("ALL",), project_root=str(root), **settings)
    return Engine(base, REGISTRY, project_root=str(root), project_scope=files)


def lint_paths(root: Path, files: list[str], scope: list[str] | None = None, **settings) -> list[Finding]:
    engine = engine_for(root, scope, **settings)
    return [f for path in files for f in engine.lint_file(path).findings]


def lint_project(root: Path, **settings) -> list[Finding]:
    """Every finding of a project fixture: each file discovery finds under ``root``, linted by one engine."""
    return lint_paths(root, [str(f) for f in discover([str(root)], root).files], **settings)


def lint_text(code: str, name: str = "example.py", tmp: Path | None = None, **settings) -> list[Finding]:
    import tempfile

    directory = Path(tmp or tempfile.mkdtemp())
    path = directory / name
    path.write_text(textwrap.dedent(code).lstrip("\n"), encoding="utf-8")
    return lint_paths(directory, [str(path)], [str(path)], **settings)


def annotations(path: Path) -> tuple[Counter, set[str]]:
    """(Counter of (line, code) expected, set of codes mentioned by any annotation)."""
    expected: Counter = Counter()
    mentioned: set[str] = set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if "#" not in line:
            continue
        comment = line[line.index("#"):]
        for m in re.finditer(r"#\s*(?:expect|ok):[^#]*", comment):
            am = _ANNOTATION.match(m.group(0).rstrip())
            if not am:
                continue
            kind, codes, times = am.group(1), am.group(2), int(am.group(3) or 1)
            for code in re.split(r"[,\s]+", codes.strip()):
                if not code:
                    continue
                mentioned.add(code)
                if kind == "expect":
                    expected[(lineno, code)] += times
    return expected, mentioned


def fixture_cases() -> list[tuple[str, Path, list[Path]]]:
    """(id, project root, files) for every single-file fixture and every fixture project."""
    cases = []
    for path in sorted((FIXTURES / "rules").glob("*.py")):
        cases.append((f"rules/{path.name}", path.parent, [path]))
    for project in sorted(p for p in (FIXTURES / "projects").iterdir() if p.is_dir()):
        files = [Path(f) for f in discover([str(project)], project).files]
        cases.append((f"projects/{project.name}", project, files))
    showcase = FIXTURES / "showcase"
    if showcase.is_dir():
        files = [Path(f) for f in discover([str(showcase)], showcase).files]
        cases.append(("showcase", showcase, files))
    return cases


def compare(root: Path, files: list[Path], single: bool) -> list[str]:
    """Mismatches between findings and inline annotations (empty when the fixture passes)."""
    scope = [str(f) for f in files] if single else None
    findings = lint_paths(root, [str(f) for f in files], scope)
    problems = []
    notes = {f: annotations(f) for f in files}
    # (a project's codes are those mentioned in any of its files: fixtures/README.md)
    everywhere = set().union(*(m for _, m in notes.values())) if not single else set()
    for f in files:
        expected, mentioned = notes[f]
        mentioned = mentioned | everywhere
        actual = Counter((x.span.start_line, x.code) for x in findings
                         if os.path.abspath(x.path) == os.path.abspath(f)
                         and (x.code in mentioned or x.code == "SL000"))  # a rule crashing on a fixture: always wrong
        rel = f.relative_to(FIXTURES) if f.is_relative_to(FIXTURES) else f.relative_to(root)
        for key in sorted(set(expected) | set(actual)):
            if expected[key] != actual[key]:
                line, code = key
                msgs = [x.message for x in findings if os.path.abspath(x.path) == os.path.abspath(f)
                        and x.span.start_line == line and x.code == code]
                problems.append(f"{rel}:{line}: {code} expected {expected[key]}, got {actual[key]} {msgs}")
    return problems


def write(root: Path, rel: str, text: str) -> Path:
    """Write ``text`` (dedented) to ``root/rel``, creating folders."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def cli(args: list[str], input: "str | bytes | None" = None, env: "dict[str, str] | None" = None):
    """Run the command line in process (click's runner); a traceback in the output fails the test."""
    from click.testing import CliRunner

    from streamlint.cli import main

    result = CliRunner().invoke(main, args, input=input, env=env, catch_exceptions=False)
    assert "Traceback" not in result.output
    return result
