"""Build a deterministic benchmark corpus: a large Python project, mostly plain model code.

    python bench/make_corpus.py OUT_DIR [--files 5000] [--seed 7]

Layout: ``OUT_DIR/pyproject.toml`` and ``OUT_DIR/stack/pkgNN/`` packages of modules. Roughly:

- ~92% plain model/utility modules that never mention a stream API (a few mention the word
  "stream" incidentally, e.g. ``logging.StreamHandler``, as real code does: they defeat the prefilter);
- ~6% stream modules in the style of ``fixtures/projects/*``: TorchAir scopes through project wrappers
  (``pkgNN/utils.py``), ``torch.npu`` streams and events, tagged events, compile configs and runners;
- ~0.5% large files (3,000+ lines), a few of them with streams.

``--repo-shaped`` builds the other shape (``build_repo``): 60% of the files mention streams and the
imports form chains and cycles, as in a real Ascend repository (see bench/scale.py).

The output is a pure function of ``--files`` and ``--seed`` (same bytes on every run).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
from pathlib import Path

WORDS = (
    "hidden", "proj", "attn", "mlp", "gate", "expert", "token", "layer", "block", "cache", "embed", "rotary",
    "norm", "scale", "weight", "bias", "router", "score", "logit", "query", "key", "value", "head", "rank",
    "shard", "batch", "seq", "pos", "mask", "prefill", "decode", "draft", "sample", "vocab", "kv", "page",
)
CLASS_WORDS = ("Linear", "Attention", "MoE", "Router", "Decoder", "Encoder", "Norm", "Sampler", "Cache",
               "Projector", "Block", "Layer", "Embedding", "Pool", "Head", "Mixer")


def _ident(rng: random.Random, n: int = 2) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(n))


def _cls(rng: random.Random) -> str:
    return rng.choice(CLASS_WORDS) + rng.choice(CLASS_WORDS) + str(rng.randrange(100))


def _plain_function(rng: random.Random) -> str:
    name = _ident(rng, 3)
    a, b = _ident(rng), _ident(rng)
    body = [
        f"def {name}({a}: torch.Tensor, {b}: int = {rng.randrange(1, 64)}) -> torch.Tensor:",
        f'    """Compute {name.replace("_", " ")} for the given inputs."""',
        f"    if {b} <= 0:",
        f'        raise ValueError("{b} must be positive, got %d" % {b})',
        f"    out = {a}.reshape(-1, {a}.shape[-1])",
    ]
    for i in range(rng.randrange(2, 9)):
        op = rng.choice(("out = out * {s}", "out = torch.nn.functional.silu(out)", "out = out + out.mean(dim=-1, keepdim=True)",
                         "out = out.clamp(min=-{s}, max={s})", "out = torch.cat([out, out[:, :1]], dim=-1)[:, :-1]",
                         "tmp_{i} = out.sum(dim=0)\n    out = out - tmp_{i} / max({b}, 1)"))
        body.append("    " + op.format(s=round(rng.uniform(0.1, 4.0), 3), i=i, b=b))
    body.append(f"    return out.reshape({a}.shape)")
    return "\n".join(body) + "\n"


def _plain_class(rng: random.Random) -> str:
    name = _cls(rng)
    fields = [_ident(rng) for _ in range(rng.randrange(2, 6))]
    lines = [
        f"class {name}(nn.Module):",
        f'    """{name}: a plain model block."""',
        "",
        "    def __init__(self, config) -> None:",
        "        super().__init__()",
        "        self.config = config",
    ]
    for f in fields:
        lines.append(f"        self.{f} = nn.Linear(config.hidden_size, config.hidden_size, bias={rng.choice(('True', 'False'))})")
    lines += ["", "    def forward(self, x: torch.Tensor) -> torch.Tensor:", "        residual = x"]
    for f in fields:
        lines.append(f"        x = self.{f}(x)")
        if rng.random() < 0.4:
            lines.append("        x = torch.nn.functional.gelu(x)")
    lines += ["        if self.config.use_residual:", "            x = x + residual", "        return x", ""]
    for _ in range(rng.randrange(0, 3)):
        helper = _ident(rng, 2)
        lines += [
            f"    def {helper}(self, items: list[int]) -> dict[str, int]:",
            "        counts: dict[str, int] = {}",
            "        for item in items:",
            f'            counts[f"{helper}_{{item % {rng.randrange(2, 9)}}}"] = counts.get(str(item), 0) + 1',
            "        return counts",
            "",
        ]
    return "\n".join(lines) + "\n"


def _utility_module(rng: random.Random) -> str:
    parts = ['"""Utilities for configuration parsing and bookkeeping."""', "import json", "import os",
             "from dataclasses import dataclass, field", "from typing import Any", ""]
    for _ in range(rng.randrange(1, 4)):
        name = _cls(rng) + "Config"
        parts += ["@dataclass", f"class {name}:"]
        for _ in range(rng.randrange(2, 7)):
            parts.append(f"    {_ident(rng)}: int = {rng.randrange(0, 4096)}")
        parts += ["    extra: dict[str, Any] = field(default_factory=dict)", "",
                  "    @classmethod",
                  f"    def from_json(cls, path: str) -> \"{name}\":",
                  "        with open(path, encoding=\"utf-8\") as fh:",
                  "            data = json.load(fh)",
                  "        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}",
                  "        return cls(**known)", ""]
    for _ in range(rng.randrange(1, 4)):
        fn = _ident(rng, 3)
        parts += [f"def {fn}(root: str, suffix: str = \".json\") -> list[str]:",
                  "    found = []",
                  "    for dirpath, _, names in os.walk(root):",
                  "        for name in sorted(names):",
                  "            if name.endswith(suffix):",
                  "                found.append(os.path.join(dirpath, name))",
                  "    return found", ""]
    return "\n".join(parts) + "\n"


def plain_module(rng: random.Random, incidental: bool, target_lines: int = 0) -> str:
    if rng.random() < 0.3 and not target_lines:
        text = _utility_module(rng)
    else:
        head = ['"""Model components."""', "import logging", "import math", "", "import torch",
                "from torch import nn", ""]
        if incidental:
            head.insert(2, "import sys")
            head.append("logging.basicConfig(handlers=[logging.StreamHandler(sys.stderr)])")
        head += ["logger = logging.getLogger(__name__)", ""]
        chunks = ["\n".join(head) + "\n"]
        count = 0
        while True:
            chunk = _plain_class(rng) if rng.random() < 0.6 else _plain_function(rng)
            chunks.append("\n" + chunk)
            count += chunk.count("\n") + 1
            if target_lines:
                if count >= target_lines:
                    break
            elif len(chunks) > rng.randrange(2, 6):
                break
        text = "".join(chunks)
    return text


UTILS = '''"""Stream helpers for this package (vllm-ascend style wrappers)."""
import logging
from contextlib import nullcontext

import torch

try:
    from torchair.scope import npu_stream_switch as _npu_stream_switch
    from torchair.scope import npu_wait_tensor as _npu_wait_tensor
except ImportError:
    from torchair.ops import NpuStreamSwitch as _npu_stream_switch
    from torchair.ops import npu_wait_tensor as _npu_wait_tensor

logger = logging.getLogger(__name__)


def npu_stream_switch(tag: str, priority: int, *, enabled: bool = True):
    return _npu_stream_switch(tag, priority) if enabled else nullcontext()


def npu_wait_tensor(self: torch.Tensor, dependency: torch.Tensor, *, enabled: bool = True):
    return _npu_wait_tensor(self, dependency) if enabled else self


def get_max_num_tokens(attn_metadata) -> int:
    return attn_metadata.max_num_tokens_across_dp
'''


def stream_module(rng: random.Random, kind: int, target_lines: int = 0) -> str:
    """A module using streams; ``kind`` picks the style."""
    name = _cls(rng)
    tag = rng.choice(('"moe_secondary"', '"mla_secondary"', '"22"', '"prefetch"', "self.tag", "None", "7"))
    prio = rng.choice(("0", "1", "2", "3", "priority"))
    lines = ['"""Multi-stream model code."""', "import logging", "", "import torch", "import torch_npu",
             "from torch import nn", ""]
    if kind == 0:  # through the package wrapper
        lines += ["from .utils import npu_stream_switch, npu_wait_tensor", "",
                  "logger = logging.getLogger(__name__)", "",
                  f"class {name}(nn.Module):",
                  "    def __init__(self, config, priority: int = 0):",
                  "        super().__init__()",
                  "        self.tag = config.stream_tag",
                  "        self.shared = nn.Linear(config.hidden_size, config.hidden_size)",
                  "        self.routed = nn.Linear(config.hidden_size, config.hidden_size)",
                  "        self.enable_multistream = config.enable_multistream", "",
                  "    def forward(self, hidden_states: torch.Tensor, priority: int = 0) -> torch.Tensor:",
                  "        routed = self.routed(hidden_states)",
                  f"        with npu_stream_switch({tag}, {prio}, enabled=self.enable_multistream):",
                  "            npu_wait_tensor(hidden_states, routed, enabled=self.enable_multistream)",
                  "            shared = self.shared(hidden_states)",
                  "        return routed + shared", ""]
    elif kind == 1:  # torchair scope directly
        lines += ["import torchair as tng", "from torchair.scope import npu_stream_switch, npu_wait_tensor", "",
                  f"class {name}(nn.Module):",
                  "    def __init__(self, config):",
                  "        super().__init__()",
                  "        self.tag = config.stream_tag",
                  "        self.q_proj = nn.Linear(config.hidden_size, config.hidden_size)",
                  "        self.kv_proj = nn.Linear(config.hidden_size, config.hidden_size)", "",
                  "    def forward(self, x: torch.Tensor, priority: int = 0) -> torch.Tensor:",
                  "        q = self.q_proj(x)",
                  f"        with npu_stream_switch({tag}, {prio}):",
                  "            npu_wait_tensor(x, q)",
                  "            kv = self.kv_proj(x)",
                  "        with tng.scope.npu_stream_switch(\"aux\"):",
                  "            kv = kv * 2",
                  "        return q + kv", ""]
    elif kind == 2:  # native torch.npu streams and events
        lines += [f"class {name}:",
                  "    def __init__(self, device):",
                  "        self.copy_stream = torch.npu.Stream(device=device)",
                  "        self.done = torch.npu.Event()", "",
                  "    def prefetch(self, weights: list[torch.Tensor]) -> list[torch.Tensor]:",
                  "        out = []",
                  "        with torch.npu.stream(self.copy_stream):",
                  "            for w in weights:",
                  "                out.append(w.to(\"npu\", non_blocking=True))",
                  "            self.done.record()",
                  "        torch.npu.current_stream().wait_event(self.done)",
                  "        for t in out:",
                  "            t.record_stream(torch.npu.current_stream())",
                  "        return out", ""]
    elif kind == 3:  # compile config + runner
        lines += ["import torchair", "from torchair.configs.compiler_config import CompilerConfig", "",
                  f"class {name}Runner:",
                  "    def __init__(self, model, dynamic: bool = False):",
                  "        self.model = model",
                  "        self.dynamic = dynamic", "",
                  "    def _config(self) -> CompilerConfig:",
                  "        config = CompilerConfig()",
                  "        config.mode = " + rng.choice(('"max-autotune"', '"reduce-overhead"')),
                  "        config.experimental_config.frozen_parameter = True",
                  "        return config", "",
                  "    def compile(self):",
                  "        backend = torchair.get_npu_backend(compiler_config=self._config())",
                  f"        self.model = torch.compile(self.model, backend=backend, dynamic={rng.choice(('True', 'False'))}, fullgraph=True)",
                  "        return self.model", ""]
    else:  # tagged events
        lines += ["import torchair", "",
                  f"class {name}(nn.Module):",
                  "    def __init__(self, config):",
                  "        super().__init__()",
                  "        self.event = torchair.ops.npu_create_tagged_event(tag=\"kv_ready\")",
                  "        self.proj = nn.Linear(config.hidden_size, config.hidden_size)", "",
                  "    def forward(self, x: torch.Tensor) -> torch.Tensor:",
                  "        y = self.proj(x)",
                  "        torchair.ops.npu_tagged_event_record(self.event)",
                  "        with torchair.scope.npu_stream_switch(\"kv\", 0):",
                  "            torchair.ops.npu_tagged_event_wait(self.event)",
                  "            z = y * 2",
                  "        return z", ""]
    text = "\n".join(lines) + "\n"
    if target_lines:
        text += plain_module(rng, False, target_lines).split("logger = logging.getLogger(__name__)\n", 1)[-1]
    else:
        for _ in range(rng.randrange(0, 3)):
            text += "\n" + _plain_class(rng)
    return text


MENTION = '''

_PATTERN = re.compile(r"layer_(\\d+)")  # re.compile: no compile site


def sync_{i}(stream=None) -> None:
    """Wait for the side stream; torch.compile users call this before capture."""
    (stream or torch.npu.current_stream()).synchronize()
'''


def repo_module(rng: random.Random, index: int, names: list[str], mentions: bool) -> str:
    """A module of a repo-shaped corpus: plain model code that imports the 1-3 previous modules of its
    package (chains) and, one in ten, a later one (cycles); ``mentions``: it also touches a stream."""
    text = plain_module(rng, False)
    imports = [names[j] for j in range(max(0, index - rng.randrange(1, 4)), index)]
    if index % 10 == 5 and index + 3 < len(names):
        imports.append(names[index + 3])  # a cycle: that module imports this one back through its chain
    head = "import re\n" + "".join(f"from . import {n}\n" for n in imports)
    return head + text + (MENTION.format(i=index) if mentions else "")


def build_repo(out: Path, files: int, seed: int = 7) -> dict[str, int]:
    """A repo-shaped corpus (``--repo-shaped``): 60% of the files mention streams (as in torch_npu or
    vllm-ascend, where the byte prefilter keeps most of the tree), about 1% are real multi-stream
    modules (wrappers, compile runners, tagged events), imports form chains and cycles."""
    rng = random.Random(seed)
    if out.exists():
        shutil.rmtree(out)
    root = out / "repo"
    root.mkdir(parents=True)
    (out / "pyproject.toml").write_text('[project]\nname = "bench-repo"\nversion = "0"\n', encoding="utf-8")
    (root / "__init__.py").write_text("", encoding="utf-8")
    counts = {"files": 1, "plain": 0, "mentions": 0, "stream": 0, "utils": 0}
    written, p = 1, 0
    while written < files:
        pkg = root / f"pkg{p:03d}"
        pkg.mkdir()
        (pkg / "__init__.py").write_text(f'"""Package {p}."""\n', encoding="utf-8")
        (pkg / "utils.py").write_text(UTILS, encoding="utf-8")
        written += 2
        counts["files"] += 2
        counts["utils"] += 1
        n = min(98, files - written)
        names = [f"mod_{_ident(rng, 2)}_{i:03d}" for i in range(n)]
        for i, name in enumerate(names):
            roll = rng.random()
            if roll < 0.01:
                text = stream_module(rng, rng.randrange(5))
                counts["stream"] += 1
            else:
                mentions = roll < 0.60
                text = repo_module(rng, i, names, mentions)
                counts["mentions" if mentions else "plain"] += 1
            (pkg / f"{name}.py").write_text(text, encoding="utf-8")
        written += n
        counts["files"] += n
        p += 1
    return counts


def build(out: Path, files: int, seed: int = 7) -> dict[str, int]:
    rng = random.Random(seed)
    if out.exists():
        shutil.rmtree(out)
    root = out / "stack"
    root.mkdir(parents=True)
    (out / "pyproject.toml").write_text('[project]\nname = "bench-stack"\nversion = "0"\n', encoding="utf-8")
    (root / "__init__.py").write_text("", encoding="utf-8")
    per_pkg = 100
    packages = max(1, files // (per_pkg - 2) + 1)
    stream_every = 16  # ~6% stream modules
    large_every = 200  # ~0.5% large files
    counts = {"files": 1, "plain": 0, "incidental": 0, "stream": 0, "large": 0, "utils": 0}
    written = 1
    for p in range(packages):
        pkg = root / f"pkg{p:03d}"
        pkg.mkdir()
        (pkg / "__init__.py").write_text(f'"""Package {p}."""\n', encoding="utf-8")
        written += 1
        counts["files"] += 1
        has_streams = p % 3 != 2  # two packages in three have stream code
        if has_streams and written < files:
            (pkg / "utils.py").write_text(UTILS, encoding="utf-8")
            written += 1
            counts["files"] += 1
            counts["utils"] += 1
        index = 0
        while index < per_pkg - 2 and written < files:
            name = f"mod_{_ident(rng, 2)}_{index:03d}.py"
            roll = written
            if roll % large_every == 0:
                kind = rng.randrange(5) if rng.random() < 0.3 and has_streams else -1
                text = stream_module(rng, kind, 3000 + rng.randrange(1500)) if kind >= 0 \
                    else plain_module(rng, False, 3000 + rng.randrange(1500))
                counts["large"] += 1
            elif has_streams and roll % stream_every == 0:
                text = stream_module(rng, rng.randrange(5))
                counts["stream"] += 1
            else:
                incidental = rng.random() < 0.04
                text = plain_module(rng, incidental)
                counts["incidental" if incidental else "plain"] += 1
            (pkg / name).write_text(text, encoding="utf-8")
            written += 1
            counts["files"] += 1
            index += 1
        if written >= files:
            break
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repo-shaped", action="store_true",
                        help="60%% of the files mention streams, imports form chains and cycles (issue 15)")
    args = parser.parse_args()
    counts = (build_repo if args.repo_shaped else build)(args.out, args.files, args.seed)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(args.out) for f in fs)
    print(f"wrote {counts['files']} files ({size / 1e6:.1f} MB) to {args.out}: " +
          ", ".join(f"{k} {v}" for k, v in counts.items() if k != "files"))


if __name__ == "__main__":
    main()
