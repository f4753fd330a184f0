"""The language server end to end: `python -m streamlint server` over stdio, driven by pytest-lsp."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

WAIT = 20.0  # generous: CI machines are shared
SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "streamlint", "server"])

# A Chinese comment line above, and Chinese text plus an astral character (two UTF-16 code units)
# before the finding on the same line: columns differ between code points, UTF-16 and UTF-8.
SOURCE = textwrap.dedent('''
    import torchair as tng

    # 中文注释: 侧流计算
    def forward(x):
        with tng.scope.npu_stream_switch("侧流😀", 3):  # 优先级
            return x
''').lstrip()
LINE = SOURCE.splitlines()[4]
PRIO_COL = LINE.index("3)")  # code points


def _project(root: Path, config: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(f"[tool.streamlint]\n{config}", encoding="utf-8")
    path = root / "model.py"
    path.write_text("x = 1\n", encoding="utf-8")  # the disk differs: the buffer is what gets linted
    return path


class Publishes:
    """Records every publishDiagnostics notification (pytest-lsp keeps only the latest per uri)."""

    def __init__(self, client: LanguageClient) -> None:
        self.items: list[types.PublishDiagnosticsParams] = []
        self.event = asyncio.Event()
        features = client.protocol.fm.features
        original = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

        def record(params: types.PublishDiagnosticsParams) -> None:
            self.items.append(params)
            self.event.set()
            original(params)

        features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = record

    async def next(self, uri: str, after: int = 0, version: int | None = None) -> types.PublishDiagnosticsParams:
        """The first publish for ``uri`` with index >= ``after`` (and the given version, if any)."""
        deadline = time.monotonic() + WAIT
        while True:
            for item in self.items[after:]:
                if item.uri == uri and (version is None or item.version == version):
                    return item
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no diagnostics for {uri} (version {version}); got {self.items[after:]}")
            self.event.clear()
            try:
                await asyncio.wait_for(self.event.wait(), remaining)
            except asyncio.TimeoutError:
                pass


async def _start(client: LanguageClient, root: Path, spec: str = "visual-studio-code",
                 encodings: list[str] | None = None) -> Publishes:
    caps = client_capabilities(spec)
    if encodings is not None:
        caps.general = types.GeneralClientCapabilities(position_encodings=encodings)
    publishes = Publishes(client)
    client.registrations = []  # type: ignore[attr-defined]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)  # type: ignore[attr-defined]

    await client.initialize_session(types.InitializeParams(
        capabilities=caps, root_uri=from_fs_path(str(root)),
        workspace_folders=[types.WorkspaceFolder(uri=from_fs_path(str(root)), name="project")]))
    return publishes


def _open(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))


def _change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    """Apply UTF-16 based edits (VS Code's encoding) to ``text``."""
    lines = text.splitlines(keepends=True)

    def offset(pos: types.Position) -> int:
        base = sum(len(line) for line in lines[:pos.line])
        line = lines[pos.line] if pos.line < len(lines) else ""
        units = 0
        for i, ch in enumerate(line):
            if units >= pos.character:
                return base + i
            units += 2 if ord(ch) > 0xFFFF else 1
        return base + len(line)

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
        lines = text.splitlines(keepends=True)
    return text


def _edits(action: types.CodeAction, uri: str) -> list[types.TextEdit]:
    edit = action.edit
    assert edit is not None
    if edit.document_changes:
        return [e for change in edit.document_changes if change.text_document.uri == uri for e in change.edits]
    return list(edit.changes[uri])


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    """One server (VS Code's capabilities: UTF-16) for the module; each test uses its own project."""
    root = tmp_path_factory.mktemp("workspace")
    lsp_client.publishes = await _start(lsp_client, root)  # type: ignore[attr-defined]
    lsp_client.root = root  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


def _setup(client: LanguageClient, name: str, config: str = "") -> tuple[Path, str, Publishes]:
    root = client.root / name  # type: ignore[attr-defined]
    path = _project(root, config)
    return root, from_fs_path(str(path)), client.publishes  # type: ignore[attr-defined]


MODULE = pytest.mark.asyncio(loop_scope="module")


@MODULE
async def test_diagnostics_lifecycle_utf16(client: LanguageClient):
    _, uri, publishes = _setup(client, "lifecycle")
    started = time.monotonic()
    after = len(publishes.items)
    _open(client, uri, SOURCE)
    first = await publishes.next(uri, after)
    elapsed = time.monotonic() - started
    print(f"\ntime to first diagnostics: {elapsed * 1000:.0f} ms")
    assert first.version == 1
    [diag] = first.diagnostics
    assert diag.code == "SL104" and diag.source == "streamlint"
    assert diag.severity == types.DiagnosticSeverity.Information
    assert diag.code_description is None  # no documentation site: the hover carries the documentation
    # UTF-16: the astral character before the finding counts twice
    assert diag.range.start == types.Position(line=4, character=PRIO_COL + 1)
    assert diag.range.end == types.Position(line=4, character=PRIO_COL + 2)
    assert diag.data["fix"]["safety"] == "safe"

    # an edit: the tag becomes an int → SL105 appears (debounced), SL104 stays
    after = len(publishes.items)
    changed = SOURCE.replace('"侧流😀"', "1")
    _change(client, uri, 2, changed)
    second = await publishes.next(uri, after, version=2)
    assert sorted(d.code for d in second.diagnostics) == ["SL104", "SL105"]

    # close → an empty list
    after = len(publishes.items)
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    closed = await publishes.next(uri, after)
    assert list(closed.diagnostics) == []


@MODULE
async def test_rapid_edits_publish_only_the_latest_version(client: LanguageClient):
    _, uri, publishes = _setup(client, "rapid")
    _open(client, uri, SOURCE)
    await publishes.next(uri, version=1)
    after = len(publishes.items)
    for version in range(2, 7):
        _change(client, uri, version, SOURCE.replace(", 3)", f", {version})"))
    final = await publishes.next(uri, after, version=6)
    assert "stream_priority=6" in final.diagnostics[0].message
    await asyncio.sleep(0.5)
    versions = [p.version for p in publishes.items[after:] if p.uri == uri]
    assert versions == [6], versions  # intermediate versions were debounced away or dropped as stale


@MODULE
async def test_code_actions_and_hover(client: LanguageClient):
    _, uri, publishes = _setup(client, "actions")
    text = SOURCE.replace('"侧流😀", 3', '1, 3')
    _open(client, uri, text)
    published = await publishes.next(uri)
    by_code = {d.code: d for d in published.diagnostics}
    assert set(by_code) == {"SL104", "SL105"}

    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=by_code["SL104"].range,
        context=types.CodeActionContext(diagnostics=[by_code["SL104"]])))
    titles = [a.title for a in actions]
    fix = next(a for a in actions if "Remove the reserved" in a.title)
    assert fix.is_preferred and fix.kind == types.CodeActionKind.QuickFix
    assert _apply(text, _edits(fix, uri)) == text.replace("(1, 3)", "(1)")
    noqa = next(a for a in actions if "noqa" in a.title)
    assert _apply(text, _edits(noqa, uri)) == text.replace("# 优先级", "# 优先级  # noqa: SL104")
    fix_all = next(a for a in actions if a.kind == "source.fixAll.streamlint")
    assert _apply(text, _edits(fix_all, uri)) == text.replace("(1, 3)", "(1)")  # safe fixes only
    assert len(titles) == len(set(titles))

    unsafe = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=by_code["SL105"].range,
        context=types.CodeActionContext(diagnostics=[by_code["SL105"]], only=[types.CodeActionKind.QuickFix])))
    quote = next(a for a in unsafe if "Quote the tag" in a.title)
    assert "(unsafe)" in quote.title and not quote.is_preferred
    assert _apply(text, _edits(quote, uri)) == text.replace("(1, 3)", '("1", 3)')
    assert not any(a.kind == "source.fixAll.streamlint" for a in unsafe)

    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=by_code["SL104"].range.start))
    assert hover is not None and "SL104" in hover.contents.value and "## Why is this bad?" in hover.contents.value
    nothing = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=0)))
    assert nothing is None


@MODULE
async def test_config_change_republishes(client: LanguageClient):
    root, uri, publishes = _setup(client, "config")
    _open(client, uri, SOURCE)
    assert [d.code for d in (await publishes.next(uri)).diagnostics] == ["SL104"]
    after = len(publishes.items)
    (root / "pyproject.toml").write_text('[tool.streamlint]\nignore = ["SL104"]\n', encoding="utf-8")
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[types.FileEvent(
        uri=from_fs_path(str(root / "pyproject.toml")), type=types.FileChangeType.Changed)]))
    republished = await publishes.next(uri, after)
    [registration] = client.registrations  # the server asked to watch the configuration files
    globs = [w["globPattern"] for w in registration.register_options["watchers"]]
    assert "**/pyproject.toml" in globs and "**/streamlint.toml" in globs

    # a broken configuration: an error message, and no stale findings
    after = len(publishes.items)
    (root / "pyproject.toml").write_text('[tool.streamlint]\nselect = ["NOPE"]\n', encoding="utf-8")
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[types.FileEvent(
        uri=from_fs_path(str(root / "pyproject.toml")), type=types.FileChangeType.Changed)]))
    assert list((await publishes.next(uri, after)).diagnostics) == []
    assert any("NOPE" in m.message and m.type == types.MessageType.Error for m in client.messages)

    # repaired (saved in the editor this time): the finding is back
    after = len(publishes.items)
    (root / "pyproject.toml").write_text("[tool.streamlint]\n", encoding="utf-8")
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=from_fs_path(str(root / "pyproject.toml")))))
    assert [d.code for d in (await publishes.next(uri, after)).diagnostics] == ["SL104"]
    assert list(republished.diagnostics) == []


def test_position_conversions():
    """Columns in every negotiable encoding (the server uses the one pygls negotiated; UTF-16 above)."""
    from streamlint.lsp import Lines, from_client, to_client

    lines = Lines(SOURCE.replace("\n", "\r\n"))
    expected = {
        types.PositionEncodingKind.Utf8: len(LINE[:PRIO_COL].encode("utf-8")),
        types.PositionEncodingKind.Utf16: PRIO_COL + 1,
        types.PositionEncodingKind.Utf32: PRIO_COL,
    }
    for encoding, column in expected.items():
        pos = to_client(lines, 5, PRIO_COL, encoding)
        assert pos == types.Position(line=4, character=column), encoding
        assert from_client(lines, pos, encoding) == (5, PRIO_COL)
    assert lines.line(2) == "# 中文注释: 侧流计算"


def test_related_information_in_other_files(tmp_path):
    """In-process: related locations (other files included) become relatedInformation in client units."""
    from streamlint.finding import Confidence, Finding, Location, Severity, Span
    from streamlint.lsp import LintResult, StreamlintServer

    from harness import engine_for

    other = tmp_path / "utils.py"
    other.write_text("# 注释😀\ndef helper(x):  # 😀\n    return x\n", encoding="utf-8")
    path = tmp_path / "model.py"
    path.write_text(SOURCE, encoding="utf-8")
    finding = Finding("SL104", "reserved-stream-priority", "m", Severity.INFO, Confidence.HIGH, str(path),
                      Span(5, PRIO_COL, 5, PRIO_COL + 1),
                      related=(Location(str(other), Span(2, 4, 2, 10), "wrapper defined here"),
                               Location(str(path), Span(5, 8, 5, 12), "")))

    class Server(StreamlintServer):
        encoding = types.PositionEncodingKind.Utf16

    server = Server()
    [diag] = server.diagnostics(LintResult(1, SOURCE, [finding], engine_for(tmp_path, [str(path)])))
    first, second = diag.related_information
    assert first.location.uri == from_fs_path(str(other))
    assert first.location.range == types.Range(start=types.Position(line=1, character=4),
                                                end=types.Position(line=1, character=10))
    assert first.message == "wrapper defined here"
    assert second.location.uri == from_fs_path(str(path)) and second.message == "related location"
    server.worker.shutdown()


@MODULE
async def test_unsaved_buffer_feeds_the_project_index(client: LanguageClient):
    """model.py calls a wrapper from utils.py; editing utils.py (unsaved) changes model.py's findings."""
    root, _, publishes = _setup(client, "crossfile")
    wrapper = ("import torchair\n\n\ndef npu_stream_switch(tag, prio=0):\n"
               "    return torchair.scope.npu_stream_switch(tag, prio)\n")
    (root / "utils.py").write_text(wrapper, encoding="utf-8")
    model = "from utils import npu_stream_switch\n\nwith npu_stream_switch(\"a\", 3):\n    pass\n"
    (root / "model.py").write_text(model, encoding="utf-8")
    model_uri, utils_uri = from_fs_path(str(root / "model.py")), from_fs_path(str(root / "utils.py"))
    _open(client, model_uri, model)
    first = await publishes.next(model_uri)
    assert [d.code for d in first.diagnostics] == ["SL104"]
    assert "through wrapper" in first.diagnostics[0].message
    _open(client, utils_uri, wrapper)
    await publishes.next(utils_uri)
    after = len(publishes.items)
    _change(client, utils_uri, 2, wrapper.replace("npu_stream_switch(tag, prio)", "npu_stream_switch(tag)"))
    again = await publishes.next(model_uri, after)
    assert list(again.diagnostics) == []
    for uri in (model_uri, utils_uri):
        client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))


def test_did_open_is_answered_from_the_command_line_cache(tmp_path, monkeypatch):
    """In-process: a file the CLI linted (same content, same dependencies) gets the cached findings at once;
    any difference — the buffer, an unsaved buffer of a dependency, a dependency on disk — lints afresh."""
    import json

    from click.testing import CliRunner

    from streamlint.cli import main
    from streamlint.lsp import StreamlintServer

    (tmp_path / "pyproject.toml").write_text("[tool.streamlint]\n", encoding="utf-8")
    wrapper = ("import torchair\n\n\ndef npu_stream_switch(tag, prio=0):\n"
               "    return torchair.scope.npu_stream_switch(tag, prio)\n")
    model = "from utils import npu_stream_switch\n\nwith npu_stream_switch(\"a\", 3):\n    pass\n"
    (tmp_path / "utils.py").write_text(wrapper, encoding="utf-8")
    path = tmp_path / "model.py"
    path.write_text(model, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["check", "."]).exit_code == 1
    # mark the cached result so that its use is visible
    [results] = (tmp_path / ".streamlint_cache").rglob("results-*.json")
    data = json.loads(results.read_text(encoding="utf-8"))
    [entry] = [e for p, e in data["files"].items() if p.endswith("model.py")]
    assert [f["c"] for f in entry["f"]] == ["SL104"]
    entry["f"][0]["m"] = "FROM THE CACHE"
    results.write_text(json.dumps(data), encoding="utf-8")

    class Server(StreamlintServer):
        encoding = types.PositionEncodingKind.Utf16  # (no client handshake in-process)

    server = Server()
    try:
        uri = from_fs_path(str(path))

        def messages(text: str) -> list[str]:
            return [f.message for f in server.lint(uri, str(path), text, 1).findings]

        assert messages(model) == ["FROM THE CACHE"]
        fresh = messages(model + "\n")  # another content: linted
        assert len(fresh) == 1 and "through wrapper" in fresh[0]
        engine = next(iter(server.engines.values()))[0]
        engine.set_override(str(tmp_path / "utils.py"), wrapper.replace("tag, prio)", "tag)").encode())
        assert messages(model) == []  # an unsaved dependency differs from the disk: not the cache
        engine.set_override(str(tmp_path / "utils.py"), None)
        assert messages(model) == ["FROM THE CACHE"]
        (tmp_path / "utils.py").write_text(wrapper.replace("tag, prio)", "tag)"), encoding="utf-8")
        server.forget(str(tmp_path / "utils.py"))
        assert messages(model) == []  # the dependency changed on disk
    finally:
        server.worker.shutdown()
