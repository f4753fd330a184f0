"""A field event kept as the object's own slot-reuse guard (escapes.py ``own_guard``): the answer must not depend
on which other files are in the run, on which file is analysed first, nor on how ``-j`` splits the files."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

# analysed first (sorted): a class with a field of the same name that nobody waits on
MARKS = """
import torch


class ProgressTicks:
    def __init__(self, n: int):
        self.aux = torch.cuda.Stream()
        self.freed = [torch.cuda.Event() for _ in range(n)]

    def step(self, x: torch.Tensor, w: torch.Tensor, k: int) -> torch.Tensor:
        self.aux.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.aux):
            y = torch.matmul(x, w)
            self.freed[k].record()
        return y
"""

# a layer runner whose `freed` events only guard its own copy stream's refill: no join handle for the caller
RUNNER = """
import torch


class PagedLayerRunner:
    def __init__(self, pages: int):
        self.loader = torch.cuda.Stream()
        self.math = torch.cuda.Stream()
        self.freed = [torch.cuda.Event() for _ in range(pages)]
        self.pages = [torch.empty(1024, device="cuda") for _ in range(pages)]

    def load(self, page: int, host: torch.Tensor) -> None:
        self.loader.wait_event(self.freed[page])
        with torch.cuda.stream(self.loader):
            self.pages[page].copy_(host, non_blocking=True)

    def run(self, h: torch.Tensor, order: list) -> torch.Tensor:
        self.math.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.math):
            for page in order:
                h = h * self.pages[page]
                self.freed[page].record()
        return h
"""


def _check(cwd: Path, target: str, *extra: str) -> list[tuple]:
    out = subprocess.run([sys.executable, "-m", "streamlint", "check", "--isolated", "--no-cache",
                          "--output-format", "json", *extra, target], cwd=cwd, capture_output=True, text=True)
    data = json.loads(out.stdout)
    items = data if isinstance(data, list) else data.get("findings", [])
    return sorted((Path(f["filename"]).name, f["code"], f["start"]["line"], f["confidence"], f["message"])
                  for f in items if Path(f["filename"]).name == "z_runner.py")


def test_own_guard_same_alone_and_with_other_files_any_jobs(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a_marks.py").write_text(textwrap.dedent(MARKS))
    (proj / "z_runner.py").write_text(textwrap.dedent(RUNNER))
    alone = _check(proj, "z_runner.py")
    assert [f[1] for f in alone] == ["SL201"], alone
    assert _check(tmp_path, "proj", "-j", "1") == alone
    assert _check(tmp_path, "proj", "-j", "2") == alone
