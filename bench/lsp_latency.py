"""LSP latency: time from ``didOpen`` of a 3,000-line file to its ``publishDiagnostics``, warm server.

    python bench/lsp_latency.py [--runs 5] [--lines 3000] [--timeout 60] [--json OUT] [--keep DIR]

What it does:

1. builds a throw-away project in a temp directory: ``pyproject.toml``, ``pkg/utils.py`` (the
   vllm-ascend style ``npu_stream_switch`` / ``npu_wait_tensor`` wrappers of ``bench/make_corpus.py``),
   a small stream module used only to warm the server up, and ``--runs`` distinct ~3,000-line modules
   (one seed each, so no two have the same content): TorchAir scopes through the wrapper and directly,
   ``torch.npu`` streams and events, tagged events, compile runners, MoE-like ``forward`` methods, and
   lots of plain model code between them;
2. starts ``streamlint server`` over stdio and talks to it with a minimal JSON-RPC client written here
   (stdlib only: ``Content-Length`` framing, one reader thread);
3. ``initialize`` / ``initialized``, then opens the small module and waits for its diagnostics (loads
   the rules, builds the engine, resolves the package: the server is now warm);
4. for each large module: sends ``didOpen`` (the whole text, version 1) and measures the wall time until
   ``textDocument/publishDiagnostics`` arrives for that URI and version; then ``didClose``;
   then sends ``didChange`` with one statement added inside a method (the whole text, version 2) and
   measures the time to the diagnostics of version 2, less the server's ``DEBOUNCE`` (the "after an
   edit" row of issue 15);
5. ``shutdown`` / ``exit``; the server is killed if it has not gone within a few seconds. Every wait has
   a timeout (``--timeout``, whole run) so the script cannot hang.

``didOpen`` is linted at once by the server (``streamlint/lsp.py``: ``schedule(uri, 0.0)``); only
``didChange`` is debounced (``DEBOUNCE`` = 0.2 s). So the number printed is the raw latency with no
debounce in it. For reference the script also times ``Engine.lint_file`` on the same buffers in its own
process (parse + model + rules, no JSON-RPC, no diagnostics conversion).

Prints min / median / max in ms; ``--json`` also writes them (``-`` for stdout, as the last line).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.make_corpus import UTILS, _plain_class, _plain_function, stream_module

HEADER = '''"""Multi-stream MoE layer: generated for the LSP latency benchmark."""
import logging
import math

import torch
import torch_npu
import torchair
import torchair as tng
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

from .utils import npu_stream_switch, npu_wait_tensor

logger = logging.getLogger(__name__)
'''


def _moe_block(rng: random.Random, index: int) -> str:
    """A MoE-like layer: shared experts on a secondary stream through the package wrapper."""
    tag = rng.choice(('"moe_secondary"', '"moe_shared"', "self.tag", "None"))
    prio = rng.choice(("0", "1", "2", "priority"))
    return f'''
class MoELayer{index}(nn.Module):
    def __init__(self, config, priority: int = 0):
        super().__init__()
        self.tag = config.stream_tag
        self.gate = nn.Linear(config.hidden_size, config.num_experts, bias=False)
        self.experts = nn.ModuleList(nn.Linear(config.hidden_size, config.hidden_size)
                                     for _ in range(config.num_experts))
        self.shared_experts = nn.Linear(config.hidden_size, config.hidden_size)
        self.enable_multistream = config.enable_multistream
        self.top_k = config.top_k

    def route(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.gate(hidden_states)
        weights, ids = torch.topk(logits.softmax(dim=-1), self.top_k, dim=-1)
        return weights / weights.sum(dim=-1, keepdim=True), ids

    def forward(self, hidden_states: torch.Tensor, priority: int = 0) -> torch.Tensor:
        weights, ids = self.route(hidden_states)
        with npu_stream_switch({tag}, {prio}, enabled=self.enable_multistream):
            npu_wait_tensor(hidden_states, weights, enabled=self.enable_multistream)
            shared = self.shared_experts(hidden_states)
        out = torch.zeros_like(hidden_states)
        for k in range(self.top_k):
            for e, expert in enumerate(self.experts):
                mask = ids[..., k] == e
                if mask.any():
                    out[mask] += weights[..., k][mask].unsqueeze(-1) * expert(hidden_states[mask])
        return out + shared
'''


def _stream_body(rng: random.Random, kind: int) -> str:
    """One of make_corpus's stream modules without its import header (the file has one header)."""
    text = stream_module(rng, kind)
    start = text.index("\nclass ")
    return text[start:]


def big_module(seed: int, target_lines: int = 3000) -> str:
    """A deterministic ~``target_lines``-line module: stream code spread through plain model code."""
    rng = random.Random(seed)
    chunks = [HEADER]
    count = HEADER.count("\n")
    index = 0
    while count < target_lines:
        roll = index % 10
        if roll == 0:
            chunk = _moe_block(rng, index)
        elif roll == 5:
            chunk = _stream_body(rng, rng.randrange(5))
        elif rng.random() < 0.6:
            chunk = "\n" + _plain_class(rng)
        else:
            chunk = "\n" + _plain_function(rng)
        chunks.append(chunk)
        count += chunk.count("\n")
        index += 1
    return "".join(chunks)


WARM = '''"""Small module opened first, to warm the server up."""
import torch
from torch import nn

from .utils import npu_stream_switch, npu_wait_tensor


class Warm(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        with npu_stream_switch("warm", 3):
            npu_wait_tensor(x, y)
            z = y * 2
        return z
'''


def make_project(root: Path, runs: int, lines: int, seed: int = 11) -> tuple[Path, list[Path]]:
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "lsp-bench"\nversion = "0"\n\n[tool.streamlint]\n',
                                         encoding="utf-8")
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "utils.py").write_text(UTILS, encoding="utf-8")
    warm = pkg / "warm.py"
    warm.write_text(WARM, encoding="utf-8")
    big = []
    for i in range(runs):
        path = pkg / f"moe_layer_{i:02d}.py"
        path.write_text(big_module(seed + i, lines), encoding="utf-8")
        big.append(path)
    return warm, big


# ---- a minimal LSP client (stdlib only)

class Timeout(Exception):
    pass


class Client:
    def __init__(self, cmd: list[str], cwd: Path, deadline: float) -> None:
        self.deadline = deadline
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.inbox: queue.Queue[tuple[float, dict | None]] = queue.Queue()
        self.stderr: list[bytes] = []
        self.next_id = 0
        self.write_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            while True:
                length = None
                while True:
                    line = out.readline()
                    if not line:
                        self.inbox.put((time.perf_counter(), None))
                        return
                    line = line.strip()
                    if not line:
                        break
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                if length is None:
                    continue
                body = out.read(length)
                received = time.perf_counter()  # the message is complete here
                self.inbox.put((received, json.loads(body)))
        except (OSError, ValueError):
            self.inbox.put((time.perf_counter(), None))

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def send(self, message: dict) -> float:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        assert self.proc.stdin is not None
        with self.write_lock:
            sent = time.perf_counter()
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        return sent

    def notify(self, method: str, params: dict | None = None) -> float:
        return self.send({"method": method, "params": params if params is not None else {}})

    def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        rid = self.next_id
        msg: dict = {"id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        _, reply = self.wait(lambda m: m.get("id") == rid and "method" not in m)
        if "error" in reply:
            raise RuntimeError(f"{method} failed: {reply['error']}")
        return reply

    def wait(self, match) -> tuple[float, dict]:
        """The next message satisfying ``match``; server requests are answered with null meanwhile."""
        while True:
            remaining = self.deadline - time.perf_counter()
            if remaining <= 0:
                raise Timeout("timed out waiting for the server")
            try:
                received, msg = self.inbox.get(timeout=remaining)
            except queue.Empty:
                raise Timeout("timed out waiting for the server") from None
            if msg is None:
                raise RuntimeError("the server closed its output:\n" + b"".join(self.stderr).decode("utf-8", "replace"))
            if "method" in msg and "id" in msg:  # a request from the server (registerCapability, ...)
                self.send({"id": msg["id"], "result": None})
            if match(msg):
                return received, msg

    def close(self) -> None:
        """shutdown + exit; kill the server (our own child, by its handle) if it lingers."""
        try:
            if self.proc.poll() is None:
                self.deadline = min(self.deadline, time.perf_counter() + 5)
                self.request("shutdown")
                self.notify("exit")
        except (Timeout, RuntimeError, OSError, ValueError) as exc:  # the server is killed below
            print(f"lsp_latency: shutdown failed: {exc}", file=sys.stderr)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


def _uri(path: Path) -> str:
    return path.absolute().as_uri()


def open_and_wait(client: Client, path: Path, text: str, version: int = 1) -> tuple[float, int]:
    """didOpen → publishDiagnostics for that uri and version: (seconds, number of diagnostics)."""
    uri = _uri(path)
    sent = client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": version, "text": text}})

    def match(m: dict) -> bool:
        p = m.get("params") or {}
        return (m.get("method") == "textDocument/publishDiagnostics" and p.get("uri") == uri
                and p.get("version") in (version, None))

    received, msg = client.wait(match)
    return received - sent, len(msg["params"]["diagnostics"])


def close_doc(client: Client, path: Path) -> None:
    uri = _uri(path)
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    # the server publishes [] on close: consume it so it cannot be mistaken for a later result
    client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                and (m.get("params") or {}).get("uri") == uri and not m["params"]["diagnostics"])


def edited(text: str, index: int) -> str:
    """``text`` with one statement added inside a method body (before one of its ``return`` lines)."""
    at = [i for i in range(len(text)) if text.startswith("\n        return ", i)]
    k = at[(index * 7 + len(at) // 2) % len(at)]
    return text[:k] + f"\n        edited_{index} = {index}" + text[k:]


def change_and_wait(client: Client, path: Path, text: str, version: int) -> tuple[float, int]:
    """didChange (the whole new text) → publishDiagnostics for that version: (seconds, diagnostics). The
    server waits ``DEBOUNCE`` after a change before it lints: that wait is included."""
    uri = _uri(path)
    sent = client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                    "contentChanges": [{"text": text}]})

    def match(m: dict) -> bool:
        p = m.get("params") or {}
        return m.get("method") == "textDocument/publishDiagnostics" and p.get("uri") == uri \
            and p.get("version") == version

    received, msg = client.wait(match)
    return received - sent, len(msg["params"]["diagnostics"])


def open_each(client: Client, paths: list[Path], edits: list[tuple[float, int]] | None = None) \
        -> tuple[list[float], list[int]]:
    """(seconds to diagnostics, diagnostic count) for each file, opened and closed one after the other;
    with ``edits``, each file is also edited once (one statement added in a method) before it is closed,
    and (seconds to the new diagnostics, their count) appended there."""
    seconds, counts = [], []
    for index, path in enumerate(paths):
        text = path.read_text(encoding="utf-8")
        took, n = open_and_wait(client, path, text)
        seconds.append(took)
        counts.append(n)
        if edits is not None:
            edits.append(change_and_wait(client, path, edited(text, index), 2))
        close_doc(client, path)
    return seconds, counts


def server_command() -> list[str]:
    exe = Path(sys.executable).parent / "streamlint"
    return [str(exe), "server"] if exe.exists() else [sys.executable, "-m", "streamlint", "server"]


def engine_only(root: Path, files: list[Path], cpu: dict | None = None) -> list[float]:
    """Engine.lint_file on each buffer in this process (warmed on the first file, garbage collector tuned as
    ``streamlint server`` does), for reference: wall times; with ``cpu``, the CPU seconds of each first lint
    (``cpu["open"]``) and of a lint after one statement is added in a method (``cpu["edit"]``), the numbers
    that the load of a shared machine inflates least."""
    from streamlint.cli import tune_gc
    from streamlint.config import load_settings
    from streamlint.engine import Engine
    from streamlint.registry import load_registry

    tune_gc()
    registry = load_registry()
    engine = Engine(load_settings(registry, root / "pkg"), registry)
    engine.lint_file(str(root / "pkg" / "warm.py"))
    times = []
    for index, path in enumerate(files):
        data = path.read_bytes()
        started, used = time.perf_counter(), time.process_time()
        engine.set_override(str(path), data)
        engine.lint_file(str(path))
        times.append(time.perf_counter() - started)
        if cpu is not None:
            cpu.setdefault("open", []).append(time.process_time() - used)
            used = time.process_time()
            engine.set_override(str(path), edited(data.decode("utf-8"), index).encode("utf-8"))
            engine.lint_file(str(path))
            cpu.setdefault("edit", []).append(time.process_time() - used)
    return times


def run(runs: int, lines: int, timeout: float, keep: Path | None = None) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="streamlint-lsp-bench-")) if keep is None else keep
    if keep is not None:
        if keep.exists():
            shutil.rmtree(keep)
        keep.mkdir(parents=True)
    try:
        root = tmp.resolve()
        warm, big = make_project(root, runs, lines)
        deadline = time.perf_counter() + timeout
        started = time.perf_counter()
        client = Client(server_command(), root, deadline)
        try:
            client.request("initialize", {
                "processId": os.getpid(), "rootUri": _uri(root),
                "workspaceFolders": [{"uri": _uri(root), "name": root.name}],
                "capabilities": {"textDocument": {"publishDiagnostics": {"versionSupport": True}},
                                 "general": {"positionEncodings": ["utf-16"]}},
            })
            client.notify("initialized", {})
            warm_s, _ = open_and_wait(client, warm, warm.read_text(encoding="utf-8"))
            startup = time.perf_counter() - started
            close_doc(client, warm)
            edits: list[tuple[float, int]] = []
            samples, counts = open_each(client, big, edits)
            # the same files once the command line has linted the project (pre-commit, CI, a terminal):
            # the server answers from the result cache when content and dependencies are unchanged
            subprocess.run([*server_command()[:-1], "check", str(root), "--exit-zero", "-q"], cwd=root,
                           capture_output=True, timeout=max(1.0, deadline - time.perf_counter()), check=False)
            cached, cached_counts = open_each(client, big)
        finally:
            client.close()
        cpu: dict = {}
        engine = engine_only(root, big, cpu)
        sizes = [p.read_text(encoding="utf-8").count("\n") for p in big]
        ms = [s * 1000 for s in samples]
        from streamlint.lsp import DEBOUNCE

        edit_ms = [(s - DEBOUNCE) * 1000 for s, _ in edits]
        return {
            "runs": runs, "lines": sizes, "diagnostics": counts,
            "startup_to_first_diagnostics_ms": startup * 1000, "warmup_open_ms": warm_s * 1000,
            "samples_ms": ms, "min_ms": min(ms), "median_ms": statistics.median(ms), "max_ms": max(ms),
            "after_edit_ms": edit_ms, "after_edit_median_ms": statistics.median(edit_ms),
            "after_edit_diagnostics": [n for _, n in edits],
            "engine_only_ms": [t * 1000 for t in engine],
            "engine_only_median_ms": statistics.median(engine) * 1000,
            "engine_cpu_open_ms": [t * 1000 for t in cpu["open"]], "engine_cpu_edit_ms": [t * 1000 for t in cpu["edit"]],
            "cached_samples_ms": [s * 1000 for s in cached], "cached_median_ms": statistics.median(cached) * 1000,
            "cached_same_diagnostics": cached_counts == counts,
            "did_open_debounced": False, "server_exit_code": client.proc.returncode,
        }
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description="streamlint LSP latency: didOpen of a large file → diagnostics")
    parser.add_argument("--runs", type=int, default=5, help="distinct large files opened one after the other")
    parser.add_argument("--lines", type=int, default=3000, help="lines per large file (about)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds for the whole session")
    parser.add_argument("--json", default=None, help="write the numbers as JSON to this file ('-': stdout)")
    parser.add_argument("--keep", type=Path, default=None, help="build the project here and keep it")
    args = parser.parse_args()
    try:
        res = run(args.runs, args.lines, args.timeout, args.keep)
    except Timeout as exc:
        print(f"lsp_latency: {exc} (--timeout {args.timeout:g} s)", file=sys.stderr)
        sys.exit(2)
    except RuntimeError as exc:
        print(f"lsp_latency: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.json != "-":
        print(f"server start → first diagnostics (small file): {res['startup_to_first_diagnostics_ms']:.0f} ms")
        print(f"didOpen → publishDiagnostics, {res['runs']} distinct files of {min(res['lines'])}-"
              f"{max(res['lines'])} lines (warm server, didOpen not debounced):")
        for i, (ms, n) in enumerate(zip(res["samples_ms"], res["diagnostics"])):
            print(f"  run {i + 1}: {ms:7.1f} ms  ({n} diagnostics)")
        print(f"  min {res['min_ms']:.1f} ms  median {res['median_ms']:.1f} ms  max {res['max_ms']:.1f} ms"
              f"   (target: median < 150 ms)")
        print("didChange (one statement added in a method) → publishDiagnostics, debounce subtracted: "
              + ", ".join(f"{t:.0f}" for t in res["after_edit_ms"]) + f" ms, median {res['after_edit_median_ms']:.1f} ms"
              "   (target: < 100 ms)")
        print(f"Engine.lint_file alone on the same buffers: median {res['engine_only_median_ms']:.1f} ms "
              f"(" + ", ".join(f"{t:.0f}" for t in res["engine_only_ms"]) + ")")
        print("  its CPU time: first lint " + ", ".join(f"{t:.0f}" for t in res["engine_cpu_open_ms"])
              + " ms; after one statement added in a method " + ", ".join(f"{t:.0f}" for t in res["engine_cpu_edit_ms"])
              + " ms")
        print(f"after `streamlint check` of the project, the same opens (served from the result cache): median "
              f"{res['cached_median_ms']:.1f} ms (" + ", ".join(f"{t:.0f}" for t in res["cached_samples_ms"])
              + f"), same diagnostics: {res['cached_same_diagnostics']}")
        print(f"server exit code: {res['server_exit_code']}")
    if args.json == "-":
        print(json.dumps(res))
    elif args.json:
        Path(args.json).write_text(json.dumps(res, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
