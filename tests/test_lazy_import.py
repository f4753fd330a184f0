"""Runs that parse nothing do not import LibCST (~0.25 s of start-up): structural, not timed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

PROBE = textwrap.dedent(
    """
    import sys
    from click.testing import CliRunner
    from streamlint.cli import main

    result = CliRunner().invoke(main, sys.argv[1:])
    print("EXIT", result.exit_code)
    print("LIBCST", "libcst._nodes.expression" in sys.modules)
    """
)


def _probe(*args: str, cwd: Path) -> tuple[int, bool]:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True, check=True).stdout
    lines = dict(line.split(" ", 1) for line in out.splitlines() if line.startswith(("EXIT", "LIBCST")))
    return int(lines["EXIT"]), lines["LIBCST"] == "True"


def test_no_libcst_when_the_prefilter_skips_every_file(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    assert _probe("check", "plain.py", "--isolated", "--no-cache", cwd=tmp_path) == (0, False)


def test_libcst_for_a_stream_file_then_not_when_the_cache_answers(tmp_path: Path) -> None:
    (tmp_path / "moe.py").write_text(textwrap.dedent(
        """
        import torch
        import torchair as tng

        class MoE(torch.nn.Module):
            def forward(self, x):
                with tng.scope.npu_stream_switch("moe"):
                    print(x)
                    y = x * 2
                return y
        """), encoding="utf-8")
    exit_cold, cold = _probe("check", "moe.py", "--isolated", cwd=tmp_path)
    assert cold and exit_cold == 1  # parsed, SL101 on print()
    exit_warm, warm = _probe("check", "moe.py", "--isolated", cwd=tmp_path)
    assert (exit_warm, warm) == (1, False)  # the same finding, from the cache


def test_prefilter_stream_word_marker() -> None:
    """`Stream`/`stream` must end an identifier: logging.StreamHandler or streaming=True do not make a file
    worth parsing; torch.npu.Stream(), wait_stream(), Optional[Stream], npu_stream_switch do."""
    from harness import REGISTRY
    from streamlint.config import Settings
    from streamlint.engine import Engine

    engine = Engine(Settings(), REGISTRY)
    skipped = [b"import logging\nh = logging.StreamHandler()\n", b"def gen(streaming=True):\n    yield 1\n",
               b"class Streams:\n    pass\n", b"x = 1\n"]
    analysed = [b"s = torch.npu.Stream()\n", b"main.wait_stream(side)\n", b"def f(s: Optional[Stream]): ...\n",
                b"with npu_stream_switch('a'):\n    pass\n", b"from torch.npu import Stream\n",
                b"with torch.cuda.stream(s):\n    pass\n"]
    assert [engine.needs_analysis(bytes(d)) for d in skipped] == [False] * len(skipped)
    assert [engine.needs_analysis(bytes(d)) for d in analysed] == [True] * len(analysed)
