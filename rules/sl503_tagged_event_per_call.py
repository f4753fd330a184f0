from streamlint.finding import Confidence, Location, Severity
from streamlint.model.apis import Role
from streamlint.model.file import string_value
from streamlint.model.filefacts import CallSite, FunctionInfo, in_exclusive_branches
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line

# Decorators that make a factory return the same object for the same arguments.
_CACHING_DECORATORS = frozenset({
    "functools.lru_cache", "functools.cache", "functools.cached_property", "lru_cache", "cache",
})
# Methods called once per call of the module (the per-call roots).
_PER_CALL_METHODS = frozenset({"forward", "__call__"})


class TaggedEventPerCall(Rule):
    """## What it does
    Flags `torchair.ops.npu_create_tagged_event(tag)` where it runs more than once for the same tag:
    in `forward` (or a helper `forward` calls), in a loop with a constant tag, and a second call in the
    same module or function with a literal tag already used by an earlier call.

    ## Why is this bad?
    The tag is registered in a process-global table; a second call with the same tag raises
    `ValueError(... already in use)`. Created in `forward`, the event works on the first call and the
    second decode step fails (or the graph recaptures every call).

    ## Example
    ```python
    def forward(self, x):
        done = torchair.ops.npu_create_tagged_event("moe_done")
        ...
    ```

    ## Use instead
    ```python
    def __init__(self, layer_idx):
        super().__init__()
        self.done = torchair.ops.npu_create_tagged_event(f"moe{layer_idx}_done")
    ```
    or a cached factory (`@functools.lru_cache def get_event(tag): ...`).

    ## Fix safety
    No fix: moving the creation changes object lifetimes.

    ## References
    - TorchAir `python/torchair/ops/_tagged_event.py` (`npu_create_tagged_event`)
    """

    code = "SL503"
    name = "tagged-event-per-call"
    severity = Severity.ERROR
    confidence = Confidence.HIGH
    markers = (b"npu_create_tagged_event",)

    def check(self, ctx: RuleContext) -> None:
        creations = [u for u in ctx.project.uses_in(ctx.file, {Role.TAGGED_EVENT_CREATE}) if not u.wrappers]
        if not creations:
            return
        per_call = _per_call_functions(ctx)
        reported: set[int] = set()
        for use in creations:
            fn = use.site.function
            if fn is not None and _is_cached(fn):
                continue
            tag = use.arg("tag")
            if fn is not None and (id(fn) in per_call or _compiled(ctx, fn)):
                if fn.node.name.value in _PER_CALL_METHODS:
                    where = f"`{fn.qualname}`"
                elif id(fn) in per_call:
                    where = f"`{fn.qualname}`, which runs on every forward call"
                else:
                    where = f"`{fn.qualname}`, which runs on every call of the compiled code"
                ctx.report(use.node, first_line(f"tagged event created in {where}: the second call raises",
                                                "tagged event created per call: the second call raises"),
                           hint="create it once in `__init__`, at module level, or through a cached factory: the tag "
                                "is registered once per process (`ValueError(tag already in use)`)")
                reported.add(id(use.node))
            elif use.site.in_loop and string_value(tag) is not None:
                ctx.report(use.node, first_line(f"tagged event with the constant tag {string_value(tag)!r} created in "
                                                "a loop: the second iteration raises",
                                                "tagged event with a constant tag created in a loop"),
                           hint="make the tag unique per iteration, or create the events once outside the loop "
                                "(`ValueError(tag already in use)`)")
                reported.add(id(use.node))
        seen: dict[tuple[int, str], CallSite] = {}
        for use in creations:
            tag = string_value(use.arg("tag"))
            fn = use.site.function
            if tag is None or (fn is not None and _is_cached(fn)):
                continue
            key = (id(fn), tag)
            first = seen.get(key)
            if first is None:
                seen[key] = use.site
                continue
            if id(use.node) in reported or in_exclusive_branches(first.guards, use.site.guards):
                continue
            ctx.report(use.node, first_line(f"tag {tag!r} is already used by the tagged event created on line "
                                            f"{ctx.file.span(first.node).start_line}: this call raises",
                                            "tag already used by another tagged event: this call raises"),
                       hint=f"give this event another tag, or reuse the event of line "
                            f"{ctx.file.span(first.node).start_line} (`ValueError(tag already in use)`)",
                       related=[Location(ctx.file.path, ctx.file.span(first.node), f"{tag!r} first created here")])

    VALID = [
        Valid(
            """
            import functools
            import torchair as tng

            READY = tng.ops.npu_create_tagged_event("ready")

            @functools.lru_cache(maxsize=None)
            def get_event(tag):
                return tng.ops.npu_create_tagged_event(tag)

            class MoE:
                def __init__(self, layer_idx):
                    self.done = tng.ops.npu_create_tagged_event(f"moe{layer_idx}_done")

                def forward(self, x):
                    tng.ops.npu_tagged_event_record(get_event("moe_gate"))
                    return x
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torchair as tng

            class MoE:
                def forward(self, x):
                    done = tng.ops.npu_create_tagged_event("moe_done")
                    return x
            """,
            line=5,
        ),
        Invalid(
            """
            import torchair as tng
            A = tng.ops.npu_create_tagged_event("kv_done")
            B = tng.ops.npu_create_tagged_event("kv_done")
            """,
            line=3,
        ),
    ]


def _is_cached(fn: FunctionInfo) -> bool:
    return any(d in _CACHING_DECORATORS for d in fn.decorators)


def _per_call_functions(ctx: RuleContext) -> set[int]:
    """Functions of this module that run on every call of a module: `forward`/`__call__` and the
    functions they reach, up to (not into) cached factories and constructors."""
    roots = [(fn, ctx.file) for fn in ctx.file.functions.values()
             if fn.class_name is not None and fn.node.name.value in _PER_CALL_METHODS]
    if not roots:
        return set()
    per_call: set[int] = set()
    for fn, mod in ctx.project.reachable(roots):
        if mod is ctx.file and not _is_cached(fn) and fn.node.name.value != "__init__":
            per_call.add(id(fn))
    return per_call


def _compiled(ctx: RuleContext, fn: FunctionInfo) -> bool:
    """A function a compile site reaches runs on every call of the compiled graph."""
    return fn.node.name.value != "__init__" and ctx.project.execution_path(ctx.file, fn).source == "compile"

