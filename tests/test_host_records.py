"""A dataclass record's field every construction binds to pinned host memory is host memory
(flow/hostwrites.host_record_field): fixtures/projects/host_record_fields says where the findings are; this checks
what the evidence rests on — the project's default device (a `with torch.device("meta"):` block keeps pinned
factories host memory, a device context or `set_default_device` does not) and the confidence of the races kept."""

import shutil
from pathlib import Path

import pytest
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


@pytest.mark.parametrize("context", [
    'with torch.device("cuda"):',
    'with torch.device("meta") if meta else torch.device(dev):',  # one arm is a device: the default may change
    'with (torch.device("meta") if meta else torch.device(dev)):',
    'with torch.device(dev):',
])
def test_a_device_context_elsewhere_keeps_the_pinned_factory_unproven(tmp_path, context):
    root = tmp_path / "proj"
    shutil.copytree(PROJECT, root)
    (root / "build.py").write_text(f'import torch\n\n\ndef build(make, meta, dev):\n    {context}\n'
                                   '        return make()\n', encoding="utf-8")
    found = _found(root)
    assert any(line in found for line in _lines("# ok: SL201"))  # the inline host write is reported again


def test_a_meta_or_cpu_context_and_a_device_argument_change_nothing(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(PROJECT, root)
    (root / "build.py").write_text('import torch\n\n\ndef build(make, place, x, dev):\n'
                                   '    with torch.device("cpu"), torch.device("meta"):\n        m = make()\n'
                                   '    return place(x, torch.device(dev)), m\n', encoding="utf-8")
    found = _found(root)
    assert not any(line in found for line in _lines("# ok: SL201"))


def test_a_subclass_or_a_replaced_copy_keeps_the_field_unproven(tmp_path):
    """fixtures/projects/host_record_fields/spill.py: the record field itself is still reported, at high (not only
    the `out` the side stream writes, which the same line also races on)."""
    root = tmp_path / "proj"
    shutil.copytree(PROJECT, root)
    path = root / "spill.py"
    found = {(f.span.start_line, f.confidence) for f in lint_paths(root, [str(path)])
             if f.code == "SL201" and ("`lane.buf`" in f.message or "`lane.staging`" in f.message)}
    lines = [i for i, text in enumerate(path.read_text().splitlines(), 1) if "# expect: SL201" in text]
    assert len(lines) == 2 and found == {(line, Confidence.HIGH) for line in lines}
