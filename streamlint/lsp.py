"""`streamlint server`: the language server (pygls 2.x, over stdio).

- diagnostics on open and save (at once) and on change (debounced by ``DEBOUNCE`` seconds); linting
  runs on one worker thread (engines are not thread-safe), never on the event loop; a result for a
  version that is no longer the document's latest is dropped; closing a document publishes [];
- the unsaved buffer is what is linted (``Engine.set_override`` for as long as the document is open), the
  project index reads the other files from disk; after an edit, the other open documents are re-linted
  too (a little later: they may call wrappers defined in the edited buffer);
- one engine per configuration file; a change of pyproject.toml / streamlint.toml / .streamlint.toml
  (watched through ``workspace/didChangeWatchedFiles``, or saved in the editor) drops the engines and
  re-lints every open document; a changed ``.py`` file on disk is re-read;
- diagnostics carry code, codeDescription (the rule's docs), severity, source, related information
  (causes in other files too) and, in ``data``, the fix's edits already in client units;
- code actions: the fix of a diagnostic (quickfix; preferred when safe), ``# noqa: CODE`` for it, and
  "fix all" (``source.fixAll.streamlint``, safe fixes, or unsafe ones too when configured);
- hover on a finding shows its message and the rule's documentation;
- every position is converted to the negotiated position encoding (UTF-16 unless the client offers
  another; columns inside streamlint are code points).
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from streamlint import __version__
from streamlint.config import CONFIG_FILES, ConfigError, Settings, load_settings
from streamlint.cache import ResultCache, SummaryCache, check_cache_directory, project_digest, sha256
from streamlint.model.wordindex import WordSearch
from streamlint.wordcache import WordCache
from streamlint.discovery import discover
from streamlint.engine import Engine
from streamlint.finding import Finding, FixSafety, Severity, Span, sure_enough
from streamlint.fixes import FixPolicy, fix_file, noqa_edits
from streamlint.registry import Registry, RegistryError, load_registry
from streamlint.source import SourceFile, UndecodableSource

log = logging.getLogger("streamlint.lsp")

DEBOUNCE = 0.2
PEER_DELAY = 4  # other open documents are re-linted this many debounce periods after an edit
SOURCE = "streamlint"
FIX_ALL_KIND = "source.fixAll.streamlint"
SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}
_NEWLINES = re.compile(r"\r\n|\r|\n")
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


# ---- positions: streamlint spans (1-based lines, code-point columns) <-> client units

class Lines:
    """A text's lines split as LibCST and streamlint split them (\\r\\n, \\r, \\n only)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in _NEWLINES.finditer(text)]

    def line(self, index: int) -> str:
        if index >= len(self.starts):
            return ""
        end = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.text)
        return self.text[self.starts[index]:end].rstrip("\r\n")

    def offset(self, line0: int, col: int) -> int:
        if line0 >= len(self.starts):
            return len(self.text)
        return min(self.starts[line0] + col, self.starts[line0] + len(self.line(line0)))


def _units(text: str, encoding: str) -> int:
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8"))
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def to_client(lines: Lines, line: int, col: int, encoding: str) -> types.Position:
    """A streamlint position (1-based line, code-point column) in client units."""
    line0 = max(line - 1, 0)
    text = lines.line(line0)
    return types.Position(line=line0, character=_units(text[:col], encoding))


def from_client(lines: Lines, pos: types.Position, encoding: str) -> tuple[int, int]:
    """A client position → (1-based line, code-point column)."""
    text = lines.line(pos.line)
    units = 0
    for col, ch in enumerate(text):
        if units >= pos.character:
            return pos.line + 1, col
        units += _units(ch, encoding)
    return pos.line + 1, len(text)


def span_range(lines: Lines, span: Span, encoding: str) -> types.Range:
    return types.Range(start=to_client(lines, span.start_line, span.start_col, encoding),
                       end=to_client(lines, span.end_line, span.end_col, encoding))


def _disk_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


# ---- per-document state

@dataclass
class LintResult:
    version: int | None
    text: str
    findings: list[Finding]
    engine: Engine
    diagnostics: list[types.Diagnostic] = field(default_factory=list)


class StreamlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("streamlint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamlint-lint")
        self.engines: dict[str, tuple[Engine, Settings]] = {}  # config key -> engine
        self.versions: dict[str, int | None] = {}  # open document uri -> latest version
        self.results: dict[str, LintResult] = {}
        self.pending: dict[str, asyncio.Task] = {}
        self.debounce = DEBOUNCE
        self.registries: dict[tuple[str, ...], Registry] = {}
        self.caches: dict[int, tuple[Engine, ResultCache, int]] = {}  # id(engine) -> CLI cache, file mtime
        self.errors_shown: set[str] = set()

    def report_server_error(self, error: Exception, source: Any) -> None:
        """A message body that is not JSON (or not UTF-8) gets the JSON-RPC ParseError reply (id null);
        other out-of-band errors are shown as pygls does."""
        if isinstance(error, (json.JSONDecodeError, UnicodeDecodeError, RecursionError)):
            self.protocol._send_data({"jsonrpc": "2.0", "id": None,
                                      "error": {"code": -32700, "message": f"Parse error: {error}"}})
            return
        super().report_server_error(error, source)

    # ---- engines (worker thread only)
    def engine_for(self, path: str) -> tuple[Engine, Settings] | str:
        """The engine for the configuration governing ``path``, or the configuration error."""
        start = Path(path)
        try:
            if () not in self.registries:  # installed packs only: a workspace's config imports nothing
                self.registries[()] = load_registry()
            registry = self.registries[()]
            user_cache = os.environ.get("STREAMLINT_CACHE_DIR")  # the user's choice, as on the command line
            settings = load_settings(registry, start,
                                     overrides={"cache-dir": os.path.abspath(user_cache)} if user_cache else None)
        except (ConfigError, RegistryError) as exc:
            return f"streamlint: {exc}"
        key = settings.config_path or settings.project_root
        cached = self.engines.get(key)
        if cached is None or cached[1] != settings:
            cached = (Engine(settings, registry), settings)
            try:  # the module summaries the command line cached (read only, like its results)
                cached[0].project.summaries.source = SummaryCache(check_cache_directory(settings)).load
                cached[0].project.words = WordSearch(WordCache(check_cache_directory(settings), cached[0].root).load,
                                                     cached[0].word_stamp, cached[0].read_stamp)
            except OSError:
                pass
            self.engines[key] = cached
        return cached

    def lint(self, uri: str, path: str, text: str, version: int | None) -> LintResult | str:
        found = self.engine_for(path)
        if isinstance(found, str):
            return found
        engine, settings = found
        buffer = encode_buffer(text)
        engine.set_override(path, buffer)
        if os.path.isfile(path):
            exclude = (*settings.exclude, *settings.extend_exclude)
            chosen = discover([path], Path(settings.project_root), exclude, settings.respect_gitignore, True)
            if not chosen.files:
                return LintResult(version, text, [], engine)
        cached = self.from_cache(engine, settings, path, buffer)
        if cached is None:
            cached = engine.lint_file(path).findings
        findings = [f for f in cached if os.path.abspath(f.path) == os.path.abspath(path)
                    and sure_enough(f, settings.min_confidence)]
        result = LintResult(version, text, findings, engine)
        result.diagnostics = self.diagnostics(result)  # here: it may read other files for related locations
        return result

    def from_cache(self, engine: Engine, settings: Settings, path: str, buffer: bytes) -> list[Finding] | None:
        """The findings the command line cached for exactly this content, when every file the result
        depends on is still as it was (open documents included: an unsaved buffer that differs from its
        file on disk makes the cache unusable, as the cache only knows files on disk)."""
        try:
            cache = self._cli_cache(engine, settings)
            if cache is None or os.path.abspath(path) not in cache.entries:
                return None
            for other, data in engine._overrides.items():
                if other != os.path.abspath(path) and _disk_bytes(other) != data:
                    return None

            def dep_digest(dep: str) -> str:  # as the command line computes it ("" when unreadable)
                data = engine._overrides.get(dep)
                if data is None:
                    data = _disk_bytes(dep)
                return sha256(data) if data is not None else ""

            return cache.lookup(path, sha256(buffer), dep_digest,
                                lambda: project_digest(engine.root, skip=[cache.directory]))
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def _cli_cache(self, engine: Engine, settings: Settings) -> ResultCache | None:
        """The result cache of this configuration (read only), reloaded when the command line rewrote it."""
        known = self.caches.get(id(engine))
        if known is not None and known[0] is engine:
            cache, seen = known[1], known[2]
        else:
            cache, seen = ResultCache.for_settings(settings, engine.registry, engine.ignore_noqa), None
        try:
            mtime = os.stat(cache.file).st_mtime_ns
        except OSError:
            return None
        if seen is not None and mtime != seen:
            cache = ResultCache(cache.directory, cache.key)
        self.caches[id(engine)] = (engine, cache, mtime)
        return cache

    def forget(self, path: str) -> None:
        for engine, _ in self.engines.values():
            engine.set_override(path, None)

    # ---- scheduling (event loop)
    def schedule(self, uri: str, delay: float) -> None:
        task = self.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        self.pending[uri] = asyncio.ensure_future(self._lint_and_publish(uri, delay))

    async def _lint_and_publish(self, uri: str, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            if uri not in self.versions:
                return
            doc = self.workspace.get_text_document(uri)
            path = to_fs_path(uri)
            if path is None:
                return
            version, text = doc.version, doc.source
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(self.worker, self.lint, uri, path, text, version)
        except asyncio.CancelledError:
            return
        except Exception as exc:  # never let one document break the server
            log.exception("linting %s failed", uri)
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Error,
                                                           message=f"streamlint: linting {uri} failed: {exc}"))
            return
        finally:
            if self.pending.get(uri) is asyncio.current_task():
                del self.pending[uri]
        if uri not in self.versions or self.versions[uri] != version:
            return  # closed, or edited since: a newer lint is on its way
        if isinstance(result, str):  # a broken configuration: say so once, show no stale findings
            if result not in self.errors_shown:
                self.errors_shown.add(result)
                self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=result))
            self.results.pop(uri, None)
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, version=version,
                                                                                  diagnostics=[]))
            return
        self.results[uri] = result
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=result.diagnostics))

    def relint_all(self, delay: float = 0.0) -> None:
        for uri in list(self.versions):
            self.schedule(uri, delay)

    # ---- conversions
    @property
    def encoding(self) -> str:
        return str(self.workspace.position_encoding or types.PositionEncodingKind.Utf16)

    def lines_of(self, path: str, engine: Engine, cache: dict[str, Lines]) -> Lines:
        if path not in cache:
            try:
                cache[path] = Lines(SourceFile.from_bytes(path, engine.read(path)).text)
            except (OSError, UndecodableSource):
                cache[path] = Lines("")
        return cache[path]

    def diagnostics(self, result: LintResult) -> list[types.Diagnostic]:
        enc = self.encoding
        lines = Lines(result.text)
        other: dict[str, Lines] = {}
        out = []
        for f in result.findings:
            related = []
            for loc in f.related:
                loc_lines = lines if os.path.abspath(loc.path) == os.path.abspath(f.path) else \
                    self.lines_of(loc.path, result.engine, other)
                related.append(types.DiagnosticRelatedInformation(
                    location=types.Location(uri=from_fs_path(os.path.abspath(loc.path)) or loc.path,
                                            range=span_range(loc_lines, loc.span, enc)),
                    message=loc.message or "related location"))
            data: dict[str, Any] = {"code": f.code, "line": f.span.start_line}
            if f.fix is not None:
                data["fix"] = {
                    "title": f.fix.title,
                    "safety": _safety(f, result.engine).value,
                    "edits": [{"range": _range_json(span_range(lines, e.span, enc)),
                               "newText": _NEWLINES.sub(_newline(result.text), e.content)}
                              for e in f.fix.edits],
                }
            out.append(types.Diagnostic(
                range=span_range(lines, f.span, enc),
                message=f.message + (f"\nfix: {f.hint}" if f.hint else ""),
                severity=SEVERITIES[f.severity],
                code=f.code,
                source=SOURCE,
                related_information=related or None,
                data=data,
            ))
        return out

    # ---- actions
    def workspace_edit(self, uri: str, version: int | None, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
        """Versioned document changes when the client supports them (a stale edit is then refused)."""
        caps = self.client_capabilities.workspace
        edit_caps = caps.workspace_edit if caps is not None else None
        if edit_caps is not None and edit_caps.document_changes and version is not None:
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=edits)])
        return types.WorkspaceEdit(changes={uri: edits})

    def quick_fixes(self, uri: str, result: LintResult,
                    params: types.CodeActionParams) -> list[types.CodeAction]:
        actions = []
        lines = Lines(result.text)
        source = SourceFile(uri, b"", result.text, "utf-8", False)
        enc = self.encoding
        for diag in params.context.diagnostics:
            if diag.source != SOURCE or not isinstance(diag.data, dict):
                continue
            data = diag.data
            fix = data.get("fix")
            if fix:
                safe = fix.get("safety") == FixSafety.SAFE.value
                edits = [types.TextEdit(range=_range_from_json(e["range"]), new_text=e["newText"])
                         for e in fix["edits"]]
                actions.append(types.CodeAction(
                    title=f"streamlint: {fix['title']}" + ("" if safe else " (unsafe)"),
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diag],
                    is_preferred=safe,
                    edit=self.workspace_edit(uri, result.version, edits),
                ))
            code = data.get("code") or diag.code
            line = data.get("line") or diag.range.start.line + 1
            finding = next((f for f in result.findings if f.code == code and f.span.start_line == line), None)
            if finding is None:
                continue
            edits, _skipped = noqa_edits(source, [finding])
            if edits:
                start, end, content = edits[0]
                actions.append(types.CodeAction(
                    title=f"streamlint: Disable {code} for this line (# noqa: {code})",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diag],
                    edit=self.workspace_edit(uri, result.version, [types.TextEdit(
                        range=types.Range(start=_offset_to_client(lines, start, enc),
                                          end=_offset_to_client(lines, end, enc)),
                        new_text=content)]),
                ))
        return actions

    def fix_all(self, uri: str, result: LintResult) -> types.CodeAction | None:
        """Worker thread: every allowed fix applied to the buffer, as one whole-document edit."""
        path = to_fs_path(uri)
        if path is None:
            return None
        engine = result.engine
        policy = FixPolicy.from_settings(engine.settings, engine.registry)
        buffer = encode_buffer(result.text)
        engine.set_override(path, buffer)
        fixed = fix_file(engine, path, policy, restore=buffer)
        if not fixed.changed or fixed.text is None:
            return None
        lines = Lines(result.text)
        end = to_client(lines, len(lines.starts), len(lines.line(len(lines.starts) - 1)), self.encoding)
        return types.CodeAction(
            title=f"streamlint: Fix all auto-fixable problems ({len(fixed.applied)})",
            kind=FIX_ALL_KIND,
            edit=self.workspace_edit(uri, result.version, [types.TextEdit(
                range=types.Range(start=types.Position(line=0, character=0), end=end), new_text=fixed.text)]),
        )

    def config_changed(self) -> None:
        def reset() -> None:
            for engine, _ in self.engines.values():
                for uri in list(self.versions):
                    path = to_fs_path(uri)
                    if path:
                        engine.set_override(path, None)
            self.engines.clear()
            self.registries.clear()

        self.errors_shown.clear()
        self.worker.submit(reset)
        self.relint_all()


def _safety(f: Finding, engine: Engine) -> FixSafety:
    return FixPolicy(frozenset()).safety(f, engine.registry) or FixSafety.UNSAFE


def _offset_to_client(lines: Lines, offset: int, encoding: str) -> types.Position:
    line0 = bisect.bisect_right(lines.starts, offset) - 1
    return to_client(lines, line0 + 1, offset - lines.starts[line0], encoding)


def _range_json(r: types.Range) -> dict[str, Any]:
    return {"start": {"line": r.start.line, "character": r.start.character},
            "end": {"line": r.end.line, "character": r.end.character}}


def _range_from_json(data: dict[str, Any]) -> types.Range:
    return types.Range(start=types.Position(**data["start"]), end=types.Position(**data["end"]))


def _newline(text: str) -> str:
    m = _NEWLINES.search(text)
    return m.group(0) if m else "\n"


def encode_buffer(text: str) -> bytes:
    """Editor text → the bytes the file would hold (its PEP 263 coding if it declares one)."""
    head = text.encode("utf-8", "replace").splitlines()[:2]
    for line in head:
        m = _CODING.match(line)
        if m:
            try:
                return text.encode(m.group(1).decode("ascii"))
            except (LookupError, UnicodeEncodeError):
                break
    return text.encode("utf-8", "surrogatepass")


def create_server() -> StreamlintServer:
    server = StreamlintServer()

    @server.feature(types.INITIALIZED)
    async def initialized(ls: StreamlintServer, params: types.InitializedParams) -> None:
        caps = ls.client_capabilities.workspace
        watch = caps.did_change_watched_files if caps is not None else None
        if watch is not None and watch.dynamic_registration:
            watchers = [types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in CONFIG_FILES]
            watchers.append(types.FileSystemWatcher(glob_pattern="**/*.py"))
            try:
                await ls.client_register_capability_async(types.RegistrationParams(registrations=[
                    types.Registration(id="streamlint-watch", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                                       register_options=types.DidChangeWatchedFilesRegistrationOptions(
                                           watchers=watchers))]))
            except Exception as exc:  # the client refused: config changes are then picked up on save only
                log.warning("could not register file watchers: %s", exc)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: StreamlintServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        if not _is_python(doc.uri, doc.language_id):
            return
        ls.versions[doc.uri] = doc.version
        ls.schedule(doc.uri, 0.0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: StreamlintServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri in ls.versions:
            ls.versions[uri] = params.text_document.version
            ls.schedule(uri, ls.debounce)
            # the other open documents may depend on this buffer (wrappers, call graph): later, once
            for other in ls.versions:
                if other != uri and other not in ls.pending:
                    ls.schedule(other, ls.debounce * PEER_DELAY)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: StreamlintServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        path = to_fs_path(uri) or ""
        if os.path.basename(path) in CONFIG_FILES:
            ls.config_changed()
        elif uri in ls.versions:
            ls.relint_all()  # other open files may depend on this one

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: StreamlintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        if ls.versions.pop(uri, "closed") == "closed":
            return
        ls.results.pop(uri, None)
        task = ls.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        path = to_fs_path(uri)
        if path is not None:
            ls.worker.submit(ls.forget, path)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: StreamlintServer, params: types.DidChangeWatchedFilesParams) -> None:
        paths = [to_fs_path(change.uri) or "" for change in params.changes]
        if any(os.path.basename(p) in CONFIG_FILES for p in paths):
            ls.config_changed()
            return
        changed = [p for p in paths if p.endswith((".py", ".pyi"))]
        if changed:
            open_paths = {to_fs_path(uri) for uri in ls.versions}

            def reread() -> None:
                for p in changed:
                    if p not in open_paths:
                        ls.forget(p)

            ls.worker.submit(reread)
            ls.relint_all(ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND],
        resolve_provider=False))
    async def code_action(ls: StreamlintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        uri = params.text_document.uri
        result = ls.results.get(uri)
        if uri not in ls.versions or result is None or result.version != ls.versions[uri]:
            return None  # not linted yet, or edited since: the client will ask again
        only = params.context.only
        actions: list[types.CodeAction] = []
        wants_quickfix = not only or any(str(k).startswith("quickfix") for k in only)
        wants_fix_all = not only or any(FIX_ALL_KIND.startswith(str(k)) for k in only)
        if wants_quickfix:
            actions.extend(ls.quick_fixes(uri, result, params))
        if wants_fix_all:
            action = await asyncio.get_running_loop().run_in_executor(ls.worker, ls.fix_all, uri, result)
            if action is not None:
                actions.append(action)
        return actions

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: StreamlintServer, params: types.HoverParams) -> types.Hover | None:
        result = ls.results.get(params.text_document.uri)
        if result is None:
            return None
        lines = Lines(result.text)
        line, col = from_client(lines, params.position, ls.encoding)
        hits = [f for f in result.findings if _contains(f.span, line, col)]
        if not hits:
            return None
        parts = []
        for f in hits:
            rule = result.engine.registry.rules.get(f.code)
            doc = rule.documentation() if rule is not None else ""
            parts.append(f"**{f.code}** `{f.name}` ({f.severity.value}): {f.message}\n\n---\n\n{doc}")
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                                        value="\n\n---\n\n".join(parts)),
                           range=span_range(lines, hits[0].span, ls.encoding))

    return server


def _is_python(uri: str, language_id: str | None) -> bool:
    return (language_id or "").lower() == "python" or uri.endswith((".py", ".pyi"))


def _contains(span: Span, line: int, col: int) -> bool:
    start, end = (span.start_line, span.start_col), (span.end_line, span.end_col)
    return start <= (line, col) <= end


def serve() -> None:
    """Run the server over stdio until the client disconnects.

    stdout belongs to JSON-RPC: the protocol gets its own copy of the stdout descriptor, and descriptor 1
    (and ``sys.stdout``) then point to stderr, so that whatever a rule pack prints — with ``print`` or
    straight to the descriptor — lands on stderr instead of corrupting the protocol stream."""
    logging.basicConfig(level=logging.WARNING, format="streamlint-lsp %(levelname)s %(message)s")
    from streamlint import _lazy

    sys.stdout.flush()
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    _lazy.load(_lazy.cst)  # a long-lived process: import LibCST now, before two threads may first touch it
    create_server().start_io(sys.stdin.buffer, protocol_out)
