"""A cached result is keyed by what its analysis observed (streamlint/observed.py): an edit that changes nothing the
analysis read keeps it, an edit that changes a fact it read throws it away, and the answers are the same cold and
warm."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from harness import REGISTRY
from streamlint.cache import ResultCache
from streamlint.config import Settings
from streamlint.engine import Engine
from streamlint.parallel import lint_files
from streamlint.reachcache import code_digest

# a serving package: a TorchAir stream switch behind a config flag, a helper that is no wrapper, and a model
# whose shared expert runs under the switch with an integer tag (SL105: TorchAir tags are strings)
UTILS = '''\
from contextlib import nullcontext

from torchair.scope import npu_stream_switch as _npu_stream_switch


def stream_switch(tag, priority, *, enabled=True):
    return _npu_stream_switch(tag, priority) if enabled else nullcontext()


def round_up(value, multiple):
    return (value + multiple - 1) // multiple * multiple
'''
# the same switch on native streams: its first argument is a Stream, so an integer tag is no finding
NATIVE_UTILS = UTILS.replace("from torchair.scope import npu_stream_switch as _npu_stream_switch",
                             "import torch").replace("_npu_stream_switch(tag, priority)", "torch.npu.stream(tag)")
MOE = '''\
from ..utils import round_up, stream_switch


class SharedExpertMoE:
    def __init__(self, experts, shared, overlap):
        self.experts = experts
        self.shared = shared
        self.overlap = overlap

    def forward(self, hidden, router_logits):
        tokens = round_up(hidden.shape[0], 16)
        with stream_switch(3, 0, enabled=self.overlap):
            shared_out = self.shared(hidden)
        routed = self.experts(hidden, router_logits, tokens)
        return routed + shared_out
'''
SCHEDULER = '''\
import torch


def pick_batch(queue, budget):
    batch = []
    while queue and len(batch) < budget:
        batch.append(queue.pop())
    return batch


def sync_point():
    torch.npu.synchronize()
'''


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "serve" / "layers").mkdir(parents=True)
    (tmp_path / "serve" / "__init__.py").write_text("")
    (tmp_path / "serve" / "layers" / "__init__.py").write_text("")
    (tmp_path / "serve" / "utils.py").write_text(UTILS)
    (tmp_path / "serve" / "layers" / "moe.py").write_text(MOE)
    (tmp_path / "serve" / "scheduler.py").write_text(SCHEDULER)
    _age(tmp_path)
    return tmp_path


def _age(root: Path) -> None:
    """Date every file an hour back (a file changed within 2 s of a run is never trusted by its stamp)."""
    past = time.time() - 3600
    for path in root.rglob("*.py"):
        os.utime(path, (past, past))


def _run(root: Path, files: list[str] | None = None, jobs: int = 1, cache: bool = True):
    s = Settings(select=("ALL",), project_root=str(root), cache_dir=str(root / ".streamlint_cache"))
    engine = Engine(s, REGISTRY, project_root=str(root))
    result_cache = ResultCache.for_settings(s, REGISTRY) if cache else None
    paths = [str(root / f) for f in files] if files else [str(root / "serve" / "layers" / "moe.py")]
    reports, stats = lint_files(engine, paths, jobs=jobs, cache=result_cache)
    found = [(os.path.relpath(f.path, root), f.span.start_line, f.code, f.message) for r in reports for f in r.findings]
    return found, stats, result_cache


def _codes(found: list[tuple]) -> list[str]:
    return sorted(code for _, _, code, _ in found)


def _edit(path: Path, text: str) -> None:
    path.write_text(text)
    past = time.time() - 1800  # (settled: an edit's stamp is trusted as any other)
    os.utime(path, (past, past))


def test_a_comment_appended_to_the_imported_module_keeps_the_result(project: Path) -> None:
    cold, stats, cache = _run(project)
    assert "SL105" in _codes(cold) and stats.analysed == 1
    entry = cache.entries[str(project / "serve" / "layers" / "moe.py")]
    assert str(project / "serve" / "utils.py") in entry["d"]  # (the old key: the import's content)
    assert str(project / "serve" / "utils.py") in entry["o"]["code"]  # parsed: its code less the footer
    _edit(project / "serve" / "utils.py", UTILS + "\n# tuned for the 910B\n")
    warm, stats, cache = _run(project)
    assert warm == cold
    assert stats.cached == 1 and stats.analysed == 0  # no parse of moe.py, no analysis
    assert _codes(_run(project, cache=False)[0]) == _codes(warm)  # the same answers without a cache


def test_an_edit_of_a_module_only_scanned_keeps_the_result(project: Path) -> None:
    cold, _, cache = _run(project)
    entry = cache.entries[str(project / "serve" / "layers" / "moe.py")]
    assert str(project / "serve" / "scheduler.py") not in entry["o"]["code"]
    assert str(project / "serve" / "scheduler.py") not in entry["o"]["content"]
    _edit(project / "serve" / "scheduler.py", SCHEDULER.replace("budget:", "budget and queue[-1] is not None:"))
    warm, stats, _ = _run(project)
    assert warm == cold and stats.cached == 1


def test_an_edit_that_changes_the_wrappers_stream_effect_invalidates(project: Path) -> None:
    cold, _, _ = _run(project)
    assert "SL105" in _codes(cold)
    _edit(project / "serve" / "utils.py", NATIVE_UTILS)
    warm, stats, _ = _run(project)
    assert stats.analysed == 1 and stats.cached == 0
    assert "SL105" not in _codes(warm)
    assert _codes(_run(project, cache=False)[0]) == _codes(warm)
    _edit(project / "serve" / "utils.py", UTILS)  # back: found again
    again, stats, _ = _run(project)
    assert again == cold and stats.analysed == 1


def test_an_edit_inside_the_imported_module_invalidates(project: Path) -> None:
    """A comment that is not the module's footer (inside a function: a question may read its code) counts."""
    _run(project)
    _edit(project / "serve" / "utils.py", UTILS.replace("    return (value", "    # rounded for the kernels\n    return (value"))
    _, stats, _ = _run(project)
    assert stats.analysed == 1


def test_a_new_module_invalidates(project: Path) -> None:
    _run(project)
    (project / "serve" / "layers" / "dense.py").write_text("def forward(x):\n    return x\n")
    _age(project)
    _, stats, _ = _run(project)
    assert stats.analysed == 1  # (the file list is an observation)


def test_a_planted_record_is_a_miss(project: Path) -> None:
    _run(project)
    results = next((project / ".streamlint_cache").rglob("results-*.json"))
    data = json.loads(results.read_text())
    for entry in data["files"].values():
        entry["d"] = {str(project / "serve" / "utils.py"): "0" * 64}  # the old key fails: the record decides
        entry["o"]["scans"] = [["calling", ["not an identifier!", None], "x"]]
    results.write_text(json.dumps(data))
    found, stats, _ = _run(project)
    assert stats.analysed == 1 and "SL105" in _codes(found)


def test_a_pool_run_keeps_the_old_keys(project: Path) -> None:
    for i in range(40):  # (enough files for a pool)
        (project / "serve" / f"mod{i}.py").write_text(f"import torch\n\ndef f{i}(s):\n    torch.npu.synchronize()\n")
    _age(project)
    files = sorted(os.path.relpath(p, project) for p in project.rglob("*.py"))
    _, stats, cache = _run(project, files, jobs=2)
    if stats.jobs > 1:
        assert not any("o" in entry for entry in cache.entries.values())


def test_code_digest_ignores_only_the_footer() -> None:
    text = b"import os\nimport sys\n\nx = os.sep\n"
    assert code_digest(text) == code_digest(text + b"\n# edited\n") == code_digest(text + b"#\n\n   \n")
    assert code_digest(text) == code_digest(text.rstrip(b"\n"))
    assert code_digest(text) != code_digest(text + b"    # deeper: the last block's\n")
    assert code_digest(text) != code_digest(text + b"# it's quoted\n")  # (a quote may close a string)
    assert code_digest(text) != code_digest(text + b"# caf\xc3\xa9\n")  # (bytes that may not decode)
    assert code_digest(b"x = 1\n") != code_digest(b"x = 1\n# c\n")  # (the first two lines: an encoding)
    cont = b"import os\nimport sys\nx = 1 + \\\n"
    assert code_digest(cont) != code_digest(cont + b"# c\n")
    assert code_digest(None) == ""


def test_a_record_past_the_bound_is_not_kept(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlint import observed

    monkeypatch.setattr(observed, "MAX_OBSERVATIONS", 1)
    _, _, cache = _run(project)
    entry = cache.entries[str(project / "serve" / "layers" / "moe.py")]
    assert "o" not in entry and "d" in entry  # (the old keys only)
    _edit(project / "serve" / "utils.py", UTILS + "\n# tuned for the 910B\n")
    _, stats, _ = _run(project)
    assert stats.analysed == 1


def test_a_recorded_scan_question_is_asked_again(project: Path) -> None:
    """``Project.ask``: the record keeps the answer (not the bytes of every file the scan read); a change of the
    answer anywhere in the tree is a miss, a change the answer does not see is none."""
    from streamlint import observed
    from streamlint.model.flow.sidecalls import _called_in_stream_scope

    s = Settings(select=("ALL",), project_root=str(project))
    engine = Engine(s, REGISTRY, project_root=str(project))
    assert observed.start(engine)
    assert not _called_in_stream_scope(engine.project, "pick_batch")
    record = observed.snapshot(engine.project)
    assert ["stream-scoped", ["pick_batch"]] in [scan[:2] for scan in record["scans"]]

    def holds() -> bool:
        return observed.holds(record, observed.checker(Engine(s, REGISTRY, project_root=str(project))))

    assert holds()
    _edit(project / "serve" / "scheduler.py", SCHEDULER + "\n\ndef drain(queue):\n    return len(queue)\n")
    assert holds()  # (stream mentioned, no stream `with` calling it)
    _edit(project / "serve" / "scheduler.py", SCHEDULER + "\n\ndef overlap(queue, side):\n"
          "    with torch.npu.stream(side):\n        return pick_batch(queue, 8)\n")
    assert not holds()
