from __future__ import annotations

import difflib

from streamlint._lazy import cst

from streamlint.finding import Confidence, Location, Severity
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo, ScopeSite
from streamlint.model.project import Project
from streamlint.rule import Invalid, Rule, RuleContext, Valid, first_line


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global describe_scope, SUPER_KERNEL_OPTION_KEYS, enclosing_super_kernel, is_stream_switch, scope_factory_calls, \
        search_calls, super_kernel_region
    from streamlint.model.breaks import describe_scope
    from streamlint.model.scopes import (
        SUPER_KERNEL_OPTION_KEYS,
        enclosing_super_kernel,
        is_stream_switch,
        scope_factory_calls,
        search_calls,
        super_kernel_region,
    )


class MultistreamInSuperkernel(Rule):
    """## What it does
    Flags a stream switch nested in a `super_kernel(scope, options)` region whose options do not contain
    `stream-fusion=1` — written inside the `with` block, or reached through a project function called
    inside it (the call is reported, naming the switch). Also flags an unknown key in the options
    string (`stream-funsion=1`), with a did-you-mean suggestion.

    Options are parsed as `key=value:key=value` and may come from a module-level string constant.
    Not flagged: options containing `stream-fusion=1` in any position, switches inside an inner
    `super_kernel(None, ...)` region (which removes the SuperKernel attributes), and options that cannot
    be resolved statically (a variable from the user's configuration).

    ## Why is this bad?
    A SuperKernel is single-stream unless `stream-fusion=1` is set (domain C5): a hand-made side stream
    inside it is undefined behaviour — the fused kernel either serialises the work or mis-orders it.
    An unknown key is ignored, so a typo silently keeps the default (fusion off).

    ## Example
    ```python
    with tng.scope.super_kernel("decode_layer", "feed-sync-all=1"):
        with tng.scope.npu_stream_switch("moe_shared"):
            shared = self.shared_experts(x)
    ```

    ## Use instead
    ```python
    with tng.scope.super_kernel("decode_layer", "feed-sync-all=1:stream-fusion=1"):
        with tng.scope.npu_stream_switch("moe_shared"):
            shared = self.shared_experts(x)
    ```

    ## Fix safety
    No automatic fix: enabling stream fusion changes the kernel GE builds.

    ## References
    - TorchAir `docs/zh/ascend_ir/api/scope/super_kernel.md`, `features/advanced/super_kernel_scope.md`
    """

    code = "SL102"
    name = "multistream-in-superkernel"
    severity = Severity.WARNING
    confidence = Confidence.HIGH
    markers = (b"super_kernel", b"SuperKernelScope")

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        project, file = ctx.project, ctx.file
        for fn in list(file.functions.values()):
            if not fn.scopes:
                continue
            factories = scope_factory_calls(fn)
            for site in fn.scopes:
                region = super_kernel_region(project, file, site)
                if region is not None and region.options is not None:
                    for key in region.options.unknown_keys():
                        close = difflib.get_close_matches(key, SUPER_KERNEL_OPTION_KEYS, n=1, cutoff=0.6)
                        hint = f"; did you mean `{close[0]}`?" if close else \
                            f" (known keys: {', '.join(SUPER_KERNEL_OPTION_KEYS)})"
                        node = region.scope.uses[0].node if region.scope.uses else site.item.item
                        ctx.report(
                            node,
                            first_line(f"unknown SuperKernel option `{key}` in the options of "
                                       f"{describe_scope(region.scope)}{hint}",
                                       f"unknown SuperKernel option `{key}`{hint}"),
                            hint=f"correct or remove `{key}`: an unrecognised key is ignored, so the option "
                                 "keeps its default",
                            confidence=Confidence.HIGH if close else Confidence.MEDIUM,
                        )
                scope = project.scope_use(file, site)
                if not is_stream_switch(scope):
                    continue
                outer = enclosing_super_kernel(project, file, site.parent)
                if outer is not None and outer.single_stream:
                    message, hint = self._message(f"stream switch {describe_scope(scope)}", outer, "stream switch")
                    ctx.report(site.item.item, message, hint=hint)
            for call in fn.calls:
                if id(call.node) in factories:
                    continue
                outer = enclosing_super_kernel(project, file, call.scope)
                if outer is None or not outer.single_stream:
                    continue
                target = project.call_target(file, call)
                if target is None:
                    continue
                callee, mod = target
                found = search_calls(project, mod, callee, lambda f, m: _switch_outside_super_kernel(project, f, m),
                                     lambda s, m: enclosing_super_kernel(project, m, s.scope) is None)
                if found is None:
                    continue
                (switch_site, switch_file), via = found
                loc = switch_file.span(switch_site.item.item)
                related = Location(switch_file.path, loc, "the stream switch")
                chain = " → ".join((f"{mod.module_name}.{callee.qualname}", *via))
                message, hint = self._message(f"`{file.code(call.node.func)}(…)` switches streams and is called",
                                              outer, f"`{file.code(call.node.func)}(…)` switches streams and")
                ctx.report(call.node, message, related=[related],
                           hint=f"{hint}; the switch is `{switch_file.code(switch_site.item.item)}` at "
                                f"{project.relative(switch_file.path)}:{loc.start_line}, via {chain}")

    @staticmethod
    def _message(what: str, region, short: str) -> tuple[str, str]:
        options = region.options_expr
        shown = f" {_code(options)}" if options is not None else " (default '')"
        if options is not None and not isinstance(options, cst.SimpleString) and region.options is not None:
            text = ":".join(f"{k}={v}" if v else k for k, v in region.options.entries)
            shown += f' (= "{text}")'
        message = first_line(f"{what} inside {describe_scope(region.scope)} whose options{shown} lack "
                             "`stream-fusion=1`",
                             f"{what} inside {describe_scope(region.scope)} without `stream-fusion=1`",
                             f"{short} is inside a SuperKernel without `stream-fusion=1`")
        hint = (f"add `stream-fusion=1` to the options{shown} of {describe_scope(region.scope)} (`k=v:k=v`) or move "
                "the switch out of the SuperKernel: a SuperKernel is single-stream, so the side stream is undefined "
                "behaviour")
        return message, hint

    VALID = [
        Valid(
            """
            import torchair as tng
            def f(x):
                with tng.scope.super_kernel("sk", "feed-sync-all=1:stream-fusion=1"):
                    with tng.scope.npu_stream_switch("side"):
                        y = x * 2
                with tng.scope.super_kernel("sk", ""):
                    with tng.scope.super_kernel(None, ""):
                        with tng.scope.npu_stream_switch("side"):
                            y = y + 1
                return y
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torchair as tng
            def f(x):
                with tng.scope.super_kernel("sk", "feed-sync-all=1"):
                    with tng.scope.npu_stream_switch("side"):
                        return x * 2
            """,
            line=4,
        ),
        Invalid(
            """
            import torchair as tng
            def f(x):
                with tng.scope.super_kernel("sk", "stream-funsion=1"):
                    return x * 2
            """,
            line=3,
        ),
    ]


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _switch_outside_super_kernel(project: Project, fn: FunctionInfo,
                                 mod: FileModel) -> tuple[ScopeSite, FileModel] | None:
    """The first stream switch of ``fn`` that no SuperKernel scope of ``fn`` itself encloses."""
    for site in fn.scopes:
        if is_stream_switch(project.scope_use(mod, site)) and enclosing_super_kernel(project, mod, site.parent) is None:
            return site, mod
    return None
