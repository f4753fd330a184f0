"""fieldfacts._referenced: a method name that is also part of longer words in many files is still read."""
from __future__ import annotations

from pathlib import Path

from harness import engine_for
from streamlint.model.flow.fieldfacts import _referenced
from streamlint.model.options import MAX_CALLER_FILES


def _tree(root: Path, extra: str = "") -> None:
    pkg = root / "sampler"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "decoder.py").write_text(
        "class Decoder:\n"
        "    def sample(self, logits):\n"
        "        return logits.argmax(-1)\n"
    )
    for i in range(MAX_CALLER_FILES + 6):  # (more files than the plain limit, each naming `sampled_*` only)
        (pkg / f"stage{i}.py").write_text(
            f"def sampled_tokens_{i}(dec, logits):\n"
            f"    return dec.sample(logits)\n"
        )
    (pkg / "hooks.py").write_text(extra)


def test_name_in_longer_words_is_read(tmp_path: Path) -> None:
    _tree(tmp_path)
    project = engine_for(tmp_path).project
    home = str(tmp_path / "sampler" / "decoder.py")
    assert len(project.paths_containing((b"sample",))) > MAX_CALLER_FILES
    assert not _referenced(project, "sample", home)


def test_reference_past_the_plain_limit_is_found(tmp_path: Path) -> None:
    _tree(tmp_path, "def install(dec, table):\n    table['on_logits'] = dec.sample\n")
    project = engine_for(tmp_path).project
    assert _referenced(project, "sample", str(tmp_path / "sampler" / "decoder.py"))
