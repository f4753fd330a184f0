from __future__ import annotations

from streamlint._lazy import cst

from streamlint.finding import Confidence, Edit, FixSafety, Location, Severity, Span
from streamlint.model.apis import STREAM_MARKERS
from streamlint.model.dataflow import MAIN, file_flows, stream_label
from streamlint.model.recorders import broken_records
from streamlint.rule import Invalid, Option, Rule, RuleContext, Valid


class MissingRecordStream(Rule):
    """## What it does
    Flags a tensor allocated on one stream (the stream current where it was created) and used on
    another, whose last reference can die (`del`, rebinding, `untyped_storage().resize_(0)`, the end of
    the function) before the allocating stream waits on the using stream after that use, with no
    `x.record_stream(stream)` (`npu_record_tagged_stream(x, tag)` in reduce-overhead). Reported at the
    first unprotected use on the other stream.

    ## Why is this bad?
    The caching allocator only knows the allocation stream. When the tensor is freed, its block can be
    handed out again for work queued on the allocating stream while the other stream is still reading
    or writing it. A wait by the *consumer* orders the data but does not protect the memory; only a
    join of the allocating stream before the free, or `record_stream`, does.

    A side stream whose every entry begins with a wait on the current stream (`side.wait_stream(main)`
    before each `with torch.npu.stream(side):`, or an event wait as the scope's first statement) cannot
    take a block back before the current stream's earlier reads: a side-stream tensor read on the current
    stream after the join is then not reported.

    Code that implements the `record_stream` protocol for a caller (an object's `record_stream(self,
    stream)`, a helper that only records tensors on a stream it is given) must record on that stream:
    a record on the current stream instead, a loop over the held tensors that records none of them, a
    `record_stream` method that never uses its stream, or an empty override of a base class's records
    is reported where it happens (medium confidence: the caller's use of the stream is not seen).

    ## Example
    ```python
    probs = torch.softmax(logits, dim=-1)
    self.side.wait_stream(main)
    with torch.npu.stream(self.side):
        tokens = torch.multinomial(probs, 1)
    del probs  # main may hand the block out while side still samples from it
    main.wait_stream(self.side)
    ```

    ## Use instead
    ```python
    probs = torch.softmax(logits, dim=-1)
    self.side.wait_stream(main)
    with torch.npu.stream(self.side):
        tokens = torch.multinomial(probs, 1)
        probs.record_stream(self.side)
    del probs
    main.wait_stream(self.side)
    ```

    ## Fix safety
    Inserting `x.record_stream(stream)` after the use is unsafe: it delays memory reuse (more peak
    memory) and the right place may be elsewhere (before a `del`, in a helper).

    ## Options
    - `strict` (bool, default false): also report tensors whose ownership escapes (returned, stored on
      `self`, appended to a container), at low confidence.
    """

    code = "SL301"
    name = "missing-record-stream"
    severity = Severity.ERROR
    confidence = Confidence.HIGH
    markers = STREAM_MARKERS
    fix_safety = FixSafety.UNSAFE
    options = (Option("strict", bool, False, "Also report tensors that escape the function (low confidence)."),)

    def check(self, ctx: RuleContext) -> None:
        strict = bool(ctx.options.get("strict", False))
        seen: set[int] = set()
        for _fn, flow in file_flows(ctx.project, ctx.file):
            for issue in flow.lifetimes:
                if issue.mode == "ge" or id(issue.node) in seen or (issue.escaped and not strict):
                    continue
                seen.add(id(issue.node))
                use, alloc = stream_label(issue.use_stream), stream_label(issue.alloc)
                freed = {"function end": "dies when the function returns", "del": "is deleted",
                         "rebinding": "loses its last reference when the name is rebound",
                         "resize_(0)": "is freed by `untyped_storage().resize_(0)`"}[issue.free]
                tagged = issue.mode == "reduce-overhead"
                remedy = (f"`npu_record_tagged_stream({issue.name}, ...)`" if tagged
                          else f"`{issue.name}.record_stream(...)`")
                message = (f"`{issue.name}` is allocated on {alloc} and used here on {use}, but {freed} before "
                           f"{alloc} waits on {use}: its memory can be reused while {use} still uses it; add "
                           f"{remedy} for {use} [{issue.mode}]")
                confidence = None
                if issue.escaped:
                    confidence = Confidence.LOW
                    message += " (assumes the caller drops the escaped tensor)"
                related = []
                if issue.free_node is not None:
                    related.append(Location(ctx.file.path, ctx.file.span(issue.free_node), "freed here"))
                fix = None if tagged else self._fix(ctx, issue.node, issue.name, issue.use_stream, issue.mode)
                ctx.report(issue.node, message, confidence=confidence, related=related, fix=fix)
        for broken in broken_records(ctx.project, ctx.file):
            ctx.report(broken.node, self._forwarder_message(broken), confidence=Confidence.MEDIUM)

    @staticmethod
    def _forwarder_message(broken) -> str:
        given = f"`{broken.stream}`"
        if broken.kind == "wrong-stream":
            return (f"`{broken.detail}` is recorded on the current stream, not on {given}, the stream this "
                    f"function is asked to record on: its memory can be reused while {given} still uses it")
        if broken.kind == "unrecorded-loop":
            return (f"this loop over `{broken.detail}` records none of them on {given}: their memory can be "
                    f"reused while {given} still uses it")
        if broken.kind == "ignores-stream":
            return (f"`record_stream` never records on {given}: the tensors this object holds can be reused "
                    f"while {given} still uses them")
        return (f"this empty `record_stream` overrides `{broken.detail}.record_stream`: the tensors the base "
                f"class records are no longer recorded on {given}")

    def _fix(self, ctx: RuleContext, node: cst.CSTNode, name: str, stream: str, mode: str):
        if not name.isidentifier() or (stream != MAIN and (stream.startswith("<") or stream.startswith("tag"))):
            return None
        stream_expr = "torch.npu.current_stream()" if stream == MAIN else stream
        if stream == MAIN and mode == "cuda":
            stream_expr = "torch.cuda.current_stream()"
        if not isinstance(node, cst.BaseSmallStatement) or isinstance(
                node, (cst.Return, cst.Raise, cst.Continue, cst.Break, cst.Pass)):
            return None
        span = ctx.file.span(node)
        line = ctx.file.source.line_text(span.start_line)
        end_line = ctx.file.source.line_text(span.end_line)
        if ";" in line or end_line.rstrip("\r\n")[span.end_col:].strip() not in ("", ) \
                and not end_line.rstrip("\r\n")[span.end_col:].lstrip().startswith("#"):
            return None
        indent = line[: len(line) - len(line.lstrip())]
        text = f"{indent}{name}.record_stream({stream_expr})\n"
        at = Span(span.end_line + 1, 0, span.end_line + 1, 0)
        return ctx.fix(f"Add `{name}.record_stream({stream_expr})` after the use", Edit(at, text))

    VALID = [
        Valid(
            """
            import torch

            class S:
                def __init__(self):
                    self.side = torch.npu.Stream()

                def sample(self, logits: torch.Tensor):
                    main = torch.npu.current_stream()
                    probs = torch.softmax(logits, dim=-1)
                    self.side.wait_stream(main)
                    with torch.npu.stream(self.side):
                        tokens = torch.multinomial(probs, 1)
                        probs.record_stream(self.side)
                    del probs
                    main.wait_stream(self.side)
                    return tokens
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class S:
                def __init__(self):
                    self.side = torch.npu.Stream()

                def sample(self, logits: torch.Tensor):
                    main = torch.npu.current_stream()
                    probs = torch.softmax(logits, dim=-1)
                    self.side.wait_stream(main)
                    with torch.npu.stream(self.side):
                        tokens = torch.multinomial(probs, 1)
                    del probs
                    main.wait_stream(self.side)
                    return tokens
            """,
            line=12,
            fixed="""
            import torch

            class S:
                def __init__(self):
                    self.side = torch.npu.Stream()

                def sample(self, logits: torch.Tensor):
                    main = torch.npu.current_stream()
                    probs = torch.softmax(logits, dim=-1)
                    self.side.wait_stream(main)
                    with torch.npu.stream(self.side):
                        tokens = torch.multinomial(probs, 1)
                        probs.record_stream(self.side)
                    del probs
                    main.wait_stream(self.side)
                    return tokens
            """,
        ),
    ]
