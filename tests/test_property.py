"""Property: the engine never raises, whatever (syntactically valid) program it is given."""

from __future__ import annotations

from pathlib import Path

import hypothesmith
from hypothesis import HealthCheck, given, settings, strategies as st

from harness import REGISTRY
from streamlint.config import Settings
from streamlint.engine import Engine

# a stream-switch prefix so that the rules (not only the prefilter) run on every generated program
HEADER = "import torchair\nwith torchair.scope.npu_stream_switch(1, 3):\n    pass\n"


def _lint(tmp: Path, source: str) -> list:
    path = tmp / "generated.py"
    engine = Engine(Settings(select=("ALL",), project_root=str(tmp)), REGISTRY, project_root=str(tmp),
                    project_scope=[str(path)])
    engine.set_override(str(path), source.encode("utf-8", "surrogatepass"))
    return engine.lint_file(str(path)).findings


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=hypothesmith.from_grammar())
def test_engine_never_raises_on_generated_programs(tmp_path_factory, program: str) -> None:
    findings = _lint(tmp_path_factory.mktemp("prop"), HEADER + program)
    assert all(f.code != "SL000" for f in findings), [f.message for f in findings if f.code == "SL000"]


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=300))
def test_engine_never_raises_on_arbitrary_bytes(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("bytes") / "junk.py"
    engine = Engine(Settings(select=("ALL",), project_root=str(path.parent)), REGISTRY,
                    project_root=str(path.parent), project_scope=[str(path)])
    engine.set_override(str(path), b"npu_stream_switch # noqa: SL105\n" + data)
    findings = engine.lint_file(str(path)).findings
    assert all(f.code != "SL000" for f in findings)
