"""Regenerate ``streamlint/model/tensornames.py``: the public attribute names of ``torch.Tensor``.

The names are read, never imported, from a pinned torch wheel (``torch/_C/__init__.pyi``'s ``TensorBase``,
``torch/_tensor.py``'s ``Tensor``) plus the tensor subclasses whose values model code handles as tensors
(``nn.Parameter``, ``DTensor``, the functional collectives' ``AsyncCollectiveTensor``). Run by hand when torch
moves: ``python -m bench.tensornames [WHEEL] > streamlint/model/tensornames.py``. Without WHEEL the pinned wheel
is downloaded with ``pip download`` (PyPI must be reachable) into ``$STREAMLINT_REALCODE_CACHE/downloads``
and its sha256 checked before it is read.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

from bench.realcode.corpus import sha256_of

WHEEL = "torch-2.14.1-cp311-cp311-macosx_14_0_arm64.whl"
SHA256 = "b6074b130fd26bc50f5d171f07dfed70db22dd0c354ab34767729249f9e0f042"
CLASSES = {
    "torch/_C/__init__.pyi": "TensorBase",
    "torch/_tensor.py": "Tensor",
    "torch/nn/parameter.py": "Parameter",
    "torch/distributed/tensor/_api.py": "DTensor",
    "torch/distributed/_functional_collectives.py": "AsyncCollectiveTensor",
}


def _fetch() -> Path:
    cache = Path(os.environ.get("STREAMLINT_REALCODE_CACHE", Path.home() / ".cache" / "streamlint-realcode"))
    path = cache / "downloads" / WHEEL
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        rc = subprocess.call([sys.executable, "-m", "pip", "download", "torch==2.14.1", "--no-deps", "--only-binary",
                              ":all:", "--platform", "macosx_14_0_arm64", "--python-version", "3.11",
                              "-d", str(path.parent)], stdout=sys.stderr)
        if rc or not path.exists():
            sys.exit("bench.tensornames: could not download the pinned torch wheel (is PyPI reachable?)")
    return path


def class_names(source: str, cls: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            body, items = list(node.body), []
            while body:  # members defined under `if TYPE_CHECKING:` / `try:` in the class body count too
                item = body.pop()
                if isinstance(item, (ast.If, ast.Try)):
                    body += item.body + item.orelse + getattr(item, "finalbody", [])
                    body += [s for h in getattr(item, "handlers", []) for s in h.body]
                else:
                    items.append(item)
            for item in items:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names |= {t.id for t in item.targets if isinstance(t, ast.Name)}
    return names


def main(argv: list[str]) -> int:
    wheel = Path(argv[0]) if argv else _fetch()
    if not wheel.is_file():
        sys.exit(f"bench.tensornames: {wheel}: no such file")
    if sha256_of(wheel) != SHA256:
        sys.exit(f"bench.tensornames: {wheel}: sha256 does not match the pinned {SHA256}")
    names: set[str] = set()
    with zipfile.ZipFile(wheel) as z:
        for member, cls in CLASSES.items():
            names |= class_names(z.read(member).decode(), cls)
    public = sorted(n for n in names if not n.startswith("_"))
    body = textwrap.fill(" ".join(public), width=112, break_long_words=False)
    print('"""The public attribute names of ``torch.Tensor`` (methods and properties) and of the tensor subclasses model')
    print("code handles as tensors (``nn.Parameter``, ``DTensor``, ``AsyncCollectiveTensor``), read from torch 2.14.1's")
    print('stubs by ``bench/tensornames.py`` (generated: do not edit by hand)."""')
    print()
    print("TENSOR_NAMES = frozenset(\"\"\"")
    print(body)
    print('""".split())')
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
