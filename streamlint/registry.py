"""One registry for every rule: built-ins and third-party packs load through the same entry points."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from streamlint.rule import Rule

ENTRY_POINT_GROUP = "streamlint.rules"
BUILTIN_MODULE = "streamlint_rules"
PREFIX_RE = re.compile(r"^[A-Z]{1,3}[0-9]{0,3}$")
CODE_RE = re.compile(r"^[A-Z]{1,3}[0-9]{3}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


class RegistryError(Exception):
    pass


@dataclass(frozen=True)
class _EntryPoint:
    """The part of ``importlib.metadata.EntryPoint`` the registry uses."""

    name: str
    value: str
    group: str

    def load(self) -> Any:
        module_name, _, attrs = self.value.partition(":")
        found: Any = importlib.import_module(module_name.strip())
        for attr in filter(None, attrs.split("[")[0].strip().split(".")):
            found = getattr(found, attr)
        return found


def entry_points(group: str) -> list[Any]:
    """The entry points of ``group`` in the installed distributions.

    Read directly from the ``*.dist-info`` / ``*.egg-info`` directories on ``sys.path`` when the import
    system is the standard one (plain directories, no finder of distributions besides the path finder):
    importing ``importlib.metadata`` alone cost ~40 ms of every run, more than reading the few files.
    Anything else (zip archives, custom finders) goes through ``importlib.metadata`` itself."""
    found = _scan_entry_points(group)
    if found is None:
        from importlib.metadata import entry_points as metadata_entry_points

        return list(metadata_entry_points(group=group))
    return found


_STANDARD_FINDERS = ("BuiltinImporter", "FrozenImporter", "PathFinder")


def _scan_entry_points(group: str) -> list[_EntryPoint] | None:
    for finder in sys.meta_path:
        name = getattr(finder, "__name__", type(finder).__name__)
        if hasattr(finder, "find_distributions") and name not in _STANDARD_FINDERS:
            return None
    seen: set[str] = set()
    found: list[_EntryPoint] = []
    for base in sys.path:
        directory = base or "."
        if not os.path.isdir(directory):
            if os.path.exists(directory):
                return None  # a zip archive or an egg on the path: importlib.metadata knows those
            continue
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for entry in names:
            if not entry.endswith((".dist-info", ".egg-info")):
                continue
            dist = re.sub(r"[-_.]+", "-", entry.rsplit(".", 1)[0].partition("-")[0]).lower()
            if dist in seen:
                continue  # the first distribution of a name on the path wins, as in importlib.metadata
            seen.add(dist)
            try:
                with open(os.path.join(directory, entry, "entry_points.txt"), encoding="utf-8") as fh:
                    text = fh.read()
            except OSError:
                continue
            found.extend(_parse_entry_points(text, group))
    return found


def _parse_entry_points(text: str, group: str) -> list[_EntryPoint]:
    found: list[_EntryPoint] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if section == group and "=" in line:
            name, _, value = line.partition("=")
            found.append(_EntryPoint(name.strip(), value.strip(), group))
    return found


@dataclass(frozen=True)
class Registry:
    rules: dict[str, type[Rule]]  # code -> rule class, sorted by code
    # the loaded packs: entry-point names (= code prefixes) and module names
    packs: frozenset[str] = frozenset()

    def missing_plugins(self, names: "tuple[str, ...] | list[str]") -> list[str]:
        """The packs a configuration's ``plugins`` names that are not installed."""
        return [name for name in names if name not in self.packs]

    def by_name(self) -> dict[str, type[Rule]]:
        return {rule.name: rule for rule in self.rules.values()}

    def lookup(self, selector: str) -> list[type[Rule]]:
        """Rules matched by a code, a code prefix, a kebab-case name or ``ALL``."""
        if selector == "ALL":
            return list(self.rules.values())
        if selector in self.rules:
            return [self.rules[selector]]
        named = self.by_name().get(selector)
        if named is not None:
            return [named]
        if PREFIX_RE.match(selector):
            return [r for code, r in self.rules.items() if code.startswith(selector)]
        return []

    def is_known_selector(self, selector: str) -> bool:
        return bool(self.lookup(selector))


def _rule_classes(module: ModuleType) -> list[type[Rule]]:
    modules = [module]
    if hasattr(module, "__path__"):
        for info in sorted(pkgutil.iter_modules(module.__path__), key=lambda m: m.name):
            if not info.name.startswith("_"):
                modules.append(importlib.import_module(f"{module.__name__}.{info.name}"))
    found: list[type[Rule]] = []
    for mod in modules:
        for value in vars(mod).values():
            if isinstance(value, ModuleType):
                continue  # (an attribute test on a lazily imported module would import it)
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == mod.__name__
                and "code" in vars(value)
            ):
                found.append(value)
    return found


def _add(rules: dict[str, type[Rule]], prefix: str, module: ModuleType, origin: str) -> None:
    for rule in _rule_classes(module):
        if not isinstance(rule.code, str) or not CODE_RE.match(rule.code) or not rule.code.startswith(prefix):
            raise RegistryError(f"{origin}: rule code {rule.code!r} does not match its prefix {prefix!r}")
        if rule.code in rules and rules[rule.code] is not rule:
            raise RegistryError(
                f"{origin}: rule code {rule.code} collides with {rules[rule.code].__module__}"
            )
        # names are selectors too (`--select invalid-stream-tag`): kebab-case and unique
        name = getattr(rule, "name", None)
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise RegistryError(f"{origin}: rule {rule.code} needs a kebab-case name, got {name!r}")
        clash = next((r for r in rules.values() if r.name == name and r is not rule), None)
        if clash is not None:
            raise RegistryError(f"{origin}: rule name {name!r} of {rule.code} is already used by {clash.code}")
        rules[rule.code] = rule


DEV_PLUGINS_ENV = "STREAMLINT_PLUGINS"


def dev_plugin_modules() -> tuple[str, ...]:
    """Rule modules under development, named by the user (never by a linted repository): the
    comma-separated import names in ``$STREAMLINT_PLUGINS``, imported from the ordinary ``sys.path``."""
    return tuple(name.strip() for name in os.environ.get(DEV_PLUGINS_ENV, "").split(",") if name.strip())


def _import_plugin(name: str) -> ModuleType:
    """Import a rule module the user named in ``$STREAMLINT_PLUGINS`` (``sys.path`` is not changed)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise RegistryError(f"cannot import plugin module {name!r} (from ${DEV_PLUGINS_ENV}): {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the plugin's own code raised while importing
        raise RegistryError(f"plugin module {name!r} failed to import: {type(exc).__name__}: {exc}") from None


def load_registry(*, dev_plugins: tuple[str, ...] | None = None) -> Registry:
    """Load every rule registered under the ``streamlint.rules`` entry-point group (installed
    distributions), plus the rule modules under development the user names in ``$STREAMLINT_PLUGINS``
    (``dev_plugins`` overrides it). A linted repository's configuration never reaches this function:
    its ``plugins`` key only names installed packs it expects (see :meth:`Registry.missing_plugins`)."""
    rules: dict[str, type[Rule]] = {}
    seen_prefixes: dict[str, str] = {}
    packs: set[str] = set()
    # the built-ins first, so that a collision is blamed on the third-party pack
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP),
                     key=lambda e: (e.value != BUILTIN_MODULE, e.name, e.value)):
        if not PREFIX_RE.match(ep.name):
            raise RegistryError(f"plugin {ep.value!r}: invalid rule prefix {ep.name!r}")
        if ep.name in seen_prefixes and seen_prefixes[ep.name] != ep.value:
            raise RegistryError(
                f"plugin {ep.value!r}: prefix {ep.name!r} already registered by {seen_prefixes[ep.name]!r}"
            )
        seen_prefixes[ep.name] = ep.value
        try:
            module = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken third-party pack: a message, not a traceback
            raise RegistryError(f"plugin {ep.value!r} failed to load: {type(exc).__name__}: {exc}") from None
        _add(rules, ep.name, module, f"plugin {ep.value!r}")
        packs.update((ep.name, ep.value.partition(":")[0].strip()))
    for name in dev_plugin_modules() if dev_plugins is None else dev_plugins:
        module = _import_plugin(name)
        prefix = getattr(module, "PREFIX", None)
        if not isinstance(prefix, str) or not PREFIX_RE.match(prefix):
            raise RegistryError(f"plugin module {name!r} must define PREFIX matching {PREFIX_RE.pattern}")
        if prefix in seen_prefixes and seen_prefixes[prefix] != name:
            raise RegistryError(f"plugin module {name!r}: prefix {prefix!r} already registered")
        seen_prefixes[prefix] = name
        _add(rules, prefix, module, f"plugin {name!r}")
        packs.update((prefix, name))
    if "SL000" not in rules:
        raise RegistryError("the built-in rules are not installed (entry point 'SL' missing)")
    return Registry(dict(sorted(rules.items())), frozenset(packs))
