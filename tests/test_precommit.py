"""pre-commit, for real: the hooks of .pre-commit-hooks.yaml run by pre-commit inside a temporary git
repository. The manifest is validated with pre-commit's own schema; the test config uses `repo: local`
copies of those hooks with `language: system` pointing at the installed `streamlint` (no network, no
environment build), so a real `git commit` runs them."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pre_commit = pytest.importorskip("pre_commit")
from pre_commit.clientlib import load_manifest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
DEFECT = "import torchair\n\nwith torchair.scope.npu_stream_switch(1, 3):  # 中文注释\n    pass\n"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _streamlint_command() -> str:
    exe = Path(sys.executable).parent / "streamlint"
    if exe.is_file():
        return shlex.quote(str(exe))
    return f"{shlex.quote(sys.executable)} -m streamlint"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@e", GIT_CONFIG_NOSYSTEM="1",
               HOME=str(tmp_path), NO_COLOR="1")
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _local_config(hooks: list[dict]) -> str:
    lines = ["repos:", "  - repo: local", "    hooks:"]
    for hook in hooks:
        entry = hook["entry"].replace("streamlint", _streamlint_command(), 1)
        lines += [
            f"      - id: {hook['id']}",
            f"        name: {hook['name']}",
            f"        entry: {entry}",
            "        language: system",
            f"        types_or: [{', '.join(hook['types_or'])}]",
            f"        require_serial: {str(hook['require_serial']).lower()}",
        ]
        if hook["id"] == "streamlint-fix":  # run on demand below, not on every commit
            lines.append("        stages: [manual]")
    return "\n".join(lines) + "\n"


def test_manifest_is_valid_and_as_documented():
    hooks = {h["id"]: h for h in load_manifest(str(MANIFEST))}
    assert set(hooks) == {"streamlint", "streamlint-fix"}
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "pyi"]
        assert hook["require_serial"] is True
    assert hooks["streamlint"]["entry"] == "streamlint check --force-exclude"
    assert hooks["streamlint-fix"]["entry"] == "streamlint check --force-exclude --fix"


def test_hooks_in_a_real_repository(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = _env(tmp_path)
    hooks = list(load_manifest(str(MANIFEST)))
    (repo / ".pre-commit-config.yaml").write_text(_local_config(hooks), encoding="utf-8")
    # excluded paths stay excluded even though pre-commit names them explicitly (--force-exclude)
    (repo / "pyproject.toml").write_text('[tool.streamlint]\nextend-exclude = ["vendored"]\n', encoding="utf-8")
    (repo / "vendored").mkdir()
    (repo / "vendored" / "third_party.py").write_text(DEFECT, encoding="utf-8")
    (repo / "model.py").write_text(DEFECT, encoding="utf-8")
    assert _run(["git", "init", "-q"], repo, env).returncode == 0
    installed = _run([sys.executable, "-m", "pre_commit", "install"], repo, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    # a defect blocks the commit, and the hook output names it
    _run(["git", "add", "-A"], repo, env)
    blocked = _run(["git", "commit", "-q", "-m", "defect"], repo, env)
    assert blocked.returncode != 0
    output = blocked.stdout + blocked.stderr
    assert "SL105" in output and "model.py" in output
    assert "third_party.py" not in output

    # the fix hook applies the safe fix (SL104) and fails because it modified files; SL105 remains
    fixed = _run([sys.executable, "-m", "pre_commit", "run", "--hook-stage", "manual", "streamlint-fix",
                  "--files", "model.py"], repo, env)
    assert fixed.returncode != 0
    assert (repo / "model.py").read_text(encoding="utf-8") == DEFECT.replace("(1, 3)", "(1)")

    # fixing the defect by hand lets the commit through
    (repo / "model.py").write_text(DEFECT.replace("(1, 3)", '("side")'), encoding="utf-8")
    _run(["git", "add", "-A"], repo, env)
    passed = _run(["git", "commit", "-q", "-m", "fixed"], repo, env)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    log = _run(["git", "log", "--oneline"], repo, env)
    assert log.stdout.count("\n") == 1


def test_readme_local_hook_works_as_written(tmp_path):
    """The README's `repo: local` example, copied verbatim, blocks a commit with a defect (streamlint
    found on PATH, as in a project's activated environment)."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## pre-commit"):]
    config = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    assert "repo: local" in config and "rev:" not in config
    repo = tmp_path / "repo"
    repo.mkdir()
    env = _env(tmp_path)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if shutil.which("streamlint", path=env["PATH"]) is None:
        pytest.skip("no streamlint executable next to the interpreter")
    (repo / ".pre-commit-config.yaml").write_text(config, encoding="utf-8")
    (repo / "model.py").write_text(DEFECT, encoding="utf-8")
    assert _run(["git", "init", "-q"], repo, env).returncode == 0
    assert _run([sys.executable, "-m", "pre_commit", "install"], repo, env).returncode == 0
    _run(["git", "add", "-A"], repo, env)
    blocked = _run(["git", "commit", "-q", "-m", "defect"], repo, env)
    assert blocked.returncode != 0
    assert "SL105" in blocked.stdout + blocked.stderr


def test_readme_installs_from_a_checkout_or_git_and_links_nothing_dead():
    import tomllib

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "readthedocs" not in readme
    assert "pip install -e '/path/to/streamlint[lsp]'" in readme
    assert "@ git+https://" in readme
    assert not re.search(r"pip install '?streamlint(\[\w+\])?'?\s*$", readme, re.M)  # no index install
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert "lsp" in extras and "dev" in extras
    for path in (ROOT / "streamlint").rglob("*"):
        if path.suffix in (".py", ".json"):
            assert "readthedocs" not in path.read_text(encoding="utf-8"), path
