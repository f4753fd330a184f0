"""The linted repository is untrusted (issue 14): its configuration never imports code or reaches outside
the project, the cache deletes only what it created, --fix never loses data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import streamlint.registry as registry_module
from harness import BAD, CLEAN, cli, write

GRAPHED = "import torchair\ndef f():\n    with torchair.scope.npu_stream_switch('s', 3):\n        pass\n"


run = cli


# ---------------------------------------------------------------- 1. plugins named by the repository
def _hostile(root: Path, marker: Path, config: str = "") -> str:
    """A module in the linted tree that writes ``marker`` when imported, named in the repo's config."""
    name = f"evil_{uuid.uuid4().hex[:8]}"
    write(root, f"{name}.py", f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n"
                              "from streamlint.rule import Rule\nPREFIX = 'XE'\n")
    write(root, "pyproject.toml", f"[tool.streamlint]\nplugins = [{name!r}]\n{config}")
    write(root, "bad.py", BAD)
    write(root, "g.py", GRAPHED)
    return name


def test_repo_config_plugin_is_never_imported_by_check(project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    path_before = list(sys.path)
    name = _hostile(project, marker)
    result = run(["bad.py", "--output-format", "concise"])
    assert not marker.exists() and name not in sys.modules and sys.path == path_before
    assert result.exit_code == 1  # the findings; a plugin that is not installed is a warning
    warnings = [line for line in result.stderr.splitlines() if name in line]
    assert warnings == [f"streamlint: warning: {project / 'pyproject.toml'}: plugins: rule pack {name!r} is not "
                        "installed; its rules are not available"]


def test_repo_config_plugin_is_never_imported_by_show_settings_rule_graph(project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    name = _hostile(project, marker)
    assert run(["check", "--show-settings"]).exit_code == 0
    assert run(["rule", "SL104"]).exit_code == 0
    assert run(["rule", "--all"]).exit_code == 0
    assert run(["graph", "g.py"]).exit_code == 0
    assert run(["clean"]).exit_code == 0
    assert not marker.exists() and name not in sys.modules


def test_repo_config_plugin_is_never_imported_by_the_language_server(project: Path, tmp_path: Path) -> None:
    pytest.importorskip("pygls")
    from streamlint.lsp import StreamlintServer

    marker = tmp_path / "marker"
    name = _hostile(project, marker)
    server = StreamlintServer()
    try:
        found = server.engine_for(str(project / "bad.py"))
        assert not isinstance(found, str), found
        assert found[0].lint_file(str(project / "bad.py")).findings
    finally:
        server.worker.shutdown()
    assert not marker.exists() and name not in sys.modules


def test_selecting_codes_of_a_missing_plugin_is_exit_2(project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    _hostile(project, marker, "extend-select = ['XE']\n")
    write(project, "pyproject.toml", "[tool.streamlint]\nextend-select = ['XE1']\nplugins = ['XE']\n")
    result = run(["bad.py"])
    assert result.exit_code == 2 and not marker.exists()
    assert result.stderr.splitlines()[-1] == (
        f"streamlint: error: {project / 'pyproject.toml'}: extend-select: 'XE1' needs the rule pack 'XE' "
        "(named in plugins), which is not installed")
    # ignoring them, or giving them options, is harmless
    write(project, "pyproject.toml", "[tool.streamlint]\nplugins = ['XE']\nignore = ['XE1']\n"
                                     "[tool.streamlint.per-file-ignores]\n'x/*' = ['XE']\n"
                                     "[tool.streamlint.rules.XE101]\nanything = 1\n")
    assert run(["bad.py"]).exit_code == 1


def test_python_dash_m_in_a_hostile_checkout_imports_nothing_from_it(tmp_path: Path) -> None:
    """`python -m streamlint` puts the current directory first on sys.path: a repository's fake
    distribution (entry point) or a module shadowing a dependency must not be picked up from it."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    marker = tmp_path / "marker"
    hostile = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n"
    write(repo, "evil_ep_mod.py", hostile + "PREFIX = 'XH'\n")
    write(repo, "evil-1.0.dist-info/entry_points.txt", "[streamlint.rules]\nXH = evil_ep_mod\n")
    write(repo, "evil-1.0.dist-info/METADATA", "Name: evil\nVersion: 1.0\n")
    write(repo, "pathspec.py", hostile)  # shadows a dependency
    write(repo, "bad.py", BAD)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "STREAMLINT_PLUGINS")}
    proc = subprocess.run([sys.executable, "-m", "streamlint", "check", "bad.py", "--no-cache"], cwd=repo,
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert not marker.exists()


def test_dev_plugin_from_the_environment_only(project: Path, tmp_path: Path, monkeypatch) -> None:
    """A rule pack under development is the user's choice: $STREAMLINT_PLUGINS, from the ordinary sys.path."""
    plugins = tmp_path / "plugins"
    name = f"devplug_{uuid.uuid4().hex[:8]}"
    write(plugins, f"{name}.py", '''
        from streamlint.rule import Rule
        PREFIX = "XD"
        class Dev(Rule):
            """## What it does
            Reports the first statement."""
            code = "XD001"
            name = "dev-rule"
            def check(self, ctx):
                ctx.report(ctx.file.module.body[0], "dev rule ran")
    ''')
    monkeypatch.syspath_prepend(str(plugins))
    write(project, "bad.py", BAD)
    write(project, "streamlint.toml", "select = ['XD']\nplugins = ['XD']\n")
    assert run(["bad.py"]).exit_code == 2  # not installed, not in the environment
    monkeypatch.setenv("STREAMLINT_PLUGINS", name)
    result = run(["bad.py", "--output-format", "concise", "--no-cache"])
    assert (result.exit_code, result.stdout.splitlines()) == (1, ["bad.py:1:1: XD001 dev rule ran"])
    assert "not installed" not in result.stderr
    sys.modules.pop(name, None)


# ---------------------------------------------------------------- 12. graph with a broken or missing plugin
def test_graph_with_a_broken_plugin_is_one_line(project: Path, tmp_path: Path, monkeypatch) -> None:
    from importlib.metadata import EntryPoint, entry_points

    write(project, "bad.py", GRAPHED)
    write(project, "streamlint.toml", "plugins = ['no_such_pack']\n")
    result = run(["graph", "bad.py"])
    assert result.exit_code == 0 and result.stdout
    write(project, "streamlint.toml", "plugins = ['XN']\nselect = ['XN']\n")
    result = run(["graph", "bad.py"])
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1 and "'XN'" in result.stderr
    broken = tmp_path / "brokenpack"
    name = f"broken_{uuid.uuid4().hex[:8]}"
    write(broken, f"{name}.py", "raise RuntimeError('broken pack')\n")
    monkeypatch.syspath_prepend(str(broken))
    fake = list(entry_points(group=registry_module.ENTRY_POINT_GROUP)) + [
        EntryPoint("XB", name, registry_module.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(registry_module, "entry_points", lambda group: fake)
    write(project, "streamlint.toml", "")
    result = run(["graph", "bad.py"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"streamlint: error: plugin {name!r} failed to load: RuntimeError: broken pack"]


# ---------------------------------------------------------------- the language server over stdio (raw)
class RawLsp:
    """`python -m streamlint server` driven over stdio with hand-framed JSON-RPC; every byte the server
    writes to stdout must be a framed message."""

    def __init__(self, cwd: Path, env: dict[str, str] | None = None) -> None:
        import queue
        import threading

        full_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "STREAMLINT_PLUGINS")}
        full_env.update(env or {})
        self.proc = subprocess.Popen([sys.executable, "-m", "streamlint", "server"], cwd=cwd, env=full_env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.messages: "queue.Queue[dict | str]" = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                byte = out.read(1)
                if not byte:
                    return
                header += byte
            fields = dict(line.split(": ", 1) for line in header.decode("ascii", "replace").split("\r\n") if line)
            if "Content-Length" not in fields:
                self.messages.put(f"not a JSON-RPC frame on stdout: {header!r}")
                return
            body = out.read(int(fields["Content-Length"]))
            try:
                self.messages.put(json.loads(body))
            except ValueError:
                self.messages.put(f"not JSON on stdout: {body!r}")
                return

    def send_raw(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def send(self, method: str, params: object, request: bool = False) -> int | None:
        message: dict = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        self.send_raw(json.dumps(message).encode("utf-8"))
        return message.get("id")

    def wait(self, predicate, timeout: float = 30.0) -> dict:
        import queue
        import time

        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.messages.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError("no such message from the server") from None
            assert not isinstance(message, str), message
            if predicate(message):
                return message

    def start(self, root: Path) -> None:
        ident = self.send("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}, True)
        self.wait(lambda m: m.get("id") == ident)
        self.send("initialized", {})

    def open(self, path: Path, text: str) -> dict:
        self.send("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python",
                                                            "version": 1, "text": text}})
        return self.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                         and m["params"]["uri"] == path.as_uri())

    def close(self) -> str:
        try:
            ident = self.send("shutdown", None, True)
            self.wait(lambda m: m.get("id") == ident)
            self.send("exit", None)
            self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode("utf-8", "replace")


def test_language_server_never_imports_a_repo_plugin(tmp_path: Path) -> None:
    pytest.importorskip("pygls")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    marker = tmp_path / "marker"
    _hostile(repo, marker)
    client = RawLsp(repo)
    try:
        client.start(repo)
        published = client.open(repo / "bad.py", BAD)
        assert {d["code"] for d in published["params"]["diagnostics"]} == {"SL104", "SL105"}
    finally:
        client.close()
    assert not marker.exists()


def test_language_server_stdout_is_the_protocol_only(tmp_path: Path) -> None:
    """A plugin printing (at import, in a rule) never reaches stdout; malformed JSON gets a ParseError."""
    pytest.importorskip("pygls")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo, "pyproject.toml", "[tool.streamlint]\nextend-select = ['XP']\n")
    plugins = tmp_path / "plugins"
    write(plugins, "chatty_plugin.py", '''
        import os
        print("chatty plugin imported")
        os.write(1, b"raw bytes on fd 1\\n")
        from streamlint.rule import Rule
        PREFIX = "XP"
        class Chatty(Rule):
            """## What it does
            Prints."""
            code = "XP001"
            name = "chatty-rule"
            def check(self, ctx):
                print("chatty rule ran")
                ctx.report(ctx.file.module.body[0], "chatty")
    ''')
    client = RawLsp(repo, {"PYTHONPATH": str(plugins), "STREAMLINT_PLUGINS": "chatty_plugin"})
    try:
        client.start(repo)
        published = client.open(repo / "bad.py", BAD)
        assert "XP001" in {d["code"] for d in published["params"]["diagnostics"]}
        client.send_raw(b'{"jsonrpc": "2.0", "id": 7, "method": ')  # cut short
        error = client.wait(lambda m: "error" in m)
        assert error["id"] is None and error["error"]["code"] == -32700
        client.send_raw(b"\xff\xfe not utf-8")
        error = client.wait(lambda m: "error" in m)
        assert error["id"] is None and error["error"]["code"] == -32700
        client.send_raw(b"[" * 100_000 + b"]" * 100_000)  # too deeply nested to parse
        error = client.wait(lambda m: "error" in m)
        assert error["id"] is None and error["error"]["code"] == -32700
        # still serving
        published = client.open(repo / "other.py", CLEAN)
        assert "XP001" in {d["code"] for d in published["params"]["diagnostics"]}
    finally:
        stderr = client.close()
    assert "chatty plugin imported" in stderr and "chatty rule ran" in stderr


# ---------------------------------------------------------------- 2. the cache directory
def _victim(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    victim = tmp_path / "victim"
    write(victim, "v1/thesis.tex", "precious")
    write(victim, "v2/results-0123456789abcdef0123.json", "{}")  # named like ours, but not our folder
    write(victim, "notes.txt", "keep")
    return victim, _snapshot(victim)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>") for p in sorted(root.rglob("*"))}


def test_repo_cache_dir_outside_the_project_is_not_used(project: Path, tmp_path: Path) -> None:
    victim, before = _victim(tmp_path)
    write(project, "bad.py", BAD)
    write(project, "streamlint.toml", "cache-dir = '../victim'\n")
    result = run(["bad.py"])
    assert result.exit_code == 1
    assert [line for line in result.stderr.splitlines() if "cache-dir" in line] == [
        f"streamlint: warning: {project / 'streamlint.toml'}: cache-dir {str(project / '../victim')!r} leads "
        f"outside the project ({victim}); not used (only --cache-dir or $STREAMLINT_CACHE_DIR may choose such "
        "a place)"]
    assert _snapshot(victim) == before
    result = run(["clean"])
    assert result.exit_code == 2 and "leads outside the project" in result.stderr
    assert _snapshot(victim) == before
    # an absolute path, or a committed symbolic link, leads out just the same
    write(project, "streamlint.toml", f"cache-dir = {str(victim)!r}\n")
    assert run(["bad.py"]).exit_code == 1 and run(["clean"]).exit_code == 2
    write(project, "streamlint.toml", "")
    (project / ".streamlint_cache").symlink_to(victim)
    assert run(["bad.py"]).exit_code == 1 and run(["clean"]).exit_code == 2
    assert _snapshot(victim) == before


def test_user_may_put_the_cache_anywhere(project: Path, tmp_path: Path, monkeypatch) -> None:
    write(project, "bad.py", BAD)
    write(project, "streamlint.toml", "cache-dir = '../victim'\n")
    elsewhere = tmp_path / "elsewhere"
    result = run(["bad.py", "--cache-dir", str(elsewhere)])
    assert result.exit_code == 1 and "warning" not in result.stderr
    assert list(elsewhere.glob("v*/results-*.json"))
    monkeypatch.setenv("STREAMLINT_CACHE_DIR", str(tmp_path / "from_env"))
    assert run(["bad.py"]).exit_code == 1 and list((tmp_path / "from_env").glob("v*/results-*.json"))
    assert run(["clean"]).exit_code == 0 and not (tmp_path / "from_env").exists()
    assert not (tmp_path / "victim").exists()


def test_cache_is_not_planted_in_an_existing_folder(project: Path) -> None:
    write(project, "bad.py", BAD)
    write(project, "src/mod.py", "x = 1\n")
    for value in ("src", "."):
        before = _snapshot(project)
        write(project, "streamlint.toml", f"cache-dir = {value!r}\n")
        before = _snapshot(project)
        result = run(["bad.py"])
        assert result.exit_code == 1 and "warning" in result.stderr
        assert _snapshot(project) == before  # no CACHEDIR.TAG, no `*` .gitignore hiding the sources
        assert run(["clean"]).exit_code == 2 and _snapshot(project) == before


def test_clean_removes_only_cache_entries(project: Path) -> None:
    write(project, "bad.py", BAD)
    assert run(["bad.py"]).exit_code == 1
    cache = project / ".streamlint_cache"
    [entry] = cache.glob("v*/results-*.json")
    write(cache, "notes.txt", "mine")
    write(cache, f"{entry.parent.name}/mine.json", "mine")
    write(cache, "v1/results-0123456789abcdef0123.json", "{}")  # an older format's entry: ours
    result = run(["clean"])
    assert result.exit_code == 0
    assert "left in place (not streamlint's): CACHEDIR.TAG" not in result.stderr
    assert _snapshot(cache) == {"CACHEDIR.TAG": (cache / "CACHEDIR.TAG").read_bytes(), "notes.txt": b"mine",
                                entry.parent.name: b"<dir>", f"{entry.parent.name}/mine.json": b"mine"}
    (cache / "notes.txt").unlink()
    (cache / entry.parent.name / "mine.json").unlink()
    assert run(["clean"]).exit_code == 0 and not cache.exists()
    # a marker that is not exactly ours does not make a folder ours
    write(cache, "CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# streamlint\n")
    write(cache, "v2/results-0123456789abcdef0123.json", "{}")
    assert run(["clean"]).exit_code == 2 and (cache / "v2/results-0123456789abcdef0123.json").exists()


def test_old_cache_formats_are_removed_entry_by_entry(project: Path) -> None:
    write(project, "bad.py", BAD)
    assert run(["bad.py"]).exit_code == 1
    cache = project / ".streamlint_cache"
    write(cache, "v1/results-0123456789abcdef0123.json", "{}")
    write(cache, "v1/keep.txt", "not ours")
    write(cache, "v0/results-0123456789abcdef0123.json", "{}")
    write(project, "bad.py", BAD + "\n")  # a change: the cache is saved again
    assert run(["bad.py"]).exit_code == 1
    assert sorted(p.name for p in (cache / "v1").iterdir()) == ["keep.txt"] and not (cache / "v0").exists()


# ---------------------------------------------------------------- 3. each file is read once
@pytest.mark.parametrize("second_read", ["enoent", "changed"])
def test_each_file_is_read_once_and_hashed_and_parsed_from_the_same_bytes(
        project: Path, monkeypatch: pytest.MonkeyPatch, second_read: str) -> None:
    """A second read of a file (failing, or seeing a new content) would be cached under the first read's
    hash: every later run would report it. The bytes hashed are the bytes parsed."""
    from streamlint.engine import Engine

    write(project, "bad.py", BAD)
    write(project, "clean.py", CLEAN)
    expected = run(["--no-cache", "--output-format", "concise", "."]).stdout
    reads: dict[str, int] = {}
    real_read = Engine.read

    def flaky_read(self, path: str) -> bytes:
        key = os.path.abspath(path)
        reads[key] = reads.get(key, 0) + 1
        if reads[key] > 1:
            if second_read == "enoent":
                raise FileNotFoundError(2, "No such file or directory")
            return b"import torchair\nwith torchair.scope.npu_stream_switch(99, 99):\n    pass\n"
        return real_read(self, path)

    monkeypatch.setattr(Engine, "read", flaky_read)
    first = run(["--output-format", "concise", "-j", "1", "."])
    assert first.stdout == expected
    assert reads and set(reads.values()) == {1}
    monkeypatch.setattr(Engine, "read", real_read)
    assert run(["--output-format", "concise", "."]).stdout == expected  # from the cache: the same


# ---------------------------------------------------------------- 4. cache entries of the wrong shape
def _entry_mutations() -> list:
    def finding(field: str, value: object):
        def mutate(entry: dict) -> object:
            entry["f"][0][field] = value
            return entry
        return mutate

    def top(field: str, value: object):
        def mutate(entry: dict) -> object:
            entry[field] = value
            return entry
        return mutate

    return [
        lambda entry: [entry],  # a list instead of an object
        lambda entry: None,
        lambda entry: "text",
        top("h", 5), top("f", {"c": 1}), top("f", [[1, 2]]), top("d", ["x"]), top("d", {"x": 1}), top("w", 1),
        top("s", "x"), top("s", [1, "2"]),
        finding("sp", ["a", 1, 2, 3]), finding("sp", [1, 2]), finding("sp", [1, 2, 3, -4]), finding("s", "fatal"),
        finding("c", 104), finding("m", None), finding("r", [[1, 2]]), finding("r", "x"), finding("f", [1]),
        finding("f", ["t", "safe", [[[1, 0, 1, 0], 5]]]), finding("d", "abc"), finding("p", 3),
    ]


def _without_summary(stderr: str) -> str:
    """stderr less the run's one-line summary (``streamlint: checked N files in ...``)."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("streamlint: checked "))


@pytest.mark.parametrize("mutation", range(len(_entry_mutations())))
def test_cache_entry_of_the_wrong_shape_is_a_miss(project: Path, mutation: int) -> None:
    write(project, "bad.py", BAD)
    for path in project.rglob("*.py"):  # old enough: the cache trusts their size and mtime
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 3600 * 10**9))
    cold = run(["--output-format", "concise", "."])
    assert cold.exit_code == 1
    [results] = (project / ".streamlint_cache").rglob("results-*.json")
    data = json.loads(results.read_text(encoding="utf-8"))
    [key] = [k for k in data["files"] if k.endswith("bad.py")]
    assert data["files"][key]["f"] and "s" in data["files"][key]
    data["files"][key] = _entry_mutations()[mutation](data["files"][key])
    results.write_text(json.dumps(data), encoding="utf-8")
    for _ in range(2):  # the invalid entry is a miss, then replaced
        again = run(["--output-format", "concise", "."])
        assert (again.exit_code, again.stdout, _without_summary(again.stderr)) == (1, cold.stdout, "")


@pytest.mark.parametrize("content", ["[" * 100_000 + "]" * 100_000, '{"key": 1, "files": []}', "[]", "7",
                                     '{"key": "K", "files": {"x": ' + "[" * 50_000 + "]" * 50_000 + "}}"])
def test_cache_file_of_the_wrong_shape_is_a_miss(project: Path, content: str) -> None:
    write(project, "bad.py", BAD)
    cold = run(["--output-format", "concise", "."])
    [results] = (project / ".streamlint_cache").rglob("results-*.json")
    key = json.loads(results.read_text(encoding="utf-8"))["key"]
    results.write_text(content.replace('"K"', json.dumps(key)), encoding="utf-8")
    again = run(["--output-format", "concise", "."])
    assert (again.exit_code, again.stdout, _without_summary(again.stderr)) == (1, cold.stdout, "")


# ---------------------------------------------------------------- 6-7. data safety of --fix
FIXED = "import torchair\nwith torchair.scope.npu_stream_switch(1):\n    pass\n"


def _fix(args: list[str]):
    return run(["--fix", "--no-cache", "--output-format", "concise", *args])


def test_fix_does_not_overwrite_a_file_changed_after_it_was_read(project: Path, monkeypatch) -> None:
    import streamlint.fixes as fixes_module  # (the command line imports fix_file from it when fixing)

    write(project, "a.py", BAD)
    write(project, "b.py", BAD)
    real_fix_file = fixes_module.fix_file

    def fix_then_edit(engine, path, policy, **kw):
        result = real_fix_file(engine, path, policy, **kw)
        if path.endswith("a.py"):  # an editor saves the file while streamlint is fixing it
            Path(path).write_text("# edited meanwhile\n" + BAD, encoding="utf-8")
        return result

    monkeypatch.setattr(fixes_module, "fix_file", fix_then_edit)
    result = _fix(["."])
    assert (project / "a.py").read_text(encoding="utf-8") == "# edited meanwhile\n" + BAD
    assert (project / "b.py").read_text(encoding="utf-8") == FIXED
    assert "streamlint: warning: a.py: changed on disk since it was read; not rewritten (run again)" \
        in result.stderr.splitlines()
    assert result.exit_code == 1 and "a.py:2:39: SL105" in result.stdout  # its findings are still reported


def test_fix_writes_each_file_as_soon_as_it_is_fixed(project: Path, monkeypatch) -> None:
    import streamlint.fixes as fixes_module  # (the command line imports fix_file from it when fixing)

    for name in ("a.py", "b.py", "c.py"):
        write(project, name, BAD)
    real_fix_file = fixes_module.fix_file
    on_disk: dict[str, list[str]] = {}

    def recording(engine, path, policy, **kw):
        on_disk[os.path.basename(path)] = sorted(
            p.name for p in project.glob("*.py") if p.read_text(encoding="utf-8") == FIXED)
        return real_fix_file(engine, path, policy, **kw)

    monkeypatch.setattr(fixes_module, "fix_file", recording)
    assert _fix(["."]).exit_code == 1
    assert on_disk == {"a.py": [], "b.py": ["a.py"], "c.py": ["a.py", "b.py"]}


def test_fix_leaves_a_read_only_file_and_fixes_the_others(project: Path) -> None:
    write(project, "a.py", BAD)
    write(project, "b.py", BAD)
    os.chmod(project / "a.py", 0o444)
    result = _fix(["."])
    assert (project / "a.py").read_text(encoding="utf-8") == BAD
    assert (project / "a.py").stat().st_mode & 0o777 == 0o444
    assert (project / "b.py").read_text(encoding="utf-8") == FIXED
    assert "streamlint: warning: a.py: read-only file; not rewritten" in result.stderr.splitlines()
    assert result.exit_code == 1
    assert [line.split(": ")[0] + ": " + line.split(": ")[1].split()[0] for line in result.stdout.splitlines()] == [
        "a.py:2:39: SL105", "a.py:2:42: SL104", "b.py:2:39: SL105"]


def test_fix_writes_through_a_symbolic_link_inside_the_project_only(project: Path, tmp_path: Path) -> None:
    write(project, "real/target.py", BAD)
    (project / "link.py").symlink_to(project / "real" / "target.py")
    outside = write(tmp_path, "outside/target.py", BAD)
    (project / "out_link.py").symlink_to(outside)
    result = _fix(["link.py", "out_link.py"])
    assert (project / "link.py").is_symlink() and (project / "real/target.py").read_text(encoding="utf-8") == FIXED
    assert (project / "out_link.py").is_symlink() and outside.read_text(encoding="utf-8") == BAD
    assert f"streamlint: warning: out_link.py: a symbolic link to {outside}, outside the project; not rewritten" \
        in result.stderr.splitlines()


def test_fix_keeps_hard_links_owner_and_mode(project: Path) -> None:
    path = write(project, "a.py", BAD)
    os.link(path, project / "twin.py")
    os.chmod(path, 0o640)
    owner = None
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        owner = (12345, 23456)
        os.chown(path, *owner)
    inode = path.stat().st_ino
    assert _fix(["a.py"]).exit_code == 1
    st = path.stat()
    assert path.read_text(encoding="utf-8") == FIXED == (project / "twin.py").read_text(encoding="utf-8")
    assert (st.st_ino, st.st_nlink, st.st_mode & 0o7777) == (inode, 2, 0o640)
    if owner is not None:
        assert (st.st_uid, st.st_gid) == owner
        os.unlink(project / "twin.py")  # a single link, someone else's file: kept theirs, in place
        write(project, "a.py", BAD)
        os.chown(path, *owner)
        assert _fix(["a.py"]).exit_code == 1
        assert (path.stat().st_uid, path.stat().st_gid) == owner and path.read_text(encoding="utf-8") == FIXED


def test_fix_with_an_unwritable_file_reports_it_and_fixes_the_others(project: Path, monkeypatch) -> None:
    import errno

    import streamlint.fixes as fixes_module

    write(project, "a.py", BAD)
    write(project, "b.py", BAD)
    real_open = open

    def failing_open(file, mode="r", *args, **kwargs):
        if str(file).endswith("a.py") and any(c in mode for c in "wa+"):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(file, mode, *args, **kwargs)

    real_mkstemp = fixes_module.tempfile.mkstemp

    def failing_mkstemp(*args, **kwargs):
        if kwargs.get("dir") == str(project):
            calls.append(1)
            if len(calls) == 1:  # the folder refuses the first file's temporary file
                raise OSError(errno.EROFS, "Read-only file system")
        return real_mkstemp(*args, **kwargs)

    calls: list[int] = []
    monkeypatch.setattr(fixes_module, "open", failing_open, raising=False)
    monkeypatch.setattr(fixes_module.tempfile, "mkstemp", failing_mkstemp)
    result = _fix(["."])
    assert result.exit_code == 2
    assert "streamlint: error: a.py: cannot write the fixes: Read-only file system" in result.stderr.splitlines()
    assert (project / "a.py").read_text(encoding="utf-8") == BAD
    assert (project / "b.py").read_text(encoding="utf-8") == FIXED
    assert "a.py:2:42: SL104" in result.stdout  # the report is still printed, a.py's findings as they are


# ---------------------------------------------------------------- 8. directory links leading outside
def test_directory_links_outside_the_project_are_not_followed_by_default(project: Path, tmp_path: Path) -> None:
    write(tmp_path, "elsewhere/pkg/bad.py", BAD)
    (project / "vendor").symlink_to(tmp_path / "elsewhere")
    write(project, "inner/bad.py", BAD)
    (project / "inner_link").symlink_to(project / "inner")  # inside: followed (linted once)
    result = run(["--no-cache", "--output-format", "concise", "."])
    assert {line.split(":")[0] for line in result.stdout.splitlines() if "SL1" in line} == {"inner/bad.py"}
    assert "streamlint: warning: ./vendor: symbolic link to a directory outside the project, not followed " \
           "(--follow-external-symlinks follows it)" in result.stderr.splitlines()
    result = run(["--no-cache", "--output-format", "concise", "--follow-external-symlinks", "."])
    assert {line.split(":")[0] for line in result.stdout.splitlines() if "SL1" in line} == {
        "inner/bad.py", "vendor/pkg/bad.py"}
    result = run(["--no-cache", "--output-format", "concise", "vendor"])  # named on the command line: walked
    assert "vendor/pkg/bad.py" in result.stdout


# ---------------------------------------------------------------- 9. baselines
@pytest.mark.parametrize("content, message", [
    (b"[" * 100_000 + b"]" * 100_000, "not a streamlint baseline (too deeply nested)"),
    (b'{"version": 1, "findings": [{"fingerprint": "\xff\xfe"}]}', "not a streamlint baseline (not UTF-8: byte 45)"),
    (b"{not json", "not a streamlint baseline (invalid JSON: Expecting property name enclosed in double quotes)"),
    (b'{"version": 1, "findings": [{"fingerprint": "abc"}]}', "baseline entry 1 needs a fingerprint and a path"),
    (b'{"version": 1, "findings": [["abc"]]}', "baseline entry 1 needs a fingerprint and a path"),
])
def test_bad_baseline_is_a_clear_configuration_error(project: Path, content: bytes, message: str) -> None:
    write(project, "bad.py", BAD)
    (project / "baseline.json").write_bytes(content)
    result = run(["bad.py", "--baseline", "baseline.json"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"streamlint: error: baseline.json: {message}"]


def test_baseline_entries_match_by_fingerprint_and_path(project: Path) -> None:
    write(project, "a.py", BAD)
    assert run(["a.py", "--write-baseline", "baseline.json"]).exit_code == 0
    assert run(["a.py", "--baseline", "baseline.json"]).exit_code == 0
    data = json.loads((project / "baseline.json").read_text(encoding="utf-8"))
    for entry in data["findings"]:
        entry["path"] = "elsewhere.py"  # same fingerprints, recorded for another file
    (project / "baseline.json").write_text(json.dumps(data), encoding="utf-8")
    result = run(["a.py", "--baseline", "baseline.json", "--output-format", "concise"])
    assert result.exit_code == 1 and len(result.stdout.splitlines()) == 2


def test_baseline_outside_the_project_from_a_repo_config_is_refused(project: Path, tmp_path: Path) -> None:
    write(project, "a.py", BAD)
    assert run(["a.py", "--write-baseline", str(tmp_path / "outside.json")]).exit_code == 0
    write(project, "streamlint.toml", "baseline = '../outside.json'\n")
    result = run(["a.py"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"streamlint: error: {project / 'streamlint.toml'}: baseline: {project / '../outside.json'} leads outside "
        f"the project ({tmp_path / 'outside.json'}); refused (give it with --baseline to use it)"]
    (project / "ci").symlink_to(tmp_path)  # a link inside leading out: the same
    write(project, "streamlint.toml", "baseline = 'ci/outside.json'\n")
    assert run(["a.py"]).exit_code == 2
    assert run(["a.py", "--baseline", str(tmp_path / "outside.json")]).exit_code == 0  # the user's choice
    (project / "ci").unlink()
    write(project, "streamlint.toml", "baseline = 'ci/baseline.json'\n")
    assert run(["a.py", "--write-baseline", "ci/baseline.json"]).exit_code == 0
    assert run(["a.py"]).exit_code == 0


# ---------------------------------------------------------------- 11. Ctrl-C
@pytest.mark.parametrize("jobs, files", [("1", 1), ("2", 40)])
def test_ctrl_c_exits_130_with_one_line(tmp_path: Path, jobs: str, files: int) -> None:
    """SIGINT to the process group (as a terminal sends it) while rules run: exit 130, one line, no
    traceback from the parent or the workers."""
    import signal
    import time

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    started = tmp_path / "started"
    plugins = tmp_path / "plugins"
    write(plugins, "slow_rules.py", f'''
        import pathlib, time
        from streamlint.rule import Rule
        PREFIX = "XS"
        class Slow(Rule):
            """## What it does
            Takes its time."""
            code = "XS001"
            name = "slow-rule"
            def check(self, ctx):
                pathlib.Path({str(started)!r}).touch()
                time.sleep(600)  # only the interrupt ends this run
    ''')
    write(repo, "pyproject.toml", "[tool.streamlint]\nextend-select = ['XS']\n")
    for i in range(files):
        write(repo, f"m{i:03}.py", BAD)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(plugins), STREAMLINT_PLUGINS="slow_rules")
    # a program started from a terminal has Ctrl-C at its default disposition; a runner that starts the suite in the
    # background (a non-interactive shell's `cmd &`) ignores SIGINT, and its children would inherit that
    proc = subprocess.Popen([sys.executable, "-m", "streamlint", "check", ".", "--no-cache", "-j", jobs], cwd=repo,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 180
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), proc.communicate(timeout=30)
        os.killpg(proc.pid, signal.SIGINT)
        # generous: a loaded CI machine may take long to tear a process pool down; a run the interrupt did not
        # stop would sleep for 600 s and fail here
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (proc.returncode, stdout, stderr.decode()) == (130, b"", "streamlint: interrupted\n")


# ---------------------------------------------------------------- planted special files never block
SL402_CASE = '''\
import torch
import torchair as tng

class MoE(torch.nn.Module):
    def forward(self, x):
        with tng.scope.npu_stream_switch("moe_shared"):
            return x * 2

compiled = torch.compile(MoE(), backend="npu", dynamic=True)
'''


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifos_planted_as_gitignore_or_launch_script_are_never_opened(project: Path) -> None:
    write(project, "model.py", SL402_CASE)
    os.mkfifo(project / ".gitignore")
    os.mkfifo(project / "launch.sh")
    proc = subprocess.run([sys.executable, "-m", "streamlint", "check", ".", "--no-cache", "--output-format",
                           "concise"], cwd=project, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "model.py:9:12: SL402" in proc.stdout, proc.stderr


def test_cache_never_writes_through_a_planted_version_link(project: Path, tmp_path: Path) -> None:
    from streamlint.cache import CACHE_FORMAT, CACHEDIR_TAG

    victim = tmp_path / "victim"
    victim.mkdir()
    write(project, ".streamlint_cache/CACHEDIR.TAG", CACHEDIR_TAG)  # committed, looking like ours
    (project / ".streamlint_cache" / f"v{CACHE_FORMAT}").symlink_to(victim)
    write(project, "bad.py", BAD)
    assert run(["bad.py"]).exit_code == 1
    assert list(victim.iterdir()) == []
    assert run(["clean"]).exit_code == 0 and list(victim.iterdir()) == []


def test_add_noqa_respects_read_only_files_and_outside_links(project: Path, tmp_path: Path) -> None:
    write(project, "a.py", BAD)
    write(project, "b.py", BAD)
    os.chmod(project / "a.py", 0o444)
    outside = write(tmp_path, "outside/c.py", BAD)
    (project / "c.py").symlink_to(outside)
    result = run(["--add-noqa", "--no-cache", "a.py", "b.py", "c.py"])
    assert result.exit_code == 0
    assert (project / "a.py").read_text(encoding="utf-8") == BAD and outside.read_text(encoding="utf-8") == BAD
    assert "# noqa: SL104, SL105" in (project / "b.py").read_text(encoding="utf-8")
    lines = result.stderr.splitlines()
    assert "streamlint: warning: a.py: read-only file; not rewritten" in lines
    assert f"streamlint: warning: c.py: a symbolic link to {outside}, outside the project; not rewritten" in lines
