"""A dataclass record's field every construction binds to pinned host memory is host memory
(flow/hostwrites.host_record_field): fixtures/projects/host_record_fields says where the findings are; this checks
what the evidence rests on — the project's default device (a `with torch.device("meta"):` block keeps pinned
factories host memory, a device context or `set_default_device` does not) and the confidence of the races kept."""

import shutil
from pathlib import Path

from harness import lint_paths

from streamlint.finding import Confidence

PROJECT = Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "host_record_fields"


def _found(root: Path) -> dict[int, Confidence]:
    path = root / "optim.py"
    return {f.span.start_line: f.confidence for f in lint_paths(root, [str(path)]) if f.code == "SL201"}


def _lines(marker: str) -> list[int]:
    return [i for i, text in enumerate((PROJECT / "optim.py").read_text().splitlines(), 1) if marker in text]


def test_host_written_record_field_is_silent_and_real_races_stay_high(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(PROJECT, root)
    found = _found(root)
    assert not any(line in found for line in _lines("# ok: SL201"))
    expected = _lines("# expect: SL201")
    assert len(expected) == 3 and all(found.get(line) is Confidence.HIGH for line in expected)


def test_a_device_context_elsewhere_keeps_the_pinned_factory_unproven(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(PROJECT, root)
    (root / "build.py").write_text('import torch\n\n\ndef build(make):\n    with torch.device("cuda"):\n'
                                   '        return make()\n', encoding="utf-8")
    found = _found(root)
    assert any(line in found for line in _lines("# ok: SL201"))  # the inline host write is reported again
