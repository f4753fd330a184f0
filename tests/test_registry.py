"""The rule registry: entry-point loading, local plugins, prefix validation, collisions, lookup."""

from __future__ import annotations

import textwrap
import types
import uuid
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import pytest

import streamlint.registry as registry_module
from streamlint.registry import ENTRY_POINT_GROUP, Registry, RegistryError, _add, load_registry
from streamlint.rule import Rule

BUILTINS = {"SL000", "SL001", "SL002", "SL003", "SL104", "SL105"}


def _rule(code: str, name: str, module: str = "fake_rules") -> type[Rule]:
    return type(f"Rule_{code}", (Rule,), {"code": code, "name": name, "__module__": module,
                                          "__doc__": "## What it does\nTest."})


def _module(name: str, *rules: type[Rule]) -> types.ModuleType:
    module = types.ModuleType(name)
    for rule in rules:
        rule.__module__ = name
        setattr(module, rule.__name__, rule)
    return module


# ---------------------------------------------------------------- entry points
def test_builtins_load_through_the_entry_point() -> None:
    eps = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == "SL"]
    assert [ep.value for ep in eps] == ["streamlint_rules"]
    registry = load_registry()
    assert BUILTINS <= set(registry.rules)
    assert list(registry.rules) == sorted(registry.rules)
    assert all(code.startswith("SL") for code in registry.rules)
    assert registry.rules["SL104"].name == "reserved-stream-priority"
    assert registry.rules["SL000"].engine_emitted and not registry.rules["SL104"].engine_emitted


def test_every_rule_is_well_formed() -> None:
    registry = load_registry()
    names = [rule.name for rule in registry.rules.values()]
    assert len(names) == len(set(names))
    for code, rule in registry.rules.items():
        assert registry_module.CODE_RE.match(code) and registry_module.NAME_RE.match(rule.name)
        assert rule.summary(), code
        assert "## What it does" in rule.documentation(), code


def test_lookup() -> None:
    registry = load_registry()
    assert [r.code for r in registry.lookup("SL104")] == ["SL104"]
    assert [r.code for r in registry.lookup("reserved-stream-priority")] == ["SL104"]
    assert {r.code for r in registry.lookup("SL0")} == {"SL000", "SL001", "SL002", "SL003"}
    assert {"SL104", "SL105"} <= {r.code for r in registry.lookup("SL10")}
    assert len(registry.lookup("ALL")) == len(registry.rules)
    for unknown in ("SL999", "SL9", "sl104", "E501", "", "all", "reserved_stream_priority"):
        assert registry.lookup(unknown) == [] and not registry.is_known_selector(unknown)


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write importable plugin modules (unique names) and return a factory."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(body: str, prefix: str | None = "XT") -> str:
        name = f"slreg_{uuid.uuid4().hex[:10]}"
        head = "from streamlint.rule import Rule\n" + (f"PREFIX = {prefix!r}\n" if prefix is not None else "")
        (tmp_path / f"{name}.py").write_text(head + textwrap.dedent(body), encoding="utf-8")
        return name

    return make


RULE_XT001 = '''
class One(Rule):
    """## What it does
    One."""
    code = "XT001"
    name = "plugin-one"
'''


def _with_entry_points(monkeypatch: pytest.MonkeyPatch, *extra: tuple[str, str]) -> None:
    real = list(entry_points(group=ENTRY_POINT_GROUP))
    fake = real + [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in extra]
    monkeypatch.setattr(registry_module, "entry_points", lambda group: fake if group == ENTRY_POINT_GROUP else [])


def test_third_party_entry_point(monkeypatch: pytest.MonkeyPatch, plugin_dir) -> None:
    module = plugin_dir(RULE_XT001)
    _with_entry_points(monkeypatch, ("XT", module))
    registry = load_registry()
    assert registry.rules["XT001"].name == "plugin-one"
    assert BUILTINS <= set(registry.rules)
    assert [r.code for r in registry.lookup("XT")] == ["XT001"]


@pytest.mark.parametrize("prefix", ["xt", "ABCD", "X1234", "1X", "X-", "", "SL_1"])
def test_invalid_entry_point_prefix(monkeypatch: pytest.MonkeyPatch, plugin_dir, prefix: str) -> None:
    _with_entry_points(monkeypatch, (prefix, plugin_dir(RULE_XT001)))
    with pytest.raises(RegistryError, match="invalid rule prefix"):
        load_registry()


def test_entry_point_prefix_collision(monkeypatch: pytest.MonkeyPatch, plugin_dir) -> None:
    module = plugin_dir(RULE_XT001.replace("XT001", "SL901"))
    _with_entry_points(monkeypatch, ("SL", module))
    with pytest.raises(RegistryError, match=f"plugin '{module}': prefix 'SL' already registered by 'streamlint_rules'"):
        load_registry()


def test_entry_point_code_outside_its_prefix(monkeypatch: pytest.MonkeyPatch, plugin_dir) -> None:
    _with_entry_points(monkeypatch, ("XQ", plugin_dir(RULE_XT001)))
    with pytest.raises(RegistryError, match="rule code 'XT001' does not match its prefix 'XQ'"):
        load_registry()


def test_entry_point_code_collision_with_builtin(monkeypatch: pytest.MonkeyPatch, plugin_dir) -> None:
    module = plugin_dir(RULE_XT001.replace("XT001", "SL104"))
    _with_entry_points(monkeypatch, ("S", module))  # a different, valid prefix that still covers SL104
    with pytest.raises(RegistryError, match=f"plugin '{module}': rule code SL104 collides with streamlint_rules"):
        load_registry()


def test_missing_builtins_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [])
    with pytest.raises(RegistryError, match="built-in rules are not installed"):
        load_registry()


# ---------------------------------------------------------------- rule modules under development ($STREAMLINT_PLUGINS)
def test_local_plugin(plugin_dir) -> None:
    registry = load_registry(dev_plugins=(plugin_dir(RULE_XT001),))
    assert "XT001" in registry.rules and BUILTINS <= set(registry.rules)


def test_dev_plugins_come_from_the_environment_and_packs_are_known(plugin_dir, monkeypatch) -> None:
    name = plugin_dir(RULE_XT001)
    monkeypatch.setenv("STREAMLINT_PLUGINS", f" {name} ,")
    registry = load_registry()
    assert "XT001" in registry.rules
    assert registry.missing_plugins(["SL", "streamlint_rules", "XT", name, "XQ"]) == ["XQ"]
    with pytest.raises(TypeError):  # a configuration's `plugins` can never be passed in by position
        load_registry(("XT",))  # type: ignore[misc]


@pytest.mark.parametrize("prefix", [None, "xt", "TOOLONG", 7])
def test_local_plugin_needs_a_valid_prefix(plugin_dir, prefix) -> None:
    name = plugin_dir(RULE_XT001, prefix=None)
    if prefix is not None:
        path = Path(__import__("sys").path[0]) / f"{name}.py"
        path.write_text(path.read_text(encoding="utf-8") + f"PREFIX = {prefix!r}\n", encoding="utf-8")
    with pytest.raises(RegistryError, match=r"must define PREFIX matching \^\[A-Z\]\{1,3\}\[0-9\]\{0,3\}\$"):
        load_registry(dev_plugins=(name,))


def test_local_plugin_import_error() -> None:
    with pytest.raises(RegistryError, match="cannot import plugin module 'no_such_plugin_module_x'"):
        load_registry(dev_plugins=("no_such_plugin_module_x",))


def test_local_plugin_prefix_collision(plugin_dir) -> None:
    with pytest.raises(RegistryError, match="prefix 'SL' already registered"):
        load_registry(dev_plugins=(plugin_dir(RULE_XT001.replace("XT001", "SL901"), prefix="SL"),))
    first, second = plugin_dir(RULE_XT001), plugin_dir(RULE_XT001.replace("XT001", "XT002"))
    with pytest.raises(RegistryError, match="prefix 'XT' already registered"):
        load_registry(dev_plugins=(first, second))


def test_local_plugin_rule_name_collision(plugin_dir) -> None:
    module = plugin_dir(RULE_XT001.replace("plugin-one", "invalid-stream-tag"))
    with pytest.raises(RegistryError, match="rule name 'invalid-stream-tag' of XT001 is already used by SL105"):
        load_registry(dev_plugins=(module,))


# ---------------------------------------------------------------- _add
def test_add_collects_rules_and_checks_codes() -> None:
    rules: dict[str, type[Rule]] = {}
    one, two = _rule("AB001", "ab-one"), _rule("AB002", "ab-two")
    _add(rules, "AB", _module("ab_pack", one, two), "plugin 'ab_pack'")
    assert rules == {"AB001": one, "AB002": two}
    _add(rules, "AB", _module("ab_pack", one), "plugin 'ab_pack'")  # the same class again is fine
    with pytest.raises(RegistryError, match="plugin 'other': rule code AB001 collides with ab_pack"):
        _add(rules, "A", _module("other", _rule("AB001", "other-one")), "plugin 'other'")
    for code in ("AB01", "AB0001", "ab001", "CD001"):
        with pytest.raises(RegistryError, match="does not match its prefix"):
            _add({}, "AB", _module("bad", _rule(code, "bad-code")), "plugin 'bad'")


@pytest.mark.parametrize("name", ["Bad_Name", "bad name", "", "-bad", "bad-", "SL104"])
def test_add_rejects_non_kebab_names(name: str) -> None:
    with pytest.raises(RegistryError, match="kebab-case name"):
        _add({}, "AB", _module("named", _rule("AB001", name)), "plugin 'named'")


def test_add_ignores_imported_and_abstract_classes() -> None:
    module = _module("mixed_pack", _rule("AB001", "ab-one"))
    module.Rule = Rule  # the base class, imported
    module.Foreign = _rule("CD001", "foreign", module="elsewhere")  # imported from another module
    module.Base = type("Base", (Rule,), {"__module__": "mixed_pack"})  # no `code` of its own
    rules: dict[str, type[Rule]] = {}
    _add(rules, "AB", module, "plugin 'mixed_pack'")
    assert list(rules) == ["AB001"]


def test_registry_dataclass_lookup_by_name() -> None:
    one = _rule("AB001", "ab-one")
    registry = Registry({"AB001": one})
    assert registry.by_name() == {"ab-one": one}
    assert registry.lookup("ab-one") == [one] and registry.lookup("AB") == [one]


def test_broken_entry_point_is_a_registry_error(monkeypatch: pytest.MonkeyPatch, plugin_dir) -> None:
    _with_entry_points(monkeypatch, ("XB", plugin_dir("raise ImportError('needs torch')\n", prefix=None)))
    with pytest.raises(RegistryError, match="failed to load: ImportError: needs torch"):
        load_registry()
    _with_entry_points(monkeypatch, ("XC", "no_such_module_for_entry_point"))
    with pytest.raises(RegistryError, match="failed to load: ModuleNotFoundError"):
        load_registry()


def test_light_entry_point_scan_agrees_with_importlib_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry reads entry_points.txt itself (importlib.metadata's import costs ~40 ms a run): it must
    find what importlib.metadata finds, first distribution of a name on the path winning."""
    from importlib.metadata import entry_points as metadata_entry_points

    first, second = tmp_path / "a", tmp_path / "b"
    for base, value in ((first, "xt_pack.rules:RULES"), (second, "shadowed_pack")):
        info = base / "xt_pack-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xt-pack\nVersion: 1.0\n", encoding="utf-8")
        (info / "entry_points.txt").write_text(
            f"# comment\n[console_scripts]\nxt = xt_pack:main\n\n[streamlint.rules]\nXT = {value}\n", encoding="utf-8")
    (first / "xt_pack").mkdir()
    (first / "xt_pack" / "__init__.py").write_text("", encoding="utf-8")
    (first / "xt_pack" / "rules.py").write_text("RULES = 'loaded'\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    for group in (ENTRY_POINT_GROUP, "console_scripts", "pytest11"):
        light = sorted((e.name, e.value) for e in registry_module._scan_entry_points(group))
        assert light == sorted((e.name, e.value) for e in metadata_entry_points(group=group)), group
    [xt] = [e for e in registry_module.entry_points(ENTRY_POINT_GROUP) if e.name == "XT"]
    assert xt.value == "xt_pack.rules:RULES" and xt.load() == "loaded"
