"""Environment variables a project sets for itself (domain §1.13).

A compile-time switch such as ``ENABLE_DYNAMIC_SHAPE_MULTI_STREAM`` (C6) is usually exported by a launch
script, listed in a YAML/``.env`` file that the launcher exports, or set from Python before torchair
starts GE. The model answers "does the project set this variable anywhere?" with the places it does,
from a byte search over project files followed by a light parse of the matching ones. Never executes
anything; a value that is literally off (``0``, ``false``) does not count as set.
"""

from __future__ import annotations

import os
import stat
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from streamlint._lazy import cst

from streamlint.finding import Location, Span
from streamlint.model.file import FileModel, string_value
from streamlint.model.filefacts import FunctionInfo

if TYPE_CHECKING:
    from streamlint.model.project import Project

DYNAMIC_SHAPE_MULTI_STREAM = "ENABLE_DYNAMIC_SHAPE_MULTI_STREAM"

# Non-Python files that commonly carry environment settings: shell launchers, YAML configs, .env files.
ENV_FILE_SUFFIXES = (".sh", ".bash", ".zsh", ".yaml", ".yml", ".env", ".envrc")
_SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".nox", "build", "dist",
    "site-packages", ".mypy_cache", ".ruff_cache", ".streamlint_cache", ".eggs",
})
_MAX_FILE_BYTES = 2_000_000
_OFF_VALUES = frozenset({"0", "false", "no", "off", ""})


@dataclass(frozen=True)
class EnvSetting:
    """One place where the project sets an environment variable."""

    variable: str
    location: Location


def env_settings(project: "Project", variable: str) -> tuple[EnvSetting, ...]:
    """Every place in the project that sets ``variable`` to a value that is not literally off.

    Cached with the project's path index (dropped when an editor buffer overrides a file): the search
    reads each candidate file once per variable.
    """
    project.note_wide_read()
    cache: dict[str, tuple[EnvSetting, ...]] = project.path_index.derived.setdefault("env_settings", {})
    if variable not in cache:
        cache[variable] = tuple(_search(project, variable))
    return cache[variable]


def sets_env(project: "Project", variable: str) -> bool:
    return bool(env_settings(project, variable))


def _search(project: "Project", variable: str) -> Iterator[EnvSetting]:
    needle = variable.encode()
    for model in project.files_containing((needle,)):
        yield from _python_settings(model, variable)
    if project.scope is not None:
        return  # an explicitly scoped project (single files, editor buffers) has no launch scripts
    for path in _env_files(project.root):
        data = _read(path)
        if data is None or needle not in data:
            continue
        yield from _text_settings(path, data.decode("utf-8", errors="replace"), variable)


def _read(path: str) -> bytes | None:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_FILE_BYTES:
            return None  # a FIFO or a device planted in the repository would block or never end
        with open(path, "rb") as f:
            return f.read(_MAX_FILE_BYTES + 1)
    except OSError:
        return None


def _env_files(root: Path) -> Iterator[str]:
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(ENV_FILE_SUFFIXES) or name == ".env" or name.startswith(".env."):
                yield os.path.join(directory, name)


# ---- Python: os.environ[...] = v, os.environ.setdefault(k, v), os.putenv(k, v), os.environ.update(...)

_ENVIRON = ("os.environ",)
_SET_CALLS = ("os.environ.setdefault", "os.putenv", "os.environ.__setitem__")


def _python_settings(model: FileModel, variable: str) -> Iterator[EnvSetting]:
    for assign in model.assigns:
        base, _, key = assign.target.partition("[")
        if key.rstrip("]") != variable or _resolve(model, base, assign.function) not in _ENVIRON:
            continue
        if not _is_off(assign.value):
            yield EnvSetting(variable, Location(model.path, model.span(assign.node), f"sets {variable}"))
    for site in model.calls:
        target = site.target
        call = site.node
        if target in _SET_CALLS:
            args = [a for a in call.args if a.keyword is None]
            if len(args) >= 2 and string_value(args[0].value) == variable and not _is_off(args[1].value):
                yield EnvSetting(variable, Location(model.path, model.span(call), f"sets {variable}"))
        elif target == "os.environ.update":
            for value in _update_values(call, variable):
                if not _is_off(value):
                    yield EnvSetting(variable, Location(model.path, model.span(call), f"sets {variable}"))


def _resolve(model: FileModel, dotted_name: str, function: FunctionInfo | None) -> str | None:
    return model.resolve_dotted(dotted_name, function) if dotted_name else None


def _update_values(call: cst.Call, variable: str) -> Iterator[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == variable:
            yield arg.value
        elif arg.keyword is None and isinstance(arg.value, cst.Dict):
            for element in arg.value.elements:
                if isinstance(element, cst.DictElement) and string_value(element.key) == variable:
                    yield element.value


def _is_off(value: cst.BaseExpression) -> bool:
    text = string_value(value)
    if text is None and isinstance(value, cst.Integer):
        text = value.value
    if text is None and isinstance(value, cst.Name) and value.value in ("False", "None"):
        return True
    return text is not None and text.strip().lower() in _OFF_VALUES


# ---- shell / YAML / .env: `export VAR=1`, `VAR=1 python ...`, `VAR: 1`, `- name: VAR` + `value: "1"`

_ASSIGN = re.compile(r"""(?:^|[\s;"'{,])(?:export\s+|set\s+|setenv\s+)?%s\s*(?:=|:|\s)\s*["']?([^\s"'#;,}]*)""")
_NAME_ENTRY = re.compile(r"""\bname\s*:\s*["']?%s["']?\s*$""")
_VALUE_ENTRY = re.compile(r"""^\s*-?\s*value\s*:\s*["']?([^\s"'#]*)""")


def _text_settings(path: str, text: str, variable: str) -> Iterator[EnvSetting]:
    assign = re.compile(_ASSIGN.pattern % re.escape(variable))
    name_entry = re.compile(_NAME_ENTRY.pattern % re.escape(variable))
    lines = text.splitlines()
    for index, raw in enumerate(lines):
        line = _strip_comment(raw)
        if variable not in line:
            continue
        column = raw.index(variable)
        span = Span(index + 1, column, index + 1, column + len(variable))
        found = name_entry.search(line)
        if found is not None:  # Kubernetes / compose style: the value is on the next line
            following = lines[index + 1] if index + 1 < len(lines) else ""
            value = _VALUE_ENTRY.match(_strip_comment(following))
            if value is None or value.group(1).lower() not in _OFF_VALUES:
                yield EnvSetting(variable, Location(path, span, f"sets {variable}"))
            continue
        found = assign.search(line)
        if found is not None and found.group(1).lower() not in _OFF_VALUES:
            yield EnvSetting(variable, Location(path, span, f"sets {variable}"))


def _strip_comment(line: str) -> str:
    stripped = line.lstrip()
    if stripped.startswith("#"):
        return ""
    cut = re.search(r"\s#", line)
    return line[: cut.start()] if cut else line


__all__ = ["DYNAMIC_SHAPE_MULTI_STREAM", "EnvSetting", "env_settings", "sets_env"]
