"""The byte prefilter's second look (model/wrappercalls.py): a file that spells no marker but calls a project wrapper
of a stream API defined in another module is analysed; one calling only other helpers of that module is not."""

from __future__ import annotations

from streamlint.config import Settings
from streamlint.engine import Engine

from tests.harness import FIXTURES, REGISTRY

ROOT = FIXTURES / "projects" / "sl201_unmarked_wrapper_callers"


def test_unmarked_files_calling_a_project_wrapper_are_analysed() -> None:
    engine = Engine(Settings(select=("ALL",), project_root=str(ROOT)), REGISTRY, project_root=str(ROOT))
    verdicts = {}
    for name in ("dispatch.py", "router.py", "overlap.py"):
        path = ROOT / "moe" / name
        data = path.read_bytes()
        verdicts[name] = (engine.needs_analysis(bytes(data)), engine.needs_analysis(bytes(data), str(path)))
    # (marker alone, with the project's wrappers)
    assert verdicts == {"dispatch.py": (False, True), "router.py": (False, False), "overlap.py": (True, True)}
