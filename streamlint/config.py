"""Configuration: ``[tool.streamlint]`` in pyproject.toml, or streamlint.toml / .streamlint.toml.

Hierarchical, like ruff: each file is governed by the closest configuration file at or above it
(``extend`` inherits from another file explicitly); ``--config`` makes one file govern every file.
Resolved in the parent process (:class:`SettingsResolver`, cached per directory and per configuration
file). Unknown keys, bad values and unknown codes are errors naming the file and the key.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from streamlint.discovery import DEFAULT_EXCLUDE
from streamlint.model.apis import EXECUTION_PATHS
from streamlint.registry import Registry

CONFIG_FILES = ("streamlint.toml", ".streamlint.toml", "pyproject.toml")
MODES = ("auto", *EXECUTION_PATHS)
OUTPUT_FORMATS = ("full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit")
DEFAULT_SELECT = ("SL0", "SL1", "SL2", "SL3", "SL4", "SL5")


class ConfigError(Exception):
    def __init__(self, source: str, key: str | None, message: str) -> None:
        where = f"{source}: {key}: " if key else f"{source}: "
        super().__init__(where + message)
        self.source = source
        self.key = key


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = DEFAULT_SELECT
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    force_exclude: bool = False
    mode: str = "auto"
    min_confidence: str = "medium"  # low findings (unseen callers, ownership escapes) only on request
    fixable: tuple[str, ...] = ("ALL",)
    unfixable: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    output_format: str | None = None
    baseline: str = ""
    cache_dir: str = ".streamlint_cache"
    plugins: tuple[str, ...] = ()
    stream_switch_wrappers: tuple[str, ...] = ()
    wait_wrappers: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    per_path_mode: tuple[tuple[str, str], ...] = ()
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    config_path: str | None = None
    project_root: str = "."
    # where each selection came from, for --show-settings
    provenance: dict[str, str] = field(default_factory=dict)

    def with_overrides(self, **changes: Any) -> "Settings":
        return replace(self, **changes)

    def enabled_codes(self, registry: Registry) -> dict[str, str]:
        """code -> reason it is enabled; codes absent are disabled."""
        enabled: dict[str, str] = {}
        for key, selectors in (("select", self.select), ("extend-select", self.extend_select)):
            origin = self.provenance.get(key, "default")
            for selector in selectors:
                for rule in registry.lookup(selector):
                    enabled[rule.code] = f"{key} {selector!r} from {origin}"
        for selector in self.ignore:
            for rule in registry.lookup(selector):
                enabled.pop(rule.code, None)
        return enabled

    def disabled_reasons(self, registry: Registry) -> dict[str, str]:
        reasons: dict[str, str] = {}
        enabled = self.enabled_codes(registry)
        for code in registry.rules:
            if code in enabled:
                continue
            ignored_by = [s for s in self.ignore if any(r.code == code for r in registry.lookup(s))]
            if ignored_by:
                reasons[code] = f"ignore {ignored_by[0]!r} from {self.provenance.get('ignore', 'default')}"
            else:
                origin = self.provenance.get("select", "default")
                reasons[code] = f"not selected by select/extend-select from {origin}"
        return reasons


_LIST_KEYS = {
    "select", "extend-select", "ignore", "exclude", "extend-exclude", "fixable", "unfixable", "plugins",
    "stream-switch-wrappers", "wait-wrappers",
}
_BOOL_KEYS = {"respect-gitignore", "unsafe-fixes", "force-exclude"}
_STR_KEYS = {"mode", "min-confidence", "output-format", "baseline", "cache-dir", "extend"}
CONFIDENCES = ("high", "medium", "low")
_TABLE_KEYS = {"per-file-ignores", "per-path-mode", "rules"}
KNOWN_KEYS = _LIST_KEYS | _BOOL_KEYS | _STR_KEYS | _TABLE_KEYS


def find_config(start: Path) -> Path | None:
    """The nearest configuration file at or above ``start``."""
    directory = start if start.is_dir() else start.parent
    directory = directory.absolute()
    while True:
        for name in CONFIG_FILES:
            candidate = directory / name
            if candidate.is_file():
                if name != "pyproject.toml" or _has_tool_table(candidate):
                    return candidate
        if directory.parent == directory:
            return None
        directory = directory.parent


def _has_tool_table(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return True  # report the broken file rather than skipping it silently
    return "streamlint" in data.get("tool", {})


def _read_table(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), None, f"invalid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        return data.get("tool", {}).get("streamlint", {})
    return data


_NO_FALLBACK = Path()


def find_project_root(start: Path, fallback: "Path | None" = _NO_FALLBACK) -> "Path | None":
    """The nearest directory at or above ``start`` with a project marker; without one, ``fallback``
    (by default the directory of ``start``)."""
    directory = (start if start.is_dir() else start.parent).absolute()
    probe = directory
    while True:
        if any((probe / marker).exists() for marker in (".git", "pyproject.toml", "streamlint.toml", ".streamlint.toml")):
            return probe
        if probe.parent == probe:
            return directory if fallback is _NO_FALLBACK else fallback
        probe = probe.parent


class SettingsResolver:
    """The settings that govern each file of a run: its closest configuration file (or ``config_file``
    for every file; none with ``isolated``), plus the command-line ``overrides``. A file without any
    configuration above it gets the defaults, rooted at its project root (``.git``, ``pyproject.toml``).
    Each configuration file is read and validated once."""

    def __init__(self, registry: Registry, config_file: Path | None = None, isolated: bool = False,
                 overrides: dict[str, Any] | None = None) -> None:
        self.registry = registry
        self.config_file = config_file.absolute() if config_file is not None else None
        self.isolated = isolated
        self.overrides = overrides or {}
        self._dirs: dict[str, Path | None] = {}
        self._settings: dict[str, Settings] = {}
        self._roots: dict[str, Path] = {}
        self._file_dirs: dict[str, Settings] = {}
        # where a file with no project marker above it is rooted (see settings_for)
        self.fallback_roots: list[str] = []

    def config_for(self, path: str | Path) -> Path | None:
        """The configuration file governing ``path`` (a file or a directory), or None."""
        if self.isolated:
            return None
        if self.config_file is not None:
            return self.config_file
        absolute = os.path.abspath(path)
        directory = absolute if absolute in self._dirs or os.path.isdir(absolute) else os.path.dirname(absolute)
        walked = []
        found: Path | None = None
        while True:
            if directory in self._dirs:
                found = self._dirs[directory]
                break
            walked.append(directory)
            here = _config_in(Path(directory))
            if here is not None:
                found = here
                break
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        for d in walked:
            self._dirs[d] = found
        return found

    def settings_for(self, path: str | Path) -> Settings:
        """The effective settings of ``path`` (a file or a directory); raises ConfigError for a bad
        configuration file."""
        absolute = os.path.abspath(path)
        return self.settings_for_dir(absolute if os.path.isdir(absolute) else os.path.dirname(absolute))

    def settings_for_file(self, path: str) -> Settings:
        """:meth:`settings_for` of a file, memoised by its directory as given (no stat, no abspath per
        file: this runs for every file of the run)."""
        given = os.path.dirname(path) or "."
        settings = self._file_dirs.get(given)
        if settings is None:
            settings = self._file_dirs[given] = self.settings_for_dir(os.path.abspath(given))
        return settings

    def settings_for_dir(self, directory: str) -> Settings:
        """:meth:`settings_for` of an absolute, normalised directory."""
        config = self.config_for(directory)
        if config is None:
            root = self._roots.get(directory)
            if root is None:
                root = find_project_root(Path(directory), fallback=None)
                if root is None:  # no marker above: the outermost of the current directory and the
                    # directories named on the command line that holds it is one project
                    inside = [r for r in (os.getcwd(), *self.fallback_roots)
                              if directory == r or directory.startswith(r.rstrip(os.sep) + os.sep)]
                    root = Path(min(inside, key=len)) if inside else Path(directory)
                self._roots[directory] = root
            key = f"root:{root}"
        else:
            key = str(config)
        settings = self._settings.get(key)
        if settings is None:
            if config is None:
                settings = load_settings(self.registry, root, None, True, self.overrides)
            else:
                settings = load_settings(self.registry, config.parent, config, False, self.overrides)
            self._settings[key] = settings
        return settings


def _config_in(directory: Path) -> Path | None:
    for name in CONFIG_FILES:
        candidate = directory / name
        if candidate.is_file():
            if name != "pyproject.toml" or _has_tool_table(candidate):
                return candidate
    return None


def load_settings(
    registry: Registry,
    start: Path,
    config_file: Path | None = None,
    isolated: bool = False,
    overrides: dict[str, Any] | None = None,
) -> Settings:
    """Resolve the effective settings for a run rooted at ``start``."""
    settings = Settings()
    path = None if isolated else (config_file or find_config(start))
    if path is not None:
        settings = _apply_file(settings, path, registry, set())
        settings = replace(settings, config_path=str(path), project_root=str(path.parent.absolute()))
    else:
        settings = replace(settings, project_root=str(find_project_root(start) or start))
    for key, value in (overrides or {}).items():
        settings = _apply_key(settings, "command line", key, value, registry, Path.cwd())
    return settings


def _apply_file(settings: Settings, path: Path, registry: Registry, seen: set[Path]) -> Settings:
    path = path.absolute()
    if path in seen:
        raise ConfigError(str(path), "extend", "circular extend")
    seen.add(path)
    table = _read_table(path)
    if not isinstance(table, dict):
        raise ConfigError(str(path), None, "expected a table")
    if "extend" in table:
        base = table["extend"]
        if not isinstance(base, str):
            raise ConfigError(str(path), "extend", "expected a path string")
        base_path = (path.parent / base).resolve()
        if not base_path.is_file():
            raise ConfigError(str(path), "extend", f"no such file: {base_path}")
        settings = _apply_file(settings, base_path, registry, seen)
    # `plugins` first: the codes of a pack it names that is not installed are judged by it
    for key, value in sorted(table.items(), key=lambda kv: kv[0] != "plugins"):
        if key == "extend":
            continue
        settings = _apply_key(settings, str(path), key, value, registry, path.parent)
    return settings


def did_you_mean(value: str, candidates: "list[str] | tuple[str, ...] | set[str]") -> str:
    """``"; did you mean 'X'?"`` for the closest candidate (case-insensitive), or ``""``."""
    import difflib

    folded = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(value.lower(), list(folded), n=1, cutoff=0.6)
    return f"; did you mean {folded[close[0]]!r}?" if close else ""


def rule_suggestion(value: str, registry: Registry) -> str:
    """Did-you-mean for a rule selector: codes (``SL2O1`` -> ``SL201``) and kebab-case names."""
    return did_you_mean(value, [*registry.rules, *(r.name for r in registry.rules.values())])


def missing_plugins(settings: Settings, registry: Registry) -> list[str]:
    """The rule packs the configuration's ``plugins`` names that are not installed. ``plugins`` only
    names installed packs (entry-point names): nothing is ever imported because a configuration says so."""
    return registry.missing_plugins(settings.plugins)


def _missing_pack(selector: str, missing: list[str]) -> str | None:
    return next((name for name in missing if selector.startswith(name)), None)


def _check_selectors(source: str, key: str, values: list[str], registry: Registry,
                     settings: Settings | None = None) -> None:
    missing = missing_plugins(settings, registry) if settings is not None else []
    for value in values:
        if not registry.is_known_selector(value):
            pack = _missing_pack(value, missing)
            if pack is None:
                raise ConfigError(source, key,
                                  f"unknown rule code or name {value!r}{rule_suggestion(value, registry)}")
            if key in ("select", "extend-select"):
                raise ConfigError(source, key, f"{value!r} needs the rule pack {pack!r} (named in plugins), "
                                               "which is not installed")


def _apply_key(settings: Settings, source: str, key: str, value: Any, registry: Registry, base: Path) -> Settings:
    if key not in KNOWN_KEYS:
        hint = did_you_mean(key, KNOWN_KEYS)
        raise ConfigError(source, key, f"unknown key{hint} (known keys: {', '.join(sorted(KNOWN_KEYS))})")
    attr = key.replace("-", "_")
    if key in _LIST_KEYS:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(source, key, "expected a list of strings")
        if key in ("select", "extend-select", "ignore", "fixable", "unfixable"):
            _check_selectors(source, key, value, registry, settings)
        provenance = dict(settings.provenance)
        if key in ("select", "extend-select", "ignore"):
            provenance[key] = source
        return replace(settings, **{attr: tuple(value)}, provenance=provenance)
    if key in _BOOL_KEYS:
        if not isinstance(value, bool):
            raise ConfigError(source, key, "expected true or false")
        return replace(settings, **{attr: value})
    if key in _STR_KEYS:
        if not isinstance(value, str):
            raise ConfigError(source, key, "expected a string")
        if key == "mode" and value not in MODES:
            raise ConfigError(source, key, f"expected one of {', '.join(MODES)}, got {value!r}")
        if key == "min-confidence" and value not in CONFIDENCES:
            raise ConfigError(source, key, f"expected one of {', '.join(CONFIDENCES)}, got {value!r}")
        if key == "output-format" and value not in OUTPUT_FORMATS:
            raise ConfigError(source, key, f"expected one of {', '.join(OUTPUT_FORMATS)}, got {value!r}")
        if key in ("baseline", "cache-dir") and value:
            value = str((base / value)) if not os.path.isabs(value) else value
            # where a path came from decides where it may lead (a repository's config: inside its project)
            return replace(settings, **{attr: value}, provenance={**settings.provenance, key: source})
        return replace(settings, **{attr: value})
    if not isinstance(value, dict):
        raise ConfigError(source, key, "expected a table")
    if key == "per-file-ignores":
        entries = []
        for pattern, codes in value.items():
            if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
                raise ConfigError(source, f"{key}.{pattern}", "expected a list of codes")
            _check_selectors(source, f"{key}.{pattern}", codes, registry, settings)
            entries.append((pattern, tuple(codes)))
        return replace(settings, per_file_ignores=tuple(entries))
    if key == "per-path-mode":
        entries = []
        for pattern, mode in value.items():
            if mode not in MODES:
                raise ConfigError(source, f"{key}.{pattern}", f"expected one of {', '.join(MODES)}, got {mode!r}")
            entries.append((pattern, mode))
        return replace(settings, per_path_mode=tuple(entries))
    # rules.<CODE> = { option = value }
    options = {code: dict(opts) for code, opts in settings.rule_options.items()}
    for selector, table in value.items():
        rules = registry.lookup(selector)
        if not rules and _missing_pack(selector, missing_plugins(settings, registry)) is not None:
            continue  # options of a pack that is not installed (reported once, as a warning)
        if not rules or selector == "ALL":
            raise ConfigError(source, f"rules.{selector}",
                              f"unknown rule code or name{rule_suggestion(selector, registry)}")
        if len(rules) != 1:
            raise ConfigError(source, f"rules.{selector}",
                              f"expected one rule code or name, {selector!r} selects {len(rules)} rules")
        rule = rules[0]
        if not isinstance(table, dict):
            raise ConfigError(source, f"rules.{selector}", "expected a table of options")
        declared = {opt.name: opt for opt in rule.options}
        for opt_name, opt_value in table.items():
            if opt_name not in declared:
                known = ", ".join(declared) or "none"
                raise ConfigError(source, f"rules.{selector}.{opt_name}",
                                  f"unknown option{did_you_mean(opt_name, list(declared))} (known: {known})")
            try:
                declared[opt_name].validate(opt_value)
            except ValueError as exc:
                raise ConfigError(source, f"rules.{selector}.{opt_name}", str(exc)) from None
            options.setdefault(rule.code, {})[opt_name] = opt_value
    return replace(settings, rule_options=options)
