import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


import pytest  # noqa: E402


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated project root as the cwd: a .git marker stops the config lookup above it, and the user's
    NO_COLOR / STREAMLINT_PLUGINS do not leak into the run (a module may define its own `project`)."""
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    monkeypatch.chdir(root)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("STREAMLINT_PLUGINS", raising=False)
    return root


@pytest.fixture(autouse=True, scope="session")
def _user_cache_home(tmp_path_factory: pytest.TempPathFactory):
    """The tree cache's key (streamlint/treecache.py) lives in the user's cache directory: the suite's runs,
    in-process and subprocesses, make theirs in a temporary one, never in the real home."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("user-cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old
