"""Confidence of SL301 on a free at the return of a block of a stream the function makes for itself and lets die
(model/flow/localstreams.py): fixtures/rules/sl301_local_stream_dies.py says where the findings are; this says how
sure they are."""

from pathlib import Path

from harness import engine_for, lint_text, write

from streamlint.finding import Confidence
from streamlint.model.flow.localstreams import dies_with_function

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "rules" / "sl301_local_stream_dies.py"


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1) if marker in text)


def test_a_stream_that_dies_with_the_call_leaves_only_a_pool_guess(tmp_path):
    found = {f.span.start_line: f.confidence for f in lint_text(FIXTURE.read_text(), tmp=tmp_path) if f.code == "SL301"}
    assert found[_line("low: staging dies with the call")] is Confidence.LOW
    assert found[_line("low: grad_w read by the conversion")] is Confidence.LOW
    assert found[_line("low: no later allocation on staging")] is Confidence.LOW
    assert found[_line("the context keeps staging")] is Confidence.HIGH
    assert found[_line("handed to the prefetcher below")] is Confidence.HIGH
    assert found[_line("the next round allocates on staging again")] is Confidence.HIGH
    assert found[_line("the closure allocates on staging later")] is Confidence.HIGH


def test_only_running_and_ordering_work_keeps_a_stream_confined(tmp_path):
    count = iter(range(100))

    def _fn(code: str):
        path = write(tmp_path, f"m{next(count)}.py", code)
        return engine_for(tmp_path).project.file(str(path)).functions["f"]

    body = ("def f(x, sink):\n"
            "    s = get_accelerator().Stream()\n"
            "    main = torch.cuda.current_stream()\n"
            "    s.wait_stream(main)\n"
            "    with get_accelerator().stream(s):\n"
            "        y = x * 2\n"
            "    main.wait_stream(s)\n"
            "    y.record_stream(s)\n"
            "    s.synchronize()\n"
            "    return y\n")
    assert dies_with_function(_fn(body), "s")
    assert not dies_with_function(_fn(body), "main")  # not a new stream
    for leak in ("    sink.append(s)\n", "    torch.cuda.set_stream(s)\n", "    return y, s\n",
                 "    run = lambda: s.synchronize()\n", "    s = sink\n",
                 "    sink.s = s = get_accelerator().Stream()\n"):
        assert not dies_with_function(_fn(body.replace("    return y\n", leak + "    return y\n")), "s"), leak
    assert dies_with_function(_fn(body.replace("    return y\n", "    sink.s = 1\n    return y\n")), "s")
