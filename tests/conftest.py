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
