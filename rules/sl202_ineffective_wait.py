from __future__ import annotations

from streamlint._lazy import cst

from streamlint.finding import Confidence, FixSafety, Severity
from streamlint.model.apis import Role
from streamlint.model.file import dotted
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global wait_self_expr, argument_kind, EVENT, STREAM, attr_kind, event_recorded_elsewhere, \
        event_recorded_in_class, first_in_stream_scope, later_op_on_stream, loads_after, result_discarded, _SWAPPED, \
        handed_at_construction
    from streamlint.model.dataflow import wait_self_expr
    from streamlint.model.argkinds import argument_kind
    from streamlint.model.handedevents import handed_at_construction
    from streamlint.model.streams import EVENT, STREAM, attr_kind
    from streamlint.model.waits import (
        event_recorded_elsewhere,
        event_recorded_in_class,
        first_in_stream_scope,
        later_op_on_stream,
        loads_after,
        result_discarded,
    )
    _SWAPPED = {"wait_event": (EVENT, "wait_stream"), "wait_stream": (STREAM, "wait_event")}


class IneffectiveWait(Rule):
    """## What it does
    Flags waits that order nothing:
    - `npu_wait_tensor(x, d)` with the result discarded where `x` is a fresh expression
      (`x.view(...)`) or `x` is not used after the call, or where `x` and `d` are the same tensor;
    - `torchair.ops.wait([...])` with no later op on that stream in the function;
    - `torchair.ops.record()` as the first statement of a stream scope (it marks no op);
    - waiting on a `self.*` event (`event.wait()`, `stream.wait_event(event)`) that is never recorded (an event
      the object is handed at construction is its constructor caller's to record, unless the project
      constructs it only with a fresh `Event()`);
    - `stream.wait_event(other_stream)` / `stream.wait_stream(event)`: the other kind of object than the
      method takes (it raises when it runs; fixable by calling the other method, an unsafe fix).

    ## Why is this bad?
    `npu_wait_tensor` rewires the *later* consumers of `x` to an Identity that depends on `d`'s
    producer; with no later consumer the node is dead-code-eliminated. `torchair.ops.wait` attaches to
    the next op on the stream, `record()` to the last one already emitted. A never-recorded event
    completes immediately. In all these cases the intended ordering silently does not exist.

    ## Fix safety
    Only the swapped kind is fixed (`wait_event(stream)` becomes `wait_stream(stream)` and the reverse). It
    is unsafe: the call no longer raises and now orders the streams, which changes what runs.

    ## Example
    ```python
    with npu_stream_switch("22"):
        npu_wait_tensor(hidden_states.view(-1, h), router_logits)
        shared = self.shared_experts(hidden_states)
    ```

    ## Use instead
    ```python
    with npu_stream_switch("22"):
        npu_wait_tensor(hidden_states, router_logits)
        shared = self.shared_experts(hidden_states)
    ```
    """

    code = "SL202"
    name = "ineffective-wait"
    severity = Severity.WARNING
    confidence = Confidence.HIGH
    markers = (b"wait", b"record")
    fix_safety = FixSafety.UNSAFE

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        project, file = ctx.project, ctx.file
        for fn in file.functions.values():
            for site in fn.calls:
                uses = project.api_uses(file, site)
                roles = {u.role for u in uses}
                if Role.WAIT_TENSOR in roles:
                    use = next(u for u in uses if u.role is Role.WAIT_TENSOR)
                    self._wait_tensor(ctx, fn, site, use)
                elif Role.OPS_WAIT in roles and not uses[0].wrappers:
                    if not later_op_on_stream(project, file, fn, site):
                        ctx.report(site.node, "`torchair.ops.wait` has no later op on its stream in this function: "
                                              "it orders nothing",
                                   hint="move it before the op it should order (it attaches to the next op on "
                                        "its stream), or remove it")
                elif Role.OPS_RECORD in roles and not uses[0].wrappers:
                    if first_in_stream_scope(project, file, site):
                        ctx.report(site.node, "`torchair.ops.record()` is the first statement of its scope: it "
                                              "marks nothing",
                                   hint="move it after the op it should mark (it marks the last op already "
                                        "emitted on the stream)")
                elif site.method in _SWAPPED and self._swapped(ctx, fn, site):
                    continue
                elif Role.TAGGED_EVENT_WAIT in roles or site.method in ("wait", "wait_event"):
                    self._event_wait(ctx, fn, site, uses)

    def _swapped(self, ctx: RuleContext, fn, site) -> bool:
        """`cur.wait_event(side_stream)` / `cur.wait_stream(done_event)`: the other kind of object than the
        method takes. PyTorch's `Stream.wait_event(e)` calls `e.wait(self)` and `wait_stream(s)` calls
        `s.record_event()`; neither exists on the other kind, so the call raises when its path runs and
        orders nothing until then. Reported where the kind is certain (its constructor, or the function's own
        use of the same expression as only that kind can be used)."""
        args = [a.value for a in site.node.args if a.keyword is None]
        if not args or not isinstance(site.node.func, cst.Attribute) or ctx.project.call_target(ctx.file, site):
            return False  # (a project class's own `wait_event` takes what it likes)
        given = argument_kind(ctx.project, ctx.file, fn, args[0], site.node)
        wanted, right = _SWAPPED[site.method]
        if given is None or given == wanted:
            return False
        code = ctx.file.code(args[0])
        fix = ctx.fix(f"Call `{right}({code})`", ctx.replace(site.node.func.attr, right))
        ctx.report(site.node, first_line(f"`{site.method}()` is given the {given} `{code}`: it raises and orders nothing",
                                         f"`{site.method}()` is given a {given}: it raises and orders nothing; use "
                                         f"`{right}()`"),
                   severity=Severity.ERROR,
                   hint=f"`{site.method}` takes {'an event' if wanted == EVENT else 'a stream'}; the later uses are "
                        f"judged as if the intended `{right}` were there",
                   fix=fix)
        return True

    def _wait_tensor(self, ctx: RuleContext, fn, site, use) -> None:
        file = ctx.file
        waited = wait_self_expr(ctx.project, file, use)
        dep = use.arg("dependency")
        if waited is None:
            return
        if dep is not None and dotted(waited) is not None and dotted(waited) == dotted(dep):
            ctx.report(site.node, f"`{file.code(waited)}` waits on itself: a self-dependency orders nothing")
            return
        if not result_discarded(fn, site.node):
            return
        if not isinstance(waited, (cst.Name, cst.Attribute)):
            ctx.report(site.node, first_line(f"`npu_wait_tensor` on the fresh expression `{file.code(waited)}` with "
                                             "the result discarded orders nothing",
                                             "`npu_wait_tensor` on a fresh expression with the result discarded "
                                             "orders nothing"),
                       hint="wait on a named tensor that is used afterwards, or use the result: nothing consumes "
                            "this wait, so it is dead-code-eliminated")
            return
        if isinstance(waited, cst.Name) and not loads_after(file, fn, waited.value, site.node):
            ctx.report(site.node, first_line(f"`{waited.value}` is not used after this `npu_wait_tensor` and the "
                                             "result is discarded: it orders nothing",
                                             "the waited tensor is not used after this `npu_wait_tensor`: it orders "
                                             "nothing"),
                       hint=f"wait on the tensor the next op reads, or use the result instead of `{waited.value}`: "
                            "the wait has no consumer and is dead-code-eliminated")

    def _event_wait(self, ctx: RuleContext, fn, site, uses) -> None:
        call = site.node
        if site.method == "wait":
            event = call.func.value if isinstance(call.func, cst.Attribute) else None
        else:
            args = [a.value for a in call.args if a.keyword is None]
            event = args[0] if args else None
        if not (isinstance(event, cst.Attribute) and isinstance(event.value, cst.Name) and event.value.value == "self"):
            return
        attr = event.attr.value
        cls = ctx.file.classes.get(fn.class_name or "")
        if not uses and attr_kind(ctx.project, ctx.file, cls, attr) != EVENT:
            return
        from streamlint.model.flow.effects import class_records_through_helpers  # (lazily: it parses)

        if not event_recorded_in_class(ctx.file, fn, attr) and not event_recorded_elsewhere(ctx.project, attr) \
                and not (cls is not None and class_records_through_helpers(ctx.project, ctx.file, cls, attr)) \
                and not handed_at_construction(ctx.project, ctx.file, cls, attr):
            ctx.report(call, first_line(f"`self.{attr}` is waited on but never recorded in this class: the wait "
                                        "orders nothing", "the event is waited on but never recorded"),
                       hint=f"record `self.{attr}` after the producer, or remove the wait: it completes immediately")

    VALID = [
        Valid(
            """
            from torchair.scope import npu_stream_switch, npu_wait_tensor

            def f(self, x, dep):
                with npu_stream_switch("22"):
                    npu_wait_tensor(x, dep)
                    y = self.proj(x)
                return y
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            from torchair.scope import npu_stream_switch, npu_wait_tensor

            def f(self, x, dep):
                with npu_stream_switch("22"):
                    npu_wait_tensor(x.view(-1), dep)
                    y = self.proj(x)
                return y
            """,
            line=5,
        ),
        Invalid(
            """
            import torch

            def join(side, x):
                with torch.cuda.stream(side):
                    y = x * 2
                torch.cuda.current_stream().wait_event(side)
                return y
            """,
            line=6,
            fixed="""
            import torch

            def join(side, x):
                with torch.cuda.stream(side):
                    y = x * 2
                torch.cuda.current_stream().wait_stream(side)
                return y
            """,
        ),
    ]
