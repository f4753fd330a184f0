"""Forward references and star imports: a parameter annotated with a string (``handle: 'AsyncHandle'``, the
form of names imported under ``TYPE_CHECKING``) in a module that star-imports a project module made the
symbol lookup search the empty name, which matched at every byte and never ended (a real release hung)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from streamlint._lazy import cst
from streamlint.model import bytescan
from streamlint.model.syntax import string_annotation


def test_the_empty_name_is_spelt_nowhere() -> None:
    assert bytescan.spells(b"from typing import *\n", "") is False
    assert bytescan.spells(b"x = handle\n", "handle") is True


def test_string_annotations_read_as_dotted_names() -> None:
    assert isinstance(string_annotation(cst.SimpleString("'AsyncHandle'")), cst.Name)
    dotted = string_annotation(cst.SimpleString('"pkg.handles.AsyncHandle"'))
    assert isinstance(dotted, cst.Attribute) and dotted.attr.value == "AsyncHandle"
    for text in ("'List[int]'", "'a b'", "''", "f'{x}'"):
        node = cst.parse_expression(text)
        assert string_annotation(node) is node


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


PROJECT = {
    "pyproject.toml": "[tool.streamlint]\n",
    "pipe/__init__.py": "from pipe.pipe import pipe\n",
    "pipe/pipe.py": """
        from typing import *
        from pipe.device import *


        class pipe:
            pass
    """,
    "pipe/device.py": """
        from typing import *
        from pipe.run import Run
    """,
    "pipe/handle.py": """
        import torch


        class AsyncHandle:
            def stage(self, x: torch.Tensor) -> torch.Tensor:
                return x * 2
    """,
    "pipe/transfer.py": """
        from typing import *
        import torch


        def to_device(xs, stream: torch.cuda.Stream):
            with torch.cuda.stream(stream):
                return [x.to("cuda", non_blocking=True) for x in xs]
    """,
    "pipe/run.py": """
        from typing import *
        import torch
        from torch.utils._pytree import tree_flatten, tree_unflatten
        from pipe.transfer import *

        if TYPE_CHECKING:
            from pipe.handle import AsyncHandle


        class Run:
            @staticmethod
            def forward(handle: 'AsyncHandle', side: torch.cuda.Stream, x: torch.Tensor):
                leaves, spec = tree_flatten(x)
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    y = handle.stage(tree_unflatten(leaves, spec))
                torch.cuda.current_stream().wait_stream(side)
                return y
    """,
}


def test_a_project_of_star_imports_and_forward_references_is_linted(tmp_path: Path) -> None:
    _write(tmp_path, PROJECT)
    done = subprocess.run([sys.executable, "-m", "streamlint", "check", "--no-cache", "-j", "1",
                           "--output-format", "concise", "pipe"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)  # (a guard against the hang, not a speed assertion)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "" and "checked 6 files" in done.stderr  # (no finding: the join is there)
