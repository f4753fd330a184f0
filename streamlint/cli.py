"""Command line: `streamlint [check] PATH...`, `rule`, `server`, `graph`, `clean`."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from streamlint import __version__
from streamlint.config import OUTPUT_FORMATS, ConfigError, Settings, configured_plugins, load_settings
from streamlint.discovery import discover
from streamlint.engine import Engine, FileReport
from streamlint.fingerprint import fingerprints
from streamlint.registry import Registry, RegistryError, load_registry
from streamlint.reporting import ReportContext, render

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _DefaultCheckGroup(click.Group):
    """`streamlint PATH...` means `streamlint check PATH...` (like ruff)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args = ["check", *args]
        return super().parse_args(ctx, args)


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _fail(message: str) -> "click.exceptions.Exit":
    click.echo(f"streamlint: error: {message}", err=True)
    return click.exceptions.Exit(EXIT_ERROR)


def _registry(plugins: tuple[str, ...] = ()) -> Registry:
    try:
        return load_registry(plugins)
    except RegistryError as exc:
        raise _fail(str(exc)) from None


@click.group(cls=_DefaultCheckGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="streamlint")
def main() -> None:
    """streamlint: static analysis for multi-stream model code (TorchAir, torch_npu, npugraph_ex, CUDA)."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--select", multiple=True, help="Rule codes, prefixes or names to enable (replaces the configured set).")
@click.option("--extend-select", multiple=True, help="Rules to enable in addition.")
@click.option("--ignore", multiple=True, help="Rules to disable.")
@click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), default=None)
@click.option("-o", "--output-file", type=click.Path(dir_okay=False), default=None)
@click.option("--statistics", is_flag=True, help="Show counts per rule.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None)
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--stdin-filename", default=None, help="Read the source from stdin, reporting it under this name.")
@click.option("--ignore-noqa", is_flag=True, help="Ignore every suppression comment.")
@click.option("--show-settings", is_flag=True, help="Print the effective settings and exit.")
@click.option("--show-files", is_flag=True, help="Print the files that would be linted and exit.")
@click.option("--force-exclude", is_flag=True, help="Apply excludes to paths named on the command line too.")
@click.option("--mode", type=click.Choice(["auto", "ge", "reduce-overhead", "npugraph_ex", "eager", "cuda"]), default=None)
@click.option("-q", "--quiet", is_flag=True)
@click.option("-v", "--verbose", is_flag=True)
def check(paths: tuple[str, ...], **opts: Any) -> None:
    """Lint PATHS (files or directories; `-` reads stdin)."""
    code = run_check(list(paths), opts)
    raise click.exceptions.Exit(code)


def _overrides(opts: dict[str, Any]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for key in ("select", "extend_select", "ignore"):
        if opts.get(key):
            overrides[key.replace("_", "-")] = _split(opts[key])
    if opts.get("mode"):
        overrides["mode"] = opts["mode"]
    return overrides


def run_check(paths: list[str], opts: dict[str, Any]) -> int:
    stdin_name = opts.get("stdin_filename")
    use_stdin = "-" in paths or stdin_name is not None
    paths = [p for p in paths if p != "-"]
    if not paths and not use_stdin:
        paths = ["."]
    start = Path(stdin_name or (paths[0] if paths else ".")).absolute()
    try:
        config_file = Path(opts["config_file"]) if opts.get("config_file") else None
        if config_file is not None and not config_file.is_file():
            raise ConfigError(str(config_file), None, "no such configuration file")
        # plugin rules must be registered before selectors and rule options are validated
        registry = _registry(configured_plugins(start, config_file, bool(opts.get("isolated"))))
        settings = load_settings(registry, start, config_file, bool(opts.get("isolated")), _overrides(opts))
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    if opts.get("force_exclude"):
        settings = settings.with_overrides(force_exclude=True)
    if opts.get("show_settings"):
        _show_settings(settings, registry)
        return EXIT_OK
    exclude = (*settings.exclude, *settings.extend_exclude)
    found = discover(paths, Path(settings.project_root), exclude, settings.respect_gitignore, settings.force_exclude)
    errors = [f"{path}: {message}" for path, message in found.errors]
    if opts.get("show_files"):
        for path in found.files:
            click.echo(path)
        return EXIT_ERROR if errors else EXIT_OK
    engine = Engine(settings, registry, ignore_noqa=bool(opts.get("ignore_noqa")))
    reports: list[FileReport] = []
    if use_stdin:
        name = stdin_name or "-"
        data = sys.stdin.buffer.read()
        engine.set_override(os.path.abspath(name), data)
        reports.append(engine.lint_file(os.path.abspath(name) if stdin_name else name))
    reports.extend(_lint_with_progress(engine, found.files, quiet=bool(opts.get("quiet"))))
    for path, message in found.warnings:
        if not opts.get("quiet"):
            click.echo(f"streamlint: warning: {path}: {message}", err=True)
    for message in errors:
        click.echo(f"streamlint: error: {message}", err=True)
    findings = [f for r in reports for f in r.findings]
    # sorted by the path as displayed (finding paths may be given relative or absolute)
    findings.sort(key=lambda f: (engine.relative(f.path), *f.sort_key[1:]))
    sources = {os.path.abspath(r.path): r.source for r in reports if r.source is not None}

    def line_text(path: str, line: int) -> str:
        src = sources.get(os.path.abspath(path))
        if src is None:
            try:
                src = engine.parse(path).source
            except Exception:  # noqa: BLE001 - excerpt only
                src = None
        return src.line_text(line) if src is not None else ""

    ctx = ReportContext(
        findings=findings,
        registry=registry,
        line_text=line_text,
        relpath=engine.relative,
        files_checked=len(reports),
        statistics=bool(opts.get("statistics")),
    )
    ctx.fingerprints = fingerprints(findings, line_text, engine.relative)
    fmt = opts.get("output_format") or settings.output_format or "full"
    output_file = opts.get("output_file")
    if output_file:
        buffer = io.StringIO()
        render(fmt, ctx, buffer)
        Path(output_file).write_text(buffer.getvalue(), encoding="utf-8")
    elif not (opts.get("quiet") and fmt == "full" and not findings):
        stream = click.get_text_stream("stdout")
        ctx.color = fmt == "full" and stream.isatty() and "NO_COLOR" not in os.environ
        render(fmt, ctx, stream)
    if errors or any(f.code == "SL000" for f in findings):
        return EXIT_ERROR
    if findings and not opts.get("exit_zero"):
        return EXIT_FINDINGS
    return EXIT_OK


def _lint_with_progress(engine: Engine, files: list[str], quiet: bool) -> list[FileReport]:
    err = click.get_text_stream("stderr")
    if quiet or len(files) < 200 or not err.isatty():
        return engine.lint_paths(files)
    from rich.console import Console
    from rich.progress import Progress

    reports = []
    with Progress(console=Console(file=err), transient=True) as progress:
        task = progress.add_task("linting", total=len(files))
        for path in files:
            reports.append(engine.lint_file(path))
            progress.advance(task)
    return reports


def _show_settings(settings: Settings, registry: Registry) -> None:
    click.echo(f"config file: {settings.config_path or '(none)'}")
    click.echo(f"project root: {settings.project_root}")
    for key in ("select", "extend_select", "ignore", "exclude", "extend_exclude", "respect_gitignore", "mode",
                "fixable", "unfixable", "unsafe_fixes", "output_format", "baseline", "cache_dir", "plugins",
                "stream_switch_wrappers", "wait_wrappers", "per_file_ignores", "per_path_mode", "rule_options"):
        click.echo(f"{key.replace('_', '-')}: {getattr(settings, key)!r}")
    click.echo("rules:")
    enabled = settings.enabled_codes(registry)
    disabled = settings.disabled_reasons(registry)
    for code, rule in registry.rules.items():
        state = f"on  ({enabled[code]})" if code in enabled else f"off ({disabled[code]})"
        click.echo(f"  {code} {rule.name:<40} {state}")


@main.command()
@click.argument("selector", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rule(selector: str | None, show_all: bool, output_format: str) -> None:
    """Show a rule's documentation (by code or name), or list all rules."""
    registry = _registry()
    if show_all:
        rules = list(registry.rules.values())
    else:
        if not selector:
            raise _fail("give a rule code or name, or --all")
        rules = [r for r in registry.lookup(selector) if selector in (r.code, r.name)]
        if not rules:
            raise _fail(f"unknown rule {selector!r}")
    if output_format == "json":
        data = [
            {"code": r.code, "name": r.name, "severity": r.severity.value, "confidence": r.confidence.value,
             "fix": r.fix_safety.value if r.fix_safety else None, "summary": r.summary(),
             "options": [{"name": o.name, "type": o.type.__name__, "default": o.default,
                          "description": o.description} for o in r.options],
             "documentation": r.documentation()}
            for r in rules
        ]
        click.echo(json.dumps(data if show_all else data[0], indent=2))
        return
    if show_all:
        for r in rules:
            click.echo(f"{r.code}  {r.name:<38} {r.severity.value:<8} {r.summary()}")
        return
    r = rules[0]
    click.echo(f"# {r.name} ({r.code})\n")
    click.echo(f"Default severity: {r.severity.value}; confidence: {r.confidence.value}; "
               f"fix: {r.fix_safety.value if r.fix_safety else 'none'}\n")
    click.echo(r.documentation())
    if r.options:
        click.echo("\n## Options")
        for o in r.options:
            click.echo(f"- `{o.name}` ({o.type.__name__}, default {o.default!r}): {o.description}")
