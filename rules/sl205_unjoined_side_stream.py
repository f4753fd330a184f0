from __future__ import annotations

from streamlint.finding import Confidence, Severity
from streamlint.model.apis import STREAM_MARKERS
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global file_flows, device_module, MAIN, entry_stream_name, stream_expr, stream_label
    from streamlint.model.dataflow import file_flows
    from streamlint.model.devicenames import device_module
    from streamlint.model.streams import MAIN, entry_stream_name, stream_expr, stream_label


class UnjoinedSideStream(Rule):
    """## What it does
    Flags, in captured code (`npugraph_ex`-compiled functions, `torch.cuda.graph` / NPU graph capture
    regions), a side-stream scope whose work is not joined back into the capture stream
    (`wait_stream`, or an event recorded on the side stream and waited on the capture stream) before
    the region ends. Eager code is not reported (SL201 covers its consumers).

    ## Why is this bad?
    Graph capture requires every forked stream to rejoin the capture stream: CUDA rejects the capture
    (`cudaErrorStreamCaptureUnjoined`); on the NPU the side work may run past the end of the replayed
    graph, so later work (or the next replay) races with it.

    ## Example
    ```python
    with torch.cuda.graph(g):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            aux = model.aux(x)
        out = model(x)
    ```

    ## Use instead
    ```python
    with torch.cuda.graph(g):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            aux = model.aux(x)
        out = model(x)
        torch.cuda.current_stream().wait_stream(side)
    ```
    """

    code = "SL205"
    name = "unjoined-side-stream"
    severity = Severity.ERROR
    confidence = Confidence.HIGH
    mode_tagged = True
    markers = STREAM_MARKERS

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        seen: set[int] = set()
        for fn, flow in file_flows(ctx.project, ctx.file):
            main = entry_stream_name(ctx.project, ctx.file, fn)
            for item in flow.unjoined:
                captured = item.region == "capture" or item.mode == "npugraph_ex"
                if not captured or id(item.node) in seen:
                    continue
                seen.add(id(item.node))
                where = ("the graph-capture region" if item.region == "capture"
                         else "the npugraph_ex-captured function")
                side = stream_label(item.stream, main)
                message = first_line(f"work queued on {side} here is never joined back before {where} ends "
                                     f"[{item.mode}]",
                                     f"side-stream work here is never joined back before {where} ends [{item.mode}]")
                dev = device_module(ctx.project, ctx.file, fn, item.mode)
                side_obj = stream_expr(item.stream, main, dev)
                # inside a capture region the current stream is the capture stream, whatever the entry one is called
                main_obj = stream_expr(MAIN, main if item.region != "capture" else None, dev)
                end = ctx.file.span(item.node).end_line
                if side_obj:
                    hint = (f"add `{main_obj}.wait_stream({side_obj})` after line {end} (or wait on an event "
                            f"recorded on {side} there)")
                else:
                    hint = f"after line {end}, make the capture stream wait on an event recorded on {side}"
                confidence = None
                if item.region == "function" and not item.entry:
                    confidence = Confidence.MEDIUM
                    hint += "; this assumes no caller joins it after this function returns"
                ctx.report(item.node, message, confidence=confidence, hint=hint)

    VALID = [
        Valid(
            """
            import torch

            def capture(model, x):
                g = torch.cuda.CUDAGraph()
                side = torch.cuda.Stream()
                with torch.cuda.graph(g):
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        aux = model.aux(x)
                    out = model(x)
                    torch.cuda.current_stream().wait_stream(side)
                return g, out, aux
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            def capture(model, x):
                g = torch.cuda.CUDAGraph()
                side = torch.cuda.Stream()
                with torch.cuda.graph(g):
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        aux = model.aux(x)
                    out = model(x)
                return g, out, aux
            """,
            line=8,
        ),
    ]
