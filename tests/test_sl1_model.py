"""SL101–SL103 on small cases the fixtures do not isolate: tensor inference, guards, cycles, options."""

import textwrap

from harness import lint_paths, lint_text
from streamlint.model.scopes import parse_super_kernel_options


def _lines(findings, code):
    return sorted(f.span.start_line for f in findings if f.code == code)


def test_tensor_inference_positive_and_negative(tmp_path):
    code = """
    import torch
    import torchair as tng
    from dataclasses import dataclass
    from torch import nn

    @dataclass
    class Meta:
        lengths: torch.Tensor
        count: int

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)
            self.register_buffer("mask", torch.ones(4))
            self.flag = True

        def forward(self, x: "torch.Tensor", meta: Meta, n: int, y=None):
            with tng.scope.npu_stream_switch("s"):
                h = self.proj(x)
                a, b = torch.topk(h, 2)
                if h.mean() > 0:          # 22 tensor (module output)
                    pass
                if a.size(0) > 1:         # shape
                    pass
                if meta.lengths.max() > 8:  # 26 dataclass tensor field
                    pass
                if meta.count > 8:        # int field
                    pass
                if self.mask.any():       # 30 registered buffer
                    pass
                if self.flag or n > 2:    # bools
                    pass
                if y:                     # unknown: not assumed to be a tensor
                    pass
                z = b if self.flag else a  # ternary on a bool
                w = (b > 0).any() or n    # 37 `or` on a tensor
                q = not a.is_contiguous()
    """
    findings = lint_text(code, tmp=tmp_path)
    assert _lines(findings, "SL101") == [22, 26, 30, 37]


def test_is_compiling_guards_and_early_return(tmp_path):
    code = """
    import torch
    import torchair as tng

    def f(x: torch.Tensor, debug: bool):
        with tng.scope.npu_stream_switch("s"):
            if torch._dynamo.is_compiling():
                pass
            else:
                print(x)
            if debug and not torch.compiler.is_compiling():
                print(x)
            y = x.tolist() if not torch.compiler.is_compiling() else None
            if debug or not torch.compiler.is_compiling():
                print(x)              # 14: `or` does not guard
        return y

    def g(x: torch.Tensor):
        if torch.compiler.is_compiling():
            return x
        print("eager only")
        return x

    def h(x: torch.Tensor):
        with tng.scope.npu_stream_switch("s"):
            return g(x)
    """
    findings = lint_text(code, tmp=tmp_path)
    assert _lines(findings, "SL101") == [14]


def test_callee_cycles_and_depth(tmp_path):
    code = """
    import torch
    import torchair as tng

    def a(x: torch.Tensor, n: int):
        if n:
            return b(x, n - 1)
        return x

    def b(x: torch.Tensor, n: int):
        a(x, n)
        return c(x)

    def c(x: torch.Tensor):
        return x.tolist()

    def clean1(x, n):
        return clean2(x, n)

    def clean2(x, n):
        return clean1(x, n)

    def f(x: torch.Tensor):
        with tng.scope.limit_core_num(4, 8):
            clean1(x, 3)
            return a(x, 3)
    """
    findings = lint_text(code, tmp=tmp_path)
    sl101 = [f for f in findings if f.code == "SL101"]
    assert [f.span.start_line for f in sl101] == [25]
    assert sl101[0].related and sl101[0].related[0].span.start_line == 14
    assert "a → " in sl101[0].hint or ".a → " in sl101[0].hint  # the call chain is in the fix line


def test_reorderable_registration_in_an_importing_module(tmp_path):
    pkg = tmp_path / "app"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "model.py").write_text(textwrap.dedent("""
        import torchair as tng

        def f(x):
            with tng.scope.npu_stream_switch("s"):
                print("x")
            return x
    """), encoding="utf-8")
    (pkg / "other.py").write_text(textwrap.dedent("""
        import torchair as tng

        def g(x):
            with tng.scope.npu_stream_switch("s"):
                print("x")
    """), encoding="utf-8")
    (pkg / "runner.py").write_text(textwrap.dedent("""
        import torch
        from app.model import f

        torch._dynamo.config.reorderable_logging_functions.add(print)
    """), encoding="utf-8")
    files = [str(pkg / n) for n in ("model.py", "other.py", "runner.py")]
    findings = lint_paths(tmp_path, files)
    flagged = {(f.path.rsplit("/", 1)[-1], f.span.start_line) for f in findings if f.code == "SL101"}
    assert flagged == {("other.py", 6)}  # model.py is imported by the registering runner; other.py is not


def test_superkernel_options():
    opts = parse_super_kernel_options(" feed-sync-all=1 : stream-fusion=1 ")
    assert opts.stream_fusion and opts.unknown_keys() == []
    assert not parse_super_kernel_options("stream-fusion=0").stream_fusion
    assert parse_super_kernel_options("stream-funsion=1:x").unknown_keys() == ["stream-funsion", "x"]
    assert parse_super_kernel_options("").entries == ()


def test_superkernel_constants_across_modules_and_wrappers(tmp_path):
    (tmp_path / "consts.py").write_text('SK = "feed-sync-all=1"\nSK_OK = SK + ":stream-fusion=1"\n',
                                        encoding="utf-8")
    (tmp_path / "model.py").write_text(textwrap.dedent("""
        import torchair as tng
        from consts import SK, SK_OK

        def sk(prefix):
            return tng.scope.super_kernel(prefix, "stream-fusion=1")

        def f(x, opts):
            with tng.scope.super_kernel("a", SK):
                with tng.scope.npu_stream_switch("s"):
                    x = x + 1
            with tng.scope.super_kernel("a", SK_OK):
                with tng.scope.npu_stream_switch("s"):
                    x = x + 1
            with sk("b"):
                with tng.scope.npu_stream_switch("s"):
                    x = x + 1
            with tng.scope.super_kernel("a", opts):
                with tng.scope.npu_stream_switch("s"):
                    x = x + 1
            return x
    """), encoding="utf-8")
    files = [str(tmp_path / "model.py"), str(tmp_path / "consts.py")]
    findings = lint_paths(tmp_path, files)
    assert _lines(findings, "SL102") == [10]


def test_inner_parallel_through_wrapper(tmp_path):
    code = """
    import torch
    import torchair as tng
    from torch import nn

    def switch(tag, inner):
        return tng.scope.npu_stream_switch(tag, 0, enable_inner_parallel=inner)

    class M(nn.Module):
        def forward(self, x):
            with switch("a", True):
                x = x + 1
            with tng.scope.npu_stream_switch("b", 0):
                x = x + 1
            return x

    class G(nn.Module):
        def forward(self, x):
            with switch("a", True):
                return x + 1

    def build():
        cfg = tng.CompilerConfig()
        cfg.mode = "reduce-overhead"
        ge = torch.compile(G(), backend="npu")
        return torch.compile(M(), backend=tng.get_npu_backend(compiler_config=cfg)), ge
    """
    findings = lint_text(code, tmp=tmp_path)
    assert _lines(findings, "SL103") == [10]  # M is reduce-overhead; G is GE


def test_never_crashes_on_odd_code(tmp_path):
    code = """
    import torchair as tng
    import torch

    def f(x: "not valid[", *args, **kw):
        with tng.scope.npu_stream_switch(*args) as (a, b), open(x):
            match x:
                case [1, *rest] if rest:
                    print(rest)
            try:
                pass
            except* ValueError:
                pass
            lam = lambda t: t.item()
            [t.item() for t in args if t.any()]
            while (y := x.sum()) > 0:
                break
            async def g():
                await x
            if (x.sum() if x else x) and kw:
                pass
    """
    findings = lint_text(code, tmp=tmp_path)
    assert not [f for f in findings if f.code == "SL000"], [f.message for f in findings if f.code == "SL000"]


def test_unsaved_callee_buffer_invalidates_cached_breaks(tmp_path):
    from harness import engine_for

    (tmp_path / "helper.py").write_text("def log(x):\n    print(x)\n", encoding="utf-8")
    (tmp_path / "model.py").write_text(
        "import torchair as tng\nfrom helper import log\n\ndef f(x):\n"
        "    with tng.scope.npu_stream_switch('s'):\n        log(x)\n", encoding="utf-8")
    engine = engine_for(tmp_path, None)
    model = str(tmp_path / "model.py")
    assert [f.span.start_line for f in engine.lint_file(model).findings if f.code == "SL101"] == [6]
    engine.set_override(str(tmp_path / "helper.py"), b"def log(x):\n    return x\n")
    assert [f for f in engine.lint_file(model).findings if f.code == "SL101"] == []


def test_item_and_tolist_on_unknown_receivers(tmp_path):
    code = """
    import torchair as tng

    def f(arr, t):
        with tng.scope.npu_stream_switch("s"):
            a = arr.tolist()       # numpy arrays and lists have tolist(): not assumed to be a tensor
            b = t.item()           # 6: item() is tensor-specific — reported with medium confidence
            c = [1, 2].copy()
        return a, b, c
    """
    findings = [f for f in lint_text(code, tmp=tmp_path) if f.code == "SL101"]
    assert [(f.span.start_line, f.confidence.value) for f in findings] == [(6, "medium")]
