"""Command line: `streamlint [check] PATH...`, `rule`, `server`, `graph`, `clean`."""

from __future__ import annotations

import gc

# (tune_gc's threshold from the start: the imports below build ~100,000 objects and no garbage cycle, and the
# collector's ~30 passes over them cost ~30 ms of every run; tune_gc freezes what they built once loaded)
gc.set_threshold(100_000, 50, 100)

import io
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn

import click

from streamlint import __version__
from streamlint.config import (OUTPUT_FORMATS, ConfigError, Settings, SettingsResolver, load_settings,
                               missing_plugins)
from streamlint.discovery import discover
from streamlint.engine import Engine, FileReport

if TYPE_CHECKING:  # parallel imports the cache and the pool machinery: loaded when linting; fixes with --fix
    from streamlint.fixes import FixPolicy, FixResult
    from streamlint.parallel import RunStats
from streamlint.baseline import BaselineError, load_baseline, write_baseline
from streamlint.baseline import check_location as check_baseline_location
from streamlint.finding import Finding, FixSafety, sure_enough
from streamlint.fingerprint import fingerprints
from streamlint.profile import Profiler, phase
from streamlint.registry import Registry, RegistryError, load_registry
from streamlint.reporting import ReportContext, relative_to_root, render
from streamlint.source import SourceFile

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _DefaultCheckGroup(click.Group):
    """`streamlint PATH...` means `streamlint check PATH...` (like ruff)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            if args and args[0].isidentifier() and not os.path.lexists(args[0]):
                # `streamlint chekc .` must not lint `.`: a word close to a command is a typo
                import difflib

                close = difflib.get_close_matches(args[0], list(self.commands), n=1, cutoff=0.6)
                if close:
                    click.echo(f"streamlint: error: `{args[0]}` is neither a path nor a command; did you mean "
                               f"`{close[0]}`? (commands: {', '.join(sorted(self.commands))})", err=True)
                    ctx.exit(EXIT_ERROR)
            args = ["check", *args]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Ctrl-C: one line and exit status 130 (click would say "Aborted!" and exit 1, which means
        "findings")."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _interrupted()


EXIT_INTERRUPTED = 130


def _interrupted() -> NoReturn:
    from .parallel import silence_thread_errors

    silence_thread_errors()
    try:
        sys.stderr.write("streamlint: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    raise click.exceptions.Exit(EXIT_INTERRUPTED) from None


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _fail(message: str) -> "click.exceptions.Exit":
    click.echo(f"streamlint: error: {message}", err=True)
    return click.exceptions.Exit(EXIT_ERROR)


def _registry() -> Registry:
    """The installed rule packs (entry points) and $STREAMLINT_PLUGINS; never anything a config names."""
    try:
        return load_registry()
    except RegistryError as exc:
        raise _fail(str(exc)) from None


def _warn_missing_plugins(settings: Settings, registry: Registry, quiet: bool = False) -> None:
    for name in missing_plugins(settings, registry) if not quiet else ():
        click.echo(f"streamlint: warning: {settings.config_path or 'configuration'}: plugins: rule pack "
                   f"{name!r} is not installed; its rules are not available", err=True)


@click.group(cls=_DefaultCheckGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="streamlint")
def main() -> None:
    """streamlint: static analysis for multi-stream model code (TorchAir, torch_npu, npugraph_ex, CUDA)."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--select", multiple=True, help="Rule codes, prefixes or names to enable (replaces the configured set).")
@click.option("--extend-select", multiple=True, help="Rules to enable in addition.")
@click.option("--ignore", multiple=True, help="Rules to disable.")
@click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), default=None,
              help="How findings are printed (default: `output-format` from the configuration, else full).")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False), default=None,
              help="Write the report to this file instead of stdout.")
@click.option("--statistics", is_flag=True, help="Show counts per rule.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Use this configuration file for every file (instead of each file's closest one).")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--stdin-filename", default=None, help="Read the source from stdin, reporting it under this name.")
@click.option("--ignore-noqa", is_flag=True, help="Ignore every suppression comment.")
@click.option("--show-settings", is_flag=True,
              help="Print which configuration governs the first PATH (default: the current directory), its "
                   "effective settings and why each rule is on or off, and exit.")
@click.option("--show-files", is_flag=True, help="Print the files that would be linted and exit.")
@click.option("--force-exclude", is_flag=True, help="Apply excludes to paths named on the command line too.")
@click.option("--follow-external-symlinks", is_flag=True,
              help="Follow symbolic links to directories outside the project (not followed by default).")
@click.option("--exclude", "exclude", multiple=True,
              help="Patterns (gitignore syntax, comma-separated) to exclude, replacing the configured `exclude`.")
@click.option("--extend-exclude", "extend_exclude", multiple=True,
              help="Patterns to exclude in addition to the configured ones.")
@click.option("--mode", type=click.Choice(["auto", "ge", "reduce-overhead", "npugraph_ex", "eager", "cuda"]), default=None,
              help="Execution path to assume for every file (default: `mode` from the configuration, else auto: "
                   "inferred from compile sites and API families).")
@click.option("--min-confidence", "min_confidence", type=click.Choice(["high", "medium", "low"]), default=None,
              help="Report only findings at least this sure (default: `min-confidence` from the configuration, "
                   "else low: every finding).")
@click.option("--fix/--no-fix", default=False, help="Apply fixes (safe ones unless --unsafe-fixes).")
@click.option("--fix-only", is_flag=True,
              help="Apply fixes, but do not report (or exit non-zero for) the findings that remain.")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also apply (and offer) unsafe fixes.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff instead of writing them.")
@click.option("--show-fixes", is_flag=True, help="List the fixes that were applied.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when anything was fixed.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` comments for every finding.")
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False), default=None,
              help="Report only findings not recorded in this baseline file.")
@click.option("--write-baseline", type=click.Path(dir_okay=False), default=None,
              help="Record the current findings in this baseline file.")
@click.option("-q", "--quiet", is_flag=True,
              help="Print the findings only: no summary lines, run summary, progress, warnings or notes.")
@click.option("-v", "--verbose", is_flag=True,
              help="Also print which configuration governs how many files, how many findings a baseline "
                   "hid (stderr), and tracebacks of internal errors.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Colour the full format: auto = on a terminal unless NO_COLOR is set.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=None,
              help="Worker processes (default: CPU count; 1: no pool).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, envvar="STREAMLINT_CACHE_DIR",
              help="The result cache directory (env: STREAMLINT_CACHE_DIR); may be outside the project.")
@click.option("--profile", is_flag=True, help="Print time per phase and the slowest files to stderr.")
def check(paths: tuple[str, ...], **opts: Any) -> None:
    """Lint PATHS (files or directories; `-` reads stdin)."""
    started = opts["_started"] = time.perf_counter()
    profiler = opts["_profiler"] = Profiler() if opts.get("profile") else None
    tune_gc()
    try:
        code = run_check(list(paths), opts)
        if opts.get("_stats") is not None:
            click.echo(_run_summary(opts["_stats"], time.perf_counter() - started), err=True)
    except (click.exceptions.Exit, click.ClickException, KeyboardInterrupt):
        raise
    except BrokenPipeError:  # `streamlint ... | head`: the reader went away; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise click.exceptions.Exit(EXIT_FINDINGS) from None
    except Exception as exc:  # no traceback reaches the user (unless asked for with -v)
        if opts.get("verbose"):
            import traceback

            traceback.print_exc()
        raise _fail(f"internal error: {type(exc).__name__}: {exc} (run with -v for the traceback, and please "
                    "report it)") from None
    if profiler is not None:
        profiler.stop_all()
        profiler.render(_stream("stderr"), time.perf_counter() - started)
    raise click.exceptions.Exit(code)


def run() -> None:
    """The console entry point: :func:`main`, then an immediate process exit once the output is
    flushed. Freeing a run's heap object by object at interpreter shutdown took ~0.5 s on the bench
    corpus and serves nothing (the cache and every output are written by then)."""
    try:
        try:
            main()
        except KeyboardInterrupt:  # outside a command (while parsing the arguments, ...)
            _interrupted()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = EXIT_ERROR
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass
    os._exit(code if isinstance(code, int) else 0 if code is None else EXIT_ERROR)


def _stream(name: str):
    """The current text stream (``click.get_text_stream`` is deprecated; CliRunner swaps sys.std*)."""
    return sys.stderr if name == "stderr" else sys.stdout


def tune_gc() -> None:
    """Fewer cyclic collections for a run that builds many objects and keeps the parsed trees (they hold
    no garbage cycles worth collecting early); the modules imported so far are moved out of the
    collector's sight. Measured on the bench corpus: between no difference and ~15% of a serial run,
    within the noise of a shared machine; peak memory unchanged."""
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def _overrides(opts: dict[str, Any]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for key in ("select", "extend_select", "ignore"):
        if opts.get(key):
            overrides[key.replace("_", "-")] = _split(opts[key])
    for key in ("exclude", "extend_exclude"):
        if opts.get(key):
            overrides[key.replace("_", "-")] = _split(opts[key])
    if opts.get("mode"):
        overrides["mode"] = opts["mode"]
    if opts.get("min_confidence"):
        overrides["min-confidence"] = opts["min_confidence"]
    if opts.get("cache_dir"):
        overrides["cache-dir"] = os.path.abspath(opts["cache_dir"])
    return overrides


def display_path(path: str, cwd: str | None = None) -> str:
    """A path as text formats print it: relative to the current directory when inside it (so that
    terminals and editors open it), else absolute; ``-`` (stdin) as is."""
    if path == "-":
        return path
    cwd = cwd or os.getcwd()
    absolute = os.path.abspath(path)
    if absolute == cwd:
        return "."
    prefix = cwd if cwd.endswith(os.sep) else cwd + os.sep
    rel = absolute[len(prefix):] if absolute.startswith(prefix) else absolute
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


def repository_root(cwd: str) -> str:
    """The top of the repository containing ``cwd`` (a ``.git`` entry), else ``cwd``: the base of
    SARIF's ``%SRCROOT%`` and of the paths of the ``github`` format."""
    probe = cwd
    while True:
        if os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return cwd
        probe = parent


def run_check(paths: list[str], opts: dict[str, Any]) -> int:
    stdin_name = opts.get("stdin_filename")
    use_stdin = "-" in paths or stdin_name is not None
    paths = [p for p in paths if p != "-"]
    if not paths and not use_stdin:
        paths = ["."]
    cwd = os.getcwd()
    isolated = bool(opts.get("isolated"))
    try:
        config_file = Path(opts["config_file"]) if opts.get("config_file") else None
        if config_file is not None and not config_file.is_file():
            raise ConfigError(str(config_file), None, "no such configuration file")
        registry = _registry()
        resolver = SettingsResolver(registry, config_file, isolated, _overrides(opts))
        resolver.fallback_roots = [os.path.abspath(p) if os.path.isdir(p) else os.path.dirname(os.path.abspath(p))
                                   for p in paths]
        # run-wide options (output format, baseline, fix display) come from the current directory's
        # configuration; everything that changes what is found in a file, from the file's own
        settings = resolver.settings_for(os.path.abspath(stdin_name) if stdin_name else cwd)
        if opts.get("show_settings"):
            target = stdin_name or (paths[0] if paths else cwd)
            _show_settings(resolver.settings_for(os.path.abspath(target)), registry, target)
            return EXIT_OK
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    _warn_missing_plugins(settings, registry, bool(opts.get("quiet")))
    force_exclude = bool(opts.get("force_exclude") or settings.force_exclude)
    profiler = opts.get("_profiler")
    config_errors: list[str] = []

    def rules_for(directory: str) -> tuple[str, tuple[str, ...], bool]:
        try:
            s = resolver.settings_for_dir(directory)
        except ConfigError as exc:
            config_errors.append(str(exc))
            s = settings
        return s.project_root, (*s.exclude, *s.extend_exclude), s.respect_gitignore

    with phase(profiler, "discover"):
        found = discover(paths, Path(settings.project_root), force_exclude=force_exclude,
                         follow_external_symlinks=bool(opts.get("follow_external_symlinks")), rules_for=rules_for)
    if config_errors:
        raise _fail(config_errors[0])
    errors = [f"{path}: {message}" for path, message in found.errors]
    if opts.get("show_files"):
        for path in found.files:
            click.echo(display_path(path, cwd))
        return EXIT_ERROR if errors else EXIT_OK
    # the files grouped by the settings that govern them: one engine (and result cache) per group
    groups: dict[int, tuple[Settings, list[str]]] = {}
    try:
        for path in found.files:
            s = resolver.settings_for_file(path)
            groups.setdefault(id(s), (s, []))[1].append(path)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    for s, _files in groups.values():
        if s.config_path != settings.config_path:  # each governing configuration's missing packs, once
            _warn_missing_plugins(s, registry, bool(opts.get("quiet")))
    engines: dict[int, Engine] = {}

    def engine_of(s: Settings) -> Engine:
        if id(s) not in engines:
            engines[id(s)] = Engine(s, registry, ignore_noqa=bool(opts.get("ignore_noqa")))
            engines[id(s)].profiler = profiler
        return engines[id(s)]

    path_engine: dict[str, Engine] = {}
    reports_by_path: dict[str, FileReport] = {}
    stdin_report: FileReport | None = None
    stdin_engine: Engine | None = None
    if use_stdin:
        name = stdin_name or "-"
        data = sys.stdin.buffer.read()
        stdin_engine = engine_of(settings)
        stdin_engine.set_override(os.path.abspath(name), data)
        stdin_report = stdin_engine.lint_file(os.path.abspath(name) if stdin_name else name)
        path_engine[stdin_report.path] = stdin_engine
    if opts.get("fix_only") and not opts.get("diff"):
        opts["fix"] = True
    fix_mode = bool(opts.get("fix") or opts.get("diff"))
    fix_results: list[FixResult] = []
    policies: dict[int, FixPolicy] = {}

    def policy_of(s: Settings) -> FixPolicy:
        from streamlint.fixes import FixPolicy  # (fixes and their imports: only for --fix / --diff)

        if id(s) not in policies:
            policies[id(s)] = FixPolicy.from_settings(s, registry, opts.get("unsafe_fixes"))
        return policies[id(s)]

    relpath = lambda p: display_path(p, cwd)  # noqa: E731
    if fix_mode:
        from streamlint.fixes import fix_file

        if use_stdin:
            assert stdin_engine is not None and stdin_report is not None
            fix_results.append(fix_file(stdin_engine, stdin_report.path, policy_of(settings), restore=data))
            _apply_fix(fix_results[-1], stdin_engine, relpath, opts, True, errors)
            stdin_report = fix_results[-1].report or stdin_report
        for s, files in groups.values():
            engine = engine_of(s)
            policy = policy_of(s)
            for path in files:
                fix_results.append(fix_file(engine, path, policy))
                _apply_fix(fix_results[-1], engine, relpath, opts, False, errors)  # written at once
                reports_by_path[path] = fix_results[-1].report or FileReport(path)
                path_engine[path] = engine
        _fix_summary(fix_results, relpath, opts)
    else:
        work = [(engine_of(s), files) for s, files in groups.values()]
        for engine, files in work:
            for path in files:
                path_engine[path] = engine
        if opts.get("verbose"):
            for engine, files in work:
                click.echo(f"streamlint: {len(files)} file{'s' if len(files) != 1 else ''} governed by "
                           f"{engine.settings.config_path or 'the defaults'} (project root "
                           f"{display_path(str(engine.root), cwd)})", err=True)
        lint_reports, stats = _lint_groups(work, quiet=bool(opts.get("quiet")), jobs=opts.get("jobs"),
                                           use_cache=not opts.get("no_cache"))
        reports_by_path.update(lint_reports)
        if not opts.get("quiet"):
            for path, seconds in stats.slow:
                click.echo(f"streamlint: note: {relpath(path)} took {seconds:.1f} s to analyse", err=True)
            if stats.files:
                opts["_stats"] = stats  # the one-line summary, printed when the run is done
    reports = ([stdin_report] if stdin_report is not None else []) + [reports_by_path[p] for p in found.files]
    if profiler is not None:
        profiler.start("report")
    for path, message in found.warnings:
        if not opts.get("quiet"):
            click.echo(f"streamlint: warning: {path}: {message}", err=True)
    for message in errors:
        click.echo(f"streamlint: error: {message}", err=True)
    findings = [f for r in reports for f in r.findings]
    # sorted by the path as displayed (finding paths may be given relative or absolute)
    findings.sort(key=lambda f: (relpath(f.path), *f.sort_key[1:]))
    sources = {os.path.abspath(r.path): r.source for r in reports if r.source is not None}
    linted = {os.path.abspath(r.path): r.data for r in reports if r.data is not None}  # no second read

    def read(path: str) -> bytes:
        raw = linted.get(os.path.abspath(path))
        if raw is not None:
            return raw
        engine = path_engine.get(path) or stdin_engine
        if engine is not None:
            return engine.read(path)
        with open(path, "rb") as fh:
            return fh.read()

    def line_text(path: str, line: int) -> str:
        src = sources.get(os.path.abspath(path))
        if src is None:
            try:  # decoding is enough for an excerpt (no parse: results may come from workers or the cache)
                src = sources[os.path.abspath(path)] = SourceFile.from_bytes(path, read(path))
            except Exception:  # noqa: BLE001 - excerpt only
                src = None
        return src.line_text(line) if src is not None else ""

    # fingerprints (baseline, SARIF) use paths relative to the project root of the file's governing
    # configuration: the same whichever directory the run starts from
    def anchored(path: str) -> str:
        if path == "-":
            return path
        try:
            root = resolver.settings_for_file(os.path.abspath(path)).project_root
        except ConfigError:
            root = settings.project_root
        rel = relative_to_root(path, os.path.abspath(root))
        return rel if rel is not None else Path(os.path.abspath(path)).as_posix()

    ctx = ReportContext(
        findings=findings,
        registry=registry,
        line_text=line_text,
        relpath=relpath,
        files_checked=len(reports),
        files=[r.path for r in reports],
        statistics=bool(opts.get("statistics")),
    )
    ctx.source_root = repository_root(cwd)
    ctx.quiet = bool(opts.get("quiet"))

    def _settings_of(f: Finding) -> Settings:
        """The settings governing the file of ``f``."""
        engine = path_engine.get(f.path)
        if engine is not None:
            return engine.settings
        try:
            return settings if f.path == "-" else resolver.settings_for_file(f.path)
        except ConfigError:
            return settings

    def fix_state(f: Finding) -> str | None:
        if f.fix is None or not f.fix.edits:
            return None
        policy = policy_of(_settings_of(f))
        if f.code not in policy.codes:
            return None
        return "applicable" if policy.unsafe or policy.safety(f, registry) is FixSafety.SAFE else "hidden"

    ctx.fix_state = fix_state
    ctx.errors = len(errors)
    ctx.fingerprints = fingerprints(findings, line_text, anchored)
    ctx.fixed = sum(len(r.applied) for r in fix_results)
    ctx.unsafe_fixes = bool(opts.get("unsafe_fixes") if opts.get("unsafe_fixes") is not None else settings.unsafe_fixes)
    baseline_file = opts.get("baseline_file") or (
        str(Path(settings.project_root) / settings.baseline) if settings.baseline else None)
    if opts.get("write_baseline"):
        count = write_baseline(opts["write_baseline"], findings, ctx.fingerprint, anchored)
        click.echo(f"streamlint: wrote {count} finding{'s' if count != 1 else ''} to baseline "
                   f"{opts['write_baseline']}", err=True)
        findings = ctx.findings = []
    elif baseline_file:
        try:
            check_baseline_location(baseline_file, None if opts.get("baseline_file")
                                    else settings.provenance.get("baseline"))
            baseline = load_baseline(baseline_file)
        except BaselineError as exc:
            raise _fail(str(exc)) from None
        findings, dropped = baseline.filter(findings, ctx.fingerprint, anchored)
        ctx.findings = findings
        if dropped and opts.get("verbose"):
            click.echo(f"streamlint: {dropped} finding{'s' if dropped != 1 else ''} in the baseline", err=True)
    # `min-confidence` hides what is less sure, after the fingerprints and the baseline saw every finding (an
    # occurrence index counts the hidden ones too: a baseline is the same whatever the threshold)
    shown = [f for f in findings if sure_enough(f, _settings_of(f).min_confidence)]
    if len(shown) < len(findings) and not opts.get("quiet"):  # said, as ruff says what it hides
        hidden = len(findings) - len(shown)
        click.echo(f"streamlint: {hidden} less sure finding{'s' if hidden != 1 else ''} hidden by min-confidence "
                   "(`--min-confidence low` shows them)", err=True)
    findings = ctx.findings = shown
    if opts.get("add_noqa"):
        return _add_noqa(path_engine, findings, relpath, bool(opts.get("quiet")))
    if opts.get("diff"):
        applied = sum(len(r.applied) for r in fix_results)
        hidden = ctx.fix_counts()[1]
        if (applied or hidden) and not opts.get("quiet"):
            message = f"Would fix {applied} finding{'s' if applied != 1 else ''}"
            if hidden:
                message += (f" ({hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the "
                            "`--unsafe-fixes` option)")
            click.echo(message + ".", err=True)
        changed = any(r.changed for r in fix_results)
        return EXIT_FINDINGS if changed or errors else EXIT_OK
    if opts.get("fix_only"):  # the remaining findings are neither reported nor fail the run
        if ctx.fixed and not opts.get("quiet"):
            click.echo(f"Fixed {ctx.fixed} finding{'s' if ctx.fixed != 1 else ''}.", err=True)
        if errors or any(f.code == "SL000" for f in findings):
            return EXIT_ERROR
        return EXIT_FINDINGS if ctx.fixed and opts.get("exit_non_zero_on_fix") else EXIT_OK
    fmt = opts.get("output_format") or settings.output_format or "full"
    output_file = opts.get("output_file")
    if output_file:
        buffer = io.StringIO()
        render(fmt, ctx, buffer)
        try:
            Path(output_file).write_text(buffer.getvalue(), encoding="utf-8")
        except OSError as exc:
            raise _fail(f"cannot write {output_file}: {exc.strerror or exc}") from None
    elif not (fmt == "full" and ((opts.get("quiet") and not findings) or (errors and not reports))):
        # with --fix on stdin, stdout carries the fixed source and the report goes to stderr
        stream = _stream("stderr" if use_stdin and opts.get("fix") else "stdout")
        color = opts.get("color") or "auto"
        ctx.color = fmt == "full" and (color == "always" or (
            color == "auto" and stream.isatty() and "NO_COLOR" not in os.environ))
        render(fmt, ctx, stream)
    if errors or any(f.code == "SL000" for f in findings):
        return EXIT_ERROR
    if findings and not opts.get("exit_zero"):
        return EXIT_FINDINGS
    if ctx.fixed and opts.get("exit_non_zero_on_fix"):
        return EXIT_FINDINGS
    return EXIT_OK


def _apply_fix(res: FixResult, engine: Engine, relpath: Callable[[str], str], opts: dict[str, Any],
               stdin_result: bool, errors: list[str]) -> None:
    """Write (or, with --diff, print) one fixed file; report its discarded fixes. A file that cannot be
    written is a message (an error in ``errors`` when the write failed); the others are still written."""
    name = relpath(res.path) if not (stdin_result and res.path == "-") else "-"
    if opts.get("diff"):
        if res.changed:
            click.echo(res.diff(name), nl=False)
    elif stdin_result:
        data = res.new_bytes() if res.changed else (res.source.data if res.source is not None else b"")
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    elif res.changed:
        from streamlint.fixes import WriteRefused, write_fixed

        assert res.source is not None
        try:
            write_fixed(res.path, res.source.data, res.new_bytes(), str(engine.root))
        except WriteRefused as exc:
            res.not_written()
            if exc.error:
                errors.append(f"{name}: {exc}")
            else:
                click.echo(f"streamlint: warning: {name}: {exc}", err=True)
        engine.set_override(res.path, None)  # what the project index knows of it is now on disk
    for rej in res.rejected:
        f = rej.finding
        click.echo(f"streamlint: warning: {name}:{f.span.start_line}:{f.span.start_col + 1}: {f.code} fix "
                   f"discarded: {rej.reason}", err=True)


def _fix_summary(results: list[FixResult], relpath: Callable[[str], str], opts: dict[str, Any]) -> None:
    """With --show-fixes, the fixes applied (with --diff the count is printed with the hidden fixes)."""
    applied = [(relpath(r.path), f) for r in results for f in r.applied]
    if opts.get("diff"):
        return  # the count is printed with the hidden fixes, once the remaining findings are known
    if opts.get("show_fixes") and applied and not opts.get("quiet"):
        click.echo(f"Fixed {len(applied)} finding{'s' if len(applied) != 1 else ''}:", err=True)
        for path, f in sorted(applied, key=lambda pf: (pf[0], pf[1].span.start_line, pf[1].code)):
            assert f.fix is not None
            click.echo(f"- {path}:{f.span.start_line}: {f.code} ({f.name}) {f.fix.title}", err=True)


def _add_noqa(engines: dict[str, Engine], findings: list[Finding], relpath: Callable[[str], str],
              quiet: bool) -> int:
    from streamlint.fixes import WriteRefused, add_noqa_file

    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    added = 0
    for path, group in sorted(by_path.items()):
        if not os.path.isfile(path):
            continue
        engine = engines.get(path)
        if engine is None:
            continue
        try:
            count, skipped = add_noqa_file(engine, path, group)
        except WriteRefused as exc:
            click.echo(f"streamlint: {'error' if exc.error else 'warning'}: {relpath(path)}: {exc}", err=True)
            continue
        added += count
        for f in skipped:
            click.echo(f"streamlint: warning: {relpath(path)}:{f.span.start_line}: cannot add a noqa "
                       f"comment for {f.code} on this line", err=True)
    if not quiet:
        click.echo(f"Added {added} noqa directive{'s' if added != 1 else ''}.", err=True)
    return EXIT_OK


def _lint_groups(work: "list[tuple[Engine, list[str]]]", quiet: bool, jobs: int | None = None,
                 use_cache: bool = True) -> "tuple[dict[str, FileReport], RunStats]":
    """Lint each group of files with its engine (and its configuration's result cache). On a terminal,
    for runs of 200 files or more, a progress bar counts the files to lint plus, once its scan starts,
    the files of the project index (the scan for compile sites, which parses every module with a
    compile call: most of a first run on a large tree)."""
    from streamlint.cache import CacheRefused, ResultCache
    from streamlint.parallel import RunStats, lint_files

    total = RunStats()
    reports: dict[str, FileReport] = {}
    err = _stream("stderr")
    count = sum(len(files) for _, files in work)
    progress = None
    if not quiet and count >= 200 and err.isatty():
        from rich.console import Console
        from rich.progress import Progress

        progress = Progress(console=Console(file=err), transient=True)
        progress.start()
    try:
        task = progress.add_task("linting", total=count) if progress is not None else None
        for engine, files in work:
            try:
                cache = (ResultCache.for_settings(engine.settings, engine.registry, engine.ignore_noqa)
                         if use_cache else None)
            except CacheRefused as exc:
                click.echo(f"streamlint: warning: {exc}", err=True)
                cache = None
            advance = None
            if progress is not None:
                seen = [0]

                def on_index(done: int, of: int, seen: list[int] = seen) -> None:
                    # the index's files join the total when its scan starts: the bar counts all the work
                    if seen[0] == 0:
                        total_now = next(t.total for t in progress.tasks if t.id == task) or 0
                        progress.update(task, total=total_now + of, description="project index (compile sites)")
                    progress.advance(task, done - seen[0])
                    seen[0] = done
                    if done == of:
                        progress.update(task, description="linting")

                engine.project.index_progress = on_index
                advance = lambda n: progress.advance(task, n)  # noqa: E731
            found, stats = lint_files(engine, files, jobs=jobs, cache=cache, progress=advance)
            engine.project.index_progress = None
            reports.update(zip(files, found))
            total.files += stats.files
            total.analysed += stats.analysed
            total.cached += stats.cached
            total.skipped += stats.skipped
            total.jobs = max(total.jobs, stats.jobs)
            total.slow.extend(stats.slow)
    finally:
        if progress is not None:
            progress.stop()
    return reports, total


def _run_summary(stats: "RunStats", seconds: float) -> str:
    parts = [f"{stats.analysed} analysed", f"{stats.skipped} without a marker (syntax-checked only)",
             f"{stats.cached} from the cache"]
    return (f"streamlint: checked {stats.files} file{'s' if stats.files != 1 else ''} in {seconds:.2f} s "
            f"({', '.join(parts)}; {stats.jobs} process{'es' if stats.jobs != 1 else ''})")


def _show_settings(settings: Settings, registry: Registry, target: str) -> None:
    click.echo(f"settings for: {target}")
    click.echo(f"config file: {settings.config_path or '(none)'}")
    click.echo(f"project root: {settings.project_root}")
    for key in ("select", "extend_select", "ignore", "exclude", "extend_exclude", "respect_gitignore", "mode",
                "min_confidence", "fixable", "unfixable", "unsafe_fixes", "output_format", "baseline", "cache_dir", "plugins",
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
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Print the documentation as text or as JSON.")
def rule(selector: str | None, show_all: bool, output_format: str) -> None:
    """Show a rule's documentation (by code or name), or list all rules."""
    registry = _registry()  # the installed packs; a project's configuration imports nothing
    if show_all:
        rules = list(registry.rules.values())
    else:
        if not selector:
            raise _fail("give a rule code or name, or --all")
        rules = [r for r in registry.lookup(selector) if selector in (r.code, r.name)]
        if not rules:
            from streamlint.config import rule_suggestion

            raise _fail(f"unknown rule {selector!r}{rule_suggestion(selector, registry)}")
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
    if r.options and "## Options" not in r.documentation():  # a docstring may document them already
        click.echo("\n## Options")
        for o in r.options:
            click.echo(f"- `{o.name}` ({o.type.__name__}, default {o.default!r}): {o.description}")


@main.command()
@click.argument("path", required=False, type=click.Path())
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Use this configuration file (its `cache-dir`) instead of PATH's closest one.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, envvar="STREAMLINT_CACHE_DIR",
              help="The result cache directory (env: STREAMLINT_CACHE_DIR).")
def clean(path: str | None, config_file: str | None, isolated: bool, cache_dir: str | None) -> None:
    """Remove the result cache entries of the project containing PATH (default: the current directory)."""
    from streamlint.cache import CacheRefused, check_cache_directory, clean as clean_cache

    start = Path(path or ".").absolute()
    try:
        registry = _registry()
        settings = load_settings(registry, start, Path(config_file) if config_file else None, isolated,
                                 {"cache-dir": os.path.abspath(cache_dir)} if cache_dir else None)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    try:
        directory = check_cache_directory(settings)
        if not directory.is_dir():
            click.echo(f"no cache at {directory}", err=True)
            return
        left = clean_cache(directory)
    except (CacheRefused, OSError) as exc:
        raise _fail(str(exc)) from None
    if left:
        click.echo(f"removed the cache entries in {directory}; left in place (not streamlint's): "
                   f"{', '.join(left)}", err=True)
    else:
        click.echo(f"removed {directory}", err=True)


@main.command()
@click.option("--stdio", is_flag=True, help="Talk over stdin/stdout (the default and only transport).")
def server(stdio: bool) -> None:
    """Run the language server (LSP) over stdio; needs the `lsp` extra: pip install 'streamlint[lsp]'."""
    try:
        from streamlint.lsp import serve
    except ImportError as exc:
        raise _fail(f"the language server needs pygls: pip install 'streamlint[lsp]' ({exc})") from None
    tune_gc()
    serve()


@main.command()
@click.argument("target", metavar="FILE[::QUALNAME]")
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot", "html"]), default="mermaid", show_default=True,
              help="Mermaid (rendered by GitHub), Graphviz DOT, or a self-contained HTML page.")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False), default=None,
              help="Write the drawing to this file instead of stdout.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Use this configuration file instead of FILE's closest one.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
def graph(target: str, fmt: str, output_file: str | None, config_file: str | None, isolated: bool) -> None:
    """Render a function's stream structure (scopes, waits, cross-stream edges, findings in red).

    Without ::QUALNAME, every function of FILE with a stream scope or wait is drawn."""
    from streamlint.graph import run_graph

    try:
        text = run_graph(target, fmt, config_file, isolated)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    if output_file:
        Path(output_file).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)
