"""SL401-SL404, SL501-SL503 on small generated projects: configuration styles the fixtures do not show."""

from __future__ import annotations

import textwrap
from pathlib import Path

from harness import lint_paths

MODEL = '''
import torch
import torchair as tng


class MoE(torch.nn.Module):
    def __init__(self, enable_multistream: bool = True):
        super().__init__()
        self.enable_multistream = enable_multistream

    def forward(self, x):
        with tng.scope.npu_stream_switch("moe_shared", 0):
            return x * 2
'''


def _project(tmp_path: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return sorted(str(tmp_path / n) for n in files if n.endswith(".py"))


def _codes(tmp_path: Path, files: dict[str, str], code: str) -> list[tuple[str, int]]:
    paths = _project(tmp_path, files)
    return sorted((Path(f.path).name, f.span.start_line) for f in lint_paths(tmp_path, paths) if f.code == code)


def test_sl401_config_stored_on_self(tmp_path: Path) -> None:
    runner = '''
    import torch
    import torchair as tng
    from model import MoE

    class Runner:
        def __init__(self):
            self.config = tng.CompilerConfig()

        def configure(self):
            self.config.ge_config.enable_single_stream = True

        def capture(self):
            backend = tng.get_npu_backend(compiler_config=self.config)
            return torch.compile(MoE(), backend=backend, dynamic=False)
    '''
    assert _codes(tmp_path, {"model.py": MODEL, "runner.py": runner}, "SL401") == [("runner.py", 10)]


def test_sl401_setattr_form_and_related_location(tmp_path: Path) -> None:
    runner = '''
    import torch
    import torchair as tng
    from model import MoE

    def build():
        config = tng.CompilerConfig()
        setattr(config.ge_config, "enable_single_stream", True)
        return torch.compile(MoE(), backend=tng.get_npu_backend(compiler_config=config))
    '''
    paths = _project(tmp_path, {"model.py": MODEL, "runner.py": runner})
    findings = [f for f in lint_paths(tmp_path, paths) if f.code == "SL401"]
    assert [(Path(f.path).name, f.span.start_line) for f in findings] == [("runner.py", 7)]
    assert Path(findings[0].related[0].path).name == "model.py" and findings[0].related[0].span.start_line == 11


def test_sl401_not_for_other_modes_or_non_literals(tmp_path: Path) -> None:
    runner = '''
    import torch
    import torchair as tng
    from model import MoE

    def build_aclgraph():
        config = tng.CompilerConfig()
        config.mode = "reduce-overhead"
        config.ge_config.enable_single_stream = True
        return torch.compile(MoE(), backend=tng.get_npu_backend(compiler_config=config))

    def build_from_args(args):
        config = tng.CompilerConfig()
        config.ge_config.enable_single_stream = args.single_stream
        return torch.compile(MoE(), backend=tng.get_npu_backend(compiler_config=config))

    def build_guarded(enable_multistream):
        config = tng.CompilerConfig()
        if enable_multistream is False:
            config.ge_config.enable_single_stream = True
        return torch.compile(MoE(enable_multistream), backend=tng.get_npu_backend(compiler_config=config))
    '''
    model = MODEL.replace('        with tng.scope.npu_stream_switch("moe_shared", 0):\n            return x * 2',
                          '        if self.enable_multistream:\n'
                          '            with tng.scope.npu_stream_switch("moe_shared", 0):\n'
                          '                return x * 2\n'
                          '        return x * 2')
    assert _codes(tmp_path, {"model.py": model, "runner.py": runner}, "SL401") == []


DYNAMIC_RUNNER = '''
import torch
from model import MoE

compiled = torch.compile(MoE(), backend="npu", dynamic=True)
'''


def test_sl402_env_styles(tmp_path: Path) -> None:
    files = {"model.py": MODEL, "runner.py": DYNAMIC_RUNNER}
    assert _codes(tmp_path / "none", files, "SL402") == [("runner.py", 4)]
    commented = {**files, "run.sh": "# export ENABLE_DYNAMIC_SHAPE_MULTI_STREAM=1\npython runner.py\n"}
    assert _codes(tmp_path / "commented", commented, "SL402") == [("runner.py", 4)]
    off = {**files, ".env": "ENABLE_DYNAMIC_SHAPE_MULTI_STREAM=0\n"}
    assert _codes(tmp_path / "off", off, "SL402") == [("runner.py", 4)]
    dotenv = {**files, ".env": "TASK_QUEUE_ENABLE=2\nENABLE_DYNAMIC_SHAPE_MULTI_STREAM=1\n"}
    assert _codes(tmp_path / "dotenv", dotenv, "SL402") == []
    k8s = {**files, "deploy/pod.yaml": "env:\n  - name: ENABLE_DYNAMIC_SHAPE_MULTI_STREAM\n    value: \"1\"\n"}
    assert _codes(tmp_path / "k8s", k8s, "SL402") == []
    inline = {**files, "run.sh": "ENABLE_DYNAMIC_SHAPE_MULTI_STREAM=1 python runner.py\n"}
    assert _codes(tmp_path / "inline", inline, "SL402") == []
    putenv = {**files, "boot.py": "import os\nos.putenv('ENABLE_DYNAMIC_SHAPE_MULTI_STREAM', '1')\n"}
    assert _codes(tmp_path / "putenv", putenv, "SL402") == []


def test_sl402_needs_a_literal_dynamic_and_ge(tmp_path: Path) -> None:
    runner = '''
    import torch
    from model import MoE

    automatic = torch.compile(MoE(), backend="npu")
    captured = torch.compile(MoE(), backend="npugraph_ex", dynamic=True)
    '''
    assert _codes(tmp_path, {"model.py": MODEL, "runner.py": runner}, "SL402") == []


def test_sl502_mode_guards_and_early_returns(tmp_path: Path) -> None:
    model = '''
    import torch
    import torchair as tng


    def wait(x, dep, exe_mode):
        if exe_mode != "ge_graph":
            return x
        return tng.scope.npu_wait_tensor(x, dep)


    class Prolog(torch.nn.Module):
        def __init__(self, exe_mode):
            super().__init__()
            self.exe_mode = exe_mode

        def forward(self, q, kv):
            q = wait(q, kv, self.exe_mode)
            if self.exe_mode == "ge_graph":
                q = tng.scope.npu_wait_tensor(q, kv)
            return tng.scope.npu_wait_tensor(q, kv)
    '''
    runner = '''
    import torch
    from model import Prolog

    compiled = torch.compile(Prolog("npugraph_ex"), backend="npugraph_ex")
    '''
    assert _codes(tmp_path, {"model.py": model, "runner.py": runner}, "SL502") == [("model.py", 20)]


def test_sl503_exclusive_branches_and_unknown_functions(tmp_path: Path) -> None:
    events = '''
    import torchair as tng

    if USE_ACLGRAPH:
        DONE = tng.ops.npu_create_tagged_event("done")
    else:
        DONE = tng.ops.npu_create_tagged_event("done")


    def setup():
        return tng.ops.npu_create_tagged_event("setup_done")
    '''
    assert _codes(tmp_path, {"events.py": events}, "SL503") == []


def test_sl403_string_counts(tmp_path: Path) -> None:
    code = '''
    import torchair as tng

    def f(mlp, x):
        with tng.scope.limit_core_num("0", "8"):
            return mlp(x)
    '''
    assert _codes(tmp_path, {"m.py": code}, "SL403") == [("m.py", 4)]


def test_sl501_flag_dispatched_branches_do_not_mix(tmp_path: Path) -> None:
    model = '''
    import torch
    import torchair as tng


    class MoE(torch.nn.Module):
        def __init__(self, torchair_graph_enabled):
            super().__init__()
            self.torchair_graph_enabled = torchair_graph_enabled
            self.side = torch.npu.Stream()

        def forward(self, x):
            if self.torchair_graph_enabled:
                with tng.scope.npu_stream_switch("moe_shared"):
                    y = x * 2
            else:
                with torch.npu.stream(self.side):
                    y = x * 2
            return y

        def mixed(self, x):
            with tng.scope.npu_stream_switch("moe_shared"):
                y = x * 2
            with torch.npu.stream(self.side):
                return y * 2
    '''
    assert _codes(tmp_path, {"model.py": model}, "SL501") == [("model.py", 23)]


def test_sl502_flag_dispatch_between_families(tmp_path: Path) -> None:
    model = '''
    import torch
    import torchair as tng


    class MoE(torch.nn.Module):
        def __init__(self, torchair_graph_enabled):
            super().__init__()
            self.torchair_graph_enabled = torchair_graph_enabled
            self.side = torch.npu.Stream()

        def forward(self, x, dep):
            if self.torchair_graph_enabled:
                x = tng.scope.npu_wait_tensor(x, dep)
            else:
                self.side.wait_stream(torch.npu.current_stream())
            self.side.wait_stream(torch.npu.current_stream())
            return x
    '''
    runner = '''
    import torch
    from model import MoE

    compiled = torch.compile(MoE(True), backend="npu")
    '''
    assert _codes(tmp_path, {"model.py": model, "runner.py": runner}, "SL502") == [("model.py", 16)]


def test_sl401_runtime_mode_uses_the_mode_setting(tmp_path: Path) -> None:
    runner = '''
    import torch
    import torchair as tng
    from model import MoE

    def build(settings):
        config = tng.CompilerConfig()
        config.mode = settings["mode"]
        config.ge_config.enable_single_stream = True
        return torch.compile(MoE(), backend=tng.get_npu_backend(compiler_config=config))
    '''
    files = {"model.py": MODEL, "runner.py": runner}
    assert _codes(tmp_path / "auto", files, "SL401") == []  # mode unknown: nothing is wrong on every path
    paths = _project(tmp_path / "ge", files)
    findings = lint_paths(tmp_path / "ge", paths, mode="ge")
    assert [(Path(f.path).name, f.span.start_line) for f in findings if f.code == "SL401"] == [("runner.py", 8)]


def test_sl401_config_and_model_passed_to_a_compile_helper(tmp_path: Path) -> None:
    helpers = '''
    import torch
    import torchair as tng

    def compile_model(model, compiler_config):
        backend = tng.get_npu_backend(compiler_config=compiler_config)
        return torch.compile(model, backend=backend, dynamic=False)
    '''
    runner = '''
    import torchair as tng
    from helpers import compile_model
    from model import MoE

    def _config():
        config = tng.CompilerConfig()
        config.ge_config.enable_single_stream = True
        return config

    def build():
        return compile_model(MoE(), _config())
    '''
    files = {"model.py": MODEL, "helpers.py": helpers, "runner.py": runner}
    assert _codes(tmp_path, files, "SL401") == [("runner.py", 7)]
