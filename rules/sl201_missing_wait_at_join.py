from streamlint.finding import Confidence, Location, Severity
from streamlint.model.apis import STREAM_MARKERS
from streamlint.model.dataflow import MAIN, Race, file_flows, stream_label
from streamlint.model.waits import partial_joins
from streamlint.rule import Invalid, Option, Rule, RuleContext, Valid

_HINTS = {
    "reduce-overhead": "record a tagged event (`npu_tagged_event_record`) after the producer on {src} and "
                       "`npu_tagged_event_wait` it on {dst} before this use",
    "ge": "order them with `npu_wait_tensor` / `torchair.ops.wait`",
}
_NATIVE_HINT = "add `{dst_obj}.wait_stream({src_obj})` or wait on an event recorded on {src} after the producer"


class MissingWaitAtJoin(Rule):
    """## What it does
    Flags a tensor produced on one stream and used on another without the execution path's ordering
    primitive: a side-stream scope reading a tensor (or argument) produced on the current stream with
    no fork wait, a side-stream result consumed on another stream with no join wait after its
    production, and in-place writes racing with an earlier read on another stream (write-after-read).
    In `reduce-overhead` the ordering must be tagged events; in `ge` only the orderings GE cannot see
    (in-place / side-effecting writes racing with reads in another stream scope) are reported.

    ## Why is this bad?
    Work on different streams runs concurrently. Without a wait the consumer can read memory before
    the producer wrote it (garbage values), or the producer can overwrite memory the other stream is
    still reading. These races are timing dependent and show up as wrong tokens or loss spikes.

    ## Example
    ```python
    with torch.npu.stream(self.side):
        shared = self.shared_experts(x)
    return routed + shared  # main never waited on self.side
    ```

    ## Use instead
    ```python
    self.side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(self.side):
        shared = self.shared_experts(x)
    torch.npu.current_stream().wait_stream(self.side)
    return routed + shared
    ```

    ## Options
    - `ge-explicit-join-waits` (bool, default false): in `ge`, also report every cross-stream data join
      that has no explicit `npu_wait_tensor` / `torchair.ops.wait` (GE synchronises data edges itself,
      so this is a conservative policy).
    """

    code = "SL201"
    name = "missing-wait-at-join"
    severity = Severity.ERROR
    confidence = Confidence.HIGH
    markers = STREAM_MARKERS
    options = (
        Option("ge-explicit-join-waits", bool, False,
               "In ge, report every cross-stream data join without an explicit wait."),
    )

    def check(self, ctx: RuleContext) -> None:
        explicit = bool(ctx.options.get("ge-explicit-join-waits", False))
        groups: dict[tuple[int, str, str, str], list] = {}
        for _fn, flow in file_flows(ctx.project, ctx.file, explicit_ge_joins=explicit):
            for race in flow.races:
                kind = "write" if race.kind != "read" else "read"
                groups.setdefault((id(race.node), kind, race.src, race.dst), []).append(race)
        reported: set[int] = set()
        for (_node, _kind, _src, _dst), races in groups.items():
            race = races[0]
            if id(race.node) in reported:
                continue
            reported.add(id(race.node))
            names = list(dict.fromkeys(r.name for r in races))
            message, confidence = _message(race, names), None
            if race.argument:
                confidence = Confidence.MEDIUM
                message += " (assumes the caller produced it on its current stream shortly before the call)"
            ctx.report(race.node, message, confidence=confidence, related=_related(ctx, race))
        for fn in ctx.file.functions.values():
            for join in partial_joins(ctx.project, ctx.file, fn):
                model, store = join.evidence
                ctx.report(join.loop,
                           f"this join loop leaves out the {join.dropped} element of `{join.collection}`, which "
                           "holds events recorded after device work: the work the left-out event marks is never "
                           "waited for; iterate over every element",
                           confidence=Confidence.MEDIUM,
                           related=[Location(model.path, model.span(store), "event recorded and stored here")])

    VALID = [
        Valid(
            """
            import torch

            class M(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.side = torch.npu.Stream()

                def forward(self, x: torch.Tensor):
                    self.side.wait_stream(torch.npu.current_stream())
                    with torch.npu.stream(self.side):
                        y = x * 2
                    torch.npu.current_stream().wait_stream(self.side)
                    return x + y
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class M(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.side = torch.npu.Stream()

                def forward(self, x: torch.Tensor):
                    self.side.wait_stream(torch.npu.current_stream())
                    with torch.npu.stream(self.side):
                        y = x * 2
                    return x + y
            """,
            line=12,
        ),
    ]


def _message(race: Race, names: list[str]) -> str:
    src, dst = stream_label(race.src), stream_label(race.dst)
    listed = ", ".join(f"`{n}`" for n in names)
    if race.kind == "read":
        if race.argument:
            what = f"argument{'s' if len(names) > 1 else ''} {listed} (produced by the caller on {src})"
        else:
            what = f"{listed} (produced on {src})"
        message = f"{what} {'are' if len(names) > 1 else 'is'} used on {dst} with no wait ordering it after its producer"
    else:
        verb = "read" if race.kind == "write-after-read" else "written"
        message = (f"{listed} {'are' if len(names) > 1 else 'is'} written on {dst} while {src} may still have it "
                   f"{verb} ({race.kind.replace('-', ' ')})")
    hint = _HINTS.get(race.mode, _NATIVE_HINT)
    current = "torch.cuda.current_stream()" if race.mode == "cuda" else "torch.npu.current_stream()"
    src_obj = current if race.src == MAIN else race.src
    dst_obj = current if race.dst == MAIN else race.dst
    if race.src.startswith("tag") or race.dst.startswith("tag"):
        hint = _HINTS.get(race.mode, "order them with an event recorded on {src} after the producer and waited on {dst}")
    return message + f" [{race.mode}]; " + hint.format(src=src, dst=dst, src_obj=src_obj, dst_obj=dst_obj)


def _related(ctx: RuleContext, race: Race) -> list[Location]:
    if race.producer is None:
        return []
    label = "read here" if race.kind == "write-after-read" else "produced here"
    return [Location(ctx.file.path, ctx.file.span(race.producer), label)]
